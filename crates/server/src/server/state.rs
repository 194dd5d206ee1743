//! What the daemon's HTTP handlers share, and the JSON error answers every
//! route gives.

use crate::frontend::stats::ServerStats;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use telestore_engine::error::{Error, ErrorClass};
use telestore_engine::util::sync::LockExt;
use telestore_engine::Store;
use utoipa::ToSchema;

/// What the handlers share.
#[derive(Clone)]
pub struct HttpState {
    /// The store served.
    pub store: Arc<Store>,
    /// The daemon's counters.
    pub stats: Arc<ServerStats>,
    /// How line-protocol writes name tables and series.
    pub line_rules: Arc<crate::ingest::lineproto::Rules>,
    /// Tokens, checked by the [`super::auth::require`] layer.
    pub auth: Arc<super::auth::HttpAuth>,
    /// Rows per second over the last minutes (`/api/v1/status`).
    pub history: Arc<IngestHistory>,
    /// Where queries, exports and SQL run, under their limits.
    pub queries: Arc<telestore_query::sql::QueryPool>,
    /// The `/metrics` registry, built once.
    pub metrics: Arc<super::Metrics>,
}

/// Largest line-protocol request body, after gzip decoding.
pub const WRITE_BODY_MAX: usize = 64 << 20;

/// Seconds of ingest history kept (one sample per second).
pub const HISTORY_SECS: usize = 300;

/// The ingest rate, one `(time_ms, rows_per_second)` sample per second
/// (`status::sample_ingest` fills it, `/api/v1/status` shows it).
pub struct IngestHistory {
    /// When the daemon started.
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
    /// Add a sample, dropping the oldest past the history.
    pub fn push(&self, time_ms: i64, rows_per_second: f64) {
        let mut q = self.samples.lock_or_recover();
        if q.len() == HISTORY_SECS {
            q.pop_front();
        }
        q.push_back((time_ms, rows_per_second));
    }

    /// Oldest first.
    pub fn samples(&self) -> Vec<(i64, f64)> {
        let q = self.samples.lock_or_recover();
        q.iter().copied().collect()
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
