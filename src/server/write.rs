//! Line-protocol writes: `POST /api/v2/write` (InfluxDB 2.x) and
//! `POST /write` (1.x), gzip bodies too, through
//! [`crate::ingest::lineproto`].

use super::state::{failure_of, with_retry_after, HttpState, WRITE_BODY_MAX};
use crate::ingest::lineproto::{self, Precision};
use crate::Durability;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;

/// An error in InfluxDB's JSON shape: 2.x's `{"code", "message", "line"}`,
/// or 1.x's `{"error"}` on the v1 route.
fn influx_error(
    v1: bool,
    status: StatusCode,
    code: &str,
    message: String,
    line: Option<usize>,
) -> Response {
    let body = if v1 {
        serde_json::json!({ "error": message })
    } else {
        let mut b = serde_json::json!({ "code": code, "message": message });
        if let Some(l) = line {
            b["line"] = l.into();
        }
        b
    };
    (status, Json(body)).into_response()
}

/// `POST /api/v2/write?bucket=…&precision=ns|us|ms|s`: InfluxDB 2.x line
/// protocol. The bucket (and org) are accepted and ignored: one namespace,
/// the measurement is the table.
pub(super) async fn write_v2(
    State(s): State<HttpState>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    write_lines(s, q, headers, body, false).await
}

/// `POST /write?db=…&precision=n|u|ms|s|m|h`: InfluxDB 1.x line protocol.
/// `db` is required, as 1.x requires it, and otherwise ignored; errors
/// come in 1.x's `{"error": …}` shape.
pub(super) async fn write_v1(
    State(s): State<HttpState>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if q.get("db").is_none_or(|d| d.is_empty()) {
        let m = "database is required (db=…; any name: telestore has one namespace)";
        return influx_error(true, StatusCode::BAD_REQUEST, "invalid", m.into(), None);
    }
    write_lines(s, q, headers, body, true).await
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
    q: HashMap<String, String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
    v1: bool,
) -> Response {
    let bad = |m: String| influx_error(v1, StatusCode::BAD_REQUEST, "invalid", m, None);
    let precision = match Precision::parse(q.get("precision").map(|x| x.as_str())) {
        Ok(p) => p,
        Err(m) => return bad(m),
    };
    let durability = match q
        .get("durability")
        .map(|d| Durability::parse(d))
        .transpose()
    {
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
        let p = lineproto::prepare(&s.store, &text, precision, &s.device_tag, now).map_err(Err)?;
        lineproto::apply(&s.store, p, durability).map_err(Ok)
    })
    .await;
    match done {
        Ok(Ok(rows)) => {
            stats.http_rows.fetch_add(rows as u64, Relaxed);
            stats.http_requests.fetch_add(1, Relaxed);
            StatusCode::NO_CONTENT.into_response()
        }
        Ok(Err(Err(e))) => {
            stats.http_rejected.fetch_add(1, Relaxed);
            let msg = format!("line {}: {}", e.line, e.message);
            influx_error(v1, StatusCode::BAD_REQUEST, "invalid", msg, Some(e.line))
        }
        Ok(Err(Ok(e))) => {
            stats.http_rejected.fetch_add(1, Relaxed);
            let (status, retry_s) = failure_of(&e);
            let code = match status {
                StatusCode::SERVICE_UNAVAILABLE => "unavailable",
                StatusCode::BAD_REQUEST => "invalid",
                _ => "internal error",
            };
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
