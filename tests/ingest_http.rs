//! The daemon's HTTP endpoints over real TCP: health, table create/list,
//! Prometheus metrics.

mod common;

use common::small_rows;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use telestore::ingest::client::Client;
use telestore::ingest::proto::Response;
use telestore::ingest::server::{start, Running, ServerConfig};
use telestore::{Durability, Options, Store};

fn server() -> (tempfile::TempDir, Arc<Store>, Running, SocketAddr) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), Options::default()).unwrap());
    let cfg = ServerConfig {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..ServerConfig::default()
    };
    let run = start(store.clone(), "127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let http = run.http_addr.unwrap();
    (dir, store, run, http)
}

/// One HTTP/1.1 request; returns (status, body).
fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let status = resp[9..12].parse().unwrap();
    let body = resp
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

#[test]
fn health_tables_and_metrics() {
    let (_d, store, run, h) = server();
    let (code, body) = http(h, "GET", "/health", "");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"ok\""), "{body}");

    let spec = r#"{"name":"t","fields":[{"name":"v","type":"u64"},{"name":"x","type":"f32"},{"name":"ok","type":"bool"}],"ttl":"30d","regions":4}"#;
    assert_eq!(http(h, "POST", "/api/v1/tables", spec).0, 201);
    assert_eq!(
        http(h, "POST", "/api/v1/tables", spec).0,
        200,
        "creating the same table again is fine"
    );
    let conflict = r#"{"name":"t","fields":[{"name":"v","type":"f64"}]}"#;
    let (code, body) = http(h, "POST", "/api/v1/tables", conflict);
    assert_eq!(code, 409, "{body}");
    let (code, body) = http(
        h,
        "POST",
        "/api/v1/tables",
        r#"{"name":"u","fields":[{"name":"v","type":"f16"}]}"#,
    );
    assert_eq!(code, 400);
    assert!(body.contains("f16"), "{body}");
    assert_eq!(http(h, "POST", "/api/v1/tables", "{not json").0, 400);
    let (code, body) = http(h, "GET", "/api/v1/tables", "");
    assert_eq!(code, 200);
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list[0]["name"], "t");
    assert_eq!(list[0]["regions"], 4);
    assert_eq!(list[0]["fields"][1]["type"], "f32");
    assert_eq!(
        store.schema("t").unwrap().options.ttl_ms,
        Some(30 * 86_400_000)
    );

    let mut c = Client::connect(run.addr, "t", Durability::Sync, "").unwrap();
    let rows = small_rows(&[(1, 1_700_000_000_000, 5), (2, 1_700_000_000_000, 6)]);
    assert!(matches!(c.write(1, &rows).unwrap(), Response::Ack { .. }));
    let bad = small_rows(&[(1, -1, 5)]);
    assert!(matches!(c.write(2, &bad).unwrap(), Response::Error(_)));
    let (code, m) = http(h, "GET", "/metrics", "");
    assert_eq!(code, 200);
    for want in [
        "telestore_ingest_rows_total 2",
        "telestore_ingest_batches_total 1",
        "telestore_rejected_frames_total{reason=\"timestamp_out_of_range\"} 1",
        "telestore_connections_open 1",
        "telestore_wal_sync_seconds_count",
        "telestore_region_write_rows_per_second{table=\"t\",region=\"0\"}",
        "telestore_block_cache_hit_ratio",
        "# EOF",
    ] {
        assert!(m.contains(want), "metrics lack {want:?}:\n{m}");
    }
    run.stop();
}
