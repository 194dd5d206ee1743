//! `GET /health` and `GET /metrics` (OpenMetrics, or the classic
//! Prometheus text when a scraper asks for it).

use super::state::{json_error, ApiError, HttpState};
use crate::frontend::metric::{label, Collected, Labels, Metric};
use crate::frontend::stats::ServerStats;
use crate::mqtt::Health as MqttHealth;
use crate::mqtt::{Scrape as MqttScrape, Stats as MqttStats};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::{Registry, Unit};
use serde::Serialize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use telestore_engine::engine::{RegionInfo, StoreStats};
use telestore_engine::Store;
use telestore_query::sql::QueryPool;
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

/// The `/metrics` registry, built once when the server starts from each
/// counter's one declaration (`ServerStats`, `mqtt::Stats`, and the tables
/// below for the engine's `StoreStats`, regions and the query pool); a
/// scrape reads the values and encodes, nothing is registered again.
pub struct Metrics {
    registry: Registry,
}

impl Metrics {
    /// Register every metric of `store` and `stats`.
    pub fn new(store: Arc<Store>, stats: Arc<ServerStats>) -> Metrics {
        let mut r = Registry::with_prefix("telestore");
        let s = stats.clone();
        r.register_collector(Collected::new(
            move || Some(s.clone()),
            ServerStats::METRICS,
        ));
        let s = stats.clone();
        r.register_collector(Collected::new(
            move || Some(s.clone()),
            ServerStats::DERIVED,
        ));
        let s = stats.clone();
        r.register_collector(Collected::new(move || s.queries.get().cloned(), QUERY));
        let (s, st) = (stats.clone(), store.clone());
        r.register_collector(Collected::new(
            move || Some(MqttScrape(s.mqtt.clone(), st.now_ms())),
            MqttStats::METRICS,
        ));
        let st = store.clone();
        r.register_collector(Collected::new(move || Some(st.stats()), STORE));
        let st = store.clone();
        r.register_collector(Collected::new(move || Some(regions(&st)), REGION));
        r.register_with_unit(
            "ingest_frame",
            "Binary frames: payload read to ack written",
            Unit::Seconds,
            stats.frame_seconds.clone(),
        );
        let m = store.metrics();
        for (name, help, h) in [
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
        ] {
            r.register_with_unit(name, help, Unit::Seconds, h);
        }
        Metrics { registry: r }
    }

    /// The metrics text (OpenMetrics 1.0), values as of now.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

/// The query pool: what runs, what it holds, and how queries ended.
static QUERY: &[Metric<QueryPool>] = &[
    Metric::gauge(
        "queries_running",
        "Queries holding a slot of the query pool (queries, exports, SQL)",
        |q: &QueryPool| q.running() as f64,
    ),
    Metric::gauge(
        "query_memory",
        "Bytes the running queries hold in the memory pool they share",
        |q: &QueryPool| q.memory_used_bytes() as f64,
    )
    .in_unit("bytes"),
    Metric::gauge(
        "query_spill",
        "Bytes of query spill files on disk",
        |q: &QueryPool| q.spill_used_bytes() as f64,
    )
    .in_unit("bytes"),
    Metric::counter_each(
        "queries",
        "Queries by outcome: started (admitted), busy (refused after the queue wait), \
         timeout, cancelled (the client went away)",
        |q: &QueryPool| {
            let st = &q.stats;
            [
                ("started", &st.started),
                ("busy", &st.refused_busy),
                ("timeout", &st.timed_out),
                ("cancelled", &st.cancelled),
            ]
            .into_iter()
            .map(|(o, v)| (label("outcome", o), v.load(Relaxed) as f64))
            .collect()
        },
    ),
];

/// The engine's counters and gauges (`Store::stats`, read per scrape).
static STORE: &[Metric<StoreStats>] = &[
    Metric::gauge("memstore", "Bytes in memstores", |s: &StoreStats| {
        s.memstore_bytes as f64
    })
    .in_unit("bytes"),
    Metric::gauge("hfiles", "Live HFiles", |s: &StoreStats| s.hfiles as f64),
    Metric::gauge("hfile", "Bytes in live HFiles", |s: &StoreStats| {
        s.hfile_bytes as f64
    })
    .in_unit("bytes"),
    Metric::gauge("wal_segments", "Live WAL segments", |s: &StoreStats| {
        s.wal_segments as f64
    }),
    Metric::counter(
        "write_stalls",
        "Writes that waited in a write stall",
        |s: &StoreStats| s.stalled_writes as f64,
    ),
    Metric::counter(
        "write_busy",
        "Writes refused with Busy",
        |s: &StoreStats| s.busy_writes as f64,
    ),
    Metric::counter(
        "write_slowdowns",
        "Write batches delayed for compaction debt",
        |s: &StoreStats| s.slowed_writes as f64,
    ),
    Metric::gauge(
        "compaction_debt",
        "Bytes the pending minor compactions of all regions would read",
        |s: &StoreStats| s.compaction_debt_bytes as f64,
    )
    .in_unit("bytes"),
    Metric::gauge(
        "background_write_rate",
        "Rate of the background write limiter now (0: no limiter)",
        |s: &StoreStats| s.background_write_rate_bytes_per_sec as f64,
    )
    .in_unit("bytes_per_second"),
    Metric::counter(
        "background_write_wait",
        "Time compactions waited for the background write limiter",
        |s: &StoreStats| s.background_write_wait_ms as f64,
    )
    .in_unit("milliseconds"),
    Metric::counter(
        "hfiles_read_ahead",
        "New HFiles handed to the kernel's read-ahead after publication",
        |s: &StoreStats| s.files_read_ahead as f64,
    ),
    Metric::counter("block_cache_hits", "Block cache hits", |s: &StoreStats| {
        s.cache.hits as f64
    }),
    Metric::counter(
        "block_cache_misses",
        "Block cache misses",
        |s: &StoreStats| s.cache.misses as f64,
    ),
    Metric::gauge(
        "block_cache_hit_ratio",
        "Block cache hits / lookups since open",
        |s: &StoreStats| {
            let lookups = s.cache.hits + s.cache.misses;
            if lookups > 0 {
                s.cache.hits as f64 / lookups as f64
            } else {
                0.0
            }
        },
    ),
    Metric::counter(
        "latest_cache_hits",
        "latest reads answered from the latest-row cache",
        |s: &StoreStats| s.latest_cache.hits as f64,
    ),
    Metric::counter(
        "latest_cache_misses",
        "latest reads of one row that went to the memstores and HFiles",
        |s: &StoreStats| s.latest_cache.misses as f64,
    ),
    Metric::gauge(
        "latest_cache_devices",
        "Devices in the latest-row caches (and fills under way)",
        |s: &StoreStats| s.latest_cache.entries as f64,
    ),
];

/// Every region of every table, labelled by table and region.
type Regions = Vec<(Labels, RegionInfo)>;

fn regions(store: &Store) -> Regions {
    let mut out = Vec::new();
    for t in store.table_names() {
        for ri in store.regions(&t).unwrap_or_default() {
            let mut l = label("table", t.clone());
            l.push(("region".into(), ri.id.to_string()));
            out.push((l, ri));
        }
    }
    out
}

/// One series per region.
fn per_region(rs: &Regions, f: fn(&RegionInfo) -> f64) -> Vec<(Labels, f64)> {
    rs.iter().map(|(l, r)| (l.clone(), f(r))).collect()
}

/// Per-region gauges and counters.
static REGION: &[Metric<Regions>] = &[
    Metric::gauge_each(
        "region_write_rows_per_second",
        "Rows written per second over the hotspot window",
        |rs: &Regions| per_region(rs, |r| r.write_rate),
    ),
    Metric::gauge_each(
        "region_read_rows_per_second",
        "Rows read per second over the hotspot window",
        |rs: &Regions| per_region(rs, |r| r.read_rate),
    ),
    Metric::gauge_each(
        "region_hot",
        "1 while the hotspot detector flags the region",
        |rs: &Regions| per_region(rs, |r| f64::from(u8::from(r.hot))),
    ),
    Metric::gauge_each("region_hfiles", "HFiles of the region", |rs: &Regions| {
        per_region(rs, |r| r.files as f64)
    }),
    Metric::gauge_each(
        "region_sorted_runs",
        "Sorted runs among the region's HFiles (what the file limits count)",
        |rs: &Regions| per_region(rs, |r| r.runs as f64),
    ),
    Metric::gauge_each(
        "region",
        "Stored bytes of the region's data",
        |rs: &Regions| per_region(rs, |r| r.size_bytes as f64),
    )
    .in_unit("bytes"),
    Metric::gauge_each(
        "region_compaction_debt",
        "Bytes the minor compactions the planner would run next would read (0: none pending)",
        |rs: &Regions| per_region(rs, |r| r.compaction_debt_bytes as f64),
    )
    .in_unit("bytes"),
    Metric::gauge_each(
        "region_write_amplification",
        "(flushed + compacted bytes) / flushed bytes",
        |rs: &Regions| per_region(rs, |r| r.write_amplification),
    )
    .in_unit("ratios"),
    Metric::counter_each(
        "region_flushes",
        "Flushes of the region since open",
        |rs: &Regions| per_region(rs, |r| r.flushes as f64),
    ),
    Metric::counter_each(
        "region_compactions",
        "Compactions of the region since open",
        |rs: &Regions| per_region(rs, |r| r.compactions as f64),
    ),
];

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
    let text = tokio::task::spawn_blocking(move || s.metrics.render())
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
