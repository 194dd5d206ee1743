//! Guards the I/O layer: the backend named by TELESTORE_IO is the one
//! really used (io_uring ops are counted), forcing `uring` never silently
//! falls back, and a failed fsync poisons the write path until reopen.

use crate::common;

use common::*;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use telestore_engine::io::fault::Faults;
use telestore_engine::io::{self, IoChoice, IoKind};
use telestore_engine::schema::TableOptions;
use telestore_engine::{Durability, Error, Options};

#[test]
fn requested_backend_is_the_one_used() {
    let choice = IoChoice::from_env().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let before = io::uring_ops_completed();
    let store = open(dir.path(), Options::default());
    store
        .create_table(small_schema("t", TableOptions::default()))
        .unwrap();
    store
        .write("t", &small_rows(&[(1, 1, 1)]), Durability::Sync)
        .unwrap();
    store.flush().unwrap();
    let used = io::uring_ops_completed() - before;
    eprintln!(
        "TELESTORE_IO={choice:?}: backend {:?}, {used} io_uring ops",
        store.io_kind()
    );
    match choice {
        IoChoice::Uring => {
            assert_eq!(
                store.io_kind(),
                IoKind::Uring,
                "io_uring requested but not used"
            );
            assert!(
                used >= 4,
                "io_uring requested but only {used} ops went through it"
            );
        }
        IoChoice::Std => assert_eq!(store.io_kind(), IoKind::Std),
        IoChoice::Auto => {
            let expect = if io::probe_uring().is_ok() {
                IoKind::Uring
            } else {
                IoKind::Std
            };
            assert_eq!(store.io_kind(), expect);
        }
    }
}

#[test]
fn forcing_uring_is_an_error_or_uring_never_a_silent_fallback() {
    match io::select(IoChoice::Uring) {
        Ok(b) => assert_eq!(b.kind(), IoKind::Uring),
        Err(Error::BackendUnavailable { backend, .. }) => assert_eq!(backend, "uring"),
        Err(e) => panic!("unexpected error {e}"),
    }
    assert!(IoChoice::parse("fast").is_err());
}

/// A store on the TELESTORE_IO backend wrapped in fault injection, with
/// table `t` created.
fn faulty_store(dir: &std::path::Path, opts: Options) -> (telestore_engine::Store, Arc<Faults>) {
    let (opts, faults) = with_faults(opts);
    let store = open(dir, opts);
    store
        .create_table(small_schema("t", TableOptions::default()))
        .unwrap();
    (store, faults)
}

#[test]
fn failed_fsync_poisons_the_write_path_until_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (store, faults) = faulty_store(dir.path(), Options::default());
    store
        .write("t", &small_rows(&[(1, 1, 1)]), Durability::Sync)
        .unwrap();
    faults
        .fail_sync_from
        .store(faults.syncs.load(Ordering::SeqCst), Ordering::SeqCst);
    let e = store
        .write("t", &small_rows(&[(1, 2, 2)]), Durability::Sync)
        .unwrap_err();
    assert!(matches!(e, Error::Poisoned { .. }), "{e}");
    // Even after the disk "recovers", the store refuses writes: the page
    // cache state after a failed fsync is unknown.
    faults.fail_sync_from.store(u64::MAX, Ordering::SeqCst);
    let e = store
        .write("t", &small_rows(&[(1, 3, 3)]), Durability::Sync)
        .unwrap_err();
    assert!(matches!(e, Error::Poisoned { .. }), "{e}");
    assert!(
        store.get("t", 1, 1).unwrap().is_some(),
        "reads keep working"
    );
    drop(store);
    let store = open(dir.path(), Options::default());
    assert!(
        store.get("t", 1, 1).unwrap().is_some(),
        "acknowledged row survives"
    );
    assert!(
        store.get("t", 1, 3).unwrap().is_none(),
        "refused row never appears"
    );
    store
        .write("t", &small_rows(&[(1, 4, 4)]), Durability::Sync)
        .unwrap();
}

/// What a writer got, and whether the slow sync was over when it did.
type Outcome = (telestore_engine::Result<u64>, bool);

/// Two sync groups in flight: the first one's fdatasync is slow (and
/// fails when `fails`), the second one's is quick. Returns both writes'
/// outcomes.
fn overtaking_syncs(fails: bool) -> [Outcome; 2] {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        wal_syncs_in_flight: 2,
        ..Options::default()
    };
    let (store, faults) = faulty_store(dir.path(), opts);
    let store = Arc::new(store);
    let slow = faults.syncs.load(Ordering::SeqCst);
    faults.slow_sync_fails.store(fails, Ordering::SeqCst);
    faults.slow_sync_ms.store(300, Ordering::SeqCst);
    faults.slow_sync_at.store(slow, Ordering::SeqCst);
    let writer = |ts: i64| {
        let (store, faults) = (store.clone(), faults.clone());
        std::thread::spawn(move || {
            let r = store.write("t", &small_rows(&[(1, ts, ts as u64)]), Durability::Sync);
            let slow_done = faults.slow_sync_done.load(Ordering::SeqCst);
            (r.map(|a| a.first_seq), slow_done)
        })
    };
    let first = writer(1);
    // The second write is sent once the first one's sync has begun, so
    // it makes a group of its own, synced by the other worker.
    while faults.syncs.load(Ordering::SeqCst) <= slow {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let second = writer(2);
    [first.join().unwrap(), second.join().unwrap()]
}

#[test]
fn a_group_synced_first_is_still_acknowledged_after_the_group_before_it() {
    let [(r1, _), (r2, slow_done)] = overtaking_syncs(false);
    assert!(
        slow_done,
        "the second write was acknowledged before the first"
    );
    let (s1, s2) = (r1.unwrap(), r2.unwrap());
    assert!(s1 < s2, "sequence numbers {s1} then {s2}");
}

#[test]
fn a_failed_sync_fails_the_later_group_whose_own_sync_succeeded() {
    for (i, (r, _)) in overtaking_syncs(true).into_iter().enumerate() {
        match r {
            Err(Error::Poisoned { .. }) => {}
            other => panic!("write {}: expected Poisoned, got {other:?}", i + 1),
        }
    }
}

#[test]
fn failed_flush_write_poisons_instead_of_dropping_data() {
    let dir = tempfile::tempdir().unwrap();
    let (store, faults) = faulty_store(dir.path(), Options::default());
    store
        .write("t", &small_rows(&[(7, 1, 1), (7, 2, 2)]), Durability::Sync)
        .unwrap();
    faults
        .fail_write_from
        .store(faults.writes.load(Ordering::SeqCst), Ordering::SeqCst);
    assert!(store.flush().is_err());
    assert_eq!(
        store
            .scan("t", 7, 0, 10, telestore_engine::Order::NewestFirst)
            .unwrap()
            .len(),
        2
    );
    drop(store);
    let store = open(dir.path(), Options::default());
    assert_eq!(
        store
            .scan("t", 7, 0, 10, telestore_engine::Order::NewestFirst)
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn failing_to_delete_old_wal_segments_loses_nothing_and_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        wal_segment_bytes: 8 << 10,
        ..Options::default()
    };
    let (store, faults) = faulty_store(dir.path(), opts);
    let rows: Vec<(u64, i64, u64)> = (0..100).map(|i| (5, i, i as u64)).collect();
    for _ in 0..10 {
        store
            .write("t", &small_rows(&rows), Durability::Sync)
            .unwrap();
    }
    faults.fail_remove.store(true, Ordering::SeqCst);
    store.flush().unwrap();
    let stuck = store.stats().wal_segments;
    assert!(
        stuck > 2,
        "segments were deleted despite the fault ({stuck})"
    );
    store
        .write("t", &small_rows(&rows), Durability::Sync)
        .unwrap();
    faults.fail_remove.store(false, Ordering::SeqCst);
    store.flush().unwrap();
    assert!(
        store.stats().wal_segments < stuck,
        "retirement was not retried"
    );
    drop(store);
    let store = open(dir.path(), Options::default());
    assert_eq!(
        store
            .scan("t", 5, 0, 1000, telestore_engine::Order::NewestFirst)
            .unwrap()
            .len(),
        100
    );
}

/// Run `body` on every I/O path: the std backend; io_uring through its
/// ring thread; and io_uring on a thread with a ring of its own
/// (`Backend::thread_ring`, what the group commit's threads hold), which
/// must then have served the ops itself.
fn on_every_io_path(body: fn(&dyn io::Backend)) {
    body(&*io::select(IoChoice::Std).unwrap());
    if io::probe_uring().is_err() {
        return;
    }
    let uring = io::select(IoChoice::Uring).unwrap();
    let local_before = io::local_ring_ops_completed();
    body(&*uring);
    std::thread::scope(|s| {
        s.spawn(|| {
            let ring = uring.thread_ring().expect("a thread's own ring");
            assert!(uring.thread_ring().is_none(), "one ring per thread");
            let before = io::local_ring_ops_completed();
            body(&*uring);
            assert!(
                io::local_ring_ops_completed() > before,
                "the thread's own ring served no op"
            );
            drop(ring);
        });
    });
    // Other tests may run ops on their threads' rings concurrently, so
    // only this much is certain: our own thread's ops were counted.
    assert!(io::local_ring_ops_completed() > local_before);
}

#[test]
fn a_thread_running_a_tokio_runtime_gets_no_ring_of_its_own() {
    if io::probe_uring().is_err() {
        return;
    }
    let uring = io::select(IoChoice::Uring).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        assert!(uring.thread_ring().is_none());
        // Its ops go through the ring thread instead, and work.
        let dir = tempfile::tempdir().unwrap();
        let f = uring
            .open(&dir.path().join("f"), io::OpenMode::CreateNew)
            .unwrap();
        f.write_sync_at(b"abc".to_vec(), 0).unwrap();
        assert_eq!(f.read_at(3, 0).unwrap(), b"abc");
    });
}

#[test]
fn every_backend_honours_the_file_trait() {
    on_every_io_path(|b| {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let f = b.open(&p, io::OpenMode::CreateNew).unwrap();
        let back = f.write_at(b"hello world".to_vec(), 3).unwrap();
        assert_eq!(back, b"hello world", "{:?} hands the buffer back", b.kind());
        f.write_sync_at(b"!".to_vec(), 14).unwrap();
        assert!(
            f.write_at(Vec::new(), 15).unwrap().is_empty(),
            "an empty write"
        );
        assert!(f.read_at(0, 15).unwrap().is_empty(), "an empty read");
        assert_eq!(f.read_at(6, 9).unwrap(), b"world!");
        assert_eq!(f.read_at(3, 0).unwrap(), [0, 0, 0], "a hole reads as zeros");
        assert!(
            f.read_at(4, 13).is_err(),
            "reading past the end is an error"
        );
        f.set_len(8).unwrap();
        f.sync_all().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"\0\0\0hello");
        assert!(
            b.open(&p, io::OpenMode::CreateNew).is_err(),
            "create_new refuses an existing file"
        );
        let q = dir.path().join("g");
        b.rename(&p, &q).unwrap();
        b.sync_dir(dir.path()).unwrap();
        b.remove_file(&q).unwrap();
        assert!(!q.exists() && !p.exists());
    });
}

/// `O_DIRECT` is visible in the descriptor flags of the open file.
fn opened_direct(path: &std::path::Path) -> bool {
    let want = std::fs::canonicalize(path).unwrap();
    std::fs::read_dir("/proc/self/fd").unwrap().any(|fd| {
        let fd = fd.unwrap();
        if std::fs::read_link(fd.path()).ok().as_deref() != Some(want.as_path()) {
            return false;
        }
        let info = std::fs::read_to_string(format!(
            "/proc/self/fdinfo/{}",
            fd.file_name().to_string_lossy()
        ))
        .unwrap_or_default();
        info.lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .and_then(|f| i64::from_str_radix(f.trim(), 8).ok())
            .is_some_and(|f| f & i64::from(libc_o_direct()) != 0)
    })
}

/// `O_DIRECT` on the architectures we build for (x86_64: 0o40000,
/// aarch64: 0o200000).
fn libc_o_direct() -> i32 {
    if cfg!(target_arch = "aarch64") {
        0o200000
    } else {
        0o40000
    }
}

#[test]
fn direct_files_write_aligned_blocks_direct_and_everything_else_buffered() {
    on_every_io_path(|b| {
        let block: Vec<u8> = (0..8192u32).map(|i| (i % 253) as u8).collect();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let f = b.open(&p, io::OpenMode::CreateNewDirect).unwrap();
        // The test directory's filesystem may refuse O_DIRECT; then the
        // file is plain and everything below still holds.
        let direct = opened_direct(&p);
        let back = f.write_at(block.clone(), 4096).unwrap();
        assert_eq!(back, block, "{:?} hands the caller's buffer back", b.kind());
        assert_eq!(opened_direct(&p), direct, "an aligned write keeps O_DIRECT");
        f.write_at(b"tail".to_vec(), 4096 + 8192).unwrap();
        assert!(!opened_direct(&p), "an unaligned write turns O_DIRECT off");
        f.write_at(block[..4096].to_vec(), 0).unwrap();
        f.sync_all().unwrap();
        let mut want = block[..4096].to_vec();
        want.extend_from_slice(&block);
        want.extend_from_slice(b"tail");
        assert!(
            std::fs::read(&p).unwrap() == want,
            "{:?}: file contents",
            b.kind()
        );
        assert_eq!(f.read_at(4, 4096 + 8192).unwrap(), b"tail");
        let g = dir.path().join("g");
        let f = b.open(&g, io::OpenMode::CreateNewDirect).unwrap();
        assert_eq!(f.read_at(0, 0).unwrap(), b"", "an empty read");
        f.write_at(block.clone(), 0).unwrap();
        assert_eq!(
            f.read_at(3, 1).unwrap(),
            block[1..4],
            "{:?}: a read",
            b.kind()
        );
        assert!(!opened_direct(&g), "a read turns O_DIRECT off");
        f.write_at(block.clone(), 8192).unwrap();
        f.sync_data().unwrap();
        assert_eq!(std::fs::read(&g).unwrap().len(), 16384);
        assert!(
            b.open(&g, io::OpenMode::CreateNewDirect).is_err(),
            "direct create refuses an existing file"
        );
        eprintln!(
            "{:?}: O_DIRECT {}",
            b.kind(),
            if direct {
                "used"
            } else {
                "refused by the filesystem"
            }
        );
    });
}
