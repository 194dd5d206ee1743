//! The daemon's HTTP side: `GET /health`, `GET /metrics` (Prometheus /
//! OpenMetrics text), `GET /api/v1/tables` and `POST /api/v1/tables`,
//! line-protocol writes, and the query endpoints of [`super::query_http`].

use super::lineproto::{self, Precision};
use super::proto::ErrorCode;
use super::server::ServerStats;
use crate::error::Error;
use crate::schema::{
    parse_duration_ms, BlockEncoding, Compression, Field, FieldType, TableOptions, TableSchema,
};
use crate::Durability;
use crate::Store;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// What the handlers share.
#[derive(Clone)]
pub struct HttpState {
    pub store: Arc<Store>,
    pub stats: Arc<ServerStats>,
    /// The line-protocol tag that names the device.
    pub device_tag: Arc<str>,
    /// Tokens, checked by the [`super::auth::require`] layer.
    pub auth: Arc<super::auth::HttpAuth>,
}

/// Largest line-protocol request body, after gzip decoding.
pub const WRITE_BODY_MAX: usize = 64 << 20;

/// The HTTP routes, all behind the auth layer (added last, so it wraps
/// every route, the ones added later too).
pub fn router(state: HttpState) -> Router {
    let auth = axum::middleware::from_fn_with_state(state.auth.clone(), super::auth::require);
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/api/v1/tables", get(list_tables).post(create_table))
        .route("/api/v1/query", get(super::query_http::query))
        .route("/api/v1/export", get(super::query_http::export))
        .route("/api/v2/write", post(write_v2))
        .route("/write", post(write_v1))
        .route("/api/v1/flush", post(flush))
        .layer(DefaultBodyLimit::max(WRITE_BODY_MAX))
        .with_state(state)
        .layer(auth)
}

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
async fn write_v2(
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
async fn write_v1(
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

fn json_error(status: StatusCode, message: impl Into<String>) -> Response {
    let body = serde_json::json!({ "code": status.as_u16(), "message": message.into() });
    (status, Json(body)).into_response()
}

async fn health(State(s): State<HttpState>) -> Response {
    match s.store.health() {
        Ok(()) => Json(serde_json::json!({ "status": "ok", "tables": s.store.table_names() }))
            .into_response(),
        Err(e) => json_error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

/// A table as the API shows it.
#[derive(Serialize, Deserialize, Debug)]
pub struct TableSpec {
    pub name: String,
    pub fields: Vec<FieldSpec>,
    /// Retention, e.g. "30d" (absent: keep forever).
    #[serde(default)]
    pub ttl: Option<String>,
    #[serde(default)]
    pub regions: Option<u32>,
    /// none, snappy, zstd or zstd:LEVEL.
    #[serde(default)]
    pub compression: Option<String>,
    #[serde(default)]
    pub max_versions: Option<u32>,
    /// Data block layout: rows or columnar.
    #[serde(default)]
    pub encoding: Option<String>,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct FieldSpec {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
}

fn spec_of(t: &TableSchema) -> TableSpec {
    let o = &t.options;
    TableSpec {
        name: t.name.clone(),
        fields: t
            .fields
            .iter()
            .map(|f| FieldSpec {
                name: f.name.clone(),
                ty: f.ty.name().into(),
            })
            .collect(),
        ttl: o.ttl_ms.map(|ms| format!("{}s", ms / 1000)),
        regions: Some(o.regions),
        compression: Some(o.compression.name()),
        max_versions: Some(o.max_versions),
        encoding: Some(o.encoding.name().into()),
    }
}

async fn list_tables(State(s): State<HttpState>) -> Response {
    let specs: Vec<TableSpec> = s
        .store
        .table_names()
        .iter()
        .filter_map(|n| s.store.schema(n).ok())
        .map(|t| spec_of(&t))
        .collect();
    Json(specs).into_response()
}

fn schema_of(spec: &TableSpec) -> crate::Result<TableSchema> {
    let fields = spec
        .fields
        .iter()
        .map(|f| Ok(Field::new(&f.name, FieldType::parse(&f.ty)?)))
        .collect::<crate::Result<Vec<_>>>()?;
    let d = TableOptions::default();
    let options = TableOptions {
        ttl_ms: spec.ttl.as_deref().map(parse_duration_ms).transpose()?,
        regions: spec.regions.unwrap_or(d.regions),
        compression: match &spec.compression {
            Some(c) => Compression::parse(c)?,
            None => d.compression,
        },
        max_versions: spec.max_versions.unwrap_or(d.max_versions),
        encoding: match &spec.encoding {
            Some(e) => BlockEncoding::parse(e)?,
            None => d.encoding,
        },
        ..d
    };
    TableSchema::new(&spec.name, fields, options)
}

async fn create_table(State(s): State<HttpState>, body: axum::body::Bytes) -> Response {
    let spec: TableSpec = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, format!("table spec: {e}")),
    };
    let schema = match schema_of(&spec) {
        Ok(v) => v,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let existed = s.store.schema(&schema.name).is_ok();
    let store = s.store.clone();
    let done = tokio::task::spawn_blocking(move || store.create_table(schema)).await;
    match done {
        Ok(Ok(id)) => {
            let status = if existed {
                StatusCode::OK
            } else {
                StatusCode::CREATED
            };
            (
                status,
                Json(serde_json::json!({ "id": id, "name": spec.name })),
            )
                .into_response()
        }
        Ok(Err(e @ Error::SchemaConflict { .. })) => {
            json_error(StatusCode::CONFLICT, e.to_string())
        }
        Ok(Err(e @ Error::InvalidInput { .. })) => {
            json_error(StatusCode::BAD_REQUEST, e.to_string())
        }
        Ok(Err(e)) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// `POST /api/v1/flush[?table=T]`: flush the table's (every table's)
/// memstores to HFiles; answers once they are durable, with what the
/// memstores and the WAL hold then (`{"memstore_bytes", "wal_segments"}`:
/// writes that came in meanwhile are in them).
async fn flush(State(s): State<HttpState>, Query(q): Query<HashMap<String, String>>) -> Response {
    let table = q.get("table").cloned();
    let done = tokio::task::spawn_blocking(move || {
        s.store.flush_tables(table.as_deref())?;
        Ok::<_, Error>(s.store.stats())
    })
    .await;
    match done {
        Ok(Ok(st)) => Json(serde_json::json!({
            "memstore_bytes": st.memstore_bytes,
            "wal_segments": st.wal_segments,
        }))
        .into_response(),
        Ok(Err(e @ Error::UnknownTable(_))) => json_error(StatusCode::NOT_FOUND, e.to_string()),
        Ok(Err(e)) => store_failure(&e),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// A store error as JSON: `503` with `Retry-After` when the store is busy
/// or its write path has stopped (a full disk, a failed fsync: `/health`
/// says which), see [`failure_of`].
fn store_failure(e: &Error) -> Response {
    let (status, retry_s) = failure_of(e);
    with_retry_after(json_error(status, e.to_string()), retry_s)
}

/// The status for a store error, and the seconds for `Retry-After` (0:
/// none). An invalid input found only when applying (a device re-tagged
/// by another request meanwhile) is still the request's fault: `400`.
fn failure_of(e: &Error) -> (StatusCode, u64) {
    match e {
        Error::Busy { retry_after_ms } => (
            StatusCode::SERVICE_UNAVAILABLE,
            retry_after_ms.div_ceil(1000).max(1),
        ),
        Error::Poisoned { .. } | Error::Closed => (StatusCode::SERVICE_UNAVAILABLE, 30),
        Error::InvalidInput { .. } => (StatusCode::BAD_REQUEST, 0),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, 0),
    }
}

fn with_retry_after(mut r: Response, retry_s: u64) -> Response {
    if retry_s > 0 {
        r.headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from(retry_s));
    }
    r
}

type Labels = Vec<(String, String)>;

fn counter(r: &mut Registry, name: &str, help: &str, v: u64) {
    let c: Counter = Counter::default();
    c.inc_by(v);
    r.register(name, help, c);
}

fn gauge(r: &mut Registry, name: &str, help: &str, v: f64) {
    let g: Gauge<f64, AtomicU64> = Gauge::default();
    g.set(v);
    r.register(name, help, g);
}

/// A gauge in bytes: `name` gets the `_bytes` suffix and a `# UNIT` line.
fn gauge_bytes(r: &mut Registry, name: &str, help: &str, v: f64) {
    let g: Gauge<f64, AtomicU64> = Gauge::default();
    g.set(v);
    r.register_with_unit(name, help, Unit::Bytes, g);
}

/// Per-region gauges and counters, labelled by table and region.
fn region_metrics(r: &mut Registry, store: &Store) {
    let gauges: [(&str, &str, Option<Unit>); 8] = [
        (
            "region_write_rows_per_second",
            "Rows written per second over the hotspot window",
            None,
        ),
        (
            "region_read_rows_per_second",
            "Rows read per second over the hotspot window",
            None,
        ),
        (
            "region_hot",
            "1 while the hotspot detector flags the region",
            None,
        ),
        ("region_hfiles", "HFiles of the region", None),
        (
            "region_sorted_runs",
            "Sorted runs among the region's HFiles (what the file limits count)",
            None,
        ),
        (
            "region",
            "Stored bytes of the region's data",
            Some(Unit::Bytes),
        ),
        (
            "region_compaction_debt",
            "Bytes the minor compactions the planner would run next would read (0: none pending)",
            Some(Unit::Bytes),
        ),
        (
            "region_write_amplification",
            "(flushed + compacted bytes) / flushed bytes",
            Some(Unit::Ratios),
        ),
    ];
    let counters: [(&str, &str); 2] = [
        ("region_flushes", "Flushes of the region since open"),
        ("region_compactions", "Compactions of the region since open"),
    ];
    let gfams: Vec<Family<Labels, Gauge<f64, AtomicU64>>> =
        gauges.iter().map(|_| Family::default()).collect();
    let cfams: Vec<Family<Labels, Counter>> = counters.iter().map(|_| Family::default()).collect();
    for t in store.table_names() {
        for ri in store.regions(&t).unwrap_or_default() {
            let l: Labels = vec![
                ("table".into(), t.clone()),
                ("region".into(), ri.id.to_string()),
            ];
            let vals = [
                ri.write_rate,
                ri.read_rate,
                f64::from(u8::from(ri.hot)),
                ri.files as f64,
                ri.runs as f64,
                ri.size_bytes as f64,
                ri.compaction_debt_bytes as f64,
                ri.write_amplification,
            ];
            for (f, v) in gfams.iter().zip(vals) {
                f.get_or_create(&l).set(v);
            }
            for (f, v) in cfams.iter().zip([ri.flushes, ri.compactions]) {
                f.get_or_create(&l).inc_by(v);
            }
        }
    }
    for ((name, help, unit), f) in gauges.into_iter().zip(gfams) {
        match unit {
            Some(u) => r.register_with_unit(name, help, u, f),
            None => r.register(name, help, f),
        }
    }
    for ((name, help), f) in counters.into_iter().zip(cfams) {
        r.register(name, help, f);
    }
}

/// The metrics text (OpenMetrics 1.0): built from the store's and the
/// server's counters at each scrape.
pub fn render_metrics(store: &Store, stats: &ServerStats) -> String {
    let mut r = Registry::with_prefix("telestore");
    let st = store.stats();
    counter(
        &mut r,
        "ingest_rows",
        "Rows acknowledged through the binary protocol",
        stats.rows.load(Relaxed),
    );
    let c: Counter = Counter::default();
    c.inc_by(stats.bytes.load(Relaxed));
    r.register_with_unit(
        "ingest",
        "Payload bytes accepted through the binary protocol",
        Unit::Bytes,
        c,
    );
    counter(
        &mut r,
        "ingest_batches",
        "Frames acknowledged",
        stats.frames.load(Relaxed),
    );
    r.register_with_unit(
        "ingest_frame",
        "Binary frames: payload read to ack written",
        Unit::Seconds,
        stats.frame_seconds.clone(),
    );
    let http = [
        (
            "http_write_rows",
            "Rows written through the line protocol",
            &stats.http_rows,
        ),
        (
            "http_write_requests",
            "Line-protocol requests applied",
            &stats.http_requests,
        ),
        (
            "http_write_rejected",
            "Line-protocol requests rejected",
            &stats.http_rejected,
        ),
    ];
    for (name, help, v) in http {
        counter(&mut r, name, help, v.load(Relaxed));
    }
    gauge(
        &mut r,
        "connections_open",
        "Open ingest connections",
        stats.connections_open.load(Relaxed) as f64,
    );
    counter(
        &mut r,
        "connections",
        "Ingest connections accepted",
        stats.connections_total.load(Relaxed),
    );
    let rejected = Family::<Labels, Counter>::default();
    for c in 1..=12u16 {
        if let Some(code) = ErrorCode::from_u16(c) {
            rejected
                .get_or_create(&vec![("reason".into(), code.name().into())])
                .inc_by(stats.rejected_of(code));
        }
    }
    r.register(
        "rejected_frames",
        "Rejected handshakes and frames by reason",
        rejected,
    );
    gauge_bytes(
        &mut r,
        "memstore",
        "Bytes in memstores",
        st.memstore_bytes as f64,
    );
    gauge(&mut r, "hfiles", "Live HFiles", st.hfiles as f64);
    gauge_bytes(
        &mut r,
        "hfile",
        "Bytes in live HFiles",
        st.hfile_bytes as f64,
    );
    gauge(
        &mut r,
        "wal_segments",
        "Live WAL segments",
        st.wal_segments as f64,
    );
    counter(
        &mut r,
        "write_stalls",
        "Writes that waited in a write stall",
        st.stalled_writes,
    );
    counter(
        &mut r,
        "write_busy",
        "Writes refused with Busy",
        st.busy_writes,
    );
    counter(
        &mut r,
        "write_slowdowns",
        "Write batches delayed for compaction debt",
        st.slowed_writes,
    );
    gauge_bytes(
        &mut r,
        "compaction_debt",
        "Bytes the pending minor compactions of all regions would read",
        st.compaction_debt_bytes as f64,
    );
    gauge(
        &mut r,
        "background_write_rate_bytes_per_second",
        "Rate of the background write limiter now (0: no limiter)",
        st.background_write_rate_bytes_per_sec as f64,
    );
    counter(
        &mut r,
        "background_write_wait_milliseconds",
        "Time compactions waited for the background write limiter",
        st.background_write_wait_ms,
    );
    counter(
        &mut r,
        "hfiles_read_ahead",
        "New HFiles handed to the kernel's read-ahead after publication",
        st.files_read_ahead,
    );
    counter(
        &mut r,
        "block_cache_hits",
        "Block cache hits",
        st.cache.hits,
    );
    counter(
        &mut r,
        "block_cache_misses",
        "Block cache misses",
        st.cache.misses,
    );
    let lookups = st.cache.hits + st.cache.misses;
    let ratio = if lookups > 0 {
        st.cache.hits as f64 / lookups as f64
    } else {
        0.0
    };
    gauge(
        &mut r,
        "block_cache_hit_ratio",
        "Block cache hits / lookups since open",
        ratio,
    );
    counter(
        &mut r,
        "latest_cache_hits",
        "latest reads answered from the latest-row cache",
        st.latest_cache.hits,
    );
    counter(
        &mut r,
        "latest_cache_misses",
        "latest reads of one row that went to the memstores and HFiles",
        st.latest_cache.misses,
    );
    gauge(
        &mut r,
        "latest_cache_devices",
        "Devices in the latest-row caches (and fills under way)",
        st.latest_cache.entries as f64,
    );
    let m = store.metrics();
    let seconds = [
        (
            "wal_sync",
            "WAL write + fdatasync latency",
            m.wal_sync_seconds,
        ),
        (
            "write",
            "Put latency in the engine: commit queue, WAL write and sync, memstore insert",
            m.write_seconds,
        ),
        ("flush", "Memstore flush duration", m.flush_seconds),
        ("compaction", "Compaction duration", m.compaction_seconds),
    ];
    for (name, help, h) in seconds {
        r.register_with_unit(name, help, Unit::Seconds, h);
    }
    region_metrics(&mut r, store);
    let mut out = String::new();
    if encode(&mut out, &r).is_err() {
        out.clear();
    }
    out
}

/// `GET /metrics`: OpenMetrics, or the classic Prometheus text format
/// (0.0.4) when the scraper asks for `text/plain` and not for
/// OpenMetrics.
async fn metrics(State(s): State<HttpState>, headers: HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let classic = accept.contains("text/plain") && !accept.contains("application/openmetrics-text");
    let text = tokio::task::spawn_blocking(move || render_metrics(&s.store, &s.stats))
        .await
        .unwrap_or_default();
    if classic {
        let ct = "text/plain; version=0.0.4; charset=utf-8";
        return ([(header::CONTENT_TYPE, ct)], classic_text(&text)).into_response();
    }
    let ct = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    ([(header::CONTENT_TYPE, ct)], text).into_response()
}

/// OpenMetrics text rewritten as the classic Prometheus format: no
/// `# UNIT` and `# EOF` lines, and a counter's `# HELP`/`# TYPE` name the
/// sample (`x_total`), not the family (`x`).
pub fn classic_text(open_metrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = open_metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(open_metrics.len());
    for line in open_metrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((p, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let suffix = if counters.contains(name) {
                    "_total"
                } else {
                    ""
                };
                out.push_str(&format!("{p}{name}{suffix} {tail}"));
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}
