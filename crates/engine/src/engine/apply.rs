//! The apply thread: takes logged groups from the sync workers
//! (`syncer.rs`; queued just before their writers are acknowledged), in
//! sequence order, inserts them into the memstores,
//! publishes the applied sequence number to readers and freezes full
//! memstores (between groups, so a frozen memstore holds every edit up to
//! its highest sequence number).
//!
//! It never waits for flushes: what it applies was acknowledged already,
//! and reads wait for it (read-your-writes), so a wait here for memory
//! would hold every read behind the flusher. Memory is bounded where
//! writes come in instead (`Store::admit`: the global memstore limit and
//! `frozen_memstores_max` stall writers), plus what was admitted before
//! the limit was reached, which the apply queue's byte budget bounds.

use super::budget::ByteBudget;
use super::commit::{apply, Logged};
use super::region::Region;
use super::table::Table;
use super::Shared;
use crate::ids::{SeqNo, TableId};
use crossbeam_channel::{Receiver, Sender};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Payload bytes of logged groups queued for the apply thread; when it
/// falls behind (CPU) the sync workers, then the commit thread and
/// writers, wait.
pub const APPLY_QUEUE_BYTES: usize = 64 << 20;

/// Messages to the apply thread.
pub enum ApplyMsg {
    /// Logged writes, in sequence order, and the bytes they hold against
    /// the budget ([`group_bytes`], counted once by the sender).
    Writes(Vec<Logged>, usize),
    /// Freeze the table's (all tables' when `None`) active memstore.
    Freeze(Option<TableId>, Sender<()>),
    /// Freeze the table's active memstores holding an edit numbered `seq`
    /// or lower (they pin the oldest WAL segment). Memstores already
    /// frozen are on their way to the flusher and are left alone.
    Unpin {
        table: TableId,
        seq: SeqNo,
    },
    /// Freeze memstores until they are back under the global limit.
    Relieve,
    Shutdown,
}

pub struct Applier {
    pub shared: Arc<Shared>,
    pub rx: Receiver<ApplyMsg>,
    /// Given back as each group is applied (see [`group_bytes`]).
    pub budget: Arc<ByteBudget>,
}

/// The bytes a group holds against [`APPLY_QUEUE_BYTES`].
pub fn group_bytes(group: &[Logged]) -> usize {
    group.iter().map(|w| w.op.payload_bytes()).sum()
}

impl Applier {
    pub fn run(self) {
        // However this thread ends, readers and the commit thread must
        // not wait for it.
        let _close = CloseGate(&self.shared, &self.budget);
        while let Ok(m) = self.rx.recv() {
            match m {
                ApplyMsg::Writes(group, bytes) => {
                    for w in group {
                        let now = self.shared.opts.clock.now_ms();
                        let touched = apply(&w.table, w.first_seq, &w.op, now);
                        let n = w.op.count(w.table.schema.row_width());
                        if matches!(w.op, super::commit::Op::Put(_)) {
                            self.shared.counters.rows_applied.fetch_add(n, Relaxed);
                        }
                        let last = w.first_seq + n - 1;
                        self.shared.write.gate.set_applied(last);
                        self.maybe_freeze(&w.table, &touched);
                    }
                    self.budget.release(bytes);
                }
                ApplyMsg::Freeze(t, reply) => {
                    self.freeze(t);
                    let _ = reply.send(());
                }
                ApplyMsg::Unpin { table, seq } => self.unpin(table, seq),
                ApplyMsg::Relieve => self.relieve_global_pressure(),
                ApplyMsg::Shutdown => break,
            }
        }
    }

    /// Freeze a region's memstore at the flush threshold; under global
    /// memory pressure hand the flusher the largest one anywhere.
    fn maybe_freeze(&self, t: &Arc<Table>, touched: &[Arc<Region>]) {
        for r in touched {
            if r.active().bytes() >= self.shared.opts.flush_threshold_bytes && r.freeze() {
                self.shared.background.request_flush(t.id);
            }
        }
        self.relieve_global_pressure();
    }

    /// Under global pressure freeze the largest memstore (see
    /// [`super::MemUsage::wants_flush`]). Writers wait for the flush it
    /// starts in `Store::admit`, never this thread.
    fn relieve_global_pressure(&self) {
        let usage = self.shared.memstore_usage();
        if usage.wants_flush(&self.shared.opts) {
            if let Some((table, r)) = &usage.largest {
                if r.freeze() {
                    self.shared.background.request_flush(*table);
                }
            }
        }
    }

    fn unpin(&self, table: TableId, seq: SeqNo) {
        let tables = self.shared.catalog.tables();
        let Some(t) = tables.iter().find(|t| t.id == table) else {
            return;
        };
        let mut any = false;
        for r in t.regions().iter() {
            if r.active().min_seq() <= seq.0 {
                any |= r.freeze();
            }
        }
        if any {
            self.shared.background.request_flush(table);
        }
    }

    fn freeze(&self, table: Option<TableId>) {
        let tables = self.shared.catalog.tables();
        for t in tables.iter().filter(|t| table.is_none_or(|id| id == t.id)) {
            if t.freeze() {
                self.shared.background.request_flush(t.id);
            }
        }
    }
}

struct CloseGate<'a>(&'a Shared, &'a ByteBudget);

impl Drop for CloseGate<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Writes acknowledged from now on would never become readable.
            self.0.poison.stop(&crate::error::Error::Closed);
        }
        self.0.write.gate.close();
        self.1.close();
    }
}
