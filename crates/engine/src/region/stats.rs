//! Per-region load counters and sliding-window rates. Counters only go
//! up; rates come from per-second buckets over the last
//! [`WINDOW_SECS`] seconds of the store's clock.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Length of the rate window.
pub const WINDOW_SECS: u64 = 60;

/// Events per second over a sliding window of one-second buckets. Writers
/// and the reader race benignly: a bucket being recycled may lose or
/// double a few events of that second (these are statistics).
pub struct RateWindow {
    counts: [AtomicU64; WINDOW_SECS as usize],
    second: [AtomicU64; WINDOW_SECS as usize],
}

impl Default for RateWindow {
    fn default() -> Self {
        RateWindow {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            second: std::array::from_fn(|_| AtomicU64::new(u64::MAX)),
        }
    }
}

fn second_of(now_ms: i64) -> u64 {
    now_ms.max(0) as u64 / 1000
}

impl RateWindow {
    /// Count `n` events at `now_ms`.
    pub fn add(&self, now_ms: i64, n: u64) {
        let s = second_of(now_ms);
        let i = (s % WINDOW_SECS) as usize;
        let seen = self.second[i].load(Relaxed);
        if seen != s
            && self.second[i]
                .compare_exchange(seen, s, Relaxed, Relaxed)
                .is_ok()
        {
            self.counts[i].store(0, Relaxed);
        }
        self.counts[i].fetch_add(n, Relaxed);
    }

    /// Events in the `secs` whole seconds before `now_ms`'s second
    /// (the current, incomplete second is left out), per second.
    pub fn rate(&self, now_ms: i64, secs: u64) -> f64 {
        let secs = secs.clamp(1, WINDOW_SECS - 1);
        let now = second_of(now_ms);
        let total: u64 = (1..=secs)
            .filter_map(|back| now.checked_sub(back))
            .map(|s| {
                let i = (s % WINDOW_SECS) as usize;
                if self.second[i].load(Relaxed) == s {
                    self.counts[i].load(Relaxed)
                } else {
                    0
                }
            })
            .sum();
        total as f64 / secs as f64
    }
}

/// A region's counters since it was opened (a split or merge starts its
/// daughters at zero).
#[derive(Default)]
pub struct RegionStats {
    pub rows_written: AtomicU64,
    pub write_batches: AtomicU64,
    pub read_requests: AtomicU64,
    pub rows_scanned: AtomicU64,
    pub flushes: AtomicU64,
    /// Bytes of HFiles written by flushes.
    pub flush_bytes: AtomicU64,
    /// Compactions completed (including whole-file TTL drops).
    pub compactions: AtomicU64,
    pub compactions_failed: AtomicU64,
    /// 1 while a compaction of the region is queued / running.
    pub compaction_queued: AtomicU64,
    pub compaction_running: AtomicU64,
    /// Bytes of HFiles read and written by compactions.
    pub compaction_bytes_read: AtomicU64,
    pub compaction_bytes_written: AtomicU64,
    /// Rows written per second.
    pub writes: RateWindow,
    /// Rows read per second.
    pub reads: RateWindow,
}

impl RegionStats {
    /// (flush bytes + compaction bytes written) / flush bytes; 1 before
    /// any compaction, 0 before any flush.
    pub fn write_amplification(&self) -> f64 {
        let f = self.flush_bytes.load(Relaxed);
        if f == 0 {
            return 0.0;
        }
        (f + self.compaction_bytes_written.load(Relaxed)) as f64 / f as f64
    }
    pub fn on_write(&self, now_ms: i64, rows: u64) {
        self.rows_written.fetch_add(rows, Relaxed);
        self.write_batches.fetch_add(1, Relaxed);
        self.writes.add(now_ms, rows);
    }
    pub fn on_read(&self, now_ms: i64, rows: u64) {
        self.read_requests.fetch_add(1, Relaxed);
        self.rows_scanned.fetch_add(rows, Relaxed);
        self.reads.add(now_ms, rows);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_covers_whole_past_seconds_and_forgets_old_ones() {
        let w = RateWindow::default();
        for s in 0..10 {
            w.add(s * 1000 + 500, 100);
        }
        assert_eq!(w.rate(10_000, 10), 100.0);
        assert_eq!(w.rate(10_000, 5), 100.0);
        // The current second is not counted.
        w.add(10_100, 1000);
        assert_eq!(w.rate(10_900, 5), 100.0);
        // A minute later the buckets are stale.
        assert_eq!(w.rate(80_000, 10), 0.0);
        w.add(80_000, 7);
        assert_eq!(w.rate(81_000, 1), 7.0);
    }
}
