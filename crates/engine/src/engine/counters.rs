//! The engine's own counters and latency histograms, read by
//! `Store::stats` and the daemon's `/metrics` (each region counts its own
//! work in `region::stats`).

use std::sync::atomic::AtomicU64;

/// Counters of the write path, for `Store::stats`.
#[derive(Default)]
pub(crate) struct Counters {
    /// Writes that had to wait (write stall).
    pub stalls: AtomicU64,
    /// Writes refused `Busy`.
    pub busy: AtomicU64,
    /// Writes slowed down for compaction debt.
    pub slowed: AtomicU64,
    /// New files handed to the kernel's read-ahead.
    pub files_read_ahead: AtomicU64,
    /// Rows of put batches applied since open (not counting WAL replay).
    pub rows_applied: AtomicU64,
    pub metrics: EngineMetrics,
}

/// Latency histograms the engine records (for the daemon's `/metrics`).
#[derive(Clone)]
pub struct EngineMetrics {
    /// WAL writes that fdatasync (group commits with a `sync` writer, and
    /// the `async` timer), in seconds.
    pub wal_sync_seconds: prometheus_client::metrics::histogram::Histogram,
    /// Seconds per memstore flush.
    pub flush_seconds: prometheus_client::metrics::histogram::Histogram,
    /// Accepted puts, from submission to acknowledgement (queueing for
    /// the commit thread, the WAL write and sync, the memstore insert).
    pub write_seconds: prometheus_client::metrics::histogram::Histogram,
    /// Seconds per compaction.
    pub compaction_seconds: prometheus_client::metrics::histogram::Histogram,
}

impl Default for EngineMetrics {
    fn default() -> Self {
        use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
        EngineMetrics {
            wal_sync_seconds: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
            flush_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            write_seconds: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
            compaction_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 20)),
        }
    }
}
