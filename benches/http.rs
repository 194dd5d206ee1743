//! HTTP query latency through the daemon's endpoints: `latest` of one
//! device over **one kept-alive connection** (how InfluxDB clients,
//! Grafana and `requests.Session` call), and over a new connection per
//! request. Without `TCP_NODELAY` on the server's sockets the kept-alive
//! case took ~44 ms per query (the response's second write waited for the
//! client's delayed ACK); with it, both are well under a millisecond.
//!
//! `cargo bench --bench http` measures; `cargo test --benches` runs each
//! once.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "a benchmark or example: a failed unwrap stops it, and it reads top to bottom"
)]

use criterion::{criterion_group, criterion_main, Criterion};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use telestore::daemon::{start, Running, ServerConfig};
use telestore::testkit;
use telestore::{Durability, Options, Store};

const TABLE: &str = "readings";
const DEVICES: u64 = 100;

fn daemon() -> (tempfile::TempDir, Running, SocketAddr) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(Store::open(dir.path(), Options::default()).expect("open"));
    store
        .create_table(testkit::readings_schema(TABLE))
        .expect("create");
    let mut batch = Vec::new();
    for r in 0..100 {
        for d in 0..DEVICES {
            testkit::push_fleet_row(&mut batch, d, r, 10_000);
        }
    }
    store.write(TABLE, &batch, Durability::Sync).expect("write");
    store.flush().expect("flush");
    let cfg = ServerConfig {
        http_listen: Some("127.0.0.1:0".parse().expect("addr")),
        ..ServerConfig::default()
    };
    let run = start(store, "127.0.0.1:0".parse().expect("addr"), cfg).expect("start");
    let http = run.http_addr.expect("http");
    (dir, run, http)
}

/// One GET on `conn` (HTTP/1.1, kept alive); reads the whole response
/// (chunked, as the query endpoints stream) and returns its body length.
fn get(conn: &mut BufReader<TcpStream>, path: &str) -> usize {
    let req = format!("GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n");
    conn.get_mut().write_all(req.as_bytes()).expect("send");
    let mut line = String::new();
    let mut chunked = false;
    let mut length = 0usize;
    loop {
        line.clear();
        conn.read_line(&mut line).expect("header");
        let l = line.trim_end().to_ascii_lowercase();
        if l.is_empty() {
            break;
        }
        chunked |= l == "transfer-encoding: chunked";
        if let Some(v) = l.strip_prefix("content-length: ") {
            length = v.parse().expect("length");
        }
    }
    if !chunked {
        let mut body = vec![0; length];
        conn.read_exact(&mut body).expect("body");
        return length;
    }
    let mut total = 0;
    loop {
        line.clear();
        conn.read_line(&mut line).expect("chunk size");
        let n = usize::from_str_radix(line.trim_end(), 16).expect("hex size");
        let mut chunk = vec![0; n + 2];
        conn.read_exact(&mut chunk).expect("chunk");
        total += n;
        if n == 0 {
            return total;
        }
    }
}

fn bench(c: &mut Criterion) {
    let (_dir, run, http) = daemon();
    let mut g = c.benchmark_group("http_query");
    let mut d = 0u64;
    let mut path = || {
        d = (d + 1) % DEVICES;
        format!("/api/v1/query?kind=latest&table={TABLE}&device={d}&n=1&format=csv")
    };
    let mut kept = BufReader::new(TcpStream::connect(http).expect("connect"));
    g.bench_function("latest_kept_alive", |b| {
        b.iter(|| assert!(get(&mut kept, &path()) > 0))
    });
    g.bench_function("latest_new_connection", |b| {
        b.iter(|| {
            let mut conn = BufReader::new(TcpStream::connect(http).expect("connect"));
            assert!(get(&mut conn, &path()) > 0)
        })
    });
    g.finish();
    drop(kept);
    run.stop();
}

criterion_group!(benches, bench);
criterion_main!(benches);
