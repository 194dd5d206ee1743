//! A thread's own io_uring.
//!
//! The io_uring backend's shared ring thread lets many ops be in flight at
//! once, but every op it serves costs two thread hand-offs: a wake-up of
//! the ring thread, and one of the caller when the completion comes back.
//! A thread that waits for each of its ops anyway gains nothing from
//! that, and on a busy machine each wake-up can wait for a free core. The
//! group commit's threads are such threads: the commit thread writes a
//! group's frames, a sync worker fdatasyncs them, and writers are
//! acknowledged only after both.
//!
//! Such a thread holds a [`LocalRing`] for its life. While it does, the
//! io_uring backend's file ops issued on that thread (writes, reads,
//! syncs) are submitted to a small tokio-uring runtime of the thread's own
//! and reaped by the thread itself. Renames and removals, and every op of
//! threads without one, still go through the ring thread (opens are plain
//! `openat` calls on the caller's thread for everyone).

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

/// Submission queue entries of a thread's ring: its thread waits for
/// each op, so one or two are in flight at a time.
const ENTRIES: u32 = 8;

/// How often a thread waiting for an op on a ring wakes up while the op
/// is in flight. tokio-uring hands queued ops to the kernel only when its
/// thread is about to sleep, and ignores a failed `io_uring_enter` there
/// (`EAGAIN` when the kernel is short of memory); the op then stays queued
/// until the thread sleeps again, which for a thread with its own ring
/// (or an idle ring thread) may be never: this wake-up makes it retry.
pub(super) const RESUBMIT_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

thread_local! {
    static RING: RefCell<Option<tokio_uring::Runtime>> = const { RefCell::new(None) };
}

static LOCAL_OPS: AtomicU64 = AtomicU64::new(0);

/// Number of ops completed on threads' own rings in this process (tests
/// use it to show that the group commit's I/O took no hop).
pub fn local_ring_ops_completed() -> u64 {
    LOCAL_OPS.load(Ordering::Relaxed)
}

/// This thread's own ring, for as long as the guard lives. The ring is
/// closed when the guard drops (in the thread's own code, not in a
/// thread-local destructor). Not `Send`: it belongs to its thread.
pub struct LocalRing {
    _thread_bound: PhantomData<*const ()>,
}

impl LocalRing {
    /// Give the calling thread a ring. Fails on a thread inside a tokio
    /// runtime (tokio-uring cannot block on one there), on one that has a
    /// ring already, or when the kernel refuses a new ring.
    ///
    /// Call only once the backend's probe found io_uring working: where
    /// `io_uring_enter` is blocked, building a ring succeeds and the
    /// first op hangs.
    pub(super) fn enter() -> io::Result<LocalRing> {
        if in_tokio_runtime() {
            return Err(io::Error::other("the thread runs a tokio runtime"));
        }
        RING.with(|ring| {
            let mut ring = ring.borrow_mut();
            if ring.is_some() {
                return Err(io::Error::other("the thread has a ring already"));
            }
            *ring = Some(new_runtime()?);
            Ok(())
        })?;
        Ok(LocalRing {
            _thread_bound: PhantomData,
        })
    }
}

impl Drop for LocalRing {
    fn drop(&mut self) {
        let ring = RING.with(|ring| ring.borrow_mut().take());
        drop(ring);
    }
}

fn in_tokio_runtime() -> bool {
    tokio::runtime::Handle::try_current().is_ok()
}

/// A runtime of `ENTRIES` entries. tokio-uring panics instead of
/// returning an error in a few places (registering the ring with epoll):
/// those become errors too, so that the thread falls back to the ring
/// thread.
fn new_runtime() -> io::Result<tokio_uring::Runtime> {
    let build = || tokio_uring::Runtime::new(tokio_uring::builder().entries(ENTRIES));
    std::panic::catch_unwind(build)
        .unwrap_or_else(|_| Err(io::Error::other("tokio-uring panicked building a ring")))
}

/// Call `f` with this thread's ring, or with `None` when it has none or
/// cannot block on it now: inside a tokio runtime (one entered after the
/// ring was made, or this ring's own while an op runs).
pub(super) fn with<T>(f: impl FnOnce(Option<&tokio_uring::Runtime>) -> T) -> T {
    if in_tokio_runtime() {
        return f(None);
    }
    RING.with(|ring| match ring.try_borrow() {
        Ok(ring) => f(ring.as_ref()),
        // Being made or closed (`enter`, `drop`): not available.
        Err(_) => f(None),
    })
}

/// Run one op to completion on `ring`, counting it when it succeeds.
pub(super) fn block_on<T>(
    ring: &tokio_uring::Runtime,
    op: impl Future<Output = (io::Result<()>, T)>,
) -> (io::Result<()>, T) {
    let out = ring.block_on(resubmitting(op));
    if out.0.is_ok() {
        LOCAL_OPS.fetch_add(1, Ordering::Relaxed);
    }
    out
}

/// `op`, with its thread woken every [`RESUBMIT_EVERY`] while it waits
/// (must run inside a tokio-uring runtime).
pub(super) async fn resubmitting<F: Future>(op: F) -> F::Output {
    let mut op = std::pin::pin!(op);
    loop {
        if let Ok(out) = tokio::time::timeout(RESUBMIT_EVERY, op.as_mut()).await {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use std::time::Duration;

    /// Ready on its third poll, and never asks to be woken: to the runtime
    /// it looks like an op whose submission failed and stayed queued.
    struct ReadyOnThirdPoll(u32);

    impl Future for ReadyOnThirdPoll {
        type Output = (io::Result<()>, ());
        fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
            self.0 += 1;
            if self.0 >= 3 {
                Poll::Ready((Ok(()), ()))
            } else {
                Poll::Pending
            }
        }
    }

    #[test]
    fn an_op_that_nothing_wakes_is_polled_again() {
        if super::super::probe_uring().is_err() {
            return;
        }
        let (tx, rx) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || {
            let _ring = LocalRing::enter().expect("a ring");
            let out = with(|ring| block_on(ring.expect("this thread's ring"), ReadyOnThirdPoll(0)));
            let _ = tx.send(out.0.is_ok());
        });
        // Without the periodic wake-ups it never finishes; the bound only
        // keeps such a failure from hanging the suite.
        assert_eq!(rx.recv_timeout(Duration::from_secs(60)), Ok(true));
    }

    #[test]
    fn no_ring_is_lent_inside_a_tokio_runtime() {
        if super::super::probe_uring().is_err() {
            return;
        }
        let _ring = LocalRing::enter().expect("a ring");
        assert!(with(|ring| ring.is_some()));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a tokio runtime");
        rt.block_on(async { assert!(with(|ring| ring.is_none())) });
    }
}
