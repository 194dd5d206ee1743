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
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(io::Error::other("the thread runs a tokio runtime"));
        }
        RING.with(|ring| {
            let mut ring = ring.borrow_mut();
            if ring.is_some() {
                return Err(io::Error::other("the thread has a ring already"));
            }
            *ring = Some(tokio_uring::Runtime::new(
                tokio_uring::builder().entries(ENTRIES),
            )?);
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

/// Call `f` with this thread's ring, or with `None` when it has none.
pub(super) fn with<T>(f: impl FnOnce(Option<&tokio_uring::Runtime>) -> T) -> T {
    RING.with(|ring| match ring.try_borrow() {
        Ok(ring) => f(ring.as_ref()),
        // Already in use further up this thread's stack (cannot happen
        // with our ops, which never nest): not available.
        Err(_) => f(None),
    })
}

/// Run one op to completion on `ring`, counting it when it succeeds.
pub(super) fn block_on<T>(
    ring: &tokio_uring::Runtime,
    op: impl Future<Output = (io::Result<()>, T)>,
) -> (io::Result<()>, T) {
    let out = ring.block_on(op);
    if out.0.is_ok() {
        LOCAL_OPS.fetch_add(1, Ordering::Relaxed);
    }
    out
}
