//! `POST /api/v1/sql`: a SQL query (see [`telestore_query::sql`]) over HTTP. The
//! body is the query text, or JSON `{"query": "…", "format": "…"}`
//! when sent as `application/json`; the answer is an Arrow IPC stream by
//! default, or `format=json|jsonl|csv|table` (query string or JSON), as
//! `/api/v1/query` answers. Only queries run (DDL, DML, `SET` are
//! refused), so a read-only token may use it.

use super::query::{format_of, query_error, stream_answer, RowAnswers};
use super::state::HttpState;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap};
use axum::response::Response;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use telestore_engine::error::Error;
use telestore_query::output::Printer;
use utoipa::ToSchema;

/// A SQL request as JSON.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SqlBody {
    /// The query (one statement, at most 1 MiB).
    query: String,
    /// arrow (default), json, jsonl, csv or table.
    #[serde(default)]
    format: Option<String>,
}

/// The query and the format asked for.
fn request_of(
    q: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(String, Option<String>), Error> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let (sql, format) = if json {
        let b: SqlBody = serde_json::from_slice(body)
            .map_err(|e| Error::invalid("body", format!("not {{\"query\": …}}: {e}")))?;
        (b.query, b.format)
    } else {
        let text = std::str::from_utf8(body)
            .map_err(|_| Error::invalid("body", "the query is not UTF-8"))?;
        (text.to_string(), None)
    };
    Ok((sql, format.or_else(|| q.get("format").cloned())))
}

/// Run a SQL query
///
/// One query over the tables (a column per field, `device`, `device_id`,
/// `ts` and one per device tag key) and the `devices` table, through
/// Apache DataFusion. The body is the query text, or JSON `{"query",
/// "format"}` sent as `application/json`. Only queries run: DDL, DML and
/// `SET` are refused, so a read-only token suffices. The answer is an Arrow
/// IPC stream unless `format` asks for json, jsonl, csv or table.
#[utoipa::path(
    post,
    path = "/api/v1/sql",
    tag = "query",
    params(("format" = Option<String>, Query, description = "arrow (default), json, jsonl, csv or table")),
    request_body(content(
        (String = "text/plain"),
        (SqlBody = "application/json"),
    )),
    responses(RowAnswers)
)]
pub(super) async fn sql(
    State(s): State<HttpState>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let refused = |e: Error| {
        s.stats.sql_failed.fetch_add(1, Relaxed);
        query_error(&e)
    };
    let (sql, format) = match request_of(&q, &headers, &body) {
        Ok(r) => r,
        Err(e) => return refused(e),
    };
    let format = match format_of(format.as_deref(), &headers) {
        Ok(f) => f,
        Err(e) => return refused(e),
    };
    let (store, pool) = (s.store.clone(), s.queries.clone());
    let stats = s.stats.clone();
    stream_answer(&s, format, false, move |w, run| {
        let admission = run
            .admission
            .ok_or_else(|| Error::invalid("sql", "a query without a slot"))?;
        let res = telestore_query::sql::run_blocking(
            &store,
            &pool,
            admission,
            &sql,
            run.gone,
            |schema| Printer::new(format, schema, w),
            |p, b| p.write(&b),
        )
        .and_then(|p| p.finish().map(|_| ()));
        let counter = match res {
            Ok(()) => &stats.sql_queries,
            Err(_) => &stats.sql_failed,
        };
        counter.fetch_add(1, Relaxed);
        res
    })
    .await
}
