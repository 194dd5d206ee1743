//! `GET /api/v1/query` and `GET /api/v1/export`: the query engine of
//! [`crate::query`] over HTTP. Parameters are those of the CLI (see
//! [`Params`]); the response streams as it is produced — an Arrow IPC
//! stream by default, or `format=json|jsonl|csv|table` (also chosen by
//! `Accept: application/json`). A bad parameter is a `400` with
//! `{"code", "message", "arg"}` before any row is sent; an error after
//! rows were sent aborts the response, so a client never takes a cut
//! stream for a complete one.

use super::http::HttpState;
use crate::error::Error;
use crate::query::output::{Format, Printer};
use crate::query::{Kind, Params, Plan, Prepared};
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::io::Write;
use tokio::sync::mpsc;

/// Bytes gathered before a chunk is sent to the client.
const CHUNK_BYTES: usize = 64 << 10;
/// Chunks buffered between the query thread and the connection.
const CHUNKS_AHEAD: usize = 8;

fn query_error(e: &Error) -> Response {
    let (status, arg) = match e {
        Error::InvalidInput { what, .. } => (StatusCode::BAD_REQUEST, Some(*what)),
        Error::UnknownTable(_) => (StatusCode::BAD_REQUEST, Some("table")),
        Error::Busy { .. } => (StatusCode::SERVICE_UNAVAILABLE, None),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, None),
    };
    let mut body = serde_json::json!({ "code": status.as_u16(), "message": e.to_string() });
    if let Some(a) = arg {
        body["arg"] = a.trim_start_matches('-').into();
    }
    (status, Json(body)).into_response()
}

fn format_of(p: &Params, headers: &HeaderMap) -> Result<Format, Error> {
    let wants_json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"));
    Ok(match p.format.as_deref() {
        None if wants_json => Format::Json,
        None | Some("arrow") | Some("arrow-stream") => Format::Arrow,
        Some("json") => Format::Json,
        Some("jsonl") | Some("ndjson") => Format::Jsonl,
        Some("csv") => Format::Csv,
        Some("table") => Format::Table,
        Some(f) => {
            return Err(Error::invalid(
                "format",
                format!("{f:?}: use arrow, json, jsonl, csv or table"),
            ))
        }
    })
}

/// Sends what is written to it as body chunks; fails once the client is
/// gone, which stops the query.
struct ChunkWriter {
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    buf: Vec<u8>,
}

impl ChunkWriter {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(
            &mut self.buf,
            Vec::with_capacity(CHUNK_BYTES),
        ));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "client went away"))
    }
}

impl Write for ChunkWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        if self.buf.len() >= CHUNK_BYTES {
            self.send()?;
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

fn parse_params(uri: &Uri) -> Result<Params, Error> {
    Query::<Params>::try_from_uri(uri)
        .map(|q| q.0)
        .map_err(|e| Error::invalid("query string", e.body_text()))
}

/// `GET /api/v1/query?kind=latest|range|scan|agg&table=…&…`
pub async fn query(State(s): State<HttpState>, headers: HeaderMap, uri: Uri) -> Response {
    match parse_params(&uri) {
        Ok(p) => respond(s, headers, p).await,
        Err(e) => query_error(&e),
    }
}

/// `GET /api/v1/export?table=…&from=…&to=…[&devices=…|&where=…]`: a scan
/// of every selected row, as an Arrow IPC stream unless asked otherwise.
pub async fn export(State(s): State<HttpState>, headers: HeaderMap, uri: Uri) -> Response {
    match parse_params(&uri) {
        Ok(mut p) => {
            p.kind = Kind::Scan;
            respond(s, headers, p).await
        }
        Err(e) => query_error(&e),
    }
}

async fn respond(s: HttpState, headers: HeaderMap, p: Params) -> Response {
    let format = match format_of(&p, &headers) {
        Ok(f) => f,
        Err(e) => return query_error(&e),
    };
    let store = s.store.clone();
    let prepared = tokio::task::spawn_blocking(move || {
        let plan = Plan::resolve(&store, &p, store.now_ms())?;
        Ok::<_, Error>(Prepared::new(&store, plan))
    })
    .await;
    let prepared = match prepared {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return query_error(&e),
        Err(e) => return query_error(&Error::invalid("query", e.to_string())),
    };
    let (tx, rx) = mpsc::channel(CHUNKS_AHEAD);
    let store = s.store.clone();
    tokio::task::spawn_blocking(move || {
        let w = ChunkWriter {
            tx: tx.clone(),
            buf: Vec::with_capacity(CHUNK_BYTES),
        };
        let res = (|| {
            let mut printer = Printer::new(format, prepared.schema(), w)?;
            prepared.run(&store, &mut |b| printer.write(&b))?;
            let mut w = printer.finish()?;
            w.flush().map_err(|e| Error::io("response", e))
        })();
        if let Err(e) = res {
            tracing::warn!("query response aborted: {e}");
            let _ = tx.blocking_send(Err(std::io::Error::other(e.to_string())));
        }
    });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    ([(header::CONTENT_TYPE, format.content_type())], body).into_response()
}
