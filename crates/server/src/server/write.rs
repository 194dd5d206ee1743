//! Line-protocol writes: `POST /api/v2/write` (InfluxDB 2.x) and
//! `POST /write` (1.x), gzip bodies too, through
//! [`crate::ingest::lineproto`].

use super::state::{with_retry_after, HttpState, WRITE_BODY_MAX};
use crate::ingest::lineproto::{self, Precision, Refused};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use std::sync::atomic::Ordering::Relaxed;
use telestore_engine::Durability;
use utoipa::{IntoParams, ToSchema};

/// A refused write, in InfluxDB 2.x's shape.
#[derive(Serialize, ToSchema)]
pub(super) struct InfluxError {
    /// `invalid`, `unavailable`, `unauthorized`, `forbidden` or
    /// `internal error`.
    code: String,
    message: String,
    /// The first bad line (1-based), for a bad line.
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<usize>,
}

/// A refused write, in InfluxDB 1.x's shape (`POST /write`).
#[derive(Serialize, ToSchema)]
pub(super) struct InfluxV1Error {
    pub(super) error: String,
}

/// An error in InfluxDB's JSON shape: 2.x's `{"code", "message", "line"}`,
/// or 1.x's `{"error"}` on the v1 route.
pub(super) fn influx_error(
    v1: bool,
    status: StatusCode,
    code: &str,
    message: String,
    line: Option<usize>,
) -> Response {
    if v1 {
        return (status, Json(InfluxV1Error { error: message })).into_response();
    }
    let body = InfluxError {
        code: code.into(),
        message,
        line,
    };
    (status, Json(body)).into_response()
}

/// A query string the parameters cannot be read from (a parameter given
/// twice, say), in the route's error shape.
pub(super) fn bad_query(v1: bool, e: QueryRejection) -> Response {
    influx_error(v1, StatusCode::BAD_REQUEST, "invalid", e.body_text(), None)
}

/// `POST /api/v2/write`'s parameters.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct V2Params {
    /// Accepted and ignored (one namespace: the measurement is the table).
    #[allow(dead_code)]
    bucket: Option<String>,
    /// Accepted and ignored.
    #[allow(dead_code)]
    org: Option<String>,
    /// The timestamps' unit: ns (default), us, ms, s (also m, h).
    precision: Option<String>,
    /// sync (default: answered once in the fsynced WAL), async or skip.
    durability: Option<String>,
}

/// `POST /write`'s parameters.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct V1Params {
    /// Required, as InfluxDB 1.x requires it; any name (one namespace).
    #[param(required = true)]
    db: Option<String>,
    /// The timestamps' unit: n (default), u, ms, s, m or h.
    precision: Option<String>,
    /// sync (default: answered once in the fsynced WAL), async or skip.
    durability: Option<String>,
    /// User name (ignored; the token is `p`).
    #[allow(dead_code)]
    u: Option<String>,
    /// The token, when not sent in `Authorization`.
    #[allow(dead_code)]
    p: Option<String>,
}

/// Write line protocol (InfluxDB 2.x)
///
/// Each line is `table,device=NAME[,tag=value…] field=value[,…] [time]`:
/// the measurement is the table, the `device` tag names the device (other
/// tags are stored on the device), the fields are the table's. Gzip bodies
/// are taken (`Content-Encoding: gzip`, at most 64 MiB decoded). All or
/// nothing: a bad line refuses the whole request (`400` naming the line)
/// and nothing of it is applied. `204` means every line is applied (and,
/// with `durability=sync`, fsynced).
#[utoipa::path(
    post,
    path = "/api/v2/write",
    tag = "write",
    params(V2Params),
    request_body(content = String, content_type = "text/plain",
        description = "Line protocol, one row per line"),
    responses(
        (status = 204, description = "Every line applied"),
        (status = 400, description = "A bad line (`line` names the first), precision, durability or body; nothing applied", body = InfluxError),
        (status = 503, description = "Busy or the write path stopped; retry after `Retry-After` seconds", body = InfluxError,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub(super) async fn write_v2(
    State(s): State<HttpState>,
    q: Result<Query<V2Params>, QueryRejection>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return bad_query(false, e),
    };
    let opts = (q.precision.as_deref(), q.durability.as_deref());
    write_lines(s, opts, headers, body, false).await
}

/// Write line protocol (InfluxDB 1.x)
///
/// The 2.x route's behaviour with 1.x's parameters and error shape
/// (`{"error"}`). `db` is required, as 1.x requires it, and otherwise
/// ignored.
#[utoipa::path(
    post,
    path = "/write",
    tag = "write",
    params(V1Params),
    request_body(content = String, content_type = "text/plain",
        description = "Line protocol, one row per line"),
    responses(
        (status = 204, description = "Every line applied"),
        (status = 400, description = "A bad line, precision, durability, body or no `db`; nothing applied", body = InfluxV1Error),
        (status = 503, description = "Busy or the write path stopped; retry after `Retry-After` seconds", body = InfluxV1Error,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub(super) async fn write_v1(
    State(s): State<HttpState>,
    q: Result<Query<V1Params>, QueryRejection>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return bad_query(true, e),
    };
    if q.db.as_deref().is_none_or(|d| d.is_empty()) {
        let m = "database is required (db=…; any name: telestore has one namespace)";
        return influx_error(true, StatusCode::BAD_REQUEST, "invalid", m.into(), None);
    }
    let opts = (q.precision.as_deref(), q.durability.as_deref());
    write_lines(s, opts, headers, body, true).await
}

/// A request body as text: gzip decoded (bounded), UTF-8 checked.
fn body_text(headers: &HeaderMap, body: &[u8]) -> Result<String, String> {
    let gzip = headers
        .get(header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
    let raw = if gzip {
        let mut out = Vec::new();
        let dec = flate2::read::GzDecoder::new(body);
        match std::io::Read::read_to_end(
            &mut std::io::Read::take(dec, WRITE_BODY_MAX as u64 + 1),
            &mut out,
        ) {
            Ok(n) if n > WRITE_BODY_MAX => {
                return Err(format!(
                    "body over {WRITE_BODY_MAX} bytes once decompressed"
                ))
            }
            Ok(_) => out,
            Err(e) => return Err(format!("gzip body: {e}")),
        }
    } else {
        body.to_vec()
    };
    String::from_utf8(raw)
        .map_err(|e| format!("body is not UTF-8 (byte {})", e.utf8_error().valid_up_to()))
}

/// Line-protocol writes (gzip bodies too). Optional
/// `durability=sync|async|skip` (default sync). `204` when every line was
/// applied; `400` naming the first bad line, with nothing applied (1.x
/// would write the good lines and answer "partial write": we do not, so
/// that a retry of the fixed request cannot double-apply anything and a
/// 400 always means nothing was written); `503` with `Retry-After` when
/// the store is busy or its write path has stopped (a full disk).
async fn write_lines(
    s: HttpState,
    (precision, durability): (Option<&str>, Option<&str>),
    headers: HeaderMap,
    body: axum::body::Bytes,
    v1: bool,
) -> Response {
    let bad = |m: String| influx_error(v1, StatusCode::BAD_REQUEST, "invalid", m, None);
    let precision = match Precision::parse(precision) {
        Ok(p) => p,
        Err(m) => return bad(m),
    };
    let durability = match durability.map(Durability::parse).transpose() {
        Ok(d) => d.unwrap_or(Durability::Sync),
        Err(e) => return bad(e.to_string()),
    };
    let text = match body_text(&headers, &body) {
        Ok(t) => t,
        Err(m) => return bad(m),
    };
    let stats = s.stats.clone();
    let done = tokio::task::spawn_blocking(move || {
        let now = s.store.now_ms();
        lineproto::write(&s.store, &text, precision, &s.line_rules, now, durability)
    })
    .await;
    match done {
        Ok(Ok(rows)) => {
            stats.http_rows.fetch_add(rows as u64, Relaxed);
            stats.http_requests.fetch_add(1, Relaxed);
            StatusCode::NO_CONTENT.into_response()
        }
        Ok(Err(Refused::Line(e))) => {
            stats.http_rejected.fetch_add(1, Relaxed);
            let msg = format!("line {}: {}", e.line, e.message);
            influx_error(v1, StatusCode::BAD_REQUEST, "invalid", msg, Some(e.line))
        }
        Ok(Err(Refused::Store(e))) => {
            stats.http_rejected.fetch_add(1, Relaxed);
            let class = e.class();
            let (status, retry_s) = crate::classes::http(class);
            let code = crate::classes::influx_code(class);
            let r = influx_error(v1, status, code, e.to_string(), None);
            with_retry_after(r, retry_s)
        }
        Err(e) => influx_error(
            v1,
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal error",
            e.to_string(),
            None,
        ),
    }
}
