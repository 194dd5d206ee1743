//! `Store::close` leaves nothing behind: the directory lock is released
//! when it returns, even while a child process forked by another thread
//! still holds a copy of the lock file (the window between a fork and its
//! exec, which made an open right after a close fail with `Locked` under
//! load), and a store can be opened again at once.

use crate::common;

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

fn unflushed_store(dir: &std::path::Path) {
    let s = Store::open(dir, Options::default()).unwrap();
    s.create_table(common::small_schema("t", Default::default()))
        .unwrap();
    for b in 0..20u64 {
        let rows: Vec<(u64, i64, u64)> = (0..50)
            .map(|i| (b, 1_700_000_000_000 + i, i as u64))
            .collect();
        s.write("t", &common::small_rows(&rows), telestore::Durability::Sync)
            .unwrap();
    }
    s.close().unwrap();
}

fn telestore(args: &[&str], dir: &std::path::Path) -> String {
    let out = common::telestore_cli(dir, args);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// `telestore flush` moves what the WAL holds into HFiles: the next open
/// replays nothing.
#[test]
fn flush_command_empties_the_memstores_for_good() {
    let dir = tempfile::tempdir().unwrap();
    unflushed_store(dir.path());
    let out = telestore(&["flush", "--table", "t"], dir.path());
    assert!(out.contains("memstores now hold 0 bytes"), "{out}");
    let s = Store::open(dir.path(), Options::default()).unwrap();
    let st = s.stats();
    assert!(st.hfiles > 0 && st.memstore_bytes == 0, "{st:?}");
    assert_eq!(common::row_count(&s, "t"), 1000);
}

/// A major compaction of a store whose rows are all in the WAL flushes
/// first, instead of reporting "0 compactions".
#[test]
fn major_compaction_flushes_first() {
    let dir = tempfile::tempdir().unwrap();
    unflushed_store(dir.path());
    let out = telestore(&["compact", "--table", "t", "--major"], dir.path());
    assert!(!out.starts_with("0 compactions"), "{out}");
    let s = Store::open(dir.path(), Options::default()).unwrap();
    assert_eq!(s.stats().memstore_bytes, 0);
    assert_eq!(common::row_count(&s, "t"), 1000);
}
