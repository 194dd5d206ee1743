//! What agents send reaches a fresh daemon with its defaults: a
//! measurement that does not exist becomes a table on its first line
//! (fields typed by their values), a line without the device tag is the
//! series of its whole tag set, and what cannot be created (strings, bad
//! names, type clashes within the request) is refused with the line and
//! nothing created. With `auto_create` off, today's refusal.

use crate::common;

use common::http_request;
use std::net::SocketAddr;
use telestore_engine::schema::FieldType as F;
use telestore_engine::{Options, Order};
use telestore_server::daemon::ServerConfig;

fn write(h: SocketAddr, path: &str, body: &str) -> (u16, serde_json::Value) {
    let r = http_request(h, "POST", path, "", body.as_bytes());
    let j = serde_json::from_str(&r.body).unwrap_or_default();
    (r.status, j)
}

fn fields(store: &telestore_engine::Store, table: &str) -> Vec<(String, F)> {
    let s = store.schema(table).unwrap();
    s.fields.iter().map(|f| (f.name.clone(), f.ty)).collect()
}

fn named(fs: &[(&str, F)]) -> Vec<(String, F)> {
    fs.iter().map(|(n, t)| (n.to_string(), *t)).collect()
}

/// Telegraf's shape: several tags per series, no `device` tag, ns time.
const TELEGRAF: &str = "\
cpu,cpu=cpu0,host=truck-0 usage_user=1.5,usage_system=0.5 1700000000000000000
cpu,cpu=cpu1,host=truck-0 usage_user=2.5,usage_system=0.25 1700000000000000000
mem,host=truck-0 used=123i,available_percent=41.5,free=7u 1700000000000000000
net,host=truck-0,interface=eth0 bytes_recv=10i,up=true 1700000000000000000
disk,path=/var\\ log,host=truck-0,label=a\\,b free=1i 1700000000000000000
";

#[test]
fn agent_lines_create_their_tables_and_series_on_a_fresh_daemon() {
    let (_d, store, run, h) = common::http_daemon(Options::default(), ServerConfig::default());
    let (code, j) = write(h, "/api/v2/write?org=o&bucket=b", TELEGRAF);
    assert_eq!(code, 204, "{j}");
    assert_eq!(
        fields(&store, "cpu"),
        named(&[("usage_user", F::F64), ("usage_system", F::F64)])
    );
    assert_eq!(
        fields(&store, "mem"),
        named(&[
            ("used", F::I64),
            ("available_percent", F::F64),
            ("free", F::U64)
        ])
    );
    assert_eq!(
        fields(&store, "net"),
        named(&[("bytes_recv", F::I64), ("up", F::Bool)])
    );
    // Two series of one host, each holding its whole tag set.
    let cpu0 = store.device_id("cpu=cpu0,host=truck-0").unwrap();
    let cpu1 = store.device_id("cpu=cpu1,host=truck-0").unwrap();
    assert_ne!(cpu0, cpu1);
    let tags = store.device(cpu1).unwrap().tags;
    let want = [("cpu", "cpu1"), ("host", "truck-0")];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(tags, want);
    // Tags in key order, escaped as the line protocol escapes them.
    let disk = store.device_id(r"host=truck-0,label=a\,b,path=/var\ log");
    let disk = disk.expect("the escaped series key");
    assert_eq!(store.device(disk).unwrap().tags[2].1, "/var log");
    // Values exact, at the nanosecond time given in whole milliseconds.
    let r = &store.latest("cpu", cpu1, 1).unwrap()[0];
    assert_eq!(r.ts, 1_700_000_000_000);
    let mut v = 2.5f64.to_le_bytes().to_vec();
    v.extend(0.25f64.to_le_bytes());
    assert_eq!(r.fields, v);
    let host = store.device_id("host=truck-0").unwrap();
    let r = &store.latest("mem", host, 1).unwrap()[0];
    let mut v = 123i64.to_le_bytes().to_vec();
    v.extend(41.5f64.to_le_bytes());
    v.extend(7u64.to_le_bytes());
    assert_eq!(r.fields, v);

    // The next interval: the same series, no new table or device.
    let devices = store.device_count();
    let next = TELEGRAF.replace("1700000000000000000", "1700000010000000000");
    assert_eq!(write(h, "/api/v2/write", &next).0, 204);
    assert_eq!(store.device_count(), devices);
    let rows = store.scan("cpu", cpu0, i64::MIN, i64::MAX, Order::OldestFirst);
    assert_eq!(rows.unwrap().len(), 2);
    // A line with the device tag still names its device by it; the other
    // tags are its attributes.
    let named_line = "cpu,device=truck-9,fleet=East usage_user=1,usage_system=2 1700000000000\n";
    assert_eq!(write(h, "/api/v2/write?precision=ms", named_line).0, 204);
    let t9 = store.device_id("truck-9").unwrap();
    let tags = store.device(t9).unwrap().tags;
    assert_eq!(tags, vec![("fleet".to_string(), "East".to_string())]);
    run.stop();
}

#[test]
fn what_cannot_be_created_is_refused_naming_the_line_and_nothing_is_created() {
    let (_d, store, run, h) = common::http_daemon(Options::default(), ServerConfig::default());
    let cases = [
        (
            "sys,host=a uptime_format=\"3 days\",load1=0.5 1\n",
            1,
            "string",
        ),
        ("Sys,host=a load1=0.5 1\n", 1, "table name"),
        ("sys,host=a Load=0.5 1\n", 1, "field name"),
        (
            "sys,host=a load1=0.5 1\nsys,host=a load1=t 2\n",
            2,
            "does not fit",
        ),
        (
            "sys,host=a load1=0.5 1\nsys,host=a load5=1 2\n",
            2,
            "not in table",
        ),
        ("sys load1=0.5 1\n", 1, "no tags"),
        ("ok,host=a v=1 1\nsys,host=a s=\"x\" 1\n", 2, "string"),
    ];
    for (body, line, says) in cases {
        let (code, j) = write(h, "/api/v2/write?precision=ms", body);
        assert_eq!(code, 400, "{body}: {j}");
        assert_eq!(j["line"], line, "{body}: {j}");
        let m = j["message"].as_str().unwrap();
        assert!(m.contains(says), "{body}: {m}");
    }
    assert!(store.table_names().is_empty(), "{:?}", store.table_names());
    assert_eq!(store.device_count(), 0);
    run.stop();
}

#[test]
fn writers_racing_to_create_one_table_all_land_in_it() {
    let (_d, store, run, h) = common::http_daemon(Options::default(), ServerConfig::default());
    let writers: Vec<_> = (0..4)
        .map(|i| {
            std::thread::spawn(move || {
                // Half in the other field order: a request that finds the
                // table created meanwhile is checked against it.
                let body = match i % 2 {
                    0 => format!("race,host=h{i} v={i},n={i}i 1700000000000\n"),
                    _ => format!("race,host=h{i} n={i}i,v={i} 1700000000000\n"),
                };
                write(h, "/api/v2/write?precision=ms", &body)
            })
        })
        .collect();
    for w in writers {
        let (code, j) = w.join().unwrap();
        assert_eq!(code, 204, "{j}");
    }
    assert_eq!(store.table_names(), vec!["race".to_string()]);
    for i in 0..4 {
        let id = store.device_id(&format!("host=h{i}")).unwrap();
        assert_eq!(store.latest("race", id, 1).unwrap().len(), 1);
    }
    run.stop();
}

#[test]
fn with_auto_create_off_an_unknown_measurement_is_refused() {
    let cfg = ServerConfig {
        auto_create: None,
        ..ServerConfig::default()
    };
    let (_d, store, run, h) = common::http_daemon(Options::default(), cfg);
    let (code, j) = write(h, "/api/v2/write?precision=ms", "cpu,host=a v=1 1\n");
    assert_eq!(code, 400, "{j}");
    let m = j["message"].as_str().unwrap();
    assert!(
        m.contains("unknown table") && m.contains("auto_create"),
        "{m}"
    );
    assert!(store.table_names().is_empty());
    run.stop();
}
