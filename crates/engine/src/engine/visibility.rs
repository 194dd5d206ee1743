//! Read-your-writes once writes are acknowledged before the memstores
//! hold them.
//!
//! A sync worker (`syncer.rs`) acknowledges a group as soon as its WAL
//! frames have reached the durability asked for (and every earlier group
//! is acknowledged); the apply thread inserts the group into the
//! memstores afterwards (so ack latency does not include memstore
//! work). Sequence numbers give the order: `logged` is the highest one
//! acknowledged, `applied` the highest one in the memstores. A read first
//! waits until `applied` has reached the `logged` it saw when it began, so
//! every write acknowledged before a read starts is visible to it. The
//! wait is nothing when the apply thread keeps up, which it must anyway
//! (its queue is bounded, and a full queue holds back the acknowledgements).

use crate::util::sync::LockExt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// How long a waiting reader sleeps before it looks again (it is woken
/// sooner by the apply thread; this only bounds a missed wake-up).
const RECHECK: Duration = Duration::from_millis(5);

pub struct SeqGate {
    logged: AtomicU64,
    applied: AtomicU64,
    waiters: AtomicUsize,
    /// Cleared when the apply thread stops: readers no longer wait.
    applying: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl SeqGate {
    /// Everything up to `last_seq` is already applied (after replay).
    pub fn new(last_seq: u64) -> Self {
        SeqGate {
            logged: AtomicU64::new(last_seq),
            applied: AtomicU64::new(last_seq),
            waiters: AtomicUsize::new(0),
            applying: AtomicBool::new(true),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    /// Highest sequence number in the memstores.
    pub fn applied(&self) -> u64 {
        self.applied.load(Ordering::SeqCst)
    }

    /// The sync worker whose turn it is: every sequence number up to `seq`
    /// is logged and about to be acknowledged. Call before sending the
    /// acknowledgements.
    pub fn set_logged(&self, seq: u64) {
        self.logged.fetch_max(seq, Ordering::Release);
    }

    /// The apply thread: every sequence number up to `seq` is in the
    /// memstores.
    pub fn set_applied(&self, seq: u64) {
        // SeqCst here and on `waiters`: a store followed by a load on each
        // side (Dekker), so either the reader sees the new value or this
        // thread sees the waiter.
        self.applied.fetch_max(seq, Ordering::SeqCst);
        self.wake();
    }

    /// The apply thread has stopped; nothing more will be applied.
    pub fn close(&self) {
        self.applying.store(false, Ordering::SeqCst);
        self.wake();
    }

    fn wake(&self) {
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock_or_recover();
            self.cv.notify_all();
        }
    }

    /// Wait until every write acknowledged before this call is in the
    /// memstores (or the apply thread has stopped).
    pub fn wait_caught_up(&self) {
        let target = self.logged.load(Ordering::Acquire);
        if self.applied() >= target {
            return;
        }
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let mut g = self.lock.lock_or_recover();
        while self.applied() < target && self.applying.load(Ordering::SeqCst) {
            g = match self.cv.wait_timeout(g, RECHECK) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        drop(g);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_reader_waits_for_what_was_acknowledged_before_it() {
        let gate = Arc::new(SeqGate::new(10));
        gate.wait_caught_up(); // nothing pending: returns at once
        gate.set_logged(20);
        let g2 = gate.clone();
        let reader = std::thread::spawn(move || {
            g2.wait_caught_up();
            g2.applied()
        });
        std::thread::sleep(Duration::from_millis(20));
        gate.set_applied(15);
        std::thread::sleep(Duration::from_millis(20));
        assert!(!reader.is_finished(), "15 < 20: the reader must still wait");
        gate.set_applied(20);
        assert!(reader.join().unwrap() >= 20);
    }

    #[test]
    fn readers_stop_waiting_when_the_apply_thread_stops() {
        let gate = Arc::new(SeqGate::new(0));
        gate.set_logged(5);
        let g2 = gate.clone();
        let reader = std::thread::spawn(move || g2.wait_caught_up());
        std::thread::sleep(Duration::from_millis(10));
        gate.close();
        reader.join().unwrap();
        assert_eq!(gate.applied(), 0);
    }
}
