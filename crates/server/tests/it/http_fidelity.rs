//! Nothing is silently changed on the way in or out over HTTP: lossy
//! number conversions, non-finite floats, sub-millisecond timestamps, tag
//! changes and control characters are refused with a 400 naming the line;
//! JSON output prints floats that parse back to the same bits; v1 writes
//! speak 1.x (db required, `m`/`h` precisions, `{"error"}` bodies).

use crate::common;

use common::http_request;
use std::net::SocketAddr;
use std::sync::Arc;
use telestore_engine::{Options, Store};
use telestore_server::daemon::{Running, ServerConfig};

fn server() -> (tempfile::TempDir, Arc<Store>, Running, SocketAddr) {
    let (dir, store, run, http) = common::http_daemon(Options::default(), ServerConfig::default());
    let spec = r#"{"name":"m","fields":[{"name":"v","type":"f64"},{"name":"s","type":"f32"}]}"#;
    let r = http_request(http, "POST", "/api/v1/tables", "", spec.as_bytes());
    assert_eq!(r.status, 201, "{}", r.body);
    (dir, store, run, http)
}

fn write(h: SocketAddr, path: &str, body: &str) -> (u16, serde_json::Value) {
    let r = http_request(h, "POST", path, "", body.as_bytes());
    let j = serde_json::from_str(&r.body).unwrap_or_default();
    (r.status, j)
}

#[test]
fn lossy_or_ambiguous_lines_are_refused_naming_line_and_field() {
    let (_d, store, run, h) = server();
    let ok = "m,device=a,fleet=East v=1,s=2 1700000000000\n";
    assert_eq!(write(h, "/api/v2/write?precision=ms", ok).0, 204);
    let cases = [
        ("m,device=a v=1e999,s=1 1700000000001", "v", "finite"),
        (
            "m,device=a v=9007199254740993i,s=1 1700000000001",
            "v",
            "exactly",
        ),
        ("m,device=a v=1,s=16777217i 1700000000001", "s", "exactly"),
        ("m,device=a v=1,s=1e39 1700000000001", "s", "range"),
        (
            "m,device=a,fleet=West v=1,s=1 1700000000001",
            "fleet",
            "fixed",
        ),
        ("m,device=b\u{7} v=1,s=1 1700000000001", "device", "control"),
    ];
    for (line, what, why) in cases {
        let body = format!("{ok}{line}\n");
        let (code, j) = write(h, "/api/v2/write?precision=ms", &body);
        assert_eq!(code, 400, "{line}: {j}");
        assert_eq!(j["line"], 2, "{j}");
        let msg = j["message"].as_str().unwrap();
        assert!(msg.contains(what) && msg.contains(why), "{line}: {msg}");
    }
    // Nanoseconds that are not whole milliseconds would merge into one row.
    let ns = "m,device=a v=1,s=1 1700000000000000001\nm,device=a v=2,s=1 1700000000000000002\n";
    let (code, j) = write(h, "/api/v2/write", ns);
    assert_eq!(code, 400, "{j}");
    assert!(
        j["message"].as_str().unwrap().contains("millisecond"),
        "{j}"
    );
    // Exact conversions go through: an integer into f32, whole ms in ns.
    let fine = "m,device=a v=9007199254740992i,s=3i 1700000000002000000\n";
    assert_eq!(write(h, "/api/v2/write", fine).0, 204);
    assert_eq!(common::row_count(&store, "m"), 2);
    assert_eq!(store.device_id("b\u{7}"), None);
    let a = store.device(store.device_id("a").unwrap()).unwrap();
    assert_eq!(a.tags, vec![("fleet".to_string(), "East".to_string())]);
    run.stop();
}

#[test]
fn v1_writes_need_db_take_minutes_and_hours_and_answer_in_1x_shape() {
    let (_d, store, run, h) = server();
    let line = "m,device=a v=1,s=1 472222\n";
    let (code, j) = write(h, "/write?precision=m", line);
    assert_eq!(code, 400);
    assert!(j["error"].as_str().unwrap().contains("database"), "{j}");
    assert_eq!(write(h, "/write?db=x&precision=m", line).0, 204);
    assert_eq!(
        write(h, "/write?db=x&precision=h", "m,device=a v=2,s=1 7870\n").0,
        204
    );
    let (code, j) = write(h, "/write?db=x", "m,device=a v=oops\n");
    assert_eq!(code, 400);
    assert!(j["error"].as_str().unwrap().starts_with("line 1"), "{j}");
    let id = store.device_id("a").unwrap();
    let ts: Vec<i64> = store
        .scan(
            "m",
            id,
            i64::MIN,
            i64::MAX,
            telestore_engine::Order::OldestFirst,
        )
        .unwrap()
        .iter()
        .map(|r| r.ts)
        .collect();
    assert_eq!(ts, vec![7870 * 3_600_000, 472_222 * 60_000]);
    run.stop();
}

/// Values whose shortest decimal form serde_json's default float parser
/// gets wrong (90.33333333333333 came back as 90.33333333333331).
#[test]
fn json_output_floats_parse_back_to_the_same_bits() {
    let (_d, _store, run, h) = server();
    let vals = [
        90.333_333_333_333_33,
        0.1 + 0.2,
        1e-300,
        123_456_789.123_456_78,
        -2.220_446_049_250_313e-16,
    ];
    let mut body = String::new();
    for (i, v) in vals.iter().enumerate() {
        body += &format!(
            "m,device=a v={v:?},s=0.1 {}\n",
            1_700_000_000_000i64 + i as i64
        );
    }
    assert_eq!(write(h, "/api/v2/write?precision=ms", &body).0, 204);
    for format in ["json", "jsonl"] {
        let q = format!(
            "/api/v1/query?kind=range&table=m&device=a&from=0s&to=now&order=asc&format={format}"
        );
        let r = http_request(h, "GET", &q, "", b"");
        assert_eq!(r.status, 200, "{}", r.body);
        let text = r.body.replace("\r\n", "\n");
        for v in vals {
            let shortest = format!("\"v\":{v:?}");
            assert!(
                text.contains(&shortest),
                "{format}: {v:?} missing in\n{text}"
            );
        }
        assert!(text.contains("\"s\":0.1"), "{format}: f32 0.1 in\n{text}");
    }
    run.stop();
}

/// A misspelt parameter is refused, naming it, on query and export alike
/// (`form=json` exported the whole table as Arrow); v1's `u`/`p`
/// credentials are passed over.
#[test]
fn unknown_query_parameters_are_refused() {
    let (_d, _store, run, h) = server();
    assert_eq!(
        write(
            h,
            "/api/v2/write?precision=ms",
            "m,device=a v=1,s=2 1700000000000"
        )
        .0,
        204
    );
    for path in [
        "/api/v1/export?table=m&form=json",
        "/api/v1/query?kind=latest&table=m&device=a&limt=5",
    ] {
        let r = http_request(h, "GET", path, "", b"");
        assert_eq!(r.status, 400, "{path}: {}", r.body);
        assert!(r.body.contains("unknown field"), "{path}: {}", r.body);
    }
    let r = http_request(
        h,
        "GET",
        "/api/v1/query?kind=latest&table=m&device=a&format=json&u=x&p=y",
        "",
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    run.stop();
}

/// A write path stopped by a failed WAL write (a full disk) answers 503
/// with `Retry-After`, as the binary protocol says `unavailable` and
/// `/health` says 503; not 500.
#[test]
fn a_stopped_write_path_answers_503_with_retry_after() {
    let (opts, faults) = common::with_faults(Options::default());
    let (_dir, _store, run, h) = common::http_daemon(opts, ServerConfig::default());
    let spec = r#"{"name":"m","fields":[{"name":"v","type":"f64"}]}"#;
    assert_eq!(
        http_request(h, "POST", "/api/v1/tables", "", spec.as_bytes()).status,
        201
    );
    use std::sync::atomic::Ordering::SeqCst;
    faults.fail_write_from.store(0, SeqCst);
    faults.fail_sync_from.store(0, SeqCst);
    for path in ["/api/v2/write?precision=ms", "/write?db=x&precision=ms"] {
        let r = http_request(h, "POST", path, "", b"m,device=a v=1 1700000000000\n");
        assert_eq!(r.status, 503, "{path}: {}", r.body);
        assert!(r.header("Retry-After").is_some(), "{}", r.head);
    }
    assert_eq!(http_request(h, "GET", "/health", "", b"").status, 503);
    run.stop();
}
