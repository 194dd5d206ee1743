//! What the daemon's HTTP handlers share, the server's counters, and the
//! JSON error answers every route gives.

use super::auth::Tokens;
use crate::ingest::proto::ErrorCode;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use telestore_engine::error::{Error, ErrorClass};
use telestore_engine::Store;
use utoipa::ToSchema;

/// What the handlers share.
#[derive(Clone)]
pub struct HttpState {
    pub store: Arc<Store>,
    pub stats: Arc<ServerStats>,
    /// The line-protocol tag that names the device.
    pub device_tag: Arc<str>,
    /// Tokens, checked by the [`super::auth::require`] layer.
    pub auth: Arc<super::auth::HttpAuth>,
    /// Rows per second over the last minutes (`/api/v1/status`).
    pub history: Arc<IngestHistory>,
    /// Where queries, exports and SQL run, under their limits.
    pub queries: Arc<telestore_query::sql::QueryPool>,
}

/// Largest line-protocol request body, after gzip decoding.
pub const WRITE_BODY_MAX: usize = 64 << 20;

/// Server settings.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Tokens a client must present (none configured: any client); the
    /// binary protocol writes, so it needs a read-write token.
    pub tokens: Tokens,
    /// Serve `/metrics` without a token.
    pub metrics_public: bool,
    /// Payload bytes a connection may have in flight (read, not yet acked).
    pub max_inflight_bytes: usize,
    /// How long a client may take to send its handshake.
    pub handshake_timeout: Duration,
    /// How long a shutdown waits for connections to send their last acks.
    pub shutdown_grace: Duration,
    /// Where the HTTP endpoints listen (`None`: no HTTP).
    pub http_listen: Option<SocketAddr>,
    /// The line-protocol tag naming the device.
    pub device_tag: String,
    /// Where the Arrow Flight service listens (`None`: no Flight).
    pub flight_listen: Option<SocketAddr>,
    /// The MQTT broker to subscribe to (`None`: no MQTT).
    pub mqtt: Option<crate::mqtt::MqttConfig>,
    /// The limits every query runs under.
    pub queries: telestore_query::sql::QueryLimits,
    /// Connections open at once over every listener (HTTP, binary,
    /// Flight), less if the descriptor limit leaves fewer.
    pub connections_max: usize,
    /// How long an HTTP or Flight client may take to send a request's
    /// headers (HTTP: also how long a kept-alive connection may sit idle).
    pub header_timeout: Duration,
    /// TLS on every listener (HTTP, binary, Flight); `None`: plain TCP.
    pub tls: Option<std::sync::Arc<super::tls::Tls>>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            tokens: Tokens::default(),
            metrics_public: true,
            max_inflight_bytes: 32 << 20,
            handshake_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(10),
            http_listen: None,
            device_tag: "device".into(),
            flight_listen: None,
            mqtt: None,
            queries: telestore_query::sql::QueryLimits::default(),
            connections_max: 4096,
            header_timeout: Duration::from_secs(30),
            tls: None,
        }
    }
}

/// Seconds of ingest history kept (one sample per second).
pub const HISTORY_SECS: usize = 300;

/// The ingest rate, one `(time_ms, rows_per_second)` sample per second
/// (`status::sample_ingest` fills it, `/api/v1/status` shows it).
pub struct IngestHistory {
    pub started: Instant,
    samples: Mutex<VecDeque<(i64, f64)>>,
}

impl Default for IngestHistory {
    fn default() -> Self {
        IngestHistory {
            started: Instant::now(),
            samples: Mutex::new(VecDeque::with_capacity(HISTORY_SECS)),
        }
    }
}

impl IngestHistory {
    pub fn push(&self, time_ms: i64, rows_per_second: f64) {
        let mut q = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() == HISTORY_SECS {
            q.pop_front();
        }
        q.push_back((time_ms, rows_per_second));
    }

    /// Oldest first.
    pub fn samples(&self) -> Vec<(i64, f64)> {
        let q = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        q.iter().copied().collect()
    }
}

/// Counters for the metrics endpoint and tests.
pub struct ServerStats {
    pub connections_open: AtomicU64,
    pub connections_total: AtomicU64,
    pub frames: AtomicU64,
    pub rows: AtomicU64,
    pub bytes: AtomicU64,
    /// Rejected frames and handshakes by error code (index = code).
    pub rejected: [AtomicU64; 16],
    /// Line-protocol rows written, requests applied and rejected.
    pub http_rows: AtomicU64,
    pub http_requests: AtomicU64,
    pub http_rejected: AtomicU64,
    /// Binary frames, from the payload read to the ack written (seconds).
    pub frame_seconds: prometheus_client::metrics::histogram::Histogram,
    /// Flight calls, and those answered with an error status.
    pub flight_calls: AtomicU64,
    pub flight_rejected: AtomicU64,
    /// Rows `DoGet` sent and `DoPut` wrote.
    pub flight_rows_sent: AtomicU64,
    pub flight_rows_written: AtomicU64,
    /// SQL queries answered (HTTP: to the end; Flight: the stream
    /// started), and those refused or failed.
    pub sql_queries: AtomicU64,
    pub sql_failed: AtomicU64,
    /// The MQTT subscriber's counters and state.
    pub mqtt: Arc<crate::mqtt::Stats>,
    /// The query pool (set when the server starts): its counters and
    /// what it holds.
    pub queries: std::sync::OnceLock<Arc<telestore_query::sql::QueryPool>>,
    /// The connection cap of every listener (set when the server starts).
    pub gate: std::sync::OnceLock<Arc<super::conn::Gate>>,
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
    pub(super) fn reject(&self, code: ErrorCode) {
        self.rejected[(code as usize).min(15)].fetch_add(1, Relaxed);
    }
    /// Rejections of one code.
    pub fn rejected_of(&self, code: ErrorCode) -> u64 {
        self.rejected[(code as usize).min(15)].load(Relaxed)
    }
}

pub(super) fn json_error(status: StatusCode, message: impl Into<String>) -> Response {
    ApiError::answer(status, message.into(), None)
}

/// The body of an error answer (every route but the line-protocol
/// writes, which answer in InfluxDB's shapes).
#[derive(Serialize, ToSchema)]
pub struct ApiError {
    /// The HTTP status again.
    pub code: u16,
    /// What went wrong.
    pub message: String,
    /// The query parameter at fault, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arg: Option<String>,
}

impl ApiError {
    pub(super) fn answer(status: StatusCode, message: String, arg: Option<String>) -> Response {
        let body = ApiError {
            code: status.as_u16(),
            message,
            arg,
        };
        (status, Json(body)).into_response()
    }
}

/// A store error as JSON, with the status and `Retry-After` of
/// [`crate::classes::http`] and the argument to blame, if any.
pub(super) fn store_failure(e: &Error) -> Response {
    let class = e.class();
    let (status, retry_s) = crate::classes::http(class);
    let arg = match class {
        ErrorClass::BadRequest { arg } => arg,
        ErrorClass::NotFound => Some("table"),
        _ => None,
    };
    let arg = arg.map(|a| a.trim_start_matches('-').replace('-', "_"));
    with_retry_after(ApiError::answer(status, e.api_text(), arg), retry_s)
}

pub(super) fn with_retry_after(mut r: Response, retry_s: Option<u64>) -> Response {
    if let Some(retry_s) = retry_s {
        r.headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from(retry_s));
    }
    r
}
