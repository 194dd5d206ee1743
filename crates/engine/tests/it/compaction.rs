//! Compaction: a seeded model test (puts, back-fills, overwrites, point
//! and range deletes, TTL clock moves, flushes, minor and major
//! compactions, reopens), TTL and version limits checked on the files
//! themselves, the whole-file TTL drop, files shared after a split, and
//! the write stall's `Busy`.

use crate::common;

use common::{open, seed, small_fields, small_rows, small_schema};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use telestore_engine::cache::BlockCache;
use telestore_engine::cell::{CellKind, CellRef};
use telestore_engine::clock::ManualClock;
use telestore_engine::hfile::HFileReader;
use telestore_engine::schema::BlockEncoding;
use telestore_engine::{Durability, Error, Options, Order, Store, TableOptions};

const T0: i64 = 1_700_000_000_000;
const DEVICES: u64 = 10;
const TTL_MS: i64 = 100_000;

/// Every cell in the table's HFiles on disk: (device, ts, seq, kind).
fn cells_on_disk(dir: &Path) -> Vec<(u64, i64, u64, CellKind)> {
    let mut out = Vec::new();
    let tdir = dir.join("tables").join("1");
    for e in std::fs::read_dir(&tdir).unwrap() {
        let p = e.unwrap().path();
        assert_ne!(
            p.extension().and_then(|x| x.to_str()),
            Some("tmp"),
            "temp file left: {}",
            p.display()
        );
        // A cache of its own: blocks are cached by file id.
        let cache = Arc::new(BlockCache::new(1 << 20));
        let r = HFileReader::open(&p, 0, 13, cache).unwrap();
        for i in 0..r.block_count() {
            let b = r.block(i).unwrap();
            for c in b.chunks_exact(r.cell_width()) {
                let c = CellRef(c);
                out.push((c.device().0, c.ts(), c.seq(), c.kind()));
            }
        }
    }
    out
}

fn disk_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir.join("tables").join("1"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

fn options(clock: Arc<ManualClock>) -> Options {
    Options {
        clock,
        flush_threshold_bytes: 64 << 10,
        compaction_threads: 0,
        subcompactions: 1,
        ..Options::default()
    }
}

/// [`options`] with compactions split into up to `parts` key ranges of
/// any size.
fn split_options(clock: Arc<ManualClock>, parts: usize) -> Options {
    Options {
        subcompactions: parts,
        subcompaction_min_bytes: 4 << 10,
        ..options(clock)
    }
}

/// (device, ts) -> versions (values), newest first.
type Model = BTreeMap<(u64, i64), Vec<u64>>;

fn check(store: &Store, model: &Model, now: i64) {
    let cutoff = now - TTL_MS;
    for d in 0..DEVICES {
        let want: Vec<(i64, u64)> = model
            .range((d, i64::MIN)..=(d, i64::MAX))
            .filter(|((_, ts), vs)| *ts >= cutoff && !vs.is_empty())
            .map(|((_, ts), vs)| (*ts, vs[0]))
            .collect();
        let got: Vec<(i64, u64)> = store
            .scan("t", d, i64::MIN, i64::MAX, Order::OldestFirst)
            .unwrap()
            .iter()
            .map(|r| (r.ts, u64::from_le_bytes(r.fields[..8].try_into().unwrap())))
            .collect();
        assert_eq!(got, want, "device {d}");
    }
    // Versions of a few keys.
    for ((d, ts), vs) in model.iter().filter(|((_, ts), _)| *ts >= cutoff).take(20) {
        let got: Vec<u64> = store
            .get_versions("t", *d, *ts, 3)
            .unwrap()
            .iter()
            .map(|r| u64::from_le_bytes(r.fields[..8].try_into().unwrap()))
            .collect();
        let want: Vec<u64> = vs.iter().take(3).copied().collect();
        assert_eq!(got, want, "versions of ({d}, {ts})");
    }
}

#[test]
fn model_with_flushes_minor_and_major_compactions_ttl_and_deletes() {
    model_run(1);
}

/// The same model with every compaction split into up to three parts
/// (subcompactions).
#[test]
fn model_with_compactions_split_by_key_range() {
    model_run(3);
}

fn model_run(parts: usize) {
    let s = seed(0xc0a1);
    let mut rng = SmallRng::seed_from_u64(s);
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let opts = |clock: &Arc<ManualClock>| split_options(clock.clone(), parts);
    let mut store = open(dir.path(), opts(&clock));
    let table = TableOptions {
        ttl_ms: Some(TTL_MS),
        max_versions: 3,
        regions: 4,
        block_size_bytes: 1024,
        ..TableOptions::default()
    };
    store
        .create_table(small_schema("t", table.clone()))
        .unwrap();
    let mut model = Model::new();
    let mut v = 0u64;
    let mut counts = [0usize; 4];
    for step in 0..400 {
        let now = clock.now();
        match rng.gen_range(0..100) {
            // Puts: new, back-filled (older than now, inside the TTL) and
            // overwrites of existing keys.
            0..=54 => {
                let rows: Vec<(u64, i64, u64)> = (0..rng.gen_range(1..40))
                    .map(|_| {
                        v += 1;
                        let ts = now - rng.gen_range(0..TTL_MS * 3 / 2) / 1000 * 1000;
                        (rng.gen_range(0..DEVICES), ts, v)
                    })
                    .collect();
                store
                    .write("t", &small_rows(&rows), Durability::Async)
                    .unwrap();
                for (d, ts, v) in rows {
                    model.entry((d, ts)).or_default().insert(0, v);
                }
            }
            55..=62 => {
                let keys: Vec<(u64, i64)> = model.keys().copied().collect();
                if let Some(k) = keys.get(rng.gen_range(0..keys.len().max(1))) {
                    store.delete("t", &[*k], Durability::Async).unwrap();
                    model.remove(k);
                }
            }
            63..=66 => {
                let d = rng.gen_range(0..DEVICES);
                let from = now - rng.gen_range(0..TTL_MS);
                let to = from + rng.gen_range(0..TTL_MS / 4);
                store
                    .delete_range("t", d, from, to, Durability::Async)
                    .unwrap();
                let gone: Vec<_> = model.range((d, from)..=(d, to)).map(|(k, _)| *k).collect();
                for k in gone {
                    model.remove(&k);
                }
            }
            67..=76 => {
                clock.advance(rng.gen_range(1..TTL_MS / 5));
            }
            77..=86 => {
                store.flush().unwrap();
                counts[0] += 1;
            }
            87..=93 => {
                counts[1] += store.compact("t", false).unwrap().len();
            }
            94..=96 => {
                counts[2] += store.compact("t", true).unwrap().len();
            }
            97 => flip_encoding(&store),
            _ => {
                store.close().unwrap();
                store = open(dir.path(), opts(&clock));
                counts[3] += 1;
            }
        }
        if step % 150 == 75 {
            flip_encoding(&store); // and now and then at random (97)
        }
        if step % 10 == 0 {
            check(&store, &model, clock.now());
        }
    }
    check(&store, &model, clock.now());
    eprintln!("flushes, minor/ttl-drop compactions, major compactions, reopens: {counts:?}");
    assert!(
        counts.iter().all(|c| *c > 0),
        "every kind of step ran: {counts:?}"
    );
    // After a flush and a major compaction the files hold exactly what a
    // read returns (no expired, deleted or surplus cells, no markers).
    store.flush().unwrap();
    store.compact("t", true).unwrap();
    let cutoff = clock.now() - TTL_MS;
    let mut on_disk: Vec<(u64, i64)> = cells_on_disk(dir.path())
        .into_iter()
        .inspect(|c| {
            assert_eq!(
                c.3,
                CellKind::Put,
                "marker survived a major compaction: {c:?}"
            )
        })
        .map(|c| (c.0, c.1))
        .collect();
    on_disk.sort();
    let mut want: Vec<(u64, i64)> = Vec::new();
    for ((d, ts), vs) in model.iter().filter(|((_, ts), _)| *ts >= cutoff) {
        for _ in 0..vs.len().min(3) {
            want.push((*d, *ts));
        }
    }
    assert_eq!(
        on_disk, want,
        "cells on disk after the final major compaction"
    );
    check(&store, &model, clock.now());
}

/// Switch table `t` between rows and columnar blocks: later flushes and
/// compactions write the other layout, files already written keep theirs.
fn flip_encoding(store: &Store) {
    let now = store.schema("t").unwrap().options.encoding;
    let next = match now {
        BlockEncoding::Rows => BlockEncoding::Columnar,
        BlockEncoding::Columnar => BlockEncoding::Rows,
    };
    store.set_table_encoding("t", next).unwrap();
}

/// Encoding of every HFile of table 1 (from its info section).
fn file_encodings(dir: &Path) -> Vec<BlockEncoding> {
    let tdir = dir.join("tables").join("1");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&tdir).unwrap() {
        let p = e.unwrap().path();
        let r = HFileReader::open(&p, 0, 13, Arc::new(BlockCache::new(1 << 20))).unwrap();
        out.push(r.info().encoding);
    }
    out
}

#[test]
fn a_compaction_writes_the_tables_current_encoding() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let store = open(dir.path(), options(clock.clone()));
    let table = TableOptions {
        regions: 2,
        block_size_bytes: 1024,
        ..TableOptions::default()
    };
    store.create_table(small_schema("t", table)).unwrap();
    let rows: Vec<(u64, i64, u64)> = (0..600u64)
        .map(|i| (i % DEVICES, T0 - (i as i64 / 10) * 1000, i))
        .collect();
    store
        .write("t", &small_rows(&rows[..300]), Durability::Sync)
        .unwrap();
    store.flush().unwrap();
    let want_half = store
        .scan_all("t", i64::MIN, i64::MAX, |_| true)
        .unwrap()
        .rows;
    assert!(file_encodings(dir.path())
        .iter()
        .all(|e| *e == BlockEncoding::Rows));
    store
        .set_table_encoding("t", BlockEncoding::Columnar)
        .unwrap();
    store.compact("t", true).unwrap();
    assert!(file_encodings(dir.path())
        .iter()
        .all(|e| *e == BlockEncoding::Columnar));
    // Flushes write rows blocks whatever the encoding: now the regions
    // hold both kinds of files.
    store
        .write("t", &small_rows(&rows[300..]), Durability::Sync)
        .unwrap();
    store.flush().unwrap();
    let mixed = file_encodings(dir.path());
    assert!(
        mixed.contains(&BlockEncoding::Rows) && mixed.contains(&BlockEncoding::Columnar),
        "{mixed:?}"
    );
    let read = |s: &Store| -> Vec<(u64, i64, Vec<u8>)> {
        let mut v = Vec::new();
        for d in 0..DEVICES {
            for r in s
                .scan("t", d, i64::MIN, i64::MAX, Order::NewestFirst)
                .unwrap()
            {
                v.push((d, r.ts, r.fields.clone()));
            }
        }
        v
    };
    let before = read(&store);
    assert_eq!(before.len(), 600);
    assert!(want_half < 600);
    store.compact("t", true).unwrap();
    assert!(file_encodings(dir.path())
        .iter()
        .all(|e| *e == BlockEncoding::Columnar));
    assert_eq!(read(&store), before, "the conversion changes no reading");
    store.close().unwrap();
    let store = open(dir.path(), options(clock));
    assert_eq!(
        store.schema("t").unwrap().options.encoding,
        BlockEncoding::Columnar
    );
    assert_eq!(read(&store), before);
    store.set_table_encoding("t", BlockEncoding::Rows).unwrap();
    store.compact("t", true).unwrap();
    assert!(file_encodings(dir.path())
        .iter()
        .all(|e| *e == BlockEncoding::Rows));
    assert_eq!(read(&store), before, "and back");
    store.close().unwrap();
}

trait Now {
    fn now(&self) -> i64;
}
impl Now for ManualClock {
    fn now(&self) -> i64 {
        telestore_engine::clock::Clock::now_ms(self)
    }
}

#[test]
fn expired_cells_vanish_from_reads_at_once_and_from_disk_after_major_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let store = open(dir.path(), options(clock.clone()));
    let table = TableOptions {
        ttl_ms: Some(TTL_MS),
        regions: 1,
        ..TableOptions::default()
    };
    store.create_table(small_schema("t", table)).unwrap();
    // Old data and new data mixed in the same files.
    for round in 0..4i64 {
        let rows: Vec<_> = (0..500u64)
            .map(|i| (i % DEVICES, T0 - 50_000 + round * 10_000 + i as i64, i))
            .collect();
        store
            .write("t", &small_rows(&rows), Durability::Sync)
            .unwrap();
        store.flush().unwrap();
    }
    let before = disk_bytes(dir.path());
    let cells_before = cells_on_disk(dir.path()).len();
    clock.advance(TTL_MS - 25_000);
    // Now rounds 0..=2 are past the TTL (ts < now - ttl = T0 - 25 s).
    let visible = |s: &Store| {
        let mut n = 0;
        s.scan_all("t", i64::MIN, i64::MAX, |_| {
            n += 1;
            true
        })
        .unwrap();
        n
    };
    assert_eq!(visible(&store), 500, "expired rows still visible");
    store.compact("t", true).unwrap();
    let cells_after = cells_on_disk(dir.path()).len();
    assert_eq!(cells_before, 2000);
    assert_eq!(cells_after, 500, "expired cells still on disk");
    assert!(disk_bytes(dir.path()) < before, "disk did not shrink");
    assert_eq!(visible(&store), 500);
}

#[test]
fn a_file_whose_every_cell_expired_is_dropped_without_rewriting() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let store = open(dir.path(), options(clock.clone()));
    let table = TableOptions {
        ttl_ms: Some(TTL_MS),
        regions: 1,
        ..TableOptions::default()
    };
    store.create_table(small_schema("t", table)).unwrap();
    let old: Vec<_> = (0..100u64)
        .map(|i| (i % DEVICES, T0 - 90_000 + i as i64, i))
        .collect();
    store
        .write("t", &small_rows(&old), Durability::Sync)
        .unwrap();
    store.flush().unwrap();
    let new: Vec<_> = (0..100u64)
        .map(|i| (i % DEVICES, T0 + i as i64, i))
        .collect();
    store
        .write("t", &small_rows(&new), Durability::Sync)
        .unwrap();
    store.flush().unwrap();
    clock.advance(20_000);
    let done = store.compact("t", false).unwrap();
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(
        (done[0].kind, done[0].files_in, done[0].bytes_out),
        ("ttl-drop", 1, 0)
    );
    assert_eq!(cells_on_disk(dir.path()).len(), 100);
    assert_eq!(store.stats().hfiles, 1);
}

#[test]
fn the_three_newest_versions_survive_a_major_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let store = open(dir.path(), options(clock));
    let table = TableOptions {
        max_versions: 3,
        regions: 2,
        ..TableOptions::default()
    };
    store.create_table(small_schema("t", table)).unwrap();
    for v in 1..=5u64 {
        let rows: Vec<_> = (0..50u64).map(|d| (d, T0, v)).collect();
        store
            .write("t", &small_rows(&rows), Durability::Sync)
            .unwrap();
        store.flush().unwrap();
    }
    assert_eq!(cells_on_disk(dir.path()).len(), 250);
    store.compact("t", true).unwrap();
    assert_eq!(cells_on_disk(dir.path()).len(), 150);
    for d in 0..50 {
        let vs: Vec<u64> = store
            .get_versions("t", d, T0, 10)
            .unwrap()
            .iter()
            .map(|r| u64::from_le_bytes(r.fields[..8].try_into().unwrap()))
            .collect();
        assert_eq!(vs, vec![5, 4, 3]);
    }
}

#[test]
fn files_shared_after_a_split_are_rewritten_per_daughter_then_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let store = open(dir.path(), options(clock));
    let table = TableOptions {
        regions: 1,
        ..TableOptions::default()
    };
    store.create_table(small_schema("t", table)).unwrap();
    let rows: Vec<_> = (0..2000u64).map(|d| (d, T0, d)).collect();
    store
        .write("t", &small_rows(&rows), Durability::Sync)
        .unwrap();
    store.flush().unwrap();
    let parent = std::fs::read_dir(dir.path().join("tables/1"))
        .unwrap()
        .count();
    assert_eq!(parent, 1);
    store.split_region("t", 0, None).unwrap();
    assert_eq!(store.stats().hfiles, 1, "daughters share the parent's file");
    store.compact("t", true).unwrap();
    // Two own files; the shared one is gone from disk.
    assert_eq!(
        std::fs::read_dir(dir.path().join("tables/1"))
            .unwrap()
            .count(),
        2
    );
    let mut n = 0;
    store
        .scan_all("t", i64::MIN, i64::MAX, |r| {
            assert_eq!(r.fields, small_fields(r.device.0));
            n += 1;
            true
        })
        .unwrap();
    assert_eq!(n, 2000);
    assert_eq!(cells_on_disk(dir.path()).len(), 2000);
}

#[test]
fn too_many_files_stall_writers_then_refuse_with_busy_until_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let opts = Options {
        blocking_file_count: 4,
        slowdown_file_count: 0,
        compaction: telestore_engine::compaction::plan::Policy {
            stuck_files: 4,
            ..Default::default()
        },
        write_stall_max_ms: 200,
        ..options(clock)
    };
    let store = open(dir.path(), opts);
    let table = TableOptions {
        regions: 1,
        ..TableOptions::default()
    };
    store.create_table(small_schema("t", table)).unwrap();
    let mut refused = None;
    for i in 0..10i64 {
        match store.write("t", &small_rows(&[(1, T0 + i, 1)]), Durability::Sync) {
            Ok(_) => store.flush().unwrap(),
            Err(e) => {
                refused = Some((i, e));
                break;
            }
        }
    }
    match refused {
        Some((5, Error::Busy { retry_after_ms })) => assert!(retry_after_ms > 0),
        other => panic!("expected Busy at the 6th write, got {other:?}"),
    }
    let st = store.stats();
    assert_eq!((st.stalled_writes, st.busy_writes), (1, 1));
    assert_eq!(
        store
            .scan("t", 1, i64::MIN, i64::MAX, Order::NewestFirst)
            .unwrap()
            .len(),
        5,
        "nothing of the refused write applied"
    );
    store.compact("t", false).unwrap();
    store
        .write("t", &small_rows(&[(1, T0 + 99, 1)]), Durability::Sync)
        .unwrap();
}

/// The CI-sized version of `telestore bench sustained`: continuous
/// writes with tiny memstores and background compaction; the files per
/// region stay bounded (the write stall holds writers back while
/// compactions catch up) and every row stays readable.
#[test]
fn continuous_ingest_keeps_files_per_region_bounded() {
    // One worker, and several (the default on machines with 6+ cores).
    for workers in [1, 3] {
        continuous_ingest(workers);
    }
}

fn continuous_ingest(workers: usize) {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        flush_threshold_bytes: 32 << 10,
        compaction_threads: workers,
        // Other tests of this binary keep both cores busy at normal
        // priority: at the default nice 19 the compactor would only run
        // once writers stall (see `Options::background_nice`), and this
        // test is about it keeping up alongside them.
        background_nice: 0,
        ..Options::default()
    };
    let bound = opts.blocking_file_count + opts.frozen_memstores_max + 1;
    let store = open(dir.path(), opts);
    let table = TableOptions {
        regions: 4,
        block_size_bytes: 4096,
        ..TableOptions::default()
    };
    store.create_table(small_schema("t", table)).unwrap();
    let (mut worst, mut compactions) = (0, 0);
    for b in 0..400i64 {
        let rows: Vec<_> = (0..250u64).map(|d| (d, T0 + b * 1000, d)).collect();
        // A client retries a `Busy` write (how often depends on the
        // machine's speed, so it is not asserted).
        while let Err(e) = store.write("t", &small_rows(&rows), Durability::Async) {
            assert!(matches!(e, Error::Busy { .. }), "{e}");
        }
        if b % 20 == 0 {
            let regions = store.regions("t").unwrap();
            worst = worst.max(regions.iter().map(|r| r.files).max().unwrap());
            compactions = regions.iter().map(|r| r.compactions).sum::<u64>();
        }
    }
    eprintln!(
        "{workers} workers: most files in a region: {worst}; compactions so far: {compactions}"
    );
    assert!(worst <= bound, "{worst} files in a region (bound {bound})");
    assert!(compactions > 0, "no background compaction ran");
    let mut n = 0;
    store
        .scan_all("t", i64::MIN, i64::MAX, |_| {
            n += 1;
            true
        })
        .unwrap();
    assert_eq!(n, 400 * 250);
}

/// `Store::regions` shows each region's pending compaction debt: the
/// bytes its next minor compaction would merge, 0 once it has run.
#[test]
fn regions_show_pending_compaction_debt_until_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), options(Arc::new(ManualClock::new(T0))));
    let one_region = TableOptions {
        regions: 1,
        ..TableOptions::default()
    };
    store.create_table(small_schema("t", one_region)).unwrap();
    let debt = |s: &Store| s.regions("t").unwrap()[0].compaction_debt_bytes;
    assert_eq!(debt(&store), 0);
    flush_small_files(&store, 4);
    let hfiles = store.stats().hfile_bytes;
    assert_eq!(debt(&store), hfiles, "all four small files are one run");
    store.compact("t", false).unwrap();
    assert_eq!(debt(&store), 0);
}

/// A compaction split by key range writes one file per part; the parts
/// are one sorted run (what the file limits count), they are not merged
/// again for being several files, and they read back exactly what was
/// written.
#[test]
fn a_split_compaction_writes_one_run_of_parts() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let store = open(dir.path(), split_options(clock, 3));
    let one_region = TableOptions {
        regions: 1,
        block_size_bytes: 1024,
        ..TableOptions::default()
    };
    store.create_table(small_schema("t", one_region)).unwrap();
    let mut want = BTreeMap::new();
    for f in 0..4i64 {
        let rows: Vec<(u64, i64, u64)> = (0..200u64)
            .flat_map(|d| (0..5).map(move |i| (d, T0 + i * 1000 + f, d ^ i as u64)))
            .collect();
        for (d, ts, v) in &rows {
            want.insert((*d, *ts), *v);
        }
        store
            .write("t", &small_rows(&rows), Durability::Sync)
            .unwrap();
        store.flush().unwrap();
    }
    let region = |s: &Store| s.regions("t").unwrap()[0].clone();
    assert_eq!((region(&store).files, region(&store).runs), (4, 4));
    let out = store.compact("t", false).unwrap();
    assert_eq!(out.len(), 1, "one minor compaction: {out:?}");
    assert_eq!(out[0].files_out, 3, "{out:?}");
    let r = region(&store);
    assert_eq!((r.files, r.runs, r.compaction_debt_bytes), (3, 1, 0));
    // One run: nothing more to merge, however many files it has.
    assert!(store.compact("t", false).unwrap().is_empty());
    let mut got = BTreeMap::new();
    for d in 0..200u64 {
        for row in store
            .scan("t", d, i64::MIN, i64::MAX, Order::OldestFirst)
            .unwrap()
        {
            got.insert(
                (d, row.ts),
                u64::from_le_bytes(row.fields[..8].try_into().unwrap()),
            );
        }
    }
    assert_eq!(got, want);
    // A major compaction of one run of disjoint parts is not split again.
    let out = store.compact("t", true).unwrap();
    assert_eq!(out[0].files_out, 1, "{out:?}");
}

/// Three flushed files in one region and nothing compacting them: with a
/// slowdown from three sorted runs, or from any compaction debt,
/// writes are delayed (counted) and still accepted; past the debt stop
/// they stall and are refused `Busy`, nothing applied.
#[test]
fn runs_and_compaction_debt_slow_writes_down_then_stop_them() {
    let setup = |opts: Options| {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), opts);
        let one_region = TableOptions {
            regions: 1,
            ..TableOptions::default()
        };
        store.create_table(small_schema("t", one_region)).unwrap();
        flush_small_files(&store, 3);
        (dir, store)
    };
    let write = |s: &Store, ts: i64| s.write("t", &small_rows(&[(1, ts, 1)]), Durability::Sync);
    let base = || options(Arc::new(ManualClock::new(T0)));
    // By runs: the flushes above were slowed too once there were three.
    let (_d, store) = setup(Options {
        slowdown_file_count: 3,
        compaction_debt_slowdown_bytes: 0,
        ..base()
    });
    let before = store.stats().slowed_writes;
    write(&store, T0 + 100).unwrap();
    assert_eq!(store.stats().slowed_writes, before + 1);
    // Off: nothing slowed.
    let (_d, store) = setup(Options {
        slowdown_file_count: 0,
        compaction_debt_slowdown_bytes: 0,
        ..base()
    });
    write(&store, T0 + 100).unwrap();
    assert_eq!(store.stats().slowed_writes, 0);
    // By debt (refreshed after every flush).
    let (_d, store) = setup(Options {
        slowdown_file_count: 0,
        compaction_debt_slowdown_bytes: 1,
        compaction_debt_stop_bytes: 0,
        ..base()
    });
    assert!(store.stats().compaction_debt_bytes > 0);
    write(&store, T0 + 100).unwrap();
    assert!(store.stats().slowed_writes >= 1);
    // The debt stop: a stall, then Busy, nothing applied.
    let (_d, store) = setup(Options {
        slowdown_file_count: 0,
        compaction_debt_slowdown_bytes: 0,
        compaction_debt_stop_bytes: 1,
        write_stall_max_ms: 100,
        ..base()
    });
    match write(&store, T0 + 100) {
        Err(Error::Busy { .. }) => {}
        other => panic!("expected Busy past the debt stop, got {other:?}"),
    }
    assert!(store.get("t", 1, T0 + 100).unwrap().is_none());
    store.compact("t", false).unwrap();
    assert_eq!(store.stats().compaction_debt_bytes, 0);
    write(&store, T0 + 100).unwrap();
}

/// A minor compaction of young data (less than
/// `columnar_min_compaction_bytes` read) writes rows blocks even on a
/// columnar table; a bigger one, and every major, writes columnar.
#[test]
fn young_minor_compactions_write_rows_and_bigger_ones_the_tables_encoding() {
    for (threshold, want) in [
        (256 << 20, BlockEncoding::Rows),
        (0, BlockEncoding::Columnar),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            columnar_min_compaction_bytes: threshold,
            ..options(Arc::new(ManualClock::new(T0)))
        };
        let store = open(dir.path(), opts);
        let table = TableOptions {
            regions: 1,
            encoding: BlockEncoding::Columnar,
            ..TableOptions::default()
        };
        store.create_table(small_schema("t", table)).unwrap();
        flush_small_files(&store, 3);
        let out = store.compact("t", false).unwrap();
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(file_encodings(dir.path()), [want], "threshold {threshold}");
        store.compact("t", true).unwrap();
        assert_eq!(file_encodings(dir.path()), [BlockEncoding::Columnar]);
    }
}

/// `n` flushes into table `t`, one row of every device each.
fn flush_small_files(store: &Store, n: i64) {
    for f in 0..n {
        let rows: Vec<(u64, i64, u64)> = (0..DEVICES).map(|d| (d, T0 + f, d)).collect();
        store
            .write("t", &small_rows(&rows), Durability::Sync)
            .unwrap();
        store.flush().unwrap();
    }
}
