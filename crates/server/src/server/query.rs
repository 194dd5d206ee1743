//! `GET /api/v1/query` and `GET /api/v1/export`: the query engine of
//! [`telestore_query`] over HTTP. Parameters are those of the CLI (see
//! [`Params`]); the response streams as it is produced — an Arrow IPC
//! stream by default, or `format=json|jsonl|csv|table` (also chosen by
//! `Accept: application/json`). A bad parameter is a `400` with
//! `{"code", "message", "arg"}`; so is any error before the first chunk
//! (64 KiB) of the answer is complete. An answer that fits in one chunk
//! is sent whole, with a `Content-Length`; a longer one streams, and an
//! error after rows were streamed aborts the response, so a client never
//! takes a cut stream for a complete one.

use super::state::HttpState;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use std::collections::BTreeMap;
use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use telestore_engine::error::Error;
use telestore_query::output::{Format, Printer};
use telestore_query::sql::Admission;
use telestore_query::{Kind, Params, Plan, Prepared};
use tokio::sync::mpsc;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::{Content, RefOr};

/// Bytes gathered before a chunk is sent to the client.
const CHUNK_BYTES: usize = 64 << 10;
/// Chunks buffered between the query thread and the connection.
const CHUNKS_AHEAD: usize = 8;

/// The answers of the routes that stream rows (query, export, SQL), for
/// the OpenAPI document.
pub(super) struct RowAnswers;

impl utoipa::IntoResponses for RowAnswers {
    fn responses() -> BTreeMap<String, RefOr<utoipa::openapi::response::Response>> {
        let formats = [
            Format::Arrow,
            Format::Json,
            Format::Jsonl,
            Format::Csv,
            Format::Table,
        ];
        let rows = formats.iter().fold(
            ResponseBuilder::new().description("The rows, in the format asked for"),
            |r, f| r.content(f.content_type(), Content::default()),
        );
        let error = |d: &str| super::openapi::json_answer(d, "ApiError");
        BTreeMap::from([
            ("200".to_string(), rows.build().into()),
            (
                "400".to_string(),
                error("A bad parameter (`arg` names it), query or body").into(),
            ),
            (
                "404".to_string(),
                error("No such table (`arg` is `table`; SQL names an unknown table with a 400)")
                    .into(),
            ),
            (
                "422".to_string(),
                error("The query went past the shared query memory or the value size limit").into(),
            ),
            (
                "503".to_string(),
                error("The store is busy, or every query slot stayed taken").into(),
            ),
            (
                "504".to_string(),
                error("The query ran past its timeout (serve --query-timeout-s)").into(),
            ),
        ])
    }
}

pub(super) fn query_error(e: &Error) -> Response {
    super::state::store_failure(e)
}

pub(super) fn format_of(format: Option<&str>, headers: &HeaderMap) -> Result<Format, Error> {
    let wants_json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"));
    Ok(match format {
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

/// How a response starts, told by the query thread: an error before any
/// byte (a proper status), the whole answer (it fitted in one chunk: sent
/// with a length, no stream), or a stream whose chunks follow.
enum Start {
    Failed(Error),
    Whole(Bytes),
    Streaming,
}

/// Gathers what is written to it; once a chunk is full it starts the
/// stream and sends body chunks, failing once the client is gone (which
/// stops the query).
struct ChunkWriter {
    start: Option<tokio::sync::oneshot::Sender<Start>>,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    buf: Vec<u8>,
    /// False: keep the whole answer and send it at the end (a query run
    /// on the connection's thread, where nothing drains the stream yet).
    stream: bool,
}

impl ChunkWriter {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if let Some(start) = self.start.take() {
            let _ = start.send(Start::Streaming);
        }
        let chunk = Bytes::from(std::mem::replace(
            &mut self.buf,
            Vec::with_capacity(CHUNK_BYTES),
        ));
        self.tx.blocking_send(Ok(chunk)).map_err(|_| gone())
    }

    /// The end of the answer: all of it when nothing was streamed yet.
    fn finish(mut self) -> std::io::Result<()> {
        match self.start.take() {
            Some(start) => {
                let _ = start.send(Start::Whole(Bytes::from(std::mem::take(&mut self.buf))));
                Ok(())
            }
            None => self.send(),
        }
    }
}

impl Write for ChunkWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.tx.is_closed() {
            return Err(gone());
        }
        self.buf.extend_from_slice(b);
        if self.stream && self.buf.len() >= CHUNK_BYTES {
            self.send()?;
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        // Chunks leave when full or at the end (`finish`).
        Ok(())
    }
}

fn gone() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::BrokenPipe, "client went away")
}

/// What a query job gets beside its writer: its slot in the query pool
/// (`None` for a small query run on the connection's thread), and a
/// future that completes when the client has gone away.
pub(super) struct Run {
    pub admission: Option<Admission>,
    pub gone: Pin<Box<dyn Future<Output = ()> + Send>>,
}

/// The query string as [`Params`]; an unknown parameter is refused. `u`
/// and `p` (InfluxDB 1.x credentials, read by the auth layer) are passed
/// over.
fn parse_params(uri: &Uri) -> Result<Params, Error> {
    let query = uri.query().unwrap_or("");
    let kept = form_urlencoded::parse(query.as_bytes()).filter(|(k, _)| k != "u" && k != "p");
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(kept)
        .finish();
    let uri: Uri = format!("/?{query}")
        .parse()
        .map_err(|_| Error::invalid("query string", "not a valid query string"))?;
    Query::<Params>::try_from_uri(&uri)
        .map(|q| q.0)
        .map_err(|e| Error::invalid("query string", e.body_text()))
}

/// Query a table: latest, range, scan or aggregate
///
/// The parameters are the `telestore query` flags without their dashes.
/// `kind=latest` answers the newest `n` rows of one `device`; `range` one
/// device over `[from, to)` (newest first unless `order=asc`); `scan` every
/// selected device over the window; `agg` applies `fn` per `every` bucket,
/// grouped by device or a tag key. Times are RFC 3339, epoch numbers with a
/// unit (`1700000000s`, `…ms`, `…us`, `…ns`) or relative (`-1h`, `now`).
///
/// The answer streams as it is produced: an Arrow IPC stream by default,
/// or `format=json|jsonl|csv|table` (`Accept: application/json` also picks
/// JSON). An error before the first 64 KiB of the answer is a proper
/// status with an `ApiError`; one after rows were streamed aborts the
/// response, so a cut stream is never taken for a complete one.
#[utoipa::path(
    get,
    path = "/api/v1/query",
    tag = "query",
    params(Params),
    responses(RowAnswers)
)]
pub async fn query(State(s): State<HttpState>, headers: HeaderMap, uri: Uri) -> Response {
    match parse_params(&uri) {
        Ok(p) => respond(s, headers, p).await,
        Err(e) => query_error(&e),
    }
}

/// Export rows: a scan of every selected row
///
/// `/api/v1/query` with `kind=scan` whatever `kind` says: `table`, the
/// window `from`/`to`, and `devices` or `where` to narrow it, as an Arrow
/// IPC stream unless another `format` is asked for (the answer of
/// `telestore export`, readable by pyarrow, DuckDB or Polars).
#[utoipa::path(
    get,
    path = "/api/v1/export",
    tag = "query",
    params(Params),
    responses(RowAnswers)
)]
pub async fn export(State(s): State<HttpState>, headers: HeaderMap, uri: Uri) -> Response {
    match parse_params(&uri) {
        Ok(mut p) => {
            p.kind = Kind::Scan;
            respond(s, headers, p).await
        }
        Err(e) => query_error(&e),
    }
}

/// A query that reads a few rows (`latest` of one device, at most
/// [`SMALL_ROWS`]): it runs on the connection's thread
/// (`block_in_place`), saving the two thread hand-offs of a blocking task,
/// most of such a query's time.
fn is_small(p: &Params) -> bool {
    p.kind == Kind::Latest
        && p.device.is_some()
        && p.devices.is_none()
        && p.where_.is_none()
        && p.n.unwrap_or(1) <= SMALL_ROWS
}

/// Rows of a query small enough to run on the connection's thread.
const SMALL_ROWS: u64 = 100;

async fn respond(s: HttpState, headers: HeaderMap, p: Params) -> Response {
    let format = match format_of(p.format.as_deref(), &headers) {
        Ok(f) => f,
        Err(e) => return query_error(&e),
    };
    let store = s.store.clone();
    let small = is_small(&p);
    stream_answer(&s, format, small, move |w, run| {
        let control = run.admission.as_ref().map(|a| a.control.clone());
        let plan = Plan::resolve(&store, &p, store.now_ms())?;
        let prepared = Prepared::new(&store, plan);
        let mut printer = Printer::new(format, prepared.schema(), w)?;
        prepared.run(&store, &mut |b| {
            if let Some(c) = &control {
                c.check()?;
            }
            printer.write(&b)
        })?;
        printer.finish()?;
        Ok(())
    })
    .await
}

/// Answer with what `job` writes in `format`: sent whole when it fits in
/// a chunk, else streamed; an error before the first chunk is a proper
/// status. A `small` job runs on this thread; any other waits for a slot
/// of the query pool (busy: `503`) and runs on one of its threads.
pub(super) async fn stream_answer(
    s: &HttpState,
    format: Format,
    small: bool,
    job: impl FnOnce(&mut dyn Write, Run) -> Result<(), Error> + Send + 'static,
) -> Response {
    let admission = match small {
        true => None,
        false => match s.queries.admit().await {
            Ok(a) => Some(a),
            Err(e) => return query_error(&e),
        },
    };
    let (start_tx, start_rx) = tokio::sync::oneshot::channel();
    let (tx, rx) = mpsc::channel(CHUNKS_AHEAD);
    let watch = tx.clone();
    let gone = Box::pin(async move { watch.closed().await });
    let run = move || {
        let mut w = ChunkWriter {
            start: Some(start_tx),
            tx: tx.clone(),
            buf: Vec::new(),
            stream: !small,
        };
        match job(&mut w, Run { admission, gone }) {
            Ok(()) => {
                if let Err(e) = w.finish() {
                    tracing::warn!("query response aborted: {e}");
                }
            }
            Err(e) => match w.start.take() {
                // Nothing sent yet: the client gets the error's status.
                Some(start) => {
                    let _ = start.send(Start::Failed(e));
                }
                None => {
                    tracing::warn!("query response aborted: {e}");
                    let _ = tx.blocking_send(Err(std::io::Error::other(e.to_string())));
                }
            },
        }
    };
    if small {
        tokio::task::block_in_place(run);
    } else {
        s.queries.spawn_blocking(run);
    }
    let content_type = [(header::CONTENT_TYPE, format.content_type())];
    match start_rx.await {
        Ok(Start::Whole(b)) => (content_type, b).into_response(),
        Ok(Start::Streaming) => {
            let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
            (content_type, body).into_response()
        }
        Ok(Start::Failed(e)) => query_error(&e),
        Err(_) => query_error(&Error::invalid("query", "the query thread stopped")),
    }
}
