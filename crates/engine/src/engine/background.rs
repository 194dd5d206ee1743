//! What the background threads share with the write path: the flusher's
//! and the compactors' queues, the flush-progress signal stalled writers
//! wait on, the compaction debt, the background write rate limiter, the
//! read-ahead pool, and the graveyard of replaced HFiles.

use super::compact::Job;
use crate::hfile::HFileReader;
use crate::ids::TableId;
use crate::io::rate::RateLimiter;
use crate::read::prefetch::Prefetcher;
use crate::util::sync::LockExt;
use crossbeam_channel::Sender;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Queues and signals of the flusher, the compactors and read-ahead.
pub(crate) struct Background {
    /// The flusher's queue: `Some(table)` to flush, `None` to stop.
    flush_tx: Sender<Option<TableId>>,
    /// The compaction queue; `None` once closing.
    compact_tx: Mutex<Option<Sender<Job>>>,
    /// Counts finished flushes and compactions; stalled writers wait on it.
    progress: (Mutex<u64>, Condvar),
    /// Set when the store is closing: long work (compaction) stops early.
    pub closing: AtomicBool,
    /// The store's compaction debt (`pacing.rs`), as last refreshed.
    pub compaction_debt: AtomicU64,
    /// The background write rate limiter, when configured.
    pub limiter: Option<Arc<RateLimiter>>,
    pub prefetch: Arc<Prefetcher>,
    /// Replaced HFiles waiting for their last reader before deletion.
    graveyard: Mutex<Vec<Arc<HFileReader>>>,
}

impl Background {
    pub fn new(
        flush_tx: Sender<Option<TableId>>,
        compact_tx: Sender<Job>,
        limiter: Option<Arc<RateLimiter>>,
        prefetch: Prefetcher,
    ) -> Self {
        Background {
            flush_tx,
            compact_tx: Mutex::new(Some(compact_tx)),
            progress: (Mutex::new(0), Condvar::new()),
            closing: AtomicBool::new(false),
            compaction_debt: AtomicU64::new(0),
            limiter,
            prefetch: Arc::new(prefetch),
            graveyard: Mutex::new(Vec::new()),
        }
    }

    pub fn request_flush(&self, table: TableId) {
        let _ = self.flush_tx.send(Some(table));
    }

    /// Queue a compaction job; false when no worker will take it (closing,
    /// or `compaction_threads = 0`).
    pub fn queue_compaction(&self, job: Job) -> bool {
        let tx = self.compact_tx.lock_or_recover();
        tx.as_ref().is_some_and(|tx| tx.send(job).is_ok())
    }

    pub fn notify_flush_progress(&self) {
        let mut g = self.progress.0.lock_or_recover();
        *g += 1;
        self.progress.1.notify_all();
    }

    pub fn wait_flush_progress(&self, timeout: Duration) {
        let g = self.progress.0.lock_or_recover();
        let _ = self.progress.1.wait_timeout(g, timeout);
    }

    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Relaxed)
    }

    /// Start closing: long work stops early and no compaction is queued
    /// any more (the workers end when their queue is empty).
    pub fn close(&self) {
        self.closing.store(true, Ordering::Relaxed);
        self.compact_tx.lock_or_recover().take();
    }

    /// Ask the flusher to end (after what it was asked before).
    pub fn stop_flusher(&self) {
        let _ = self.flush_tx.send(None);
    }

    pub fn graveyard(&self) -> MutexGuard<'_, Vec<Arc<HFileReader>>> {
        self.graveyard.lock_or_recover()
    }
}
