//! `GET /health` and `GET /metrics` (OpenMetrics, or the classic
//! Prometheus text when a scraper asks for it).

use super::state::{json_error, ApiError, HttpState};
use crate::frontend::stats::ServerStats;
use crate::ingest::proto::ErrorCode;
use crate::mqtt::Health as MqttHealth;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use telestore_engine::Store;
use utoipa::ToSchema;

/// `/health`'s answer when the store is healthy.
#[derive(Serialize, ToSchema)]
pub(super) struct Health {
    /// Always `ok`.
    status: &'static str,
    /// The tables' names.
    tables: Vec<String>,
    /// The MQTT subscriber, when one runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    mqtt: Option<MqttHealth>,
    /// What the store's open found wrong and went past (the WAL's last
    /// entry torn or damaged, and its rows dropped); absent when nothing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

/// `/health` without a token, when the daemon requires one: the state,
/// nothing about tables, brokers or paths.
#[derive(Serialize, ToSchema)]
pub(super) struct HealthStatus {
    /// `ok`, or `unavailable` (the write path stopped).
    status: &'static str,
}

/// Is the store healthy?
///
/// `200` while the write path runs; `503` once it stopped (a failed fsync,
/// a full disk, a closing store), the message saying why. Always open,
/// for load balancers and probes; when the daemon requires tokens, a
/// request without a valid one gets only `{"status"}`. An InfluxDB 2
/// client library (its `User-Agent`) gets InfluxDB 2's shape (`name`,
/// `status: pass|fail`, `message`, `version`), which it parses.
#[utoipa::path(
    get,
    path = "/health",
    tag = "status",
    responses(
        (status = 200, description = "Healthy (`HealthStatus` without a token when tokens are required)", body = Health),
        (status = 503, description = "The write path stopped: `message` says why (`{\"status\": \"unavailable\"}` without a token when tokens are required)", body = ApiError),
    )
)]
pub(super) async fn health(State(s): State<HttpState>, req: axum::extract::Request) -> Response {
    let state = s.store.health().map_err(|e| e.to_string());
    if super::influx::is_influx_client(req.headers()) {
        return super::influx::health_v2(state);
    }
    let told = s.auth.tokens.is_open() || s.auth.granted(&req).is_some();
    match (state, told) {
        (Ok(()), true) => Json(Health {
            status: "ok",
            tables: s.store.table_names(),
            mqtt: s.stats.mqtt.health(),
            warnings: s.store.warnings(),
        })
        .into_response(),
        (Err(e), true) => json_error(StatusCode::SERVICE_UNAVAILABLE, e),
        (Ok(()), false) => Json(HealthStatus { status: "ok" }).into_response(),
        (Err(_), false) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(HealthStatus {
                status: "unavailable",
            }),
        )
            .into_response(),
    }
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

/// A gauge whose name ends in its unit (`# UNIT`).
fn gauge_in(r: &mut Registry, (name, unit): (&str, Unit), help: &str, v: f64) {
    let g: Gauge<f64, AtomicU64> = Gauge::default();
    g.set(v);
    r.register_with_unit(name, help, unit, g);
}

/// A gauge in bytes: `name` gets the `_bytes` suffix and a `# UNIT` line.
fn gauge_bytes(r: &mut Registry, name: &str, help: &str, v: f64) {
    gauge_in(r, (name, Unit::Bytes), help, v);
}

/// The query pool: what runs, what it holds, and how queries ended.
fn query_metrics(r: &mut Registry, q: &telestore_query::sql::QueryPool) {
    gauge(
        r,
        "queries_running",
        "Queries holding a slot of the query pool (queries, exports, SQL)",
        q.running() as f64,
    );
    gauge_bytes(
        r,
        "query_memory",
        "Bytes the running queries hold in the memory pool they share",
        q.memory_used_bytes() as f64,
    );
    gauge_bytes(
        r,
        "query_spill",
        "Bytes of query spill files on disk",
        q.spill_used_bytes() as f64,
    );
    let ended = Family::<Labels, Counter>::default();
    let st = &q.stats;
    for (outcome, v) in [
        ("started", &st.started),
        ("busy", &st.refused_busy),
        ("timeout", &st.timed_out),
        ("cancelled", &st.cancelled),
    ] {
        ended
            .get_or_create(&vec![("outcome".into(), outcome.into())])
            .inc_by(v.load(Relaxed));
    }
    r.register(
        "queries",
        "Queries by outcome: started (admitted), busy (refused after the queue wait), \
         timeout, cancelled (the client went away)",
        ended,
    );
}

/// Per-region gauges and counters, labelled by table and region.
#[expect(
    clippy::too_many_lines,
    reason = "one registration per region metric; goes away when each counter is registered once next to its code"
)]
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

/// Rows written, over all protocols and per protocol (a label).
fn ingest_rows(r: &mut Registry, stats: &ServerStats) {
    let per = [
        ("binary", stats.rows.load(Relaxed)),
        ("line_protocol", stats.http_rows.load(Relaxed)),
        ("flight", stats.flight_rows_written.load(Relaxed)),
        ("mqtt", stats.mqtt.rows.load(Relaxed)),
    ];
    counter(
        r,
        "ingest_rows",
        "Rows written, over every protocol",
        per.iter().map(|p| p.1).sum(),
    );
    let fam = Family::<Labels, Counter>::default();
    for (protocol, n) in per {
        fam.get_or_create(&vec![("protocol".into(), protocol.into())])
            .inc_by(n);
    }
    r.register(
        "ingest_protocol_rows",
        "Rows written, by protocol (binary, line_protocol, flight, mqtt)",
        fam,
    );
}

/// The metrics text (OpenMetrics 1.0): built from the store's and the
/// server's counters at each scrape.
#[expect(
    clippy::too_many_lines,
    reason = "one registration per daemon metric; goes away when each counter is registered once next to its code"
)]
pub fn render_metrics(store: &Store, stats: &ServerStats) -> String {
    let mut r = Registry::with_prefix("telestore");
    let st = store.stats();
    ingest_rows(&mut r, stats);
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
            "http_write_requests",
            "Line-protocol requests applied",
            &stats.http_requests,
        ),
        (
            "http_write_rejected",
            "Line-protocol requests rejected",
            &stats.http_rejected,
        ),
        ("flight_calls", "Arrow Flight calls", &stats.flight_calls),
        (
            "flight_rejected",
            "Arrow Flight calls answered with an error status",
            &stats.flight_rejected,
        ),
        (
            "flight_rows_sent",
            "Rows sent by Flight DoGet",
            &stats.flight_rows_sent,
        ),
        (
            "sql_queries",
            "SQL queries answered (HTTP: to the end; Flight: the stream started)",
            &stats.sql_queries,
        ),
        (
            "sql_failed",
            "SQL queries refused or failed",
            &stats.sql_failed,
        ),
        ("mqtt_messages", "MQTT messages taken", &stats.mqtt.messages),
        (
            "mqtt_acked",
            "MQTT messages acknowledged to the broker (after their rows were durable)",
            &stats.mqtt.acked,
        ),
        (
            "mqtt_redeliveries",
            "MQTT messages that came again (DUP flag)",
            &stats.mqtt.redeliveries,
        ),
        (
            "mqtt_reconnects",
            "MQTT connection losses (each followed by a retry)",
            &stats.mqtt.reconnects,
        ),
        (
            "mqtt_dead_letters",
            "Refused MQTT payloads republished to the dead-letter topic",
            &stats.mqtt.dead_letters,
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
    mqtt_metrics(&mut r, store, &stats.mqtt);
    if let Some(q) = stats.queries.get() {
        query_metrics(&mut r, q);
    }
    let rejected = Family::<Labels, Counter>::default();
    for code in ErrorCode::ALL {
        rejected
            .get_or_create(&vec![("reason".into(), code.name().into())])
            .inc_by(stats.rejected_of(code));
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
    gauge_in(
        &mut r,
        (
            "background_write_rate",
            Unit::Other("bytes_per_second".into()),
        ),
        "Rate of the background write limiter now (0: no limiter)",
        st.background_write_rate_bytes_per_sec as f64,
    );
    let c: Counter = Counter::default();
    c.inc_by(st.background_write_wait_ms);
    r.register_with_unit(
        "background_write_wait",
        "Time compactions waited for the background write limiter",
        Unit::Other("milliseconds".into()),
        c,
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

/// Metrics for Prometheus
///
/// OpenMetrics text, or the classic Prometheus text format (0.0.4) when
/// the scraper asks for `text/plain` and not for OpenMetrics. Every family
/// is `telestore_*`; docs/operations.md lists them.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "status",
    responses((status = 200, description = "The metrics", content(
        (String = "application/openmetrics-text"),
        (String = "text/plain"),
    )))
)]
pub(super) async fn metrics(State(s): State<HttpState>, headers: HeaderMap) -> Response {
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

/// The MQTT subscriber's refused payloads by reason and its state.
fn mqtt_metrics(r: &mut Registry, store: &Store, m: &crate::mqtt::Stats) {
    let bad = Family::<Labels, Counter>::default();
    for why in crate::mqtt::payload::Bad::ALL {
        bad.get_or_create(&vec![("reason".into(), why.name().into())])
            .inc_by(m.bad[why as usize].load(Relaxed));
    }
    r.register("mqtt_bad_payloads", "MQTT payloads refused, by reason", bad);
    gauge(
        r,
        "mqtt_connected",
        "1 while the MQTT subscriber is connected",
        f64::from(u8::from(m.connected.load(Relaxed))),
    );
    gauge(
        r,
        "mqtt_pending_messages",
        "MQTT messages taken and not yet durable (so not yet acknowledged)",
        m.pending.load(Relaxed) as f64,
    );
    gauge_in(
        r,
        ("mqtt_lag", Unit::Seconds),
        "Age of the oldest MQTT message taken and not yet durable (0: none)",
        m.lag_seconds(store.now_ms()),
    );
}
