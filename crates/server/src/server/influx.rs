//! What InfluxDB tooling probes before it writes: `GET /ping` (the 1.x
//! and 2.x clients' `ping()`), `/health` in InfluxDB 2's shape (for its
//! clients, see [`super::metrics::health`]) and 1.x's `/query` for the
//! statements clients and Grafana's InfluxDB source send on connecting
//! (`SHOW DATABASES`, `CREATE DATABASE`, `SHOW MEASUREMENTS`). Queries
//! themselves are SQL (`/api/v1/sql`): any other InfluxQL is refused,
//! saying so.

use super::state::HttpState;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The version the probes report (`X-Influxdb-Version`, `version`).
pub const VERSION: &str = concat!("telestore-", env!("CARGO_PKG_VERSION"));

/// The name every database has: telestore has one namespace, so any
/// `db` a client names is this one.
const DATABASE: &str = "telestore";

/// Is the server up? (InfluxDB's ping)
///
/// `204` with InfluxDB's version headers (`HEAD` too); needs no token.
#[utoipa::path(
    get,
    path = "/ping",
    tag = "status",
    responses((status = 204, description = "Up",
        headers(("X-Influxdb-Version" = String, description = "telestore-<version>"),
                 ("X-Influxdb-Build" = String, description = "`OSS`"))))
)]
pub(super) async fn ping() -> Response {
    let mut r = StatusCode::NO_CONTENT.into_response();
    version_headers(r.headers_mut());
    r
}

fn version_headers(h: &mut HeaderMap) {
    h.insert("x-influxdb-version", HeaderValue::from_static(VERSION));
    h.insert("x-influxdb-build", HeaderValue::from_static("OSS"));
}

/// Does this request come from an InfluxDB 2 client library (its
/// `User-Agent`: `influxdb-client-python/…`, `…-go`, `…-java`, `…-js`)?
pub fn is_influx_client(headers: &HeaderMap) -> bool {
    headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ua| ua.to_ascii_lowercase().contains("influxdb-client"))
}

/// `/health` as InfluxDB 2 answers it, which its clients parse.
pub fn health_v2(ok: Result<(), String>) -> Response {
    let (status, code, message) = match ok {
        Ok(()) => (
            "pass",
            StatusCode::OK,
            "ready for queries and writes".to_string(),
        ),
        Err(m) => ("fail", StatusCode::SERVICE_UNAVAILABLE, m),
    };
    let body = json!({
        "name": "telestore",
        "message": message,
        "status": status,
        "checks": [],
        "version": VERSION,
        "commit": "",
    });
    let mut r = (code, Json(body)).into_response();
    version_headers(r.headers_mut());
    r
}

/// `/query`'s parameters (InfluxDB 1.x).
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct V1QueryParams {
    /// The statements, `;`-separated.
    q: Option<String>,
    /// Accepted and ignored (one namespace).
    #[allow(dead_code)]
    db: Option<String>,
    /// Accepted and ignored.
    #[allow(dead_code)]
    epoch: Option<String>,
    /// 1.x credentials (read by the auth layer).
    #[allow(dead_code)]
    u: Option<String>,
    #[allow(dead_code)]
    p: Option<String>,
}

/// 1.x's answer: one result per statement.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct V1Results {
    results: Vec<Value>,
}

/// InfluxQL probes (InfluxDB 1.x)
///
/// For the statements 1.x clients and Grafana's InfluxDB source send when
/// they connect: `SHOW DATABASES` (one database, `telestore`: the store
/// has one namespace, and writes take any `db`), `CREATE DATABASE name`
/// (nothing to create: `{}` as 1.x answers), `SHOW MEASUREMENTS` (the
/// tables). `q` comes in the query string or, on POST, a form body. Any
/// other statement is answered with an `error` naming `/api/v1/sql`.
#[utoipa::path(
    get,
    path = "/query",
    tag = "query",
    params(V1QueryParams),
    responses(
        (status = 200, description = "One result per statement (a refused one carries `error`)", body = V1Results),
        (status = 400, description = "No `q`", body = super::write::InfluxV1Error),
    )
)]
pub(super) async fn query_v1(
    s: State<HttpState>,
    q: Result<Query<V1QueryParams>, QueryRejection>,
) -> Response {
    query_v1_of(s, q, axum::body::Bytes::new())
}

/// InfluxQL probes (InfluxDB 1.x), `q` in a form body
///
/// As `GET /query`, the statements in the body (`q=…`,
/// `application/x-www-form-urlencoded`) or the query string.
#[utoipa::path(
    post,
    path = "/query",
    tag = "query",
    params(V1QueryParams),
    request_body(content = String, content_type = "application/x-www-form-urlencoded",
        description = "`q=statements`"),
    responses(
        (status = 200, description = "One result per statement (a refused one carries `error`)", body = V1Results),
        (status = 400, description = "No `q`", body = super::write::InfluxV1Error),
    )
)]
pub(super) async fn query_v1_form(
    s: State<HttpState>,
    q: Result<Query<V1QueryParams>, QueryRejection>,
    body: axum::body::Bytes,
) -> Response {
    query_v1_of(s, q, body)
}

fn query_v1_of(
    State(s): State<HttpState>,
    q: Result<Query<V1QueryParams>, QueryRejection>,
    body: axum::body::Bytes,
) -> Response {
    let from_body = form_urlencoded::parse(&body)
        .find(|(k, _)| k == "q")
        .map(|(_, v)| v.into_owned());
    let q = match q {
        Ok(Query(p)) => p.q,
        Err(e) => return super::write::bad_query(true, e),
    };
    let Some(text) = q.or(from_body).filter(|t| !t.trim().is_empty()) else {
        let m = "missing required parameter \"q\"".to_string();
        return super::write::influx_error(true, StatusCode::BAD_REQUEST, "invalid", m, None);
    };
    let statements = text.split(';').map(str::trim).filter(|t| !t.is_empty());
    let results = statements
        .enumerate()
        .map(|(i, st)| answer(i, st, &s))
        .collect();
    let mut r = Json(V1Results { results }).into_response();
    version_headers(r.headers_mut());
    r
}

/// One statement's result.
fn answer(i: usize, statement: &str, s: &HttpState) -> Value {
    let words: Vec<String> = statement
        .split_whitespace()
        .map(str::to_ascii_uppercase)
        .collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["SHOW", "DATABASES", ..] => series(i, "databases", vec![json!([DATABASE])]),
        ["CREATE", "DATABASE", _, ..] => json!({"statement_id": i}),
        ["SHOW", "MEASUREMENTS", ..] => {
            let tables = s
                .store
                .table_names()
                .into_iter()
                .map(|t| json!([t]))
                .collect();
            series(i, "measurements", tables)
        }
        _ => json!({
            "statement_id": i,
            "error": format!(
                "telestore answers SHOW DATABASES, CREATE DATABASE and SHOW MEASUREMENTS over /query, not {statement:?}: query with SQL at /api/v1/sql"
            ),
        }),
    }
}

fn series(i: usize, name: &str, values: Vec<Value>) -> Value {
    if values.is_empty() {
        return json!({"statement_id": i});
    }
    json!({
        "statement_id": i,
        "series": [{"name": name, "columns": ["name"], "values": values}],
    })
}
