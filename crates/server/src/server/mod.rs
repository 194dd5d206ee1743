//! Two frontends: the binary protocol's TCP listener (`tcp`) and the HTTP
//! side (`router`, one file per route group: `write` line protocol,
//! `tables`, `devices` device search, `query` queries and exports,
//! `metrics` health and metrics,
//! `status` the console's JSON, `console` its page, `openapi` the API's
//! OpenAPI document), with the tokens of `crate::frontend::auth` checked by `auth`'s router
//! layer. The protocols' codecs live in `crate::ingest`; `crate::daemon`
//! starts these listeners with the others.

pub mod auth;
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
mod write;

pub use metrics::{classic_text, Metrics};
pub use openapi::{document as openapi_document, document_json as openapi_json};
pub use state::{HttpState, IngestHistory, WRITE_BODY_MAX};
pub use tcp::serve;

use crate::frontend::config::ServerConfig;
use crate::frontend::Serving;
use auth::HttpAuth;
use std::sync::Arc;

/// Serve HTTP on `l` (bound by the daemon) until `stop`: the routes, the
/// console's ingest sampler, the connection cap and TLS of `cfg`.
pub fn spawn_http(
    rt: &tokio::runtime::Runtime,
    l: tokio::net::TcpListener,
    serving: &Serving,
    cfg: &ServerConfig,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let history = Arc::new(IngestHistory::default());
    let state = HttpState {
        store: serving.store.clone(),
        stats: serving.stats.clone(),
        line_rules: Arc::new(cfg.line_rules()),
        auth: Arc::new(HttpAuth {
            tokens: cfg.tokens.clone(),
            metrics_public: cfg.metrics_public,
        }),
        history: history.clone(),
        queries: serving.queries.clone(),
        metrics: Arc::new(Metrics::new(serving.store.clone(), serving.stats.clone())),
    };
    let app = router::router(state);
    rt.spawn(status::sample_ingest(
        serving.store.clone(),
        history,
        stop.clone(),
    ));
    rt.spawn(http::serve(
        l,
        app,
        serving.gate.clone(),
        (cfg.header_timeout, cfg.shutdown_grace),
        cfg.tls.clone(),
        stop,
    ));
}
