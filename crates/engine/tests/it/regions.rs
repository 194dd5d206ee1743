//! Regions: routing, the region map in the manifest, splits and merges
//! under concurrent writes and reads, automatic splits, the parallel
//! table scan, WAL retirement with idle regions, and the hotspot detector.

use crate::common;

use common::{open, seed, small_rows, small_schema, tiny_options};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use telestore_engine::clock::ManualClock;
use telestore_engine::key::{self, DeviceId};
use telestore_engine::region::{self, hotspot::HotspotConfig};
use telestore_engine::{Durability, Options, Order, TableOptions};

fn opts_with_regions(n: u32) -> TableOptions {
    TableOptions {
        regions: n,
        block_size_bytes: 1024,
        ..TableOptions::default()
    }
}

/// Every region's `[start, end)` as key bytes.
fn region_bounds(store: &telestore_engine::Store, t: &str) -> Vec<(String, Option<String>)> {
    store
        .regions(t)
        .unwrap()
        .into_iter()
        .map(|r| (r.start, r.end))
        .collect()
}

fn assert_contiguous(b: &[(String, Option<String>)]) {
    assert_eq!(b[0].0, "0000");
    for w in b.windows(2) {
        assert_eq!(w[0].1.as_ref(), Some(&w[1].0));
    }
    assert_eq!(b.last().unwrap().1, None);
}

#[test]
fn pre_split_map_is_uniform_and_round_trips_through_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Options::default());
    store
        .create_table(small_schema("t", opts_with_regions(16)))
        .unwrap();
    let before = region_bounds(&store, "t");
    assert_eq!(before.len(), 16);
    assert_contiguous(&before);
    assert_eq!(before[1].0, "1000");
    assert_eq!(before[15].0, "f000");
    store
        .split_region("t", 3, Some(region::prefix_start(0x3800)))
        .unwrap();
    let m = store.merge_regions("t", 0).unwrap();
    let after = region_bounds(&store, "t");
    assert_eq!(after.len(), 16);
    assert_eq!(store.regions("t").unwrap()[0].id, m);
    store.close().unwrap();
    let store = open(dir.path(), Options::default());
    assert_eq!(region_bounds(&store, "t"), after);
    // Bad requests are errors that change nothing.
    assert!(store.split_region("t", 999, None).is_err());
    assert!(store
        .split_region("t", 1, Some(region::prefix_start(0x0001)))
        .is_err());
    let last = store.regions("t").unwrap().last().unwrap().id;
    assert!(store.merge_regions("t", last).is_err());
    assert_eq!(region_bounds(&store, "t"), after);
}

#[test]
fn writes_land_in_the_region_of_their_key_and_a_device_scan_reads_one_region() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Options::default());
    store
        .create_table(small_schema("t", opts_with_regions(8)))
        .unwrap();
    let rows: Vec<(u64, i64, u64)> = (0..400u64).map(|d| (d, 1000, d)).collect();
    store
        .write("t", &small_rows(&rows), Durability::Sync)
        .unwrap();
    let regions = store.regions("t").unwrap();
    let starts: Vec<_> = regions.iter().map(|r| r.start_key).collect();
    let mut want = vec![0u64; regions.len()];
    for d in 0..400u64 {
        want[region::route(&starts, &key::encode(DeviceId(d), 1000))] += 1;
    }
    let got: Vec<u64> = regions.iter().map(|r| r.rows_written).collect();
    assert_eq!(got, want);
    assert_eq!(got.iter().sum::<u64>(), 400);
    let st = store
        .scan_with("t", 7, 0, 2000, Order::NewestFirst, |_| true)
        .unwrap();
    assert_eq!((st.regions, st.rows), (1, 1));
    // The table scan visits every region and yields key order.
    let mut keys = Vec::new();
    let st = store
        .scan_all("t", i64::MIN, i64::MAX, |r| {
            keys.push(key::encode(r.device, r.ts));
            true
        })
        .unwrap();
    assert_eq!(st.regions, 8);
    assert_eq!(keys.len(), 400);
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "not in key order");
    // Stopping early stops.
    let mut n = 0;
    store
        .scan_all("t", i64::MIN, i64::MAX, |_| {
            n += 1;
            n < 10
        })
        .unwrap();
    assert_eq!(n, 10);
}

/// Writers and readers run while the main thread flushes, splits (at
/// automatic and random points, prefix, device and inside-device) and
/// merges; every acknowledged row must be readable exactly once throughout
/// and after a reopen.
#[test]
fn splits_and_merges_under_concurrent_writes_and_reads_lose_and_duplicate_nothing() {
    let s = seed(0x5e17);
    let dir = tempfile::tempdir().unwrap();
    let opts = || Options {
        flush_threshold_bytes: 256 << 10,
        // A reader scanning in a loop and the other tests of this binary
        // keep both cores busy at normal priority; at the default nice 19
        // compactions starve until the writer is refused `Busy` (see
        // `Options::background_nice`). This test is about reshaping.
        background_nice: 0,
        ..tiny_options()
    };
    let store = Arc::new(open(dir.path(), opts()));
    store
        .create_table(small_schema("t", opts_with_regions(4)))
        .unwrap();
    let model: Arc<Mutex<BTreeMap<(u64, i64), u64>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (store, model, stop) = (store.clone(), model.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rng = SmallRng::seed_from_u64(s);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let rows: Vec<(u64, i64, u64)> = (0..50)
                    .map(|_| (rng.gen_range(0..40), rng.gen_range(0..500), i))
                    .collect();
                i += 1;
                store
                    .write("t", &small_rows(&rows), Durability::Async)
                    .unwrap();
                let mut m = model.lock().unwrap();
                for (d, ts, v) in rows {
                    m.insert((d, ts), v);
                }
            }
        })
    };
    let reader = {
        let (store, model, stop) = (store.clone(), model.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut checks = 0;
            while !stop.load(Ordering::Relaxed) {
                // Rows acknowledged before the scan started must be there,
                // once each.
                let before = model.lock().unwrap().len();
                let mut seen = std::collections::HashSet::new();
                store
                    .scan_all("t", i64::MIN, i64::MAX, |r| {
                        assert!(seen.insert((r.device.0, r.ts)), "row seen twice");
                        true
                    })
                    .unwrap();
                assert!(
                    seen.len() >= before,
                    "{} rows visible, {before} acked",
                    seen.len()
                );
                checks += 1;
            }
            checks
        })
    };
    let mut rng = SmallRng::seed_from_u64(s ^ 1);
    let mut reshapes = 0;
    let t0 = std::time::Instant::now();
    for _ in 0..40 {
        std::thread::sleep(std::time::Duration::from_millis(5));
        if rng.gen_bool(0.5) {
            store.flush().unwrap();
        }
        let regions = store.regions("t").unwrap();
        let r = &regions[rng.gen_range(0..regions.len())];
        let ok = if regions.len() > 6 && rng.gen_bool(0.4) {
            store.merge_regions("t", r.id).is_ok()
        } else if rng.gen_bool(0.5) {
            store.split_region("t", r.id, None).is_ok()
        } else {
            // A random point: a prefix, a device or a key inside a device.
            let d = rng.gen_range(0..40u64);
            let at = match rng.gen_range(0..3) {
                0 => region::prefix_start(key::prefix(DeviceId(d))),
                1 => region::device_start(key::prefix(DeviceId(d)), d),
                _ => key::encode(DeviceId(d), rng.gen_range(0..500)),
            };
            store.split_region("t", r.id, Some(at)).is_ok()
        };
        reshapes += ok as u32;
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let checks = reader.join().unwrap();
    eprintln!(
        "{reshapes} splits/merges, {checks} concurrent scans in {:?}",
        t0.elapsed()
    );
    assert!(reshapes > 10, "only {reshapes} splits/merges happened");
    assert!(checks > 0);
    let want = model.lock().unwrap().clone();
    let check = |store: &telestore_engine::Store| {
        let mut got = BTreeMap::new();
        store
            .scan_all("t", i64::MIN, i64::MAX, |r| {
                let v = u64::from_le_bytes(r.fields[..8].try_into().unwrap());
                assert!(got.insert((r.device.0, r.ts), v).is_none());
                true
            })
            .unwrap();
        let diff: Vec<_> = want
            .iter()
            .filter(|(k, v)| got.get(k) != Some(v))
            .map(|(k, v)| (*k, *v, got.get(k).copied()))
            .take(5)
            .collect();
        let extra = got.keys().filter(|k| !want.contains_key(k)).count();
        assert!(
            diff.is_empty() && extra == 0,
            "{} rows vs {} wanted; first differences (key, want, got): {diff:?}; {extra} extra",
            got.len(),
            want.len()
        );
        for d in 0..40u64 {
            let rows = store.scan("t", d, 0, 500, Order::OldestFirst).unwrap();
            let w: Vec<_> = want
                .range((d, 0)..=(d, 500))
                .map(|(k, v)| (k.1, *v))
                .collect();
            let g: Vec<_> = rows
                .iter()
                .map(|r| (r.ts, u64::from_le_bytes(r.fields[..8].try_into().unwrap())))
                .collect();
            assert_eq!(g, w, "device {d}");
        }
        assert_contiguous(&region_bounds(store, "t"));
    };
    check(&store);
    let store = Arc::try_unwrap(store).ok().unwrap();
    store.close().unwrap();
    let store = open(dir.path(), opts());
    check(&store);
}

#[test]
fn a_region_past_the_split_size_splits_on_a_prefix_boundary_after_a_flush() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        region_split_bytes: 64 << 10,
        ..tiny_options()
    };
    let store = open(dir.path(), opts);
    store
        .create_table(small_schema("t", opts_with_regions(1)))
        .unwrap();
    let mut v = 0;
    for round in 0..20i64 {
        let rows: Vec<(u64, i64, u64)> = (0..2000u64)
            .map(|d| {
                v += 1;
                (d, round * 1000, v)
            })
            .collect();
        store
            .write("t", &small_rows(&rows), Durability::Skip)
            .unwrap();
    }
    store.flush().unwrap();
    let regions = store.regions("t").unwrap();
    assert!(regions.len() >= 4, "{} regions", regions.len());
    for r in &regions[1..] {
        assert_eq!(r.start.len(), 4, "split inside a prefix: {}", r.start);
    }
    let mut n = 0;
    store
        .scan_all("t", i64::MIN, i64::MAX, |_| {
            n += 1;
            true
        })
        .unwrap();
    assert_eq!(n, 40_000);
}

#[test]
fn idle_regions_do_not_pin_the_wal_and_the_global_limit_flushes_the_largest() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        flush_threshold_bytes: 1 << 20,
        memstore_global_bytes: 1 << 20,
        wal_segment_bytes: 16 << 10,
        ..Options::default()
    };
    let store = open(dir.path(), opts);
    store
        .create_table(small_schema("t", opts_with_regions(16)))
        .unwrap();
    // One device: one region gets every write, 15 stay idle.
    for round in 0..200i64 {
        let rows: Vec<(u64, i64, u64)> = (0..100).map(|i| (42, round * 100 + i, 1)).collect();
        store
            .write("t", &small_rows(&rows), Durability::Skip)
            .unwrap();
    }
    store.flush().unwrap();
    assert!(
        store.stats().wal_segments <= 2,
        "idle regions pin the WAL: {} segments",
        store.stats().wal_segments
    );
    let hot: Vec<_> = store
        .regions("t")
        .unwrap()
        .into_iter()
        .filter(|r| r.flushes > 0)
        .collect();
    assert_eq!(hot.len(), 1, "only the written region flushes");
    // The global limit froze (and so flushed) it before the explicit
    // flush did (the freeze happens as writes are applied; the flush
    // after it runs in the background).
    assert!(
        hot[0].flushes >= 2,
        "the global limit never flushed the region: {} flushes",
        hot[0].flushes
    );
}

fn hot_store(dir: &std::path::Path, clock: Arc<ManualClock>) -> telestore_engine::Store {
    let opts = Options {
        clock,
        hotspot: HotspotConfig {
            k: 3.0,
            grace_ms: 5_000,
            min_rate: 10.0,
            window_secs: 5,
        },
        ..Options::default()
    };
    let store = open(dir, opts);
    store
        .create_table(small_schema("t", opts_with_regions(16)))
        .unwrap();
    store
}

#[test]
fn hotspot_detector_flags_skewed_load_and_not_even_load() {
    let t0 = 1_700_000_000_000;
    // Even: 1,600 devices, every one writes each second.
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(t0));
    let store = hot_store(dir.path(), clock.clone());
    for s in 0..20i64 {
        let rows: Vec<_> = (0..1600u64).map(|d| (d, s * 1000, 1)).collect();
        store
            .write("t", &small_rows(&rows), Durability::Skip)
            .unwrap();
        clock.advance(1000);
        assert!(
            store.regions("t").unwrap().iter().all(|r| !r.hot),
            "even load flagged"
        );
    }
    drop(store);
    // Skewed: one device writes 2,000 rows a second on top of the even load.
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(t0));
    let store = hot_store(dir.path(), clock.clone());
    let hot_region = |store: &telestore_engine::Store| {
        let regions = store.regions("t").unwrap();
        let starts: Vec<_> = regions.iter().map(|r| r.start_key).collect();
        regions[region::route(&starts, &key::encode(DeviceId(7), 0))].clone()
    };
    let mut flagged_at = None;
    for s in 0..20i64 {
        let mut rows: Vec<_> = (0..160u64).map(|d| (d, s * 1000, 1)).collect();
        rows.extend((0..2000).map(|i| (7u64, s * 1000 + i / 2 + 1, 2)));
        store
            .write("t", &small_rows(&rows), Durability::Skip)
            .unwrap();
        clock.advance(1000);
        let r = hot_region(&store);
        if r.hot && flagged_at.is_none() {
            flagged_at = Some(s);
        }
        let others = store
            .regions("t")
            .unwrap()
            .into_iter()
            .filter(|x| x.id != r.id);
        assert!(others.into_iter().all(|x| !x.hot), "a cool region flagged");
    }
    let at = flagged_at.expect("the skewed region was never flagged");
    assert!(
        (5..=12).contains(&at),
        "flagged after {at} s (grace 5 s, window 5 s)"
    );
    // The load moves elsewhere: the episode ends.
    for s in 20..40i64 {
        let rows: Vec<_> = (0..1600u64).map(|d| (d, s * 1000, 1)).collect();
        store
            .write("t", &small_rows(&rows), Durability::Skip)
            .unwrap();
        clock.advance(1000);
    }
    assert!(!hot_region(&store).hot, "the episode never ended");
}
