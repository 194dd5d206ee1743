//! `[mqtt]` of the daemon's configuration: the broker, the session, the
//! subscriptions and how a topic names a table and a device.

use super::payload::Format;
use serde::Deserialize;
use telestore_engine::error::{Error, Result};

/// `[mqtt]`: the broker and what to subscribe to.
#[derive(Clone, Debug, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct MqttConfig {
    /// `mqtt://host[:port]` (port 1883 by default).
    pub url: String,
    /// The session's client id. Keep it stable: the broker keeps the
    /// messages of the session, delivered while the daemon was down,
    /// under it.
    #[serde(default = "client_id_default")]
    pub client_id: String,
    /// The broker user, if any.
    #[serde(default)]
    pub username: Option<String>,
    /// Its password.
    #[serde(default)]
    pub password: Option<String>,
    /// With `mqtts://`: the CA certificates (PEM) the broker's certificate
    /// must chain to; default: the system's.
    #[serde(default)]
    pub ca_file: Option<std::path::PathBuf>,
    /// Where refused payloads are republished (QoS 1), as a JSON object
    /// naming the topic, the reason and the error; `None`: only counted
    /// and logged.
    #[serde(default)]
    pub dead_letter: Option<String>,
    /// Empty: [`MqttConfig::default_subscriptions`].
    #[serde(default)]
    pub subscriptions: Vec<Subscription>,
}

/// One subscription: a topic filter, the format of its payloads, and
/// where the table and device of a message come from.
#[derive(Clone, Debug, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Subscription {
    /// Topic filter, wildcards allowed.
    pub topic: String,
    /// Payload format: `line`, `json` or `row`.
    pub format: Format,
    /// 1 (at least once, the default) or 0 (at most once).
    #[serde(default = "qos_default")]
    pub qos: u8,
    /// How a topic names the table and the device, level by level:
    /// `{table}`, `{device}`, `+` (any one level), `#` (the rest) or a
    /// literal. Default `…/{table}/{device}`: the last two levels.
    #[serde(default)]
    pub map: Option<String>,
    /// The table of every message of this subscription (instead of a
    /// `{table}` level).
    #[serde(default)]
    pub table: Option<String>,
    /// When a message is acknowledged: `sync` (the default: once its rows
    /// are fsynced) or `async` (once they are written; a power loss may
    /// lose acknowledged messages, a kill -9 does not).
    #[serde(default)]
    pub durability: Option<String>,
}

fn qos_default() -> u8 {
    1
}

fn client_id_default() -> String {
    "telestore".into()
}

impl MqttConfig {
    /// A broker URL with the default session and subscriptions.
    pub fn new(url: &str) -> MqttConfig {
        MqttConfig {
            url: url.into(),
            client_id: client_id_default(),
            username: None,
            password: None,
            ca_file: None,
            dead_letter: None,
            subscriptions: Vec::new(),
        }
    }

    /// `telestore/+/+` with JSON payloads (topic `telestore/TABLE/DEVICE`)
    /// and `telestore/+` with line protocol (topic `telestore/TABLE`; the
    /// lines name their tables and devices).
    pub fn default_subscriptions() -> Vec<Subscription> {
        vec![
            Subscription::new("telestore/+/+", Format::Json),
            Subscription::new("telestore/+", Format::Line),
        ]
    }

    /// The subscriptions, the default ones when none is configured.
    pub fn subscriptions(&self) -> Vec<Subscription> {
        if self.subscriptions.is_empty() {
            return Self::default_subscriptions();
        }
        self.subscriptions.clone()
    }

    /// Whether the broker is reached over TLS (`mqtts://`).
    pub fn tls(&self) -> bool {
        self.url.starts_with("mqtts://")
    }

    /// Check the configuration; the broker's host and port.
    pub fn validate(&self) -> Result<(String, u16)> {
        let bad = |m: String| Error::invalid("mqtt", m);
        let (rest, default_port) = match self.url.split_once("://") {
            Some(("mqtt" | "tcp", rest)) => (rest, 1883),
            Some(("mqtts", rest)) => (rest, 8883),
            _ => {
                let m = format!("{:?}: use mqtt://host:port or mqtts://host:port", self.url);
                return Err(bad(m));
            }
        };
        let (host, port) = match rest.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(':') => (
                h,
                p.parse()
                    .map_err(|_| bad(format!("bad port in {:?}", self.url)))?,
            ),
            _ => (rest, default_port),
        };
        if self.tls() {
            super::tls::client_config(self.ca_file.as_deref())?;
        } else if self.ca_file.is_some() {
            return Err(bad("ca_file is for mqtts:// brokers".into()));
        }
        if host.is_empty() || self.client_id.is_empty() {
            return Err(bad("a host and a client id are needed".into()));
        }
        if let Some(t) = &self.dead_letter {
            if !rumqttc::valid_topic(t) {
                return Err(bad(format!("dead_letter {t:?} is not a topic")));
            }
            // A dead letter consumed again would be refused again, wrapped
            // again, and grow each round until the broker's packet limit.
            if let Some(s) = self
                .subscriptions()
                .into_iter()
                .find(|s| rumqttc::matches(t, &s.topic))
            {
                return Err(bad(format!(
                    "dead_letter {t:?} matches the subscription {:?}: refused messages would be \
                     consumed again; pick a topic outside every subscription (e.g. \
                     \"telestore-dead\")",
                    s.topic
                )));
            }
        }
        for s in self.subscriptions() {
            s.check()
                .map_err(|m| bad(format!("subscription {:?}: {m}", s.topic)))?;
        }
        Ok((host.trim_matches(['[', ']']).to_string(), port))
    }
}

impl Subscription {
    /// A subscription to `topic` whose payloads are `format`.
    pub fn new(topic: &str, format: Format) -> Subscription {
        Subscription {
            topic: topic.into(),
            format,
            qos: 1,
            map: None,
            table: None,
            durability: None,
        }
    }

    /// Whether a batch holding a message of this subscription must be
    /// fsynced before it is acknowledged.
    pub fn sync(&self) -> bool {
        self.durability.as_deref() != Some("async")
    }

    fn check(&self) -> std::result::Result<(), String> {
        if !rumqttc::valid_filter(&self.topic) {
            return Err("not a topic filter".into());
        }
        if self.qos > 1 {
            return Err(format!("qos {} (0 or 1)", self.qos));
        }
        if let Some(d) = self
            .durability
            .as_deref()
            .filter(|d| !["sync", "async"].contains(d))
        {
            return Err(format!("durability {d:?} (sync or async)"));
        }
        if let Some(m) = &self.map {
            let levels = Mapping::parse(m)?;
            let names_table = levels.0.contains(&Level::Table);
            if self.format != Format::Line && !names_table && self.table.is_none() {
                return Err(format!("map {m:?} has no {{table}} and no table is set"));
            }
            if self.format == Format::Json && !levels.0.contains(&Level::Device) {
                return Err(format!("map {m:?} has no {{device}}"));
            }
        }
        Ok(())
    }

    /// The table and device a topic names under this subscription.
    pub fn names<'t>(&'t self, topic: &'t str) -> Option<(&'t str, Option<&'t str>)> {
        let (table, device) = match &self.map {
            Some(m) => Mapping::parse(m).ok()?.apply(topic)?,
            None => {
                let mut rev = topic.rsplit('/');
                let device = rev.next().filter(|d| !d.is_empty());
                let table = rev.next().filter(|t| !t.is_empty());
                (table, device)
            }
        };
        Some((self.table.as_deref().or(table)?, device))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Level {
    Literal(String),
    Any,
    Rest,
    Table,
    Device,
}

/// A topic pattern (`fleet/{device}/+/{table}`), level by level.
struct Mapping(Vec<Level>);

impl Mapping {
    fn parse(m: &str) -> std::result::Result<Mapping, String> {
        let mut levels = Vec::new();
        for (i, part) in m.split('/').enumerate() {
            let l = match part {
                "{table}" => Level::Table,
                "{device}" => Level::Device,
                "+" => Level::Any,
                "#" if i + 1 == m.split('/').count() => Level::Rest,
                p if p.contains(['{', '}', '+', '#']) => {
                    return Err(format!("map {m:?}: level {p:?}"))
                }
                p => Level::Literal(p.into()),
            };
            if matches!(l, Level::Table | Level::Device) && levels.contains(&l) {
                return Err(format!("map {m:?} names {part} twice"));
            }
            levels.push(l);
        }
        Ok(Mapping(levels))
    }

    fn apply<'t>(&self, topic: &'t str) -> Option<(Option<&'t str>, Option<&'t str>)> {
        let (mut table, mut device) = (None, None);
        let mut parts = topic.split('/');
        for l in &self.0 {
            if *l == Level::Rest {
                return Some((table, device));
            }
            let p = parts.next()?;
            match l {
                Level::Literal(s) if s != p => return None,
                Level::Table | Level::Device if p.is_empty() => return None,
                Level::Table => table = Some(p),
                Level::Device => device = Some(p),
                _ => {}
            }
        }
        parts.next().is_none().then_some((table, device))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(map: Option<&str>, table: Option<&str>) -> Subscription {
        Subscription {
            map: map.map(Into::into),
            table: table.map(Into::into),
            ..Subscription::new("#", Format::Json)
        }
    }

    #[test]
    fn topics_name_table_and_device() {
        let s = sub(None, None);
        assert_eq!(
            s.names("telestore/readings/truck-1"),
            Some(("readings", Some("truck-1")))
        );
        assert_eq!(
            s.names("a/b/readings/truck-1"),
            Some(("readings", Some("truck-1")))
        );
        assert_eq!(s.names("truck-1"), None);
        assert_eq!(s.names("telestore//truck-1"), None);
        let s = sub(Some("fleet/{device}/+/{table}"), None);
        assert_eq!(
            s.names("fleet/t7/x/readings"),
            Some(("readings", Some("t7")))
        );
        assert_eq!(s.names("fleet/t7/x/readings/more"), None);
        assert_eq!(s.names("other/t7/x/readings"), None);
        let s = sub(Some("site/{device}/#"), Some("meters"));
        assert_eq!(s.names("site/m1/a/b"), Some(("meters", Some("m1"))));
        assert_eq!(s.names("site/m1"), Some(("meters", Some("m1"))));
    }

    #[test]
    fn bad_configurations_are_refused() {
        let with = |subs: Vec<Subscription>| MqttConfig {
            subscriptions: subs,
            ..MqttConfig::new("mqtt://h:1")
        };
        assert_eq!(with(vec![]).validate().unwrap(), ("h".into(), 1));
        assert_eq!(MqttConfig::new("mqtt://h").validate().unwrap().1, 1883);
        let tls = MqttConfig {
            ca_file: Some("/no/such/ca.pem".into()),
            ..MqttConfig::new("mqtts://h")
        };
        let e = tls.validate().unwrap_err().to_string();
        assert!(e.contains("ca_file /no/such/ca.pem"), "{e}");
        for (c, says) in [
            (MqttConfig::new("http://h"), "use mqtt://"),
            (
                MqttConfig {
                    ca_file: Some("ca.pem".into()),
                    ..MqttConfig::new("mqtt://h")
                },
                "for mqtts://",
            ),
            (MqttConfig::new("mqtt://h:x"), "bad port"),
            (
                with(vec![Subscription::new("a/#/b", Format::Json)]),
                "not a topic filter",
            ),
            (with(vec![sub(Some("a/{device}"), None)]), "no {table}"),
            (with(vec![sub(Some("a/{table}"), None)]), "no {device}"),
            (with(vec![sub(Some("{table}/{table}"), None)]), "twice"),
            (
                with(vec![sub(Some("a{x}/{table}/{device}"), None)]),
                "level",
            ),
            (
                MqttConfig {
                    dead_letter: Some("dead/#".into()),
                    ..MqttConfig::new("mqtt://h")
                },
                "dead_letter",
            ),
            (
                MqttConfig {
                    dead_letter: Some("telestore/dead".into()),
                    ..MqttConfig::new("mqtt://h")
                },
                "matches the subscription \"telestore/+\"",
            ),
            (
                MqttConfig {
                    dead_letter: Some("fleet/dead".into()),
                    ..with(vec![Subscription::new("fleet/#", Format::Line)])
                },
                "matches the subscription \"fleet/#\"",
            ),
        ] {
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(says), "{c:?}: {e}");
        }
    }
}
