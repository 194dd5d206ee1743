//! A daemon restarted on a disk that is still full serves reads: it opens
//! the store read-only, answers queries with every acknowledged row,
//! refuses writes with `503` and says why on `/health`; once space is
//! freed, a restart writes again. (It exited 1 before.)
//!
//! Needs a small tmpfs (root, and a kernel that lets this container
//! mount one); skipped, saying so, where that is not possible.

use crate::common;

use common::{http_request, logged_http_addr, serve_command};
use std::path::Path;
use std::process::{Child, Command};

struct Mount(tempfile::TempDir);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

fn tmpfs(size: &str) -> Option<Mount> {
    let dir = tempfile::tempdir().unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir.path())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(Mount(dir))
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(dir: &Path) -> (Daemon, std::net::SocketAddr) {
    let mut c = serve_command(dir, "127.0.0.1:0").spawn().unwrap();
    let addr = logged_http_addr(&mut c);
    (Daemon(c), addr)
}

fn write(h: std::net::SocketAddr, from: i64, n: i64) -> u16 {
    let body: String = (from..from + n)
        .map(|i| format!("m,device=d v={i} {}\n", 1_700_000_000_000 + i))
        .collect();
    http_request(h, "POST", "/api/v2/write?precision=ms", "", body.as_bytes()).status
}

fn count(h: std::net::SocketAddr) -> i64 {
    let r = http_request(
        h,
        "POST",
        "/api/v1/sql?format=json",
        "",
        b"SELECT count(*) AS n FROM m",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v: serde_json::Value = serde_json::from_str(r.body.trim()).unwrap();
    v[0]["n"].as_i64().unwrap()
}

/// Fill what is left of the file system with one file.
fn fill(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 1 << 16];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
}

#[test]
fn a_restart_on_a_full_disk_serves_reads_and_refuses_writes() {
    let Some(m) = tmpfs("256m") else {
        eprintln!("skipped: cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN)");
        return;
    };
    let data = m.0.path().join("data");
    let spec = r#"{"name":"m","fields":[{"name":"v","type":"f64"}]}"#;
    let acked = {
        let (_d, h) = serve(&data);
        let r = http_request(h, "POST", "/api/v1/tables", "", spec.as_bytes());
        assert_eq!(r.status, 201, "{}", r.body);
        assert_eq!(write(h, 0, 1000), 204);
        fill(&m.0.path().join("filler"));
        // Writes go on until the WAL cannot grow; those acknowledged count.
        let mut acked = 1000;
        for k in 1..2000 {
            match write(h, k * 1000, 1000) {
                204 => acked += 1000,
                503 => break,
                s => panic!("write answered {s}"),
            }
        }
        acked
    }; // SIGKILL
    let (d, h) = serve(&data);
    let health = http_request(h, "GET", "/health", "", b"");
    assert_eq!(health.status, 503, "{}", health.body);
    assert!(health.body.contains("disk was full"), "{}", health.body);
    assert_eq!(count(h), acked, "every acknowledged row is read");
    assert_eq!(write(h, 9_000_000, 1), 503);
    drop(d);
    std::fs::remove_file(m.0.path().join("filler")).unwrap();
    let (_d, h) = serve(&data);
    assert_eq!(http_request(h, "GET", "/health", "", b"").status, 200);
    assert_eq!(write(h, 9_000_000, 1), 204);
    assert_eq!(count(h), acked + 1);
}
