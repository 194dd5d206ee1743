//! `telestore serve`: the ingest daemon (binary TCP protocol).

use super::DirArg;
use anyhow::{Context, Result};
use clap::Args;
use std::net::SocketAddr;
use std::sync::Arc;
use telestore::ingest::server::{start, ServerConfig};
use telestore::{Options, Store};

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    dir: DirArg,
    /// Address of the binary ingest protocol (formats/ingest.md). Loopback
    /// by default: expose it deliberately (e.g. 0.0.0.0:7070) and set
    /// --token when you do.
    #[arg(long, default_value = "127.0.0.1:7070", env = "TELESTORE_LISTEN")]
    listen: SocketAddr,
    /// Address of the HTTP endpoints (/health, /metrics, /api/v1/tables).
    #[arg(long, default_value = "127.0.0.1:7071", env = "TELESTORE_HTTP_LISTEN")]
    http_listen: SocketAddr,
    /// Token every client must present in its handshake (default: none
    /// required).
    #[arg(long, env = "TELESTORE_TOKEN")]
    token: Option<String>,
    /// Payload bytes one connection may have read but not yet acknowledged;
    /// past it the server stops reading from that client (MiB).
    #[arg(long, default_value_t = 32)]
    max_inflight_mib: usize,
}

pub fn run(a: ServeArgs) -> Result<()> {
    let store = Arc::new(
        Store::open(&a.dir.dir, Options::default())
            .with_context(|| format!("opening {}", a.dir.dir.display()))?,
    );
    let cfg = ServerConfig {
        token: a.token.clone(),
        max_inflight_bytes: a.max_inflight_mib << 20,
        http_listen: Some(a.http_listen),
        ..ServerConfig::default()
    };
    let server = start(store.clone(), a.listen, cfg)
        .with_context(|| format!("listening on {}", a.listen))?;
    tracing::info!(
        "ingest (binary protocol) listening on {} (data {}, tables: {})",
        server.addr,
        a.dir.dir.display(),
        store.table_names().join(", ")
    );
    if let Some(h) = server.http_addr {
        tracing::info!("http (/health, /metrics, /api/v1/tables) listening on {h}");
    }
    wait_for_signal()?;
    tracing::info!("shutting down: finishing in-flight batches");
    server.stop();
    store.sync()?;
    Arc::try_unwrap(store)
        .map_err(|_| anyhow::anyhow!("store still in use at shutdown"))?
        .close()?;
    tracing::info!("stopped cleanly");
    Ok(())
}

/// Block until SIGINT or SIGTERM.
fn wait_for_signal() -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
        }
    })?;
    Ok(())
}
