//! One metric, declared once: its name, help, unit, kind and how its value
//! is read ([`Metric`]). The counters live where they are counted (plain
//! atomics: `ServerStats`, `mqtt::Stats`, the engine's `StoreStats`); the
//! `/metrics` registry is built once at start from these declarations and
//! reads the values at each scrape ([`Collected`]).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;
use std::borrow::Borrow;
use std::fmt;

/// Label pairs of one series.
pub type Labels = Vec<(String, String)>;

/// A counter (only grows) or a gauge (goes up and down).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only grows (`_total`).
    Counter,
    /// Goes up and down.
    Gauge,
}

/// How a metric's series are read from `T` at a scrape.
pub enum Read<T> {
    /// One unlabelled value.
    One(fn(&T) -> f64),
    /// One value per label set.
    Each(fn(&T) -> Vec<(Labels, f64)>),
}

/// One metric family of the `/metrics` page.
pub struct Metric<T> {
    /// Its name after `telestore_` and before the unit and `_total`.
    pub name: &'static str,
    /// Its `# HELP`.
    pub help: &'static str,
    /// Its unit (`bytes`, `seconds`, `ratios`, or another word), if any:
    /// the name gets it as a suffix.
    pub unit: Option<&'static str>,
    /// Counter or gauge.
    pub kind: Kind,
    /// Its value(s).
    pub read: Read<T>,
}

impl<T> Metric<T> {
    /// An unlabelled counter.
    pub const fn counter(name: &'static str, help: &'static str, f: fn(&T) -> f64) -> Self {
        Metric {
            name,
            help,
            unit: None,
            kind: Kind::Counter,
            read: Read::One(f),
        }
    }
    /// An unlabelled gauge.
    pub const fn gauge(name: &'static str, help: &'static str, f: fn(&T) -> f64) -> Self {
        Metric {
            name,
            help,
            unit: None,
            kind: Kind::Gauge,
            read: Read::One(f),
        }
    }
    /// A counter per label set.
    pub const fn counter_each(
        name: &'static str,
        help: &'static str,
        f: fn(&T) -> Vec<(Labels, f64)>,
    ) -> Self {
        Metric {
            name,
            help,
            unit: None,
            kind: Kind::Counter,
            read: Read::Each(f),
        }
    }
    /// A gauge per label set.
    pub const fn gauge_each(
        name: &'static str,
        help: &'static str,
        f: fn(&T) -> Vec<(Labels, f64)>,
    ) -> Self {
        Metric {
            name,
            help,
            unit: None,
            kind: Kind::Gauge,
            read: Read::Each(f),
        }
    }
    /// The same metric with a unit.
    pub const fn in_unit(mut self, unit: &'static str) -> Self {
        self.unit = Some(unit);
        self
    }

    fn unit_of(&self) -> Option<Unit> {
        self.unit.map(|u| match u {
            "bytes" => Unit::Bytes,
            "seconds" => Unit::Seconds,
            "ratios" => Unit::Ratios,
            other => Unit::Other(other.into()),
        })
    }

    /// Write this family's descriptor and series, read from `src`.
    /// A metric without a name is skipped (a counter only read by others).
    pub fn encode(&self, enc: &mut DescriptorEncoder, src: &T) -> fmt::Result {
        if self.name.is_empty() {
            return Ok(());
        }
        let unit = self.unit_of();
        let ty = match self.kind {
            Kind::Counter => MetricType::Counter,
            Kind::Gauge => MetricType::Gauge,
        };
        // A registered metric's help gets a full stop (`Registry::register`);
        // a collected one the same, so that every `# HELP` reads alike.
        let help = format!("{}.", self.help);
        let mut me = enc.encode_descriptor(self.name, &help, unit.as_ref(), ty)?;
        match &self.read {
            Read::One(f) => put(self.kind, me, f(src)),
            Read::Each(f) => {
                for (labels, v) in f(src) {
                    put(self.kind, me.encode_family(&labels)?, v)?;
                }
                Ok(())
            }
        }
    }
}

fn put(kind: Kind, me: MetricEncoder<'_>, v: f64) -> fmt::Result {
    match kind {
        Kind::Counter => ConstCounter::new(v.max(0.0) as u64).encode(me),
        Kind::Gauge => ConstGauge::new(v).encode(me),
    }
}

/// One label pair.
pub fn label(k: &str, v: impl Into<String>) -> Labels {
    vec![(k.into(), v.into())]
}

/// A collector: what to read `T` from at each scrape (a snapshot `S`
/// that is or holds one), and its metrics.
pub struct Collected<S, T: 'static> {
    /// Reads the source once per scrape; `None`: nothing to report.
    pub source: Box<dyn Fn() -> Option<S> + Send + Sync>,
    /// The metrics read from it.
    pub metrics: &'static [Metric<T>],
}

impl<S, T> Collected<S, T> {
    /// Read `metrics` from what `source` returns at each scrape.
    pub fn new(
        source: impl Fn() -> Option<S> + Send + Sync + 'static,
        metrics: &'static [Metric<T>],
    ) -> Box<Self> {
        Box::new(Collected {
            source: Box::new(source),
            metrics,
        })
    }
}

impl<S, T> fmt::Debug for Collected<S, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self.metrics.iter().map(|m| m.name).collect();
        f.debug_struct("Collected")
            .field("metrics", &names)
            .finish()
    }
}

impl<S: Borrow<T> + 'static, T: 'static> Collector for Collected<S, T> {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let Some(src) = (self.source)() else {
            return Ok(());
        };
        for m in self.metrics {
            m.encode(&mut enc, src.borrow())?;
        }
        Ok(())
    }
}
