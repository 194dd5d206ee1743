//! The region API of the store: the region map with load statistics,
//! manual splits and merges, and the hotspot detector's evaluation (run
//! every second by the monitor thread and before every report).

use super::split;
use super::{Shared, Store};
use crate::error::{Error, Result};
use crate::ids::RegionId;
use crate::key::RowKey;
use crate::region::hotspot::{self, HotEvent};
use crate::region::key_hex;
use crate::util::sync::LockExt;
use serde::Serialize;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// One region as reported by [`Store::regions`].
#[derive(Clone, Debug, Serialize)]
pub struct RegionInfo {
    /// The region's id, unique within its table.
    pub id: u32,
    /// First key, hex (`pppp[:device[:ts]]`).
    pub start: String,
    /// End key (exclusive), hex; `None` is the end of the key space.
    pub end: Option<String>,
    /// The region's first key, included.
    #[serde(skip)]
    pub start_key: RowKey,
    /// Its end key, excluded (`None`: the end of the key space).
    #[serde(skip)]
    pub end_key: Option<RowKey>,
    /// Stored bytes of the region's HFile data (its part of shared files).
    pub size_bytes: u64,
    /// Live HFiles.
    pub files: usize,
    /// Sorted runs among the files (the parts of one split compaction are
    /// one run): what the file limits count.
    pub runs: usize,
    /// Bytes in its memstores.
    pub memstore_bytes: usize,
    /// Rows written since open.
    pub rows_written: u64,
    /// Write batches since open.
    pub write_batches: u64,
    /// Reads since open.
    pub read_requests: u64,
    /// Rows reads returned since open.
    pub rows_scanned: u64,
    /// Flushes since open.
    pub flushes: u64,
    /// Bytes of HFiles written by flushes.
    pub flush_bytes: u64,
    /// Compactions since open.
    pub compactions: u64,
    /// Compactions that failed since open.
    pub compactions_failed: u64,
    /// A compaction is queued.
    pub compaction_queued: bool,
    /// A compaction runs now.
    pub compaction_running: bool,
    /// Bytes its compactions read since open.
    pub compaction_bytes_read: u64,
    /// Bytes its compactions wrote since open.
    pub compaction_bytes_written: u64,
    /// Pending compaction debt: the bytes the minor compactions the
    /// planner would run one after another (with nothing new flushed)
    /// would read (`compaction::plan::debt`); 0 when it would merge
    /// nothing. Expired files are dropped without a rewrite: no debt.
    pub compaction_debt_bytes: u64,
    /// (flush + compaction bytes written) / flush bytes written.
    pub write_amplification: f64,
    /// Rows written per second over the detector's window.
    pub write_rate: f64,
    /// Rows read per second over the detector's window.
    pub read_rate: f64,
    /// This region's part of the table's load (writes + reads over the
    /// window; by size when the table was idle).
    pub load_share: f64,
    /// The hotspot detector flags it now.
    pub hot: bool,
}

impl Shared {
    /// Evaluate the hotspot detector for every region now; log the start
    /// and end of each episode once.
    pub(crate) fn check_hotspots(&self) {
        let cfg = self.opts.hotspot;
        let now = self.opts.clock.now_ms();
        for t in self.catalog.tables() {
            let regions = t.regions();
            let rate = |w: &crate::region::stats::RateWindow| w.rate(now, cfg.window_secs);
            let writes: Vec<f64> = regions.iter().map(|r| rate(&r.stats.writes)).collect();
            let reads: Vec<f64> = regions.iter().map(|r| rate(&r.stats.reads)).collect();
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
            for (i, r) in regions.iter().enumerate() {
                let over = hotspot::is_over(&cfg, writes[i], &writes)
                    || hotspot::is_over(&cfg, reads[i], &reads);
                let mut st = r.hot.lock_or_recover();
                match hotspot::step(&cfg, &mut st, now, over) {
                    Some(HotEvent::Became) => tracing::warn!(
                        "hotspot: table {} region {} [{}..): writes {:.0} rows/s (table mean {:.0}), reads {:.0} rows/s (mean {:.0}), over {}x for {} s",
                        t.schema.name, r.id, key_hex(&r.start), writes[i], mean(&writes),
                        reads[i], mean(&reads), cfg.k, cfg.grace_ms / 1000
                    ),
                    Some(HotEvent::Cooled) => tracing::info!(
                        "hotspot over: table {} region {}", t.schema.name, r.id
                    ),
                    None => {}
                }
            }
        }
    }
}

/// The monitor thread: evaluates the hotspot detector every second until
/// its channel closes.
pub(crate) fn monitor(shared: std::sync::Arc<Shared>, stop: crossbeam_channel::Receiver<()>) {
    while let Err(crossbeam_channel::RecvTimeoutError::Timeout) =
        stop.recv_timeout(Duration::from_secs(1))
    {
        shared.check_hotspots();
        shared.schedule_compactions();
        shared.write.request_unpin(shared.opts.wal_segments_max);
    }
}

impl Store {
    /// The table's regions in key order, with load statistics (counting
    /// every write acknowledged before the call).
    pub fn regions(&self, table: &str) -> Result<Vec<RegionInfo>> {
        let t = self.shared.catalog.table(table)?;
        self.shared.write.gate.wait_caught_up();
        self.shared.check_hotspots();
        let cfg = self.shared.opts.hotspot;
        let now = self.shared.opts.clock.now_ms();
        let mut out: Vec<RegionInfo> = t
            .regions()
            .iter()
            .map(|r| {
                let st = r.version();
                let s = &r.stats;
                let (a, f) = r.memstore_bytes();
                RegionInfo {
                    id: r.id.0,
                    start: key_hex(&r.start),
                    end: r.end.as_ref().map(key_hex),
                    start_key: r.start,
                    end_key: r.end,
                    size_bytes: r.weights().iter().map(|(_, b)| b).sum(),
                    files: st.files.len(),
                    runs: r.run_count(),
                    memstore_bytes: a + f,
                    rows_written: s.rows_written.load(Relaxed),
                    write_batches: s.write_batches.load(Relaxed),
                    read_requests: s.read_requests.load(Relaxed),
                    rows_scanned: s.rows_scanned.load(Relaxed),
                    flushes: s.flushes.load(Relaxed),
                    flush_bytes: s.flush_bytes.load(Relaxed),
                    compactions: s.compactions.load(Relaxed),
                    compactions_failed: s.compactions_failed.load(Relaxed),
                    compaction_queued: s.compaction_queued.load(Relaxed) == 1,
                    compaction_running: s.compaction_running.load(Relaxed) == 1,
                    compaction_bytes_read: s.compaction_bytes_read.load(Relaxed),
                    compaction_bytes_written: s.compaction_bytes_written.load(Relaxed),
                    compaction_debt_bytes: r.compaction_debt(&self.shared.opts.compaction),
                    write_amplification: s.write_amplification(),
                    write_rate: s.writes.rate(now, cfg.window_secs),
                    read_rate: s.reads.rate(now, cfg.window_secs),
                    load_share: 0.0,
                    hot: r.hot.lock_or_recover().hot,
                }
            })
            .collect();
        let load = |r: &RegionInfo| r.write_rate + r.read_rate;
        let total: f64 = out.iter().map(load).sum();
        let size: u64 = out
            .iter()
            .map(|r| r.size_bytes + r.memstore_bytes as u64)
            .sum();
        for r in &mut out {
            r.load_share = if total > 0.0 {
                load(r) / total
            } else if size > 0 {
                (r.size_bytes + r.memstore_bytes as u64) as f64 / size as f64
            } else {
                0.0
            };
        }
        Ok(out)
    }

    /// Split region `id` at `at` (the right half's first key), or at the
    /// automatic split point when `None`. Returns the daughters' ids.
    pub fn split_region(&self, table: &str, id: u32, at: Option<RowKey>) -> Result<(u32, u32)> {
        self.shared.check_writable("split")?;
        self.shared.poison.check()?;
        let t = self.shared.catalog.table(table)?;
        let _g = t.flush_lock.lock_or_recover();
        let r = t
            .region_by_id(RegionId(id))
            .ok_or_else(|| Error::invalid("region", format!("table {table} has no region {id}")))?;
        let at = match at {
            Some(k) => k,
            None => split::auto_point(&self.shared, &r).ok_or_else(|| {
                Error::invalid(
                    "region",
                    format!("region {id} has no flushed data on both sides of a split point; give one with --at"),
                )
            })?,
        };
        let (left, right) = split::split_at(&self.shared, &t, &r, at)?;
        Ok((left.0, right.0))
    }

    /// Merge region `id` with the region after it (flushing both first).
    /// Returns the merged region's id.
    pub fn merge_regions(&self, table: &str, id: u32) -> Result<u32> {
        self.shared.check_writable("merge")?;
        self.shared.poison.check()?;
        let t = self.shared.catalog.table(table)?;
        let _g = t.flush_lock.lock_or_recover();
        let m = split::merge(&self.shared, &t, RegionId(id))?.0;
        if let Err(e) = self.shared.retire_wal() {
            tracing::warn!("could not retire WAL segments (retried later): {e}");
        }
        Ok(m)
    }
}
