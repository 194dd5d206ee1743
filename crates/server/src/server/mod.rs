//! The daemon: the binary protocol's TCP listener (`tcp`) and the HTTP
//! side (`router`, one file per route group: `write` line protocol,
//! `tables`, `devices` device search, `query` queries and exports,
//! `metrics` health and metrics,
//! `status` the console's JSON, `console` its page, `openapi` the API's
//! OpenAPI document), with the tokens of `auth` checked on every protocol. The protocols' codecs live in
//! `crate::ingest`.

pub mod auth;
pub mod conn;
mod console;
mod devices;
mod http;
mod influx;
mod metrics;
mod openapi;
mod query;
mod router;
mod sql;
mod state;
pub mod status;
mod tables;
mod tcp;
pub mod tls;
mod write;

pub use metrics::{classic_text, render_metrics};
pub use openapi::{document as openapi_document, document_json as openapi_json};
pub use state::{HttpState, IngestHistory, ServerConfig, ServerStats, WRITE_BODY_MAX};
pub use tcp::serve;

use auth::HttpAuth;
use std::net::SocketAddr;
use std::sync::Arc;
use telestore_engine::error::Error;
use telestore_engine::Store;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// A server running on its own runtime thread.
pub struct Running {
    pub addr: SocketAddr,
    /// The HTTP endpoints' address, when they listen.
    pub http_addr: Option<SocketAddr>,
    /// The Flight service's address, when it listens.
    pub flight_addr: Option<SocketAddr>,
    pub stats: Arc<ServerStats>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Stop accepting, finish in-flight frames and their acks, return.
    pub fn stop(mut self) {
        self.shutdown();
    }
    fn shutdown(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Bind `listen` and serve on a new runtime thread.
#[expect(
    clippy::too_many_lines,
    reason = "starts every listener in turn; becomes the composition root's bind-and-spawn helper"
)]
pub fn start(
    store: Arc<Store>,
    listen: SocketAddr,
    cfg: ServerConfig,
) -> telestore_engine::Result<Running> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("telestore-net")
        .enable_all()
        .build()
        .map_err(|e| Error::io("<ingest runtime>", e))?;
    let listener = rt
        .block_on(TcpListener::bind(listen))
        .map_err(|e| Error::io(format!("<listen {listen}>"), e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::io("<listener>", e))?;
    let stats = Arc::new(ServerStats::default());
    let spill = telestore_query::sql::pool::spill_dir_of(store.dir());
    let queries = telestore_query::sql::QueryPool::new(Some(spill), cfg.queries.clone())?;
    let _ = stats.queries.set(queries.clone());
    let gate = connection_gate(cfg.connections_max);
    let _ = stats.gate.set(gate.clone());
    let (stop, rx) = watch::channel(false);
    let http_addr = match cfg.http_listen {
        Some(a) => {
            let l = rt
                .block_on(TcpListener::bind(a))
                .map_err(|e| Error::io(format!("<listen {a}>"), e))?;
            let bound = l.local_addr().map_err(|e| Error::io("<listener>", e))?;
            let history = Arc::new(IngestHistory::default());
            let state = HttpState {
                store: store.clone(),
                stats: stats.clone(),
                device_tag: Arc::from(cfg.device_tag.as_str()),
                auth: Arc::new(HttpAuth {
                    tokens: cfg.tokens.clone(),
                    metrics_public: cfg.metrics_public,
                }),
                history: history.clone(),
                queries: queries.clone(),
            };
            let app = router::router(state);
            rt.spawn(status::sample_ingest(store.clone(), history, rx.clone()));
            rt.spawn(http::serve(
                l,
                app,
                gate.clone(),
                (cfg.header_timeout, cfg.shutdown_grace),
                cfg.tls.clone(),
                rx.clone(),
            ));
            Some(bound)
        }
        None => None,
    };
    let flight_addr = match cfg.flight_listen {
        Some(a) => {
            let l = rt
                .block_on(TcpListener::bind(a))
                .map_err(|e| Error::io(format!("<listen {a}>"), e))?;
            let bound = l.local_addr().map_err(|e| Error::io("<listener>", e))?;
            let service = crate::flight::service::Service {
                store: store.clone(),
                stats: stats.clone(),
                tokens: cfg.tokens.clone(),
                location: crate::flight::location_of(bound, cfg.tls.is_some()),
                queries: queries.clone(),
            };
            let mut stop_flight = rx.clone();
            let done = async move {
                let _ = stop_flight.changed().await;
            };
            let (gate, first, tls) = (gate.clone(), cfg.header_timeout, cfg.tls.clone());
            rt.spawn(async move {
                if let Err(e) = crate::flight::serve(l, service, gate, (first, tls), done).await {
                    tracing::error!("flight server failed: {e}");
                }
            });
            Some(bound)
        }
        None => None,
    };
    if let Some(m) = cfg.mqtt.clone() {
        m.validate()?;
        let (store, stats, stop) = (store.clone(), stats.mqtt.clone(), rx.clone());
        let tag: std::sync::Arc<str> = std::sync::Arc::from(cfg.device_tag.as_str());
        rt.spawn(async move {
            if let Err(e) = crate::mqtt::run(store, m, stats, tag, stop).await {
                tracing::error!("mqtt subscriber stopped: {e}");
            }
        });
    }
    let st = stats.clone();
    let thread = std::thread::Builder::new()
        .name("telestore-ingest".into())
        .spawn(move || rt.block_on(serve(store, listener, cfg, st, gate, rx)))
        .map_err(|e| Error::io("<ingest thread>", e))?;
    Ok(Running {
        addr,
        http_addr,
        flight_addr,
        stats,
        stop,
        thread: Some(thread),
    })
}

/// The cap on open connections of every listener: the soft descriptor
/// limit, raised to the hard one, less what the store holds and
/// [`conn::FDS_RESERVED`], at most `wanted`.
fn connection_gate(wanted: usize) -> Arc<conn::Gate> {
    let nofile = conn::raise_nofile_limit();
    let open = conn::open_descriptors();
    let max = conn::connections_for(nofile, open, wanted);
    if max < wanted {
        tracing::warn!(
            "at most {max} connections (asked {wanted}): the open-file limit is {nofile}, \
             {open} are open and {} are kept for the store",
            conn::FDS_RESERVED
        );
    }
    conn::Gate::new(max)
}
