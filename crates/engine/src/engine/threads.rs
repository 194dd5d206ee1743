//! The store's background threads, by name, and the order they stop in.
//!
//! [`Threads::stop`] joins them in dependency order:
//! - the monitor: it returns once its channel closes (the caller dropped
//!   it);
//! - the commit thread: on `Msg::Shutdown` it syncs the WAL, then stops the
//!   apply thread after the groups already queued;
//! - the apply thread;
//! - the compaction workers: their queue was closed by the caller, so each
//!   finishes the compaction it runs and returns;
//! - the flusher, last: the apply thread may have waited for a flush, so it
//!   is told to stop only once nothing can ask it for one.

use std::thread::JoinHandle;

/// The background threads of one open store.
pub(super) struct Threads {
    pub monitor: JoinHandle<()>,
    pub commit: JoinHandle<()>,
    pub apply: JoinHandle<()>,
    pub compactors: Vec<JoinHandle<()>>,
    pub flusher: JoinHandle<()>,
}

impl Threads {
    /// Join every thread in the order above; `stop_flusher` tells the
    /// flusher to return, once the threads that could need it are gone.
    pub fn stop(self, stop_flusher: impl FnOnce()) {
        let Threads {
            monitor,
            commit,
            apply,
            compactors,
            flusher,
        } = self;
        for t in [monitor, commit, apply].into_iter().chain(compactors) {
            let _ = t.join();
        }
        stop_flusher();
        let _ = flusher.join();
    }
}
