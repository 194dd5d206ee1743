//! The latest-row cache (`engine/latest.rs`) must never change what
//! `latest` returns. A seeded sequence of puts (newer, older and
//! same-timestamp overwrites), point and range deletes, flushes, minor and
//! major compactions and TTL expiry, with `latest(d, 1)` checked against a
//! device scan (which never uses the cache) after every step; and
//! concurrent readers filling the cache while a writer moves a device on,
//! where each acknowledged write must be what the writer reads next.

use crate::common;

use common::{open, seed, small_fields, small_rows, small_schema, tiny_options};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use telestore_engine::clock::ManualClock;
use telestore_engine::{Durability, Options, Order, Store, TableOptions};

const DEVICES: u64 = 6;
const T0: i64 = 1_000_000;

/// What `latest(d, 1)` must return: the newest row of a full scan.
fn newest(store: &Store, d: u64) -> Option<(i64, Vec<u8>)> {
    let rows = store
        .scan("t", d, i64::MIN, i64::MAX, Order::NewestFirst)
        .unwrap();
    rows.first().map(|r| (r.ts, r.fields.clone()))
}

fn latest(store: &Store, d: u64) -> Option<(i64, Vec<u8>)> {
    let rows = store.latest("t", d, 1).unwrap();
    assert!(rows.len() <= 1);
    rows.first().map(|r| (r.ts, r.fields.clone()))
}

fn step(store: &Store, clock: &ManualClock, rng: &mut SmallRng, v: &mut u64) {
    let d = rng.gen_range(0..DEVICES);
    let newest_ts = newest(store, d).map_or(T0, |(ts, _)| ts);
    let sync = Durability::Sync;
    match rng.gen_range(0..100) {
        0..=39 => {
            // Newer, older, or the same timestamp again.
            let ts = newest_ts + rng.gen_range(-3..4) * 1_000;
            *v += 1;
            store.write("t", &small_rows(&[(d, ts, *v)]), sync).unwrap();
        }
        40..=54 => {
            store.delete("t", &[(d, newest_ts)], sync).unwrap();
        }
        55..=59 => {
            let from = newest_ts - rng.gen_range(0..3) * 1_000;
            store
                .delete_range("t", d, from, newest_ts + 1_000, sync)
                .unwrap();
        }
        60..=64 => store.flush().unwrap(),
        65..=67 => {
            store.compact("t", rng.gen_bool(0.5)).unwrap();
        }
        68..=71 => clock.advance(rng.gen_range(0..4) * 1_000),
        _ => {}
    }
}

#[test]
fn latest_from_the_cache_is_always_what_the_files_say() {
    let mut rng = SmallRng::seed_from_u64(seed(21));
    for round in 0..4 {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0 + 20_000));
        let opts = Options {
            clock: clock.clone(),
            ..tiny_options()
        };
        let store = open(dir.path(), opts);
        let ttl = (round % 2 == 1).then_some(30_000);
        let options = TableOptions {
            ttl_ms: ttl,
            max_versions: 1 + round % 3,
            ..TableOptions::default()
        };
        store.create_table(small_schema("t", options)).unwrap();
        let mut v = 0;
        for d in 0..DEVICES {
            v += 1;
            store
                .write("t", &small_rows(&[(d, T0, v)]), Durability::Sync)
                .unwrap();
        }
        for i in 0..600 {
            step(&store, &clock, &mut rng, &mut v);
            let d = rng.gen_range(0..DEVICES);
            assert_eq!(
                latest(&store, d),
                newest(&store, d),
                "round {round} step {i} device {d}"
            );
        }
        let s = store.stats().latest_cache;
        assert!(s.hits > 100, "the cache answered reads: {s:?}");
        assert!(s.misses > 0 && s.entries <= DEVICES, "{s:?}");
    }
}

#[test]
fn concurrent_fills_never_hide_an_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(dir.path(), tiny_options()));
    store
        .create_table(small_schema("t", TableOptions::default()))
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // Readers keep asking for device 0: each delete below empties its
    // entry, so they keep filling it while the writer moves it on.
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (store, stop) = (store.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    store.latest("t", 0, 1).unwrap();
                }
            })
        })
        .collect();
    let mut rng = SmallRng::seed_from_u64(seed(5));
    let mut live: Vec<(i64, u64)> = Vec::new();
    let async_ = Durability::Async;
    for i in 0..2_500u64 {
        match live.last() {
            Some(&(ts, _)) if rng.gen_bool(0.45) => {
                store.delete("t", &[(0, ts)], async_).unwrap();
                live.pop();
            }
            _ => {
                let ts = T0 + i as i64;
                store
                    .write("t", &small_rows(&[(0, ts, i)]), async_)
                    .unwrap();
                live.push((ts, i));
            }
        }
        let want = live.last().map(|&(ts, v)| (ts, small_fields(v)));
        assert_eq!(latest(&store, 0), want, "after step {i} was acknowledged");
        if i % 500 == 499 {
            store.flush().unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    let s = store.stats().latest_cache;
    assert!(s.hits > 0 && s.misses > 0, "{s:?}");
}

#[test]
fn a_cache_of_zero_devices_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        latest_cache_devices: 0,
        ..tiny_options()
    };
    let store = open(dir.path(), opts);
    store
        .create_table(small_schema("t", TableOptions::default()))
        .unwrap();
    store
        .write("t", &small_rows(&[(1, T0, 1)]), Durability::Sync)
        .unwrap();
    for _ in 0..3 {
        assert_eq!(latest(&store, 1), Some((T0, small_fields(1))));
    }
    let s = store.stats().latest_cache;
    assert_eq!((s.hits, s.entries), (0, 0));
}
