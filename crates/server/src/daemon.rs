//! The composition root: [`start`] binds every listener the
//! configuration asks for (the binary protocol, HTTP, Flight) and the MQTT
//! subscriber, on one runtime thread with one stop signal. It is the only
//! module that knows every frontend; no frontend imports another.

pub use crate::frontend::config::ServerConfig;
use crate::frontend::conn;
use crate::frontend::stats::ServerStats;
use crate::frontend::Serving;
use std::net::SocketAddr;
use std::sync::Arc;
use telestore_engine::error::{Error, Result};
use telestore_engine::Store;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// How long a stop waits for queries to finish dropping what they hold.
const QUERY_DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// A server running on its own runtime thread.
pub struct Running {
    /// The binary protocol's address.
    pub addr: SocketAddr,
    /// The HTTP endpoints' address, when they listen.
    pub http_addr: Option<SocketAddr>,
    /// The Flight service's address, when it listens.
    pub flight_addr: Option<SocketAddr>,
    /// The daemon's counters.
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
            // A query answered just before the stop may still be dropping
            // its plan (and the store it holds) on the query pool's
            // threads: wait for it, so that the caller owns the store
            // alone again once `stop` returns.
            if let Some(q) = self.stats.queries.get() {
                if !q.wait_idle(QUERY_DRAIN) {
                    tracing::warn!("queries still running {QUERY_DRAIN:?} after the stop");
                }
            }
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
    let (listener, addr) = bind(&rt, listen)?;
    let stats = Arc::new(ServerStats::default());
    let spill = telestore_query::sql::pool::spill_dir_of(store.dir());
    let queries = telestore_query::sql::QueryPool::new(Some(spill), cfg.queries.clone())?;
    let _ = stats.queries.set(queries.clone());
    let gate = connection_gate(cfg.connections_max);
    let _ = stats.gate.set(gate.clone());
    let serving = Serving {
        store: store.clone(),
        stats: stats.clone(),
        queries: queries.clone(),
        gate: gate.clone(),
    };
    let (stop, rx) = watch::channel(false);
    let http_addr = match cfg.http_listen {
        Some(a) => {
            let (l, bound) = bind(&rt, a)?;
            crate::server::spawn_http(&rt, l, &serving, &cfg, rx.clone());
            Some(bound)
        }
        None => None,
    };
    let flight_addr = match cfg.flight_listen {
        Some(a) => {
            let (l, bound) = bind(&rt, a)?;
            let service = crate::flight::service::Service {
                store: store.clone(),
                stats: stats.clone(),
                tokens: cfg.tokens.clone(),
                location: crate::flight::location_of(bound, cfg.tls.is_some()),
                queries: queries.clone(),
                auto_create: cfg.auto_create.clone(),
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
        let rules = std::sync::Arc::new(cfg.line_rules());
        rt.spawn(async move {
            if let Err(e) = crate::mqtt::run(store, m, stats, rules, stop).await {
                tracing::error!("mqtt subscriber stopped: {e}");
            }
        });
    }
    let st = stats.clone();
    let thread = std::thread::Builder::new()
        .name("telestore-ingest".into())
        .spawn(move || rt.block_on(crate::server::serve(store, listener, cfg, st, gate, rx)))
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

/// Bind `addr` on `rt`: the listener and the address it got (port 0
/// picks one).
fn bind(rt: &tokio::runtime::Runtime, addr: SocketAddr) -> Result<(TcpListener, SocketAddr)> {
    let l = rt
        .block_on(TcpListener::bind(addr))
        .map_err(|e| Error::io(format!("<listen {addr}>"), e))?;
    let bound = l
        .local_addr()
        .map_err(|e| Error::io(format!("<listen {addr}>"), e))?;
    Ok((l, bound))
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
