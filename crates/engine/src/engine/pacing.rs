//! Pacing background work against ingest: how far behind compaction is
//! (the store's compaction debt), the write slowdown and stop it drives,
//! the background write rate limiter it tunes, and the I/O priority of
//! the threads that flush and compact.
//!
//! - **Debt** is the sum over every region of the bytes the minor
//!   compactions the planner would run next would read
//!   (`compaction::plan::debt`). It is refreshed by the monitor every
//!   second and after every flush and compaction.
//! - **Slowdown**: from `compaction_debt_slowdown_bytes`, or from
//!   `slowdown_file_count` sorted runs in a region of the table, each
//!   write batch first sleeps, from 1 ms rising to 50 ms as the debt
//!   nears the stop or the runs near `blocking_file_count` (RocksDB's
//!   delayed writes and level-0 slowdown trigger), so ingest yields to
//!   compaction before anything has to be refused.
//! - **Stop**: from `compaction_debt_stop_bytes`, writes stall as for too
//!   many files, and are refused `Busy` after `write_stall_max_ms`.
//! - **Rate limiter** (`background_write_bytes_per_sec`): see
//!   [`crate::io::rate`]; auto-tuned from the debt when
//!   `background_write_auto`.

use super::Shared;
use crate::io::priority::{set_thread_io_priority, IoPriority};
use crate::io::rate::auto_rate;
use crate::io::LocalRing;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// Longest sleep of one slowed-down write batch.
pub const SLOWDOWN_SLEEP_MAX: Duration = Duration::from_millis(50);

impl Shared {
    /// Recompute the store's compaction debt, and retune the rate
    /// limiter from it. Returns the debt.
    pub(crate) fn refresh_compaction_debt(&self) -> u64 {
        let policy = &self.opts.compaction;
        let debt: u64 = self
            .catalog
            .tables()
            .iter()
            .flat_map(|t| t.regions().iter().cloned().collect::<Vec<_>>())
            .map(|r| r.compaction_debt(policy))
            .sum();
        self.background.compaction_debt.store(debt, Relaxed);
        if let Some(l) = &self.background.limiter {
            let max = self.opts.background_write_bytes_per_sec;
            let slow = self.opts.compaction_debt_slowdown_bytes;
            l.set_rate(match self.opts.background_write_auto {
                true => auto_rate(max, debt, slow),
                false => max,
            });
        }
        debt
    }

    /// The store's compaction debt as last refreshed.
    pub(crate) fn compaction_debt(&self) -> u64 {
        self.background.compaction_debt.load(Relaxed)
    }

    /// Whether the debt stops writes.
    pub(crate) fn debt_stops_writes(&self) -> bool {
        let stop = self.opts.compaction_debt_stop_bytes;
        stop > 0 && self.compaction_debt() >= stop
    }

    /// How long a write batch sleeps for the debt now (zero below the
    /// slowdown threshold).
    pub(crate) fn debt_slowdown(&self) -> Duration {
        slowdown_for(
            self.compaction_debt(),
            self.opts.compaction_debt_slowdown_bytes,
            self.opts.compaction_debt_stop_bytes,
        )
    }

    /// Make the calling thread a background I/O thread: its I/O priority
    /// lowered as configured, and (io_uring) a ring of its own, so that
    /// its writes are issued by it and carry that priority. Keep the
    /// guard for the thread's life.
    pub(crate) fn enter_background_io(&self) -> Option<LocalRing> {
        let p = self.opts.background_io_priority;
        if p == IoPriority::Normal {
            return None;
        }
        if let Err(e) = set_thread_io_priority(p) {
            tracing::warn!("could not lower the I/O priority of a background thread: {e}");
            return None;
        }
        self.backend.thread_ring()
    }
}

impl super::Store {
    /// How long a write batch to `t` sleeps for its regions' sorted runs
    /// (`Options::slowdown_file_count`), given its most files in a region
    /// (runs are never more than files, and cost more to count).
    pub(crate) fn runs_slowdown(&self, t: &super::Table, most_files: usize) -> Duration {
        let o = &self.shared.opts;
        if o.slowdown_file_count == 0 || most_files < o.slowdown_file_count {
            return Duration::ZERO;
        }
        let runs = t.regions().iter().map(|r| r.run_count()).max().unwrap_or(0);
        slowdown_for(
            runs as u64,
            o.slowdown_file_count as u64,
            o.blocking_file_count as u64 + 1,
        )
    }
}

/// The sleep of a write batch at `debt`: none below `slowdown`, then
/// from 1 ms rising linearly to [`SLOWDOWN_SLEEP_MAX`] at `stop` (or at
/// twice `slowdown` when no stop is set). 0 turns the slowdown off.
pub fn slowdown_for(debt: u64, slowdown: u64, stop: u64) -> Duration {
    if slowdown == 0 || debt < slowdown {
        return Duration::ZERO;
    }
    let top = if stop > slowdown { stop } else { slowdown * 2 };
    let frac = ((debt - slowdown) as f64 / (top - slowdown) as f64).min(1.0);
    let max_ms = SLOWDOWN_SLEEP_MAX.as_secs_f64() * 1000.0;
    Duration::from_secs_f64((1.0 + frac * (max_ms - 1.0)) / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slowdown_rises_from_one_ms_to_the_cap() {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        assert_eq!(slowdown_for(10, 0, 100), Duration::ZERO);
        assert_eq!(slowdown_for(49, 50, 100), Duration::ZERO);
        assert!((ms(slowdown_for(50, 50, 100)) - 1.0).abs() < 1e-6);
        assert!((ms(slowdown_for(75, 50, 100)) - 25.5).abs() < 1e-6);
        assert_eq!(slowdown_for(500, 50, 100), SLOWDOWN_SLEEP_MAX);
        assert_eq!(slowdown_for(100, 50, 0), SLOWDOWN_SLEEP_MAX);
    }
}
