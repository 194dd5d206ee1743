//! The apply thread: takes logged groups from the commit thread, in
//! sequence order, inserts them into the memstores, freezes full
//! memstores (between groups, so a frozen memstore holds every edit up to
//! its highest sequence number) and acknowledges the writers.

use super::commit::{apply, WriteReq};
use super::table::{Region, Table};
use super::Shared;
use crossbeam_channel::{Receiver, Sender};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Groups queued between the commit and apply threads; when the apply
/// thread stalls (flush backlog) the commit thread, then writers, wait.
pub const APPLY_QUEUE_GROUPS: usize = 4;

/// Messages to the apply thread.
pub enum ApplyMsg {
    /// Logged writes with their first sequence numbers.
    Writes(Vec<(WriteReq, u64)>),
    /// Freeze the table's (all tables' when `None`) active memstore.
    Freeze(Option<u32>, Sender<()>),
    Shutdown,
}

pub struct Applier {
    pub shared: Arc<Shared>,
    pub rx: Receiver<ApplyMsg>,
}

impl Applier {
    pub fn run(self) {
        while let Ok(m) = self.rx.recv() {
            match m {
                ApplyMsg::Writes(group) => {
                    for (w, seq) in group {
                        let now = self.shared.opts.clock.now_ms();
                        let touched = apply(&w.table, seq, &w.op, now);
                        let last = seq + w.op.count(w.table.schema.row_width()) - 1;
                        self.shared.applied_seq.fetch_max(last, Ordering::Release);
                        self.maybe_freeze(&w.table, &touched);
                        let _ = w.reply.send(Ok(seq));
                    }
                }
                ApplyMsg::Freeze(t, reply) => {
                    self.freeze(t);
                    let _ = reply.send(());
                }
                ApplyMsg::Shutdown => break,
            }
        }
    }

    /// Freeze a region's memstore at the flush threshold; under global
    /// memory pressure freeze the largest one anywhere; then wait while
    /// flushes are behind.
    fn maybe_freeze(&self, t: &Arc<Table>, touched: &[Arc<Region>]) {
        for r in touched {
            if r.active().bytes() >= self.shared.opts.flush_threshold_bytes && r.freeze() {
                self.shared.request_flush(t.id);
            }
        }
        let usage = self.shared.memstore_usage();
        if usage.active + usage.frozen >= self.shared.opts.memstore_global_bytes {
            if let Some((table, r)) = usage.largest {
                if r.freeze() {
                    self.shared.request_flush(table);
                }
            }
        }
        self.wait_for_flush_room(touched);
    }

    /// Backpressure: while a region has too many frozen memstores, or
    /// frozen memstores together exceed half the global limit, wait for
    /// the flusher rather than growing memory without bound.
    fn wait_for_flush_room(&self, touched: &[Arc<Region>]) {
        let max = self.shared.opts.frozen_memstores_max.max(1);
        let global = self.shared.opts.memstore_global_bytes / 2;
        loop {
            let behind = touched
                .iter()
                .any(|r| !r.is_retired() && r.frozen_count() > max)
                || self.shared.memstore_usage().frozen > global;
            if !behind || self.shared.check_poisoned().is_err() {
                break;
            }
            self.shared.wait_flush_progress(Duration::from_millis(50));
        }
    }

    fn freeze(&self, table: Option<u32>) {
        let tables = self.shared.tables_snapshot();
        for t in tables.iter().filter(|t| table.is_none_or(|id| id == t.id)) {
            if t.freeze() {
                self.shared.request_flush(t.id);
            }
        }
    }
}
