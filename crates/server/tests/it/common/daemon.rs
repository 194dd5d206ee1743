//! Daemon helpers for tests that start the frontends in-process (shared
//! with the root package's tests through `#[path]`).

use telestore_engine::{Options, Store};

/// A daemon on loopback ports (binary protocol and HTTP) over a fresh
/// store opened with `opts`; `cfg`'s listen address for HTTP is set here.
pub fn http_daemon(
    opts: Options,
    cfg: telestore_server::daemon::ServerConfig,
) -> (
    tempfile::TempDir,
    std::sync::Arc<Store>,
    telestore_server::daemon::Running,
    std::net::SocketAddr,
) {
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(Store::open(dir.path(), opts).unwrap());
    let cfg = telestore_server::daemon::ServerConfig {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..cfg
    };
    let run = telestore_server::daemon::start(store.clone(), "127.0.0.1:0".parse().unwrap(), cfg)
        .unwrap();
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
    telestore_server::daemon::Running,
    std::net::SocketAddr,
) {
    use telestore_server::server::auth::{Access, Tokens};
    let tokens = Tokens::single("w-secret")
        .unwrap()
        .with("r-secret", Access::Read)
        .unwrap();
    let cfg = telestore_server::daemon::ServerConfig {
        tokens,
        metrics_public,
        ..telestore_server::daemon::ServerConfig::default()
    };
    http_daemon(Options::default(), cfg)
}
