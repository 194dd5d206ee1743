//! What every protocol frontend shares, and nothing protocol-specific:
//! tokens ([`auth`]), the settings ([`config`]), the one cap on
//! connections ([`conn`]), TLS ([`tls`]) the counters ([`stats`]) and how a metric is declared ([`metric`]). A frontend (`server` for HTTP and the binary protocol,
//! `flight`, `mqtt`) imports this layer and never another frontend; the
//! daemon ([`crate::daemon`]) is the one place that starts them all.

pub mod auth;
pub mod config;
pub mod conn;
pub mod metric;
pub mod stats;
pub mod tls;

use std::sync::Arc;
use telestore_engine::Store;

/// What every listener of one daemon shares.
#[derive(Clone)]
pub struct Serving {
    /// The store served.
    pub store: Arc<Store>,
    /// The daemon's counters.
    pub stats: Arc<stats::ServerStats>,
    /// The query pool every SQL and query request runs on.
    pub queries: Arc<telestore_query::sql::QueryPool>,
    /// The one cap on open connections over every listener.
    pub gate: Arc<conn::Gate>,
}
