//! Idle connections cannot stop the daemon: a daemon whose open-file
//! limit is 1024 (hard and soft) takes 3,000 HTTP connections that never
//! send a byte, while a writer on a connection opened before keeps
//! writing and flushing (the WAL and HFiles get their descriptors); past
//! the header timeout the idle ones are closed, and a new client is
//! served: nothing was poisoned.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The daemon under `bash`'s `ulimit -n 1024` (hard and soft).
fn daemon(dir: &std::path::Path) -> (Child, SocketAddr) {
    let mut c = Command::new("bash")
        .arg("-c")
        .arg(r#"ulimit -Sn 1024 && ulimit -Hn 1024 && exec "$0" "$@""#)
        .arg(env!("CARGO_BIN_EXE_telestore"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
            "--flight-listen",
            "off",
            "--header-timeout-s",
            "2",
        ])
        .arg("--dir")
        .arg(dir)
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = common::logged_http_addr(&mut c);
    (c, addr)
}

/// One kept-alive HTTP/1.1 connection: a request, its whole answer.
struct KeepAlive {
    rd: BufReader<TcpStream>,
}

impl KeepAlive {
    fn new(addr: SocketAddr) -> KeepAlive {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        KeepAlive {
            rd: BufReader::new(s),
        }
    }

    /// The status of `method path` with `body`.
    fn send(&mut self, method: &str, path: &str, body: &str) -> u16 {
        let json = match body.starts_with('{') {
            true => "Content-Type: application/json\r\n",
            false => "",
        };
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\n{json}Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.rd.get_mut().write_all(req.as_bytes()).unwrap();
        let mut status = String::new();
        self.rd.read_line(&mut status).unwrap();
        let mut length = 0;
        loop {
            let mut line = String::new();
            self.rd.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        self.rd.read_exact(&mut body).unwrap();
        status[9..12].parse().unwrap()
    }
}

/// Let this process hold the idle connections: soft limit up to the hard.
fn raise_own_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let hard = getrlimit(Resource::Nofile).maximum;
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: hard,
            maximum: hard,
        },
    );
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

#[test]
fn idle_connections_past_the_descriptor_limit_neither_stop_writes_nor_poison_them() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, http) = daemon(dir.path());
    let mut writer = KeepAlive::new(http);
    let create = r#"{"name":"t","fields":[{"name":"v","type":"u64"}]}"#;
    assert_eq!(writer.send("POST", "/api/v1/tables", create), 201);
    // The writer goes on all the while, on its kept-alive connection:
    // every write and flush is applied.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    let writes = std::thread::spawn(move || {
        let mut rows = 0u64;
        while !stopped.load(std::sync::atomic::Ordering::Relaxed) || rows < 200 {
            let ts = 1_700_000_000_000u64 + rows;
            let line = format!("t,device=d{} v={rows}u {ts}\n", rows % 40);
            let st = writer.send("POST", "/api/v2/write?precision=ms", &line);
            assert_eq!(st, 204, "write {rows}");
            rows += 1;
            if rows.is_multiple_of(40) {
                assert_eq!(
                    writer.send("POST", "/api/v1/flush", ""),
                    200,
                    "flush at {rows}"
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        rows
    });
    let idle_n = 3000.min(raise_own_limit().saturating_sub(256)) as usize;
    assert!(
        idle_n > 1024,
        "this machine lets a test hold only {idle_n} sockets"
    );
    let mut idle = Vec::with_capacity(idle_n);
    for _ in 0..idle_n {
        // Past the daemon's cap they wait in its backlog, or not at all.
        if let Ok(s) = TcpStream::connect_timeout(&http, Duration::from_millis(200)) {
            idle.push(s);
        }
    }
    assert!(
        idle.len() > 1024,
        "only {} idle connections made",
        idle.len()
    );
    // The idle ones the daemon took are closed after the header timeout.
    std::thread::sleep(Duration::from_secs(3));
    drop(idle);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rows = writes.join().unwrap();
    let h = common::http_request(http, "GET", "/health", "", b"");
    assert_eq!(h.status, 200, "{}", h.body);
    let q = common::http_request(
        http,
        "GET",
        "/api/v1/query?table=t&kind=scan&format=csv&from=0ms&to=now",
        "",
        b"",
    );
    assert_eq!(q.status, 200, "{}", q.body);
    assert_eq!(q.body.lines().count() as u64, rows + 1, "{}", q.body);
    child.kill().unwrap();
    child.wait().unwrap();
}
