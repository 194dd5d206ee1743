//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod mixed;

use telestore::schema::batch::push_row;
use telestore::schema::{Field, FieldType, TableOptions, TableSchema};
use telestore::{Options, Store};

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

pub fn open(dir: &std::path::Path, opts: Options) -> Store {
    Store::open(dir, opts).expect("open store")
}

/// `opts` with the TELESTORE_IO backend wrapped in fault injection.
pub fn with_faults(opts: Options) -> (Options, std::sync::Arc<telestore::io::fault::Faults>) {
    use std::sync::Arc;
    use telestore::io::fault::{Faults, FaultyBackend};
    use telestore::io::{self, IoChoice};
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

/// A daemon on loopback ports (binary protocol and HTTP) over a fresh
/// store opened with `opts`; `cfg`'s listen address for HTTP is set here.
pub fn http_daemon(
    opts: Options,
    cfg: telestore::server::ServerConfig,
) -> (
    tempfile::TempDir,
    std::sync::Arc<Store>,
    telestore::server::Running,
    std::net::SocketAddr,
) {
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(Store::open(dir.path(), opts).unwrap());
    let cfg = telestore::server::ServerConfig {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..cfg
    };
    let run = telestore::server::start(store.clone(), "127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let http = run.http_addr.unwrap();
    (dir, store, run, http)
}

/// [`http_daemon`] with two tokens: `w-secret` (write) and `r-secret`
/// (read); `/metrics` open only when `metrics_public`.
pub fn token_daemon(
    metrics_public: bool,
) -> (
    tempfile::TempDir,
    std::sync::Arc<Store>,
    telestore::server::Running,
    std::net::SocketAddr,
) {
    use telestore::server::auth::{Access, Tokens};
    let tokens = Tokens::single("w-secret")
        .unwrap()
        .with("r-secret", Access::Read)
        .unwrap();
    let cfg = telestore::server::ServerConfig {
        tokens,
        metrics_public,
        ..telestore::server::ServerConfig::default()
    };
    http_daemon(Options::default(), cfg)
}

/// `telestore serve` on `dir` with both listeners on loopback port 0 (HTTP
/// on `http_listen`), logging at info to a piped stderr (where
/// [`logged_http_addr`] finds the address); the caller adds flags and
/// spawns it.
pub fn serve_command(dir: &std::path::Path, http_listen: &str) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_telestore"));
    c.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--http-listen",
        http_listen,
        "--flight-listen",
        "127.0.0.1:0",
    ])
    .arg("--dir")
    .arg(dir)
    .env("RUST_LOG", "info")
    .stderr(std::process::Stdio::piped());
    c
}

/// `telestore ARGS --dir DIR`, its output.
pub fn telestore_cli(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_telestore"))
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()
        .unwrap()
}
