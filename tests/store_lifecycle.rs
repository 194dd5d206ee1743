//! `Store::close` leaves nothing behind: the directory lock is released
//! when it returns, even while a child process forked by another thread
//! still holds a copy of the lock file (the window between a fork and its
//! exec, which made an open right after a close fail with `Locked` under
//! load), and a store can be opened again at once.

use telestore::{Options, Store};

#[test]
fn the_lock_is_free_when_close_returns_even_with_a_forked_child_alive() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    // A child that holds every descriptor of this process (the lock file's
    // too) for a while, as a child between fork and exec does.
    // SAFETY: the child only calls async-signal-safe functions (usleep,
    // _exit) before it exits; it never returns into the test harness.
    #[allow(unsafe_code)]
    let child = unsafe {
        let pid = libc::fork();
        if pid == 0 {
            libc::usleep(3_000_000);
            libc::_exit(0);
        }
        pid
    };
    assert!(child > 0, "fork failed");
    store.close().unwrap();
    let again = Store::open(dir.path(), Options::default());
    // SAFETY: reaping our own child; kill first so the test does not wait.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(child, libc::SIGKILL);
        libc::waitpid(child, std::ptr::null_mut(), 0);
    }
    again.expect("open right after close").close().unwrap();
}

#[test]
fn reopening_in_a_loop_never_finds_the_lock_taken() {
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..20 {
        let s = Store::open(dir.path(), Options::default()).unwrap();
        s.close().unwrap();
    }
}
