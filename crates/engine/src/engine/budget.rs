//! A byte budget between the sync workers and the apply thread: a worker
//! takes bytes for each group it hands the apply thread (in its turn, so
//! in group order), the apply thread gives them back
//! once the group is in the memstores. It bounds the memory of
//! acknowledged-but-not-yet-applied groups without bounding their count,
//! so a burst of small groups never holds the acknowledgements back while a
//! single slow apply catches up.

use crate::util::sync::LockExt;
use std::sync::{Condvar, Mutex, MutexGuard};

pub struct ByteBudget {
    limit: usize,
    state: Mutex<State>,
    cv: Condvar,
}

#[derive(Default)]
struct State {
    used: usize,
    /// The consumer is gone: nothing will be given back, nobody waits.
    closed: bool,
}

impl ByteBudget {
    pub fn new(limit: usize) -> Self {
        ByteBudget {
            limit,
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock_or_recover()
    }

    /// Take `n` bytes, waiting while that would go over the limit. A
    /// request larger than the whole budget is let through once nothing
    /// else is held (it must not wait forever).
    pub fn acquire(&self, n: usize) {
        let mut st = self.lock();
        while !st.closed && st.used > 0 && st.used + n > self.limit {
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.used += n;
    }

    /// Give back `n` bytes taken by [`ByteBudget::acquire`].
    pub fn release(&self, n: usize) {
        let mut st = self.lock();
        st.used = st.used.saturating_sub(n);
        self.cv.notify_all();
    }

    /// The consumer has stopped: waiters and later callers go through.
    pub fn close(&self) {
        self.lock().closed = true;
        self.cv.notify_all();
    }

    #[cfg(test)]
    pub fn used(&self) -> usize {
        self.lock().used
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_producer_waits_for_room_and_an_oversized_request_still_passes() {
        let b = Arc::new(ByteBudget::new(100));
        b.acquire(60);
        b.acquire(40); // exactly full
        let b2 = b.clone();
        let t = std::thread::spawn(move || b2.acquire(30));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!t.is_finished(), "100 + 30 > 100: must wait");
        b.release(60);
        t.join().unwrap();
        assert_eq!(b.used(), 70);
        b.release(70);
        b.acquire(500); // larger than the budget, nothing else held
        assert_eq!(b.used(), 500);
    }

    #[test]
    fn closing_lets_waiters_through() {
        let b = Arc::new(ByteBudget::new(10));
        b.acquire(10);
        let b2 = b.clone();
        let t = std::thread::spawn(move || b2.acquire(5));
        std::thread::sleep(Duration::from_millis(10));
        b.close();
        t.join().unwrap();
    }
}
