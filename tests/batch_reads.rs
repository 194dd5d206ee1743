//! Batch reads (what the query layer's scans and exports run on): a
//! region whose only source is a columnar HFile hands over device runs as
//! columns, decoding only the fields asked for; every other region goes
//! through the row-by-row merge. Seeded model test: overwrites (several
//! versions kept), point and range deletes, TTL, windows, field subsets,
//! regions with memstore data or several files — the query layer's Arrow
//! result must equal the row-by-row reads in every state.

mod common;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, TimestampMillisecondType, UInt64Type};
use arrow_array::RecordBatch;
use common::{open, seed, small_fields, small_schema};
use std::sync::Arc;
use telestore::clock::ManualClock;
use telestore::query::{Kind, Params, Plan, Prepared};
use telestore::read::columns::Piece;
use telestore::schema::BlockEncoding;
use telestore::{Durability, Options, Store, TableOptions};

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
fn expected(store: &Store, device: Option<u64>, from: i64, to: i64, names: &[&str]) -> Vec<OutRow> {
    let mut out = Vec::new();
    store
        .scan_all("t", from, to - 1, |r| {
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
        .scan_pieces("t", None, i64::MIN, i64::MAX, &[0], |p| {
            match p {
                Piece::Run(r) => runs += r.len(),
                Piece::Row(_) => rows += 1,
            }
            true
        })
        .unwrap();
    (runs, rows)
}

fn write_round(store: &Store, rng: &mut Rng, round: u64) {
    let mut rows = Vec::new();
    for _ in 0..300 {
        let d = rng.below(DEVICES);
        let ts = T0 + rng.below(600) as i64 * 100;
        let v = round * 100_000 + rng.below(100_000);
        telestore::schema::batch::push_row(&mut rows, d, ts, &small_fields(v));
    }
    store.write("t", &rows, Durability::Async).unwrap();
    if rng.below(3) == 0 {
        let pts: Vec<(u64, i64)> = (0..5)
            .map(|_| (rng.below(DEVICES), T0 + rng.below(600) as i64 * 100))
            .collect();
        store.delete("t", &pts, Durability::Async).unwrap();
    }
    if rng.below(8) == 0 {
        let d = rng.below(DEVICES);
        let from = T0 + rng.below(600) as i64 * 100;
        store
            .delete_range("t", d, from, from + 3_000, Durability::Async)
            .unwrap();
    }
}

/// Random queries through the query layer against the row-by-row reads.
fn check(store: &Store, rng: &mut Rng, now: i64, state: &str) {
    let names = ["v", "x", "ok"];
    for q in 0..12 {
        let mut chosen: Vec<&str> = names.iter().copied().filter(|_| rng.below(2) == 0).collect();
        if chosen.is_empty() || q == 0 {
            chosen = names.to_vec();
        }
        let from = T0 + rng.below(700) as i64 * 100 - 5_000;
        let to = from + 1 + rng.below(70_000) as i64;
        let device = (rng.below(2) == 0).then(|| rng.below(DEVICES));
        let p = Params {
            kind: if device.is_some() { Kind::Range } else { Kind::Scan },
            table: "t".into(),
            device: device.map(|d| d.to_string()),
            from: Some(format!("{from}ms")),
            to: Some(format!("{to}ms")),
            fields: Some(chosen.join(",")),
            batch_rows: Some(1 + rng.below(300) as usize),
            ..Params::default()
        };
        let got = query(store, &p, now);
        let want = expected(store, device, from, to, &chosen);
        assert_eq!(
            got.len(),
            want.len(),
            "{state}: {p:?}: row count differs"
        );
        assert!(got == want, "{state}: {p:?}: rows differ");
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
        store.create_table(small_schema("t", table)).unwrap();
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
        store.compact("t", false).unwrap();
        check(&store, &mut rng, now, &format!("case {case}: minor"));
        store.compact("t", true).unwrap();
        let (runs, rows) = piece_counts(&store);
        assert!(runs > 0 && rows == 0, "case {case}: {runs} rows in runs, {rows} rows one by one after a major compaction");
        check(&store, &mut rng, now, &format!("case {case}: major"));
        // Newer writes in the memstores: those regions merge row by row.
        write_round(&store, &mut rng, 9);
        check(&store, &mut rng, now, &format!("case {case}: major + memstore"));
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
    store.create_table(small_schema("t", opts)).unwrap();
    let mut rows = Vec::new();
    for d in 0..20u64 {
        for i in 0..2_000i64 {
            let v = d * 1_000_000 + i as u64;
            telestore::schema::batch::push_row(&mut rows, d, T0 + i * 1000, &small_fields(v));
        }
    }
    store.write("t", &rows, Durability::Sync).unwrap();
    store.flush().unwrap();
    store.compact("t", true).unwrap();
    let before = store.stats().cache.bytes;
    let mut n = 0;
    store
        .scan_pieces("t", None, i64::MIN, i64::MAX, &[1], |p| {
            if let Piece::Run(r) = p {
                assert_eq!(r.fields.len(), 1);
                assert_eq!(r.fields[0].len(), r.len() * 4, "x is an f32");
                n += r.len();
            }
            true
        })
        .unwrap();
    assert_eq!(n, 40_000);
    // 40,000 rows: keys (8 bytes of ts each) and one 4-byte column, well
    // under what the 13 field bytes per row of all three would take.
    let grown = store.stats().cache.bytes - before;
    assert!(grown < 40_000 * (8 + 4) + 64 * 1024, "cache grew by {grown} bytes");
    assert!(grown > 40_000 * (8 + 4), "cache grew by {grown} bytes");
    store.close().unwrap();
}
