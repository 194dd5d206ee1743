//! Helpers of the root package's tests: those that run the `telestore`
//! binary, plus the workspace's shared ones.
#![allow(dead_code)]

#[path = "../../../crates/server/tests/it/common/daemon.rs"]
pub mod daemon;

pub use daemon::*;
pub use telestore_testsupport::*;

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
