//! The second half of group commit: sync workers. The commit thread
//! writes a group's frames and hands the group to a free worker; the
//! worker fdatasyncs the WAL, then — in group order — queues the group
//! for the apply thread and acknowledges its writers (in that order, so
//! whatever a writer asks next, a flush say, reaches the apply thread
//! after its write). With several
//! workers, the fdatasync of group N+1 is under way while N's is still in
//! flight, so a write arriving during a slow fsync waits for its own sync
//! only, not for the one before it too.
//!
//! Each worker syncs through its own handle on the segment
//! (`WalWriter::syncer`): concurrent fdatasyncs on one file description
//! could each report a writeback error to only one of them, and the other
//! group would be acknowledged though its frames never reached the disk.
//! Groups are finished strictly in order, and a failed sync poisons the
//! store at once (so the commit thread stops writing) and before any
//! later group is finished, so no group is acknowledged after one before
//! it failed. Such a later group is answered `Poisoned` even if its own
//! fdatasync succeeded: its frames may come back on reopen.

use super::apply::{group_bytes, ApplyMsg};
use super::budget::ByteBudget;
use super::commit::{reply_all, Logged, WriteReq};
use super::Shared;
use crate::error::{Error, Result};
use crate::io::IoFile;
use crate::util::sync::LockExt;
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// A written group on its way to its writers.
pub(super) struct SyncJob {
    pub writes: Vec<WriteReq>,
    pub first_seqs: Vec<u64>,
    /// Highest sequence number of the group.
    pub last_seq: u64,
    /// fdatasync through this handle first (`None`: nobody asked for sync).
    pub sync: Option<Arc<dyn IoFile>>,
}

/// What the workers share.
struct Finisher {
    shared: Arc<Shared>,
    apply_tx: Sender<ApplyMsg>,
    apply_budget: Arc<ByteBudget>,
    turn: Turnstile,
}

/// The pool of sync workers. Owned by the commit thread.
pub(super) struct SyncPool {
    jobs: Vec<Sender<(u64, SyncJob)>>,
    free: Receiver<usize>,
    /// A slot taken but not used (the group failed before its write).
    spare: Option<usize>,
    next_ticket: u64,
    threads: Vec<JoinHandle<()>>,
}

impl SyncPool {
    /// Start `n` workers (`Options::wal_syncs_in_flight`).
    pub fn start(
        n: usize,
        shared: Arc<Shared>,
        apply_tx: Sender<ApplyMsg>,
        apply_budget: Arc<ByteBudget>,
    ) -> Result<Self> {
        let fin = Arc::new(Finisher {
            shared,
            apply_tx,
            apply_budget,
            turn: Turnstile::default(),
        });
        let (free_tx, free) = bounded(n);
        let mut jobs = Vec::with_capacity(n);
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let (tx, rx) = unbounded();
            let (fin, free_tx) = (fin.clone(), free_tx.clone());
            let _ = free_tx.send(i);
            let h = std::thread::Builder::new()
                .name(format!("telestore-sync-{i}"))
                .spawn(move || worker(i, &fin, rx, free_tx))
                .map_err(|e| Error::io("<sync worker>", e))?;
            jobs.push(tx);
            threads.push(h);
        }
        Ok(SyncPool {
            jobs,
            free,
            spare: None,
            next_ticket: 0,
            threads,
        })
    }

    /// Wait for a free worker. `None` once every worker is gone (they
    /// only stop early by panicking, which poisons the store).
    pub fn take_slot(&mut self) -> Option<usize> {
        self.spare.take().or_else(|| self.free.recv().ok())
    }

    /// Hand back a slot that got no job.
    pub fn give_back(&mut self, slot: usize) {
        self.spare = Some(slot);
    }

    /// Give `job` to the worker owning `slot`. Jobs are finished in the
    /// order they are submitted.
    pub fn submit(&mut self, slot: usize, job: SyncJob) {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        if let Err(e) = self.jobs[slot].send((ticket, job)) {
            // The worker died (and poisoned the store): answer here.
            let (_, job) = e.into_inner();
            reply_all(job.writes, &Error::Closed);
        }
    }

    /// Finish every submitted job and stop the workers.
    pub fn shutdown(&mut self) {
        self.jobs.clear();
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

fn worker(slot: usize, fin: &Finisher, rx: Receiver<(u64, SyncJob)>, free: Sender<usize>) {
    let _guard = PanicGuard(fin);
    // The worker waits for each fdatasync: no hop to a ring thread.
    let _ring = fin.shared.backend.thread_ring();
    for (ticket, job) in rx {
        let synced = job.sync.as_ref().map_or(Ok(()), |f| {
            let t0 = Instant::now();
            let r = f.sync_data();
            let m = &fin.shared.counters.metrics.wal_sync_seconds;
            m.observe(t0.elapsed().as_secs_f64());
            r.map_err(|e| fin.shared.poison.stop(&e))
        });
        fin.turn.wait_for(ticket);
        fin.finish(job, synced);
        fin.turn.advance();
        let _ = free.send(slot);
    }
}

impl Finisher {
    /// Acknowledge the group (or fail it) and pass it to the apply thread.
    /// Runs in group order.
    fn finish(&self, job: SyncJob, synced: Result<()>) {
        if let Err(e) = synced {
            return reply_all(job.writes, &e);
        }
        // An earlier group's sync failed: this one's frames may sit on
        // the disk, but nothing after a failure is acknowledged.
        if let Err(e) = self.shared.poison.check() {
            return reply_all(job.writes, &e);
        }
        // Logged: the writers may be told, and reads begun after that
        // must wait for the memstores to catch up to this point.
        self.shared.write.gate.set_logged(job.last_seq);
        let mut replies = Vec::with_capacity(job.writes.len());
        let group: Vec<Logged> = job
            .writes
            .into_iter()
            .zip(job.first_seqs)
            .map(|(w, seq)| {
                replies.push((w.reply, seq));
                Logged {
                    table: w.table,
                    op: w.op,
                    first_seq: seq,
                }
            })
            .collect();
        // The group is queued for the apply thread before its writers are
        // told: whatever a writer asks next (a flush, a freeze) reaches
        // the apply thread after its write.
        //
        // The apply thread is gone before the shutdown message (which the
        // commit thread sends after stopping the workers) only if it
        // panicked: the WAL holds the group, but no read will see it
        // before a reopen, so stop the write path.
        let bytes = group_bytes(&group);
        self.apply_budget.acquire(bytes);
        if self.apply_tx.send(ApplyMsg::Writes(group, bytes)).is_err() {
            self.shared.poison.stop(&Error::Closed);
        }
        for (reply, seq) in replies {
            let _ = reply.send(Ok(seq));
        }
    }
}

/// A worker that panics poisons the store and opens the turnstile for
/// good, so the other workers do not wait forever for its turn (they
/// find the store poisoned and fail their groups).
struct PanicGuard<'a>(&'a Finisher);

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.shared.poison.stop(&Error::Closed);
            self.0.turn.break_open();
        }
    }
}

/// Tickets served in order.
#[derive(Default)]
struct Turnstile {
    state: Mutex<(u64, bool)>,
    cv: Condvar,
}

impl Turnstile {
    fn wait_for(&self, ticket: u64) {
        let mut st = self.state.lock_or_recover();
        while st.0 != ticket && !st.1 {
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn advance(&self) {
        self.state.lock_or_recover().0 += 1;
        self.cv.notify_all();
    }

    fn break_open(&self) {
        self.state.lock_or_recover().1 = true;
        self.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turnstile_serves_tickets_in_order() {
        let t = Arc::new(Turnstile::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        let hs: Vec<_> = (0..4u64)
            .rev()
            .map(|i| {
                let (t, order) = (t.clone(), order.clone());
                std::thread::spawn(move || {
                    t.wait_for(i);
                    order.lock().unwrap().push(i);
                    t.advance();
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn a_broken_turnstile_lets_everyone_through() {
        let t = Turnstile::default();
        t.break_open();
        t.wait_for(7);
    }
}
