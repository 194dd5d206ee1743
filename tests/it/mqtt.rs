//! MQTT ingest against a real broker: Debian's `mosquitto`, started here on
//! a free loopback port, and its `mosquitto_pub` as the publisher
//! (tools/test-all.sh installs both where it can; without them the test
//! says so and checks nothing). Every payload format, the topic mapping,
//! wildcard subscriptions, bad payloads counted by reason (and sent to the
//! dead-letter topic) without stopping the subscriber; every message
//! present exactly once across SIGKILLs of the daemon, and across a restart
//! of the broker.

use crate::common;

use std::io::Write;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use telestore::daemon::{start, ServerConfig};
use telestore::mqtt::payload::{Bad, Format};
use telestore::mqtt::{MqttConfig, Subscription};
use telestore::schema::batch::push_row;
use telestore::schema::{Field, FieldType, TableOptions, TableSchema};
use telestore::{Options, Store};

struct Broker {
    child: Child,
    port: u16,
    conf: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args([
            "-c",
            &format!("command -v {cmd} || test -x /usr/sbin/{cmd}"),
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Debian's mosquitto on a free loopback port, its sessions kept on disk
/// (a restart keeps them), no limit on what it queues for a session or
/// sends before an acknowledgement. `MQTT_BROKER_LOG=FILE` logs every
/// packet there.
fn broker() -> Option<Broker> {
    broker_with("")
}

/// [`broker`] with more lines for its listener (TLS files).
fn broker_with(listener_conf: &str) -> Option<Broker> {
    if !have("mosquitto") || !have("mosquitto_pub") {
        eprintln!("SKIPPED: mosquitto / mosquitto_pub not installed (tools/test-all.sh installs them as root)");
        return None;
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    // Started as root, mosquitto drops to its own user, which must be able
    // to save its sessions here.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let conf = dir.path().join("mosquitto.conf");
    let log = std::env::var("MQTT_BROKER_LOG")
        .map(|f| format!("log_dest file {f}\nlog_type all\n"))
        .unwrap_or_default();
    std::fs::write(
        &conf,
        format!(
            "listener {port} 127.0.0.1\nallow_anonymous true\npersistence true\n\
             persistence_location {}/\nmax_queued_messages 0\nmax_inflight_messages 0\n{listener_conf}{log}",
            dir.path().display()
        ),
    )
    .unwrap();
    let mut b = Broker {
        child: launch(&conf),
        port,
        conf,
        _dir: dir,
    };
    b.wait_listening();
    Some(b)
}

fn launch(conf: &std::path::Path) -> Child {
    let bin = if std::path::Path::new("/usr/sbin/mosquitto").exists() {
        "/usr/sbin/mosquitto"
    } else {
        "mosquitto"
    };
    Command::new(bin)
        .arg("-c")
        .arg(conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

impl Broker {
    fn wait_listening(&mut self) {
        let t0 = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "mosquitto did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stop the broker as an operator would (SIGTERM: it saves its
    /// sessions), keep it down for `down`, start it again.
    fn restart(&mut self, down: Duration) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        self.child.wait().unwrap();
        std::thread::sleep(down);
        self.child = launch(&self.conf);
        self.wait_listening();
    }
}

fn publish(port: u16, topic: &str, payload: &[u8]) {
    publish_with(port, &[], topic, payload);
}

fn publish_with(port: u16, extra: &[&str], topic: &str, payload: &[u8]) {
    let mut c = Command::new("mosquitto_pub")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-q", "1"])
        .args(extra)
        .args(["-t", topic, "-s"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(payload).unwrap();
    assert!(c.wait().unwrap().success());
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn table(store: &Store, name: &str) {
    let fields = vec![
        Field::new("v", FieldType::F64),
        Field::new("n", FieldType::I32),
    ];
    store
        .create_table(TableSchema::new(name, fields, TableOptions::default()).unwrap())
        .unwrap();
}

fn rows_of(store: &Store, table: &str, device: &str) -> Vec<telestore::Row> {
    let Some(id) = store.device_id(device) else {
        return Vec::new();
    };
    store
        .scan(table, id, i64::MIN, i64::MAX, telestore::Order::OldestFirst)
        .unwrap()
}

/// Every message published on `topic` until `n` have come, as text.
fn listen(port: u16, topic: &str, n: usize) -> std::thread::JoinHandle<Vec<String>> {
    use rumqttc::{Client, Event, MqttOptions, Packet, QoS};
    let (client, mut conn) =
        Client::new(MqttOptions::new("telestore-test-dl", "127.0.0.1", port), 16);
    client.subscribe(topic, QoS::AtLeastOnce).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let mut got = Vec::new();
        for ev in conn.iter() {
            match ev.unwrap() {
                Event::Incoming(Packet::SubAck(_)) => tx.send(()).unwrap(),
                Event::Incoming(Packet::Publish(p)) => {
                    got.push(String::from_utf8(p.payload.to_vec()).unwrap());
                    if got.len() == n {
                        break;
                    }
                }
                _ => {}
            }
        }
        drop(client);
        got
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    h
}

#[test]
fn every_payload_format_through_mosquitto() {
    let Some(b) = broker() else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), Options::default()).unwrap());
    table(&store, "t");
    table(&store, "meters");
    let sub = |topic: &str, format, map: Option<&str>, table: Option<&str>| Subscription {
        map: map.map(Into::into),
        table: table.map(Into::into),
        ..Subscription::new(topic, format)
    };
    let cfg = ServerConfig {
        mqtt: Some(MqttConfig {
            subscriptions: vec![
                sub("telestore/+/+", Format::Json, None, None),
                sub("lp/#", Format::Line, None, None),
                sub("raw/+/+", Format::Row, None, None),
                Subscription {
                    qos: 0,
                    ..sub("q0/+/+", Format::Json, None, None)
                },
                // A site's own layout: the device in the middle, the table
                // fixed; acknowledged once written (async), not fsynced.
                Subscription {
                    durability: Some("async".into()),
                    ..sub(
                        "site/+/+/reading",
                        Format::Json,
                        Some("site/+/{device}/reading"),
                        Some("meters"),
                    )
                },
            ],
            client_id: "telestore-test".into(),
            dead_letter: Some("dead/letters".into()),
            ..MqttConfig::new(&format!("mqtt://127.0.0.1:{}", b.port))
        }),
        ..Default::default()
    };
    let dead = listen(b.port, "dead/letters", 6);
    let run = start(store.clone(), "127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let stats = run.stats.mqtt.clone();
    wait_for("the subscription", || stats.connected.load(Relaxed));
    // The session subscribes right after connecting: give it a moment.
    std::thread::sleep(Duration::from_millis(300));
    let health = stats.health().unwrap();
    assert!(health.connected, "{health:?}");

    for k in 0..20i64 {
        let msg = format!(
            r#"{{"ts": "{}ms", "v": {}.5, "n": {k}}}"#,
            1_700_000_000_000 + k * 1000,
            k
        );
        publish(b.port, "telestore/t/dev-a", msg.as_bytes());
    }
    publish(b.port, "telestore/t/dev-a", b"{not json");
    publish(b.port, "telestore/t/dev-a", br#"{"v": 1, "n": 1, "x": 2}"#);
    // Rows need their table's schema: an unknown table is refused.
    publish(b.port, "raw/nope/anything", &[0u8; 28]);
    // A JSON message to a table that does not exist creates it.
    publish(b.port, "telestore/made/dev-a", br#"{"v": 1, "n": 1}"#);
    publish(b.port, "lp/any/level", b"t,device=dev-b v=2.25,n=7i 1700000000000000000\nt,device=dev-b v=3.5,n=8i 1700000001000000000");
    publish(
        b.port,
        "site/eu/m-17/reading",
        // 17 digits: serde_json without float_roundtrip stored it one ULP off.
        br#"{"ts": 1700000000000, "v": -31871.714327714286, "n": 17}"#,
    );
    let mut rows = Vec::new();
    push_row(
        &mut rows,
        4242,
        1_700_000_000_000,
        &[&9.75f64.to_le_bytes()[..], &(-1i32).to_le_bytes()[..]].concat(),
    );
    publish(b.port, "raw/t/anything", &rows);
    publish(b.port, "raw/t/anything", &rows[..rows.len() - 1]);
    publish(b.port, "lp/x", b"t,device=dev-b v=oops 1700000000000000000");
    // Before 1970: the engine refuses it, so it is dead-lettered.
    publish(
        b.port,
        "telestore/t/dev-a",
        br#"{"ts": -5, "v": 1, "n": 1}"#,
    );
    // The format's fixtures (formats/mqtt.md).
    let fixture = |name: &str| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("formats/fixtures/mqtt_v1");
        std::fs::read(dir.join(name)).unwrap()
    };
    publish(b.port, "telestore/t/fixture-json", &fixture("reading.json"));
    publish(b.port, "lp/fixtures", &fixture("readings.lp"));
    // At most once: taken, never acknowledged (QoS 0 has no ack).
    publish(b.port, "q0/t/dev-q", br#"{"v": 4, "n": 4}"#);

    wait_for("every message", || stats.messages.load(Relaxed) >= 33);
    wait_for("every row", || stats.rows.load(Relaxed) >= 29);
    // The QoS 0 message may come last: wait for its row itself (the
    // counters can be reached before it is written on a loaded machine).
    wait_for("the QoS 0 row", || rows_of(&store, "t", "dev-q").len() == 1);
    let fj = rows_of(&store, "t", "fixture-json");
    assert_eq!((fj.len(), fj[0].ts), (1, 1_700_000_000_500));
    assert_eq!(
        &fj[0].fields[..],
        &[&21.5f64.to_le_bytes()[..], &(-3i32).to_le_bytes()[..]].concat()[..]
    );
    let fl = rows_of(&store, "t", "fixture-lp");
    assert_eq!((fl.len(), fl[1].ts), (2, 1_700_000_001_000));
    assert_eq!(&fl[1].fields[..8], &2.5f64.to_le_bytes());
    assert_eq!(rows_of(&store, "t", "dev-q").len(), 1);
    let got = rows_of(&store, "t", "dev-a");
    assert_eq!(got.len(), 20);
    assert_eq!(got[3].ts, 1_700_000_003_000);
    assert_eq!(&got[3].fields[..8], &3.5f64.to_le_bytes());
    let lp = rows_of(&store, "t", "dev-b");
    assert_eq!(lp.len(), 2);
    assert_eq!(&lp[0].fields[..8], &2.25f64.to_le_bytes());
    let m = rows_of(&store, "meters", "m-17");
    assert_eq!(
        (m.len(), &m[0].fields[8..12]),
        (1, &17i32.to_le_bytes()[..])
    );
    let exact = (-31871.714327714286f64).to_le_bytes();
    assert_eq!(&m[0].fields[..8], &exact, "stored one ULP off");
    let made = store.schema("made").unwrap();
    let names: Vec<&str> = made.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["v", "n"]);
    assert_eq!(rows_of(&store, "made", "dev-a").len(), 1);
    let raw = store.latest("t", 4242, 1).unwrap();
    assert_eq!(&raw[0].fields[..8], &9.75f64.to_le_bytes());
    assert_eq!(stats.bad[Bad::Fields as usize].load(Relaxed), 4);
    assert_eq!(stats.bad[Bad::Table as usize].load(Relaxed), 1);
    assert_eq!(stats.bad[Bad::Encoding as usize].load(Relaxed), 1);
    // The refused payloads went to the dead-letter topic, with the reason.
    let dead = dead.join().unwrap();
    let reasons: Vec<serde_json::Value> = dead
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let spec: serde_json::Value = serde_json::from_slice(&fixture("dead_letter.json")).unwrap();
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&reasons[0]), keys(&spec));
    assert_eq!(reasons[0]["v"], spec["v"]);
    assert_eq!(reasons[0]["topic"], "telestore/t/dev-a");
    assert_eq!(reasons[0]["payload"], "{not json");
    assert!(
        reasons[0]["error"].as_str().unwrap().contains("not JSON"),
        "{}",
        reasons[0]
    );
    assert_eq!(reasons[2]["reason"], "table");
    assert_eq!(reasons[4]["reason"], "fields");
    assert_eq!(reasons[5]["reason"], "fields");
    let e = reasons[5]["error"].as_str().unwrap();
    assert!(e.contains("timestamp -5 ms is outside"), "{e}");
    assert!(
        reasons[4]["error"].as_str().unwrap().contains("line 1"),
        "{}",
        reasons[4]
    );
    // Still subscribed after the bad ones; every message acknowledged.
    publish(b.port, "telestore/t/dev-c", br#"{"v": 1, "n": 1}"#);
    wait_for("a message after the bad ones", || {
        !rows_of(&store, "t", "dev-c").is_empty()
    });
    wait_for("every ack", || stats.acked.load(Relaxed) == 33);
    assert_eq!(stats.pending.load(Relaxed), 0);
    run.stop();
    drop(b);
}

/// A message over the 64 MiB a message may hold, from a broker with no
/// limit of its own: refused (reason `size`), its first KiB dead-lettered,
/// and the next message taken. Before, the packet limit dropped the
/// connection and the broker redelivered the message on every reconnect:
/// nothing after it was ever taken.
#[test]
fn a_message_over_64_mib_is_refused_and_ingest_goes_on() {
    let Some(b) = broker() else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), Options::default()).unwrap());
    table(&store, "t");
    let cfg = ServerConfig {
        mqtt: Some(MqttConfig {
            subscriptions: vec![Subscription::new("telestore/+/+", Format::Json)],
            client_id: "telestore-test-big".into(),
            dead_letter: Some("dead/big".into()),
            ..MqttConfig::new(&format!("mqtt://127.0.0.1:{}", b.port))
        }),
        ..Default::default()
    };
    let dead = listen(b.port, "dead/big", 1);
    let run = start(store.clone(), "127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let stats = run.stats.mqtt.clone();
    wait_for("the subscription", || stats.connected.load(Relaxed));
    std::thread::sleep(Duration::from_millis(300));
    let big = vec![b'x'; telestore::mqtt::MESSAGE_MAX + 1];
    publish(b.port, "telestore/t/dev-big", &big);
    publish(b.port, "telestore/t/dev-after", br#"{"v": 1, "n": 1}"#);
    wait_for("the message after the big one", || {
        !rows_of(&store, "t", "dev-after").is_empty()
    });
    assert_eq!(stats.bad[Bad::Size as usize].load(Relaxed), 1);
    assert_eq!(stats.reconnects.load(Relaxed), 0, "the connection held");
    let letter: serde_json::Value = serde_json::from_str(&dead.join().unwrap()[0]).unwrap();
    assert_eq!(letter["reason"], "size");
    assert_eq!(letter["payload"].as_str().unwrap().len(), 1024);
    let e = letter["error"].as_str().unwrap();
    assert!(e.contains("67108865 bytes, over the 64 MiB"), "{e}");
    let health = stats.health().unwrap();
    assert_eq!(health.refused["size"], 1, "{health:?}");
    let last = health.last_refused.unwrap();
    assert!(last.starts_with("telestore/t/dev-big: size"), "{last}");
    wait_for("both acknowledged", || stats.acked.load(Relaxed) == 2);
    run.stop();
    drop(b);
}

/// A daemon process, killed (SIGKILL) when dropped: a failed test leaves
/// none behind.
struct Daemon(Child);

impl Daemon {
    fn kill(&mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn daemon(dir: &std::path::Path, url: &str) -> (Daemon, std::net::SocketAddr) {
    let mut c = common::serve_command(dir, "127.0.0.1:0")
        .args(["--mqtt", url])
        .spawn()
        .unwrap();
    let http = common::logged_http_addr(&mut c);
    (Daemon(c), http)
}

fn metric(http: std::net::SocketAddr, name: &str) -> Option<f64> {
    let m = ureq::get(&format!("http://{http}/metrics"))
        .call()
        .ok()?
        .into_string()
        .ok()?;
    m.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Wait until the daemon's subscription exists: what is published before
/// reaches nobody (MQTT keeps no message for a session that does not
/// exist yet).
fn subscribed(http: std::net::SocketAddr) {
    wait_for("the first subscription", || {
        metric(http, "telestore_mqtt_connected") == Some(1.0)
    });
    std::thread::sleep(Duration::from_millis(500));
}

/// A SQL query's answer as JSON, through the daemon.
fn sql(http: std::net::SocketAddr, query: &str) -> serde_json::Value {
    let body = serde_json::json!({ "query": query, "format": "json" }).to_string();
    let text = ureq::post(&format!("http://{http}/api/v1/sql"))
        .set("Content-Type", "application/json")
        .send_string(&body)
        .unwrap()
        .into_string()
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Rows in `t`, checking that no message became two rows.
fn count_rows(http: std::net::SocketAddr) -> i64 {
    let v = sql(http, "SELECT count(*) AS n, count(DISTINCT n) AS k FROM t");
    assert_eq!(
        v[0]["n"], v[0]["k"],
        "a message written twice as two rows: {v}"
    );
    v[0]["n"].as_i64().unwrap()
}

/// Every message 0..total present exactly once: n = 0..total, each once.
fn check_all(http: std::net::SocketAddr, total: i64) {
    let mut n = 0;
    let t0 = Instant::now();
    while n != total {
        n = count_rows(http);
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{n} of {total} messages as rows"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let v = sql(
        http,
        "SELECT sum(CAST(n AS BIGINT)) AS s, min(n) AS lo, max(n) AS hi FROM t",
    );
    assert_eq!(v[0]["s"], total * (total - 1) / 2);
    assert_eq!(
        (v[0]["lo"].as_i64(), v[0]["hi"].as_i64()),
        (Some(0), Some(total - 1))
    );
}

fn new_store(dir: &std::path::Path) {
    let store = Store::open(dir, Options::default()).unwrap();
    table(&store, "t");
    store.close().unwrap();
}

/// At least once, end to end: messages published at QoS 1 (each PUBACKed
/// by the broker) while the daemon is killed with SIGKILL and restarted
/// again and again are all present afterwards, each exactly once as a
/// row (a redelivery rewrites the same key). `MQTT_KILLS` sets the number
/// of kills (default 5; benches/RESULTS.md records 20).
#[test]
fn nothing_the_broker_delivered_is_lost_across_kill_9() {
    let Some(b) = broker() else { return };
    let kills: usize = std::env::var("MQTT_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path());
    let url = format!("mqtt://127.0.0.1:{}", b.port);
    let total: i64 = 3000;
    let port = b.port;
    let (mut d, mut http) = daemon(dir.path(), &url);
    subscribed(http);
    // Publishing lasts as long as the kills.
    let gap = Duration::from_millis(300) * kills as u32 / total as u32;
    let publisher = std::thread::spawn(move || publish_all(port, total, gap));
    let mut redelivered = 0.0;
    for _ in 0..kills {
        std::thread::sleep(Duration::from_millis(300));
        redelivered += metric(http, "telestore_mqtt_redeliveries_total").unwrap_or(0.0);
        d.kill(); // SIGKILL
        (d, http) = daemon(dir.path(), &url);
    }
    publisher.join().unwrap();
    check_all(http, total);
    redelivered += metric(http, "telestore_mqtt_redeliveries_total").unwrap();
    eprintln!("{kills} kills, {redelivered} messages delivered again");
}

/// The broker stops (saving its sessions) and starts again while the
/// daemon runs and a publisher keeps publishing: the daemon reconnects,
/// says so in /health meanwhile, and every message is there once.
#[test]
fn broker_restart_loses_nothing() {
    let Some(mut b) = broker() else { return };
    let dir = tempfile::tempdir().unwrap();
    new_store(dir.path());
    let url = format!("mqtt://127.0.0.1:{}", b.port);
    let total: i64 = 2000;
    let port = b.port;
    let (_daemon, http) = daemon(dir.path(), &url);
    subscribed(http);
    let publisher = std::thread::spawn(move || publish_all(port, total, Duration::from_millis(1)));
    std::thread::sleep(Duration::from_millis(500));
    b.restart(Duration::from_millis(1500));
    publisher.join().unwrap();
    check_all(http, total);
    let h = ureq::get(&format!("http://{http}/health")).call().unwrap();
    let h: serde_json::Value = serde_json::from_str(&h.into_string().unwrap()).unwrap();
    assert_eq!(h["mqtt"]["connected"], true, "{h}");
    assert_eq!(h["mqtt"]["broker"], url.as_str());
    assert!(h["mqtt"]["last_error"].is_string(), "{h}");
    assert!(metric(http, "telestore_mqtt_reconnects_total").unwrap() >= 1.0);
}

/// Publish `total` JSON readings at QoS 1 (message k: device dev-{k % 10},
/// ts k ms, n = k), one every `gap`, with a persistent session of its own
/// (a broker restart loses nothing of the publisher's), until the broker
/// has acknowledged every one.
fn publish_all(port: u16, total: i64, gap: Duration) {
    use rumqttc::{Client, Event, MqttOptions, Packet, QoS};
    let mut opts = MqttOptions::new("telestore-test-publisher", "127.0.0.1", port);
    opts.set_keep_alive(Duration::from_secs(30))
        .set_clean_session(false);
    let (client, mut conn) = Client::new(opts, 64);
    let sender = std::thread::spawn(move || {
        for k in 0..total {
            let msg = format!(
                r#"{{"ts": "{}ms", "v": {k}, "n": {k}}}"#,
                1_700_000_000_000 + k
            );
            let topic = format!("telestore/t/dev-{}", k % 10);
            client.publish(topic, QoS::AtLeastOnce, false, msg).unwrap();
            std::thread::sleep(gap);
        }
        client
    });
    let mut acked = 0;
    let t0 = Instant::now();
    for ev in conn.iter() {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "publisher: {acked} of {total} acknowledged"
        );
        match ev {
            Ok(Event::Incoming(Packet::PubAck(_))) => {
                acked += 1;
                if acked == total {
                    break;
                }
            }
            Ok(_) => {}
            // The broker is restarting: the next poll reconnects.
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    drop(sender.join().unwrap());
}

/// `telestore load --mqtt`: the demo fleet through the broker, as line
/// protocol batches and as one JSON message per reading; the load returns
/// once the daemon has acknowledged everything, and every row is there.
#[test]
fn load_through_the_broker() {
    let Some(b) = broker() else { return };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("mqtt://127.0.0.1:{}", b.port);
    let (_daemon, http) = daemon(dir.path(), &url);
    subscribed(http);
    for (format, table, trucks) in [("line", "readings", 40), ("json", "json_readings", 10)] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_telestore"))
            .args([
                "load",
                "--mqtt",
                &url,
                "--mqtt-format",
                format,
                "--table",
                table,
            ])
            .args([
                "--trucks",
                &trucks.to_string(),
                "--duration",
                "10m",
                "--batch",
                "100",
            ])
            .args(["--http", &format!("http://{http}")])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("made durable by the daemon"), "{text}");
        let v = sql(
            http,
            &format!("SELECT count(*) AS n, count(DISTINCT device) AS d FROM {table}"),
        );
        assert_eq!(v[0]["n"], trucks * 60, "{format}: {v}");
        assert_eq!(v[0]["d"], trucks, "{format}: {v}");
    }
}

/// A CA and a server certificate for 127.0.0.1 signed by it, made by the
/// `openssl` command in `dir`; returns the CA's path.
fn certificates(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let sh = format!(
        "set -e; cd {d}
         openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN={name} test CA' \
           -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
           -keyout {name}-ca.key -out {name}-ca.pem
         openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout {name}.key -out {name}.csr
         printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth\\n' > {name}.ext
         openssl x509 -req -in {name}.csr -CA {name}-ca.pem -CAkey {name}-ca.key -CAcreateserial \
           -days 2 -extfile {name}.ext -out {name}.pem
         chmod 644 {name}.key {name}.pem {name}-ca.pem",
        d = dir.display()
    );
    let out = Command::new("sh").args(["-c", &sh]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join(format!("{name}-ca.pem"))
}

/// `mqtts://`: a daemon given the broker's CA connects over TLS and takes
/// what is published there; one trusting another CA is refused by the
/// certificate check, says so in its state, and keeps serving.
#[test]
fn tls_to_the_broker() {
    if !have("openssl") {
        eprintln!("SKIPPED: no openssl command to make test certificates");
        return;
    }
    let certs = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(certs.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let ca = certificates(certs.path(), "broker");
    let other_ca = certificates(certs.path(), "other");
    let d = certs.path().display();
    let conf =
        format!("cafile {d}/broker-ca.pem\ncertfile {d}/broker.pem\nkeyfile {d}/broker.key\n");
    let Some(b) = broker_with(&conf) else { return };
    let url = format!("mqtts://127.0.0.1:{}", b.port);
    let daemon_with = |ca: &std::path::Path, id: &str| {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path(), Options::default()).unwrap());
        table(&store, "t");
        let cfg = ServerConfig {
            mqtt: Some(MqttConfig {
                client_id: id.into(),
                ca_file: Some(ca.to_path_buf()),
                ..MqttConfig::new(&url)
            }),
            ..Default::default()
        };
        let run = start(store.clone(), "127.0.0.1:0".parse().unwrap(), cfg).unwrap();
        (dir, store, run)
    };
    let (_dir, store, run) = daemon_with(&ca, "telestore-tls");
    let stats = run.stats.mqtt.clone();
    wait_for("a TLS connection", || stats.connected.load(Relaxed));
    std::thread::sleep(Duration::from_millis(300));
    let ca_arg = ca.to_str().unwrap();
    publish_with(
        b.port,
        &["--cafile", ca_arg],
        "telestore/t/tls-dev",
        br#"{"v": 1.5, "n": 2}"#,
    );
    wait_for("the row", || !rows_of(&store, "t", "tls-dev").is_empty());

    let (_dir2, _store2, run2) = daemon_with(&other_ca, "telestore-untrusted");
    let s2 = run2.stats.mqtt.clone();
    wait_for("the refusal", || {
        s2.last_error
            .lock()
            .unwrap()
            .as_deref()
            .is_some_and(|e| e.contains("certificate"))
    });
    assert!(!s2.connected.load(Relaxed));
    run2.stop();
    run.stop();
}
