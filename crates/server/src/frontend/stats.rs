//! The daemon's counters, one struct for every protocol (for `/metrics`,
//! `/api/v1/status` and tests). The MQTT subscriber keeps its own
//! ([`crate::mqtt::Stats`]), held here so that the metrics see it.

use crate::ingest::proto::ErrorCode;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Counters for the metrics endpoint and tests.
pub struct ServerStats {
    /// Binary-protocol connections open now.
    pub connections_open: AtomicU64,
    /// Binary-protocol connections since start.
    pub connections_total: AtomicU64,
    /// Binary frames applied.
    pub frames: AtomicU64,
    /// Rows those frames held.
    pub rows: AtomicU64,
    /// Payload bytes read.
    pub bytes: AtomicU64,
    /// Rejected frames and handshakes by error code (index = code).
    pub rejected: [AtomicU64; 16],
    /// Line-protocol rows written, requests applied and rejected.
    pub http_rows: AtomicU64,
    /// Line-protocol requests applied.
    pub http_requests: AtomicU64,
    /// Line-protocol requests refused.
    pub http_rejected: AtomicU64,
    /// Binary frames, from the payload read to the ack written (seconds).
    pub frame_seconds: prometheus_client::metrics::histogram::Histogram,
    /// Flight calls, and those answered with an error status.
    pub flight_calls: AtomicU64,
    /// Flight calls answered with an error status.
    pub flight_rejected: AtomicU64,
    /// Rows `DoGet` sent and `DoPut` wrote.
    pub flight_rows_sent: AtomicU64,
    /// Rows `DoPut` wrote.
    pub flight_rows_written: AtomicU64,
    /// SQL queries answered (HTTP: to the end; Flight: the stream
    /// started), and those refused or failed.
    pub sql_queries: AtomicU64,
    /// SQL queries refused or failed.
    pub sql_failed: AtomicU64,
    /// The MQTT subscriber's counters and state.
    pub mqtt: Arc<crate::mqtt::Stats>,
    /// The query pool (set when the server starts): its counters and
    /// what it holds.
    pub queries: std::sync::OnceLock<Arc<telestore_query::sql::QueryPool>>,
    /// The connection cap of every listener (set when the server starts).
    pub gate: std::sync::OnceLock<Arc<crate::frontend::conn::Gate>>,
}

impl Default for ServerStats {
    fn default() -> Self {
        use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
        ServerStats {
            connections_open: AtomicU64::default(),
            connections_total: AtomicU64::default(),
            frames: AtomicU64::default(),
            rows: AtomicU64::default(),
            bytes: AtomicU64::default(),
            rejected: Default::default(),
            http_rows: AtomicU64::default(),
            http_requests: AtomicU64::default(),
            http_rejected: AtomicU64::default(),
            frame_seconds: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
            flight_calls: AtomicU64::default(),
            flight_rejected: AtomicU64::default(),
            flight_rows_sent: AtomicU64::default(),
            flight_rows_written: AtomicU64::default(),
            sql_queries: AtomicU64::default(),
            sql_failed: AtomicU64::default(),
            mqtt: Arc::default(),
            queries: std::sync::OnceLock::new(),
            gate: std::sync::OnceLock::new(),
        }
    }
}

impl ServerStats {
    pub(crate) fn reject(&self, code: ErrorCode) {
        self.rejected[(code as usize).min(15)].fetch_add(1, Relaxed);
    }
    /// Rejections of one code.
    pub fn rejected_of(&self, code: ErrorCode) -> u64 {
        self.rejected[(code as usize).min(15)].load(Relaxed)
    }
}
