//! Helpers shared by the integration tests of every crate in the
//! workspace (a dev-dependency only, never shipped): seeds, small tables,
//! store options, a reference model of a mixed table ([`mixed`]) and a
//! raw HTTP client. Daemon helpers that need the frontends are in
//! `crates/server/tests/it/common/daemon.rs`, and those that run the
//! `telestore` binary in `tests/it/common/mod.rs`.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

pub mod mixed;

use telestore_engine::schema::batch::push_row;
use telestore_engine::schema::{Field, FieldType, TableOptions, TableSchema};
use telestore_engine::{Options, Store};

/// Seed from `SEED=` or the given default; printed so a failure can be rerun.
pub fn seed(default: u64) -> u64 {
    let s = std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    eprintln!("seed = {s} (rerun with SEED={s})");
    s
}

/// A small table: `v: u64`, `x: f32`, `ok: bool` (13 field bytes).
pub fn small_schema(name: &str, options: TableOptions) -> TableSchema {
    TableSchema::new(
        name,
        vec![
            Field::new("v", FieldType::U64),
            Field::new("x", FieldType::F32),
            Field::new("ok", FieldType::Bool),
        ],
        options,
    )
    .unwrap()
}

/// Field bytes for `small_schema` from one value.
pub fn small_fields(v: u64) -> Vec<u8> {
    let mut f = v.to_le_bytes().to_vec();
    f.extend_from_slice(&(v as f32).to_le_bytes());
    f.push((v % 2) as u8);
    f
}

/// Rows `(device, ts, v)` as an ingest batch for `small_schema`.
pub fn small_rows(rows: &[(u64, i64, u64)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (d, ts, v) in rows {
        push_row(&mut b, *d, *ts, &small_fields(*v));
    }
    b
}

/// Options with tiny thresholds so flushes and WAL rolls happen often.
pub fn tiny_options() -> Options {
    Options {
        flush_threshold_bytes: 16 << 10,
        wal_segment_bytes: 32 << 10,
        ..Options::default()
    }
}

/// Open a store on `dir`, panicking on error.
pub fn open(dir: &std::path::Path, opts: Options) -> Store {
    Store::open(dir, opts).expect("open store")
}

/// `opts` with the TELESTORE_IO backend wrapped in fault injection.
pub fn with_faults(
    opts: Options,
) -> (Options, std::sync::Arc<telestore_engine::io::fault::Faults>) {
    use std::sync::Arc;
    use telestore_engine::io::fault::{Faults, FaultyBackend};
    use telestore_engine::io::{self, IoChoice};
    let faults = Arc::new(Faults::default());
    let inner = io::select(IoChoice::from_env().unwrap()).unwrap();
    let opts = Options {
        backend: Some(Arc::new(FaultyBackend::new(inner, faults.clone()))),
        ..opts
    };
    (opts, faults)
}

/// Visible rows of `table`, all devices, all time.
pub fn row_count(store: &Store, table: &str) -> u64 {
    let mut n = 0;
    store
        .scan_all(table, i64::MIN, i64::MAX, |_| {
            n += 1;
            true
        })
        .unwrap();
    n
}

/// Copy a data directory (a crash image when the store that had it open
/// was forgotten, not closed).
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// An HTTP answer as the tests read it.
pub struct HttpAnswer {
    pub status: u16,
    /// Header lines, as sent (`Name: value`).
    pub head: String,
    pub body: String,
}

impl HttpAnswer {
    /// The value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// One HTTP/1.1 request on a new connection (`Connection: close`);
/// `headers` are extra header lines, each ending in CRLF. A chunked body
/// is returned with its chunk sizes (tests look for what it contains).
pub fn http_request(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &str,
    body: &[u8],
) -> HttpAnswer {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let status = resp[9..12].parse().unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
    HttpAnswer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// The HTTP address a spawned `telestore serve` (with `RUST_LOG=info` and
/// stderr piped) logs; the rest of its stderr is drained in the background.
pub fn logged_http_addr(child: &mut std::process::Child) -> std::net::SocketAddr {
    use std::io::BufRead;
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    loop {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "daemon exited");
        if !line.contains("http (") {
            continue;
        }
        if let Some(rest) = line.split("listening on ").nth(1) {
            let addr = rest.split_whitespace().next().unwrap().parse().unwrap();
            std::thread::spawn(move || for _ in err.lines() {});
            return addr;
        }
    }
}
