//! `GET /api/v1/status`: what the console page and `telestore top` show,
//! in one JSON document (its schema: `formats/status.md`, version
//! [`STATUS_VERSION`]). Built from the store's counters, the region map
//! with the hotspot detector's verdicts, and the ingest rate sampled every
//! second by [`sample_ingest`].
#![allow(
    missing_docs,
    reason = "the status document's fields are specified in formats/status.md and checked against formats/status.schema.json"
)]

use super::state::{ApiError, HttpState, IngestHistory};
use crate::frontend::stats::ServerStats;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use telestore_engine::engine::RegionInfo;
use telestore_engine::Store;
use tokio::sync::watch;
use utoipa::ToSchema;

/// The document's `version`: raised when a field changes meaning or goes
/// away (new fields may appear without it).
pub const STATUS_VERSION: u32 = 1;

/// The whole document.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct Status {
    pub version: u32,
    /// When it was taken, ms since the epoch (the store's clock).
    pub time_ms: i64,
    pub uptime_seconds: f64,
    /// `ok`, or why the write path stopped.
    pub health: String,
    /// The I/O backend: `uring` or `std`.
    pub io: String,
    pub ingest: Ingest,
    pub writes: Writes,
    pub memstores: Memstores,
    pub wal: Wal,
    pub compactions: Compactions,
    pub block_cache: Cache,
    pub latest_cache: LatestCache,
    pub connections: Connections,
    pub tables: Vec<TableStatus>,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct Ingest {
    /// Rows of put batches applied since the store opened.
    pub rows_total: u64,
    /// The last second's rate (0 until two samples exist).
    pub rows_per_second: f64,
    /// Oldest first, one per second, the last 300 s at most.
    pub history: Vec<Sample>,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, ToSchema)]
pub struct Sample {
    pub time_ms: i64,
    pub rows_per_second: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct Writes {
    /// Writes that waited in a write stall, were refused `Busy`, were
    /// slowed down for compaction debt (since open).
    pub stalled_total: u64,
    pub busy_total: u64,
    pub slowed_total: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct Memstores {
    pub bytes: u64,
    pub limit_bytes: u64,
    /// Frozen memstores waiting for (or in) their flush: the flush queue.
    pub flush_queue: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct Wal {
    pub segments: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct Compactions {
    /// Regions waiting for a compaction worker, and being compacted.
    pub queued: u64,
    pub running: u64,
    pub debt_bytes: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct Cache {
    pub bytes: u64,
    pub capacity_bytes: u64,
    pub hits: u64,
    pub misses: u64,
    /// hits / (hits + misses) since open; 0 before any lookup.
    pub hit_ratio: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct LatestCache {
    pub devices: u64,
    pub hits: u64,
    pub misses: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct Connections {
    /// Binary protocol (TCP) connections open now, and since start.
    pub tcp_open: u64,
    pub tcp_total: u64,
    /// Line-protocol (HTTP) write requests applied and refused, and the
    /// rows they wrote.
    pub http_write_requests: u64,
    pub http_write_rejected: u64,
    pub http_rows: u64,
    /// Binary frames applied and the rows they carried.
    pub tcp_frames: u64,
    pub tcp_rows: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct TableStatus {
    pub name: String,
    pub fields: Vec<String>,
    /// In key order: together they cover the hash space once.
    pub regions: Vec<RegionStatus>,
}

#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct RegionStatus {
    pub id: u32,
    /// Start and end keys, hex (`pppp[:device[:ts]]`); `end` null at the
    /// end of the key space.
    pub start: String,
    pub end: Option<String>,
    /// Where the region starts and ends in the 16-bit hash space, as
    /// fractions in [0, 1].
    pub start_fraction: f64,
    pub end_fraction: f64,
    pub size_bytes: u64,
    pub files: u64,
    pub runs: u64,
    pub memstore_bytes: u64,
    /// Rows per second over the hotspot detector's window.
    pub write_rate: f64,
    pub read_rate: f64,
    /// Share of the table's load (by size when the table is idle).
    pub load_share: f64,
    /// Flagged by the hotspot detector.
    pub hot: bool,
    pub rows_written: u64,
    pub flushes: u64,
    pub compactions: u64,
    pub compaction_queued: bool,
    pub compaction_running: bool,
    pub compaction_debt_bytes: u64,
}

/// Sample the store's rows-written counter every second into `history`
/// until `stop` turns true.
pub async fn sample_ingest(
    store: Arc<Store>,
    history: Arc<IngestHistory>,
    mut stop: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last: Option<(Instant, u64)> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let (now, rows) = (Instant::now(), store.rows_written());
        if let Some((t, r)) = last {
            let secs = now.duration_since(t).as_secs_f64().max(1e-3);
            history.push(store.now_ms(), rows.saturating_sub(r) as f64 / secs);
        }
        last = Some((now, rows));
    }
}

/// The store's state in one document
///
/// Counters, memstores, WAL, compactions, caches, connections, the ingest
/// rate of the last 300 seconds and every region of every table with the
/// hotspot detector's verdict: what the console and `telestore top` show
/// (schema `formats/status.md`).
#[utoipa::path(
    get,
    path = "/api/v1/status",
    tag = "status",
    responses(
        (status = 200, description = "The status document", body = Status),
        (status = 500, description = "The document could not be built", body = ApiError),
    )
)]
pub(super) async fn status(State(s): State<HttpState>) -> Response {
    let built = tokio::task::spawn_blocking(move || build(&s.store, &s.stats, &s.history)).await;
    match built {
        Ok(doc) => ([(header::CACHE_CONTROL, "no-store")], axum::Json(doc)).into_response(),
        Err(e) => super::state::json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// The status document now.
#[expect(
    clippy::too_many_lines,
    reason = "copies every status field in the order of formats/status.md"
)]
pub fn build(store: &Store, server: &ServerStats, history: &IngestHistory) -> Status {
    let st = store.stats();
    let samples: Vec<Sample> = history
        .samples()
        .into_iter()
        .map(|(time_ms, rows_per_second)| Sample {
            time_ms,
            rows_per_second,
        })
        .collect();
    let tables: Vec<TableStatus> = store
        .table_names()
        .iter()
        .filter_map(|name| table_status(store, name))
        .collect();
    let regions = || tables.iter().flat_map(|t| t.regions.iter());
    let lookups = st.cache.hits + st.cache.misses;
    Status {
        version: STATUS_VERSION,
        time_ms: store.now_ms(),
        uptime_seconds: history.started.elapsed().as_secs_f64(),
        health: match store.health() {
            Ok(()) => "ok".into(),
            Err(e) => e.to_string(),
        },
        io: store.io_kind().name().into(),
        ingest: Ingest {
            rows_total: st.rows_written,
            rows_per_second: samples.last().map_or(0.0, |s| s.rows_per_second),
            history: samples,
        },
        writes: Writes {
            stalled_total: st.stalled_writes,
            busy_total: st.busy_writes,
            slowed_total: st.slowed_writes,
        },
        memstores: Memstores {
            bytes: st.memstore_bytes as u64,
            limit_bytes: st.memstore_limit_bytes as u64,
            flush_queue: st.frozen_memstores as u64,
        },
        wal: Wal {
            segments: st.wal_segments as u64,
        },
        compactions: Compactions {
            queued: regions().filter(|r| r.compaction_queued).count() as u64,
            running: regions().filter(|r| r.compaction_running).count() as u64,
            debt_bytes: st.compaction_debt_bytes,
        },
        block_cache: Cache {
            bytes: st.cache.bytes,
            capacity_bytes: st.block_cache_capacity_bytes,
            hits: st.cache.hits,
            misses: st.cache.misses,
            hit_ratio: if lookups > 0 {
                st.cache.hits as f64 / lookups as f64
            } else {
                0.0
            },
        },
        latest_cache: LatestCache {
            devices: st.latest_cache.entries,
            hits: st.latest_cache.hits,
            misses: st.latest_cache.misses,
        },
        connections: Connections {
            tcp_open: server.connections_open.load(Relaxed),
            tcp_total: server.connections_total.load(Relaxed),
            http_write_requests: server.http_requests.load(Relaxed),
            http_write_rejected: server.http_rejected.load(Relaxed),
            http_rows: server.http_rows.load(Relaxed),
            tcp_frames: server.frames.load(Relaxed),
            tcp_rows: server.rows.load(Relaxed),
        },
        tables,
    }
}

/// A table's regions (`None` when it was dropped meanwhile).
fn table_status(store: &Store, name: &str) -> Option<TableStatus> {
    let schema = store.schema(name).ok()?;
    let regions = store.regions(name).ok()?;
    Some(TableStatus {
        name: name.into(),
        fields: schema.fields.iter().map(|f| f.name.clone()).collect(),
        regions: regions.iter().map(region_status).collect(),
    })
}

/// Where a key falls in the hash space, in [0, 1].
fn hash_fraction(key: &telestore_engine::key::RowKey) -> f64 {
    f64::from(u16::from_be_bytes([key[0], key[1]])) / 65_536.0
}

fn region_status(r: &RegionInfo) -> RegionStatus {
    let end_fraction = match &r.end_key {
        Some(k) => hash_fraction(k),
        None => 1.0,
    };
    RegionStatus {
        id: r.id,
        start: r.start.clone(),
        end: r.end.clone(),
        start_fraction: hash_fraction(&r.start_key),
        end_fraction,
        size_bytes: r.size_bytes,
        files: r.files as u64,
        runs: r.runs as u64,
        memstore_bytes: r.memstore_bytes as u64,
        write_rate: r.write_rate,
        read_rate: r.read_rate,
        load_share: r.load_share,
        hot: r.hot,
        rows_written: r.rows_written,
        flushes: r.flushes,
        compactions: r.compactions,
        compaction_queued: r.compaction_queued,
        compaction_running: r.compaction_running,
        compaction_debt_bytes: r.compaction_debt_bytes,
    }
}
