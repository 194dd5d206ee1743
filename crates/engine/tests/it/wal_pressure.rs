//! Guards the WAL's bounds: a long WAL replays into memstores that stay
//! within the flush threshold, a rarely written table cannot pin WAL
//! segments forever, and `async` writes are fsynced even while writers
//! never pause.

use crate::common;

use common::*;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use telestore_engine::schema::TableOptions;
use telestore_engine::{Durability, Options, Order};

fn rows_for(b: u64) -> Vec<u8> {
    let rows: Vec<(u64, i64, u64)> = (0..50).map(|i| (i % 7, (b * 50 + i) as i64, b)).collect();
    small_rows(&rows)
}

#[test]
fn long_wal_replays_into_bounded_memstores() {
    let dir = tempfile::tempdir().unwrap();
    let big = Options {
        flush_threshold_bytes: 64 << 20,
        ..Options::default()
    };
    let store = open(dir.path(), big.clone());
    store
        .create_table(small_schema("t", TableOptions::default()))
        .unwrap();
    for b in 0..400 {
        store.write("t", &rows_for(b), Durability::Async).unwrap();
    }
    drop(store);
    let small = Options {
        flush_threshold_bytes: 16 << 10,
        ..Options::default()
    };
    let store = open(dir.path(), small);
    store.flush().unwrap();
    // Count flushes, not files: background compaction may merge files.
    let flushes: u64 = store.regions("t").unwrap().iter().map(|r| r.flushes).sum();
    assert!(
        flushes >= 20,
        "replay built one huge memstore ({flushes} flushes)"
    );
    let n: usize = (0..7)
        .map(|d| {
            store
                .scan("t", d, i64::MIN, i64::MAX, Order::NewestFirst)
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!(n, 400 * 50);
}

#[test]
fn a_cold_table_does_not_pin_the_wal() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        wal_segment_bytes: 16 << 10,
        wal_segments_max: 3,
        ..Options::default()
    };
    let store = open(dir.path(), opts);
    store
        .create_table(small_schema("cold", TableOptions::default()))
        .unwrap();
    store
        .create_table(small_schema("hot", TableOptions::default()))
        .unwrap();
    store
        .write("cold", &small_rows(&[(1, 1, 1)]), Durability::Sync)
        .unwrap();
    let mut most = 0;
    for b in 0..300 {
        store.write("hot", &rows_for(b), Durability::Async).unwrap();
        most = most.max(store.stats().wal_segments);
    }
    // Flushes run in the background: give them time, bounded.
    let t0 = Instant::now();
    while store.stats().wal_segments > 5 && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let live = store.stats().wal_segments;
    assert!(
        live <= 5,
        "{live} WAL segments live (at most {most} during the run)"
    );
    assert!(store.get("cold", 1, 1).unwrap().is_some());
}

#[test]
fn async_writes_are_synced_while_writers_never_pause() {
    let dir = tempfile::tempdir().unwrap();
    let (opts, faults) = with_faults(Options {
        async_sync_interval_ms: 10,
        ..Options::default()
    });
    let store = Arc::new(open(dir.path(), opts));
    store
        .create_table(small_schema("t", TableOptions::default()))
        .unwrap();
    let start = faults.syncs.load(Ordering::SeqCst);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..4u64)
        .map(|w| {
            let (store, stop) = (store.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut b = w * 1_000_000;
                while !stop.load(Ordering::SeqCst) {
                    store.write("t", &rows_for(b), Durability::Async).unwrap();
                    b += 1;
                }
            })
        })
        .collect();
    // Liveness, not speed: the deadline is generous.
    let t0 = Instant::now();
    while faults.syncs.load(Ordering::SeqCst) < start + 3 && t0.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.join().unwrap();
    }
    let synced = faults.syncs.load(Ordering::SeqCst) - start;
    assert!(
        synced >= 3,
        "only {synced} WAL fsyncs while async writers ran"
    );
}
