//! Reads of columnar tables: a region whose only source is a columnar
//! HFile hands batch reads (the query layer's scans and exports) device
//! runs as columns, decoding only the fields asked for; merging reads of
//! columnar files turn the cached columns into cells a window at a time.
//! Seeded test against the same writes to a `rows` table (which reads
//! neither way): overwrites (several versions kept), point and range
//! deletes, TTL, windows, field subsets, regions with memstore data or
//! several files — the query layer's Arrow results and the row-by-row
//! reads must be the same in every state.

use crate::common;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, TimestampMillisecondType, UInt64Type};
use arrow_array::RecordBatch;
use common::{open, seed, small_fields, small_schema};
use std::sync::Arc;
use telestore_engine::clock::ManualClock;
use telestore_engine::read::columns::Piece;
use telestore_engine::schema::BlockEncoding;
use telestore_engine::{Durability, Options, Store, TableOptions};
use telestore_query::{Kind, Params, Plan, Prepared};

const DEVICES: u64 = 7;
const T0: i64 = 1_000_000;
const TTL_MS: i64 = 40_000;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One output row: device, ts and the asked fields' values as text.
type OutRow = (u64, i64, Vec<String>);

/// The query layer's rows (Arrow batches) for `p`.
fn query(store: &Store, p: &Params, now: i64) -> Vec<OutRow> {
    let plan = Plan::resolve(store, p, now).unwrap();
    let mut batches: Vec<RecordBatch> = Vec::new();
    Prepared::new(store, plan)
        .run(store, &mut |b| {
            batches.push(b);
            Ok(())
        })
        .unwrap();
    let mut out = Vec::new();
    for b in &batches {
        let ids = b.column(0).as_primitive::<UInt64Type>();
        let ts_col = b.schema().index_of("ts").unwrap();
        let ts = b.column(ts_col).as_primitive::<TimestampMillisecondType>();
        for i in 0..b.num_rows() {
            let vals = (ts_col + 1..b.num_columns())
                .map(|c| field_text(b, c, i))
                .collect();
            out.push((ids.value(i), ts.value(i), vals));
        }
    }
    out
}

fn field_text(b: &RecordBatch, c: usize, i: usize) -> String {
    let col = b.column(c);
    match b.schema().field(c).name().as_str() {
        "v" => col.as_primitive::<UInt64Type>().value(i).to_string(),
        "x" => format!("{:?}", col.as_primitive::<Float32Type>().value(i)),
        "ok" => col.as_boolean().value(i).to_string(),
        other => panic!("unexpected column {other}"),
    }
}

/// The same rows read one by one through the merge (`scan_all`), with
/// the fields `names` formatted as the query's.
fn row_reads(
    store: &Store,
    table: &str,
    device: Option<u64>,
    from: i64,
    to: i64,
    names: &[&str],
) -> Vec<OutRow> {
    let mut out = Vec::new();
    store
        .scan_all(table, from, to - 1, |r| {
            if device.is_none_or(|d| d == r.device.0) {
                let v = u64::from_le_bytes(r.fields[..8].try_into().unwrap());
                let x = f32::from_le_bytes(r.fields[8..12].try_into().unwrap());
                let vals = names
                    .iter()
                    .map(|n| match *n {
                        "v" => v.to_string(),
                        "x" => format!("{x:?}"),
                        _ => (r.fields[12] != 0).to_string(),
                    })
                    .collect();
                out.push((r.device.0, r.ts, vals));
            }
            true
        })
        .unwrap();
    out
}

/// How many rows a batch read hands over as runs, and how many as rows.
fn piece_counts(store: &Store) -> (usize, usize) {
    let (mut runs, mut rows) = (0, 0);
    store
        .scan_pieces("c", None, i64::MIN, i64::MAX, &[0], |p| {
            match p {
                Piece::Run(r) => runs += r.len(),
                Piece::Row(_) => rows += 1,
            }
            true
        })
        .unwrap();
    (runs, rows)
}

/// The same random writes and deletes to both tables.
fn write_round(store: &Store, rng: &mut Rng, round: u64) {
    let mut rows = Vec::new();
    for _ in 0..300 {
        let d = rng.below(DEVICES);
        let ts = T0 + rng.below(600) as i64 * 100;
        let v = round * 100_000 + rng.below(100_000);
        telestore_engine::schema::batch::push_row(&mut rows, d, ts, &small_fields(v));
    }
    let pts: Vec<(u64, i64)> = (0..5)
        .map(|_| (rng.below(DEVICES), T0 + rng.below(600) as i64 * 100))
        .collect();
    let deletes = rng.below(3) == 0;
    let range = (rng.below(8) == 0).then(|| (rng.below(DEVICES), T0 + rng.below(600) as i64 * 100));
    for t in ["c", "r"] {
        store.write(t, &rows, Durability::Async).unwrap();
        if deletes {
            store.delete(t, &pts, Durability::Async).unwrap();
        }
        if let Some((d, from)) = range {
            store
                .delete_range(t, d, from, from + 3_000, Durability::Async)
                .unwrap();
        }
    }
}

/// Rows without their sequence numbers (the tables' writes get their
/// own).
fn unseq(rows: Vec<telestore_engine::Row>) -> Vec<(u64, i64, Vec<u8>)> {
    rows.into_iter()
        .map(|r| (r.device, r.ts, r.fields))
        .collect()
}

/// Random queries of the columnar table through the query layer and
/// row by row, against the rows table.
fn check(store: &Store, rng: &mut Rng, now: i64, state: &str) {
    let names = ["v", "x", "ok"];
    for q in 0..12 {
        let mut chosen: Vec<&str> = names
            .iter()
            .copied()
            .filter(|_| rng.below(2) == 0)
            .collect();
        if chosen.is_empty() || q == 0 {
            chosen = names.to_vec();
        }
        let from = T0 + rng.below(700) as i64 * 100 - 5_000;
        let to = from + 1 + rng.below(70_000) as i64;
        let device = (rng.below(2) == 0).then(|| rng.below(DEVICES));
        let mut p = Params {
            kind: if device.is_some() {
                Kind::Range
            } else {
                Kind::Scan
            },
            table: "r".into(),
            device: device.map(|d| d.to_string()),
            from: Some(format!("{from}ms")),
            to: Some(format!("{to}ms")),
            fields: Some(chosen.join(",")),
            batch_rows: Some(1 + rng.below(300) as usize),
            ..Params::default()
        };
        let want = query(store, &p, now);
        assert_eq!(want, row_reads(store, "r", device, from, to, &chosen));
        p.table = "c".into();
        let got = query(store, &p, now);
        assert_eq!(got.len(), want.len(), "{state}: {p:?}: row count differs");
        assert!(got == want, "{state}: {p:?}: rows differ");
        let rows = row_reads(store, "c", device, from, to, &chosen);
        assert!(rows == want, "{state}: {p:?}: row-by-row reads differ");
        if let Some(d) = device {
            let n = 1 + rng.below(5) as usize;
            let latest = |t| unseq(store.latest(t, d, n).unwrap());
            assert_eq!(latest("c"), latest("r"), "{state}: latest {d} {n}");
            for ts in [from, from + 100, to] {
                let ts = ts - ts % 100;
                let v = 1 + rng.below(3) as u32;
                let get = |t| unseq(store.get_versions(t, d, ts, v).unwrap());
                assert_eq!(get("c"), get("r"), "{state}: get {d} {ts}");
            }
        }
    }
}

#[test]
fn batch_reads_equal_row_reads_in_every_state() {
    let s = seed(0x5eed_ba7c);
    let mut rng = Rng(s);
    for case in 0..4 {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let opts = Options {
            clock: clock.clone(),
            flush_threshold_bytes: 64 << 20,
            compaction_threads: 0,
            ..Options::default()
        };
        let store = open(dir.path(), opts);
        let table = TableOptions {
            encoding: BlockEncoding::Columnar,
            regions: 1 + rng.below(3) as u32,
            max_versions: 1 + rng.below(3) as u32,
            ttl_ms: (case % 2 == 1).then_some(TTL_MS),
            block_size_bytes: 1024 << rng.below(3),
            ..TableOptions::default()
        };
        store
            .create_table(small_schema("c", table.clone()))
            .unwrap();
        let rows = TableOptions {
            encoding: BlockEncoding::Rows,
            ..table
        };
        store.create_table(small_schema("r", rows)).unwrap();
        for round in 0..6 {
            write_round(&store, &mut rng, round);
            if rng.below(2) == 0 {
                store.flush().unwrap();
            }
        }
        let now = T0 + 70_000;
        clock.set(now);
        check(&store, &mut rng, now, &format!("case {case}: as written"));
        store.flush().unwrap();
        for t in ["c", "r"] {
            store.compact(t, false).unwrap();
        }
        check(&store, &mut rng, now, &format!("case {case}: minor"));
        for t in ["c", "r"] {
            store.compact(t, true).unwrap();
        }
        let (runs, rows) = piece_counts(&store);
        assert!(
            runs > 0 && rows == 0,
            "case {case}: {runs} rows in runs, {rows} rows one by one after a major compaction"
        );
        check(&store, &mut rng, now, &format!("case {case}: major"));
        // Newer writes in the memstores: those regions merge row by row.
        write_round(&store, &mut rng, 9);
        check(
            &store,
            &mut rng,
            now,
            &format!("case {case}: major + memstore"),
        );
        store.close().unwrap();
    }
}

#[test]
fn a_batch_read_decodes_only_the_fields_it_asks_for() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Options::default());
    let opts = TableOptions {
        encoding: BlockEncoding::Columnar,
        ..TableOptions::default()
    };
    store.create_table(small_schema("c", opts)).unwrap();
    let mut rows = Vec::new();
    for d in 0..20u64 {
        for i in 0..2_000i64 {
            let v = d * 1_000_000 + i as u64;
            telestore_engine::schema::batch::push_row(
                &mut rows,
                d,
                T0 + i * 1000,
                &small_fields(v),
            );
        }
    }
    store.write("c", &rows, Durability::Sync).unwrap();
    store.flush().unwrap();
    store.compact("c", true).unwrap();
    let before = store.stats().cache.bytes;
    let mut n = 0;
    store
        .scan_pieces("c", None, i64::MIN, i64::MAX, &[1], |p| {
            if let Piece::Run(r) = p {
                assert_eq!(r.field_count(), 1);
                assert_eq!(r.field(0).len(), r.len() * 4, "x is an f32");
                n += r.len();
            }
            true
        })
        .unwrap();
    assert_eq!(n, 40_000);
    // 40,000 rows: keys (8 bytes of ts each) and one 4-byte column, well
    // under what the 13 field bytes per row of all three would take.
    let grown = store.stats().cache.bytes - before;
    assert!(
        grown < 40_000 * (8 + 4) + 64 * 1024,
        "cache grew by {grown} bytes"
    );
    assert!(grown > 40_000 * (8 + 4), "cache grew by {grown} bytes");
    // A merging read of the same file adds the sequence numbers and the
    // other two fields as columns, not the block as cells (40 bytes a row).
    let before = store.stats().cache.bytes;
    assert_eq!(
        store
            .scan_all("c", i64::MIN, i64::MAX, |_| true)
            .unwrap()
            .rows,
        40_000
    );
    let grown = store.stats().cache.bytes - before;
    assert!(
        grown < 40_000 * (8 + 8 + 1) + 64 * 1024,
        "cache grew by {grown} bytes"
    );
    store.close().unwrap();
}

/// Rows a batch read of table `c` over `[from, to]` hands over as runs.
fn rows_in_runs(store: &Store, from: i64, to: i64, fields: &[usize]) -> usize {
    let mut n = 0;
    store
        .scan_pieces("c", None, from, to, fields, |p| {
            if let Piece::Run(r) = p {
                n += r.len();
            }
            true
        })
        .unwrap();
    n
}

/// A store in `dir` whose one-region columnar table `c` holds `rows` in
/// one compacted file, reopened (nothing cached).
fn compacted_columnar(dir: &std::path::Path, rows: &[u8]) -> Store {
    let store = open(dir, Options::default());
    let opts = TableOptions {
        encoding: BlockEncoding::Columnar,
        regions: 1,
        ..TableOptions::default()
    };
    store.create_table(small_schema("c", opts)).unwrap();
    store.write("c", rows, Durability::Sync).unwrap();
    store.flush().unwrap();
    store.compact("c", true).unwrap();
    store.close().unwrap();
    open(dir, Options::default())
}

#[test]
fn a_window_that_misses_a_block_decodes_none_of_its_fields() {
    let dir = tempfile::tempdir().unwrap();
    // One device, 40,960 readings: ten blocks of 4,096.
    let mut rows = Vec::new();
    for i in 0..40_960i64 {
        telestore_engine::schema::batch::push_row(
            &mut rows,
            1,
            T0 + i * 1000,
            &small_fields(i as u64),
        );
    }
    let store = compacted_columnar(dir.path(), &rows);
    let before = store.stats().cache.bytes;
    // The newest 100 readings, over the whole table: every block's keys
    // are looked at, one block holds the window.
    let (from, to) = (T0 + 40_860 * 1000, T0 + 40_959 * 1000);
    assert_eq!(rows_in_runs(&store, from, to, &[0]), 100);
    // Keys of the blocks looked at (8 bytes a row) and one block's `v`
    // (8 bytes a row): far less than `v` of all ten blocks.
    let grown = store.stats().cache.bytes - before;
    assert!(
        grown < 40_960 * 8 + 4_096 * 8 + 64 * 1024,
        "cache grew by {grown} bytes"
    );
    store.close().unwrap();
}

/// A windowed scan leaves blocks whose keys are cached but not their
/// fields; `latest` on such a block reads its run heads instead of
/// decoding every field of it for one row.
#[test]
fn latest_on_a_block_with_only_its_keys_cached_decodes_no_field() {
    let dir = tempfile::tempdir().unwrap();
    // 8 devices × 5,000 readings in blocks of 4,096 rows: a device's
    // newest readings and another's oldest share no block but some.
    let mut rows = Vec::new();
    for d in 0..8u64 {
        for i in 0..5_000i64 {
            telestore_engine::schema::batch::push_row(
                &mut rows,
                d,
                T0 + i * 1000,
                &small_fields(i as u64),
            );
        }
    }
    let store = compacted_columnar(dir.path(), &rows);
    // The oldest ten readings of every device, over the whole table.
    let (from, to) = (T0, T0 + 9 * 1000);
    assert_eq!(rows_in_runs(&store, from, to, &[0, 1, 2]), 80);
    let before = store.stats().cache.bytes;
    for d in 0..8u64 {
        let r = store.latest("c", d, 1).unwrap();
        assert_eq!(r[0].ts, T0 + 4_999 * 1000);
        assert_eq!(r[0].fields, small_fields(4_999));
    }
    // Run heads are a cell a run; one block's fields are 17 bytes a row.
    let grown = store.stats().cache.bytes - before;
    assert!(grown < 4_096 * 8, "cache grew by {grown} bytes");
    store.close().unwrap();
}
