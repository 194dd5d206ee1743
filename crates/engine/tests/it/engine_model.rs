//! Guards read correctness: a seeded random sequence of puts, overwrites,
//! point deletes, range deletes, flushes and reopens must always read back
//! exactly like a `BTreeMap` reference model (gets, versions, latest-N,
//! device scans in both orders, table-wide window scans).

use crate::common;

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use telestore_engine::schema::{BlockEncoding, TableOptions};
use telestore_engine::{Compression, Durability, Order, Store};

/// (device, ts) -> versions, newest first (values of `v`).
type Model = BTreeMap<(u64, i64), Vec<u64>>;

const DEVICES: u64 = 12;
/// Writes take times in 0..TS_SPAN (the engine refuses times before 1970);
/// reads span -TS_SPAN..=TS_SPAN, so ranges before 1970 are asked too.
const TS_SPAN: i64 = 60;

fn options(rng: &mut SmallRng) -> TableOptions {
    let compression =
        [Compression::None, Compression::Snappy, Compression::Zstd(1)][rng.gen_range(0..3)];
    let encoding = [BlockEncoding::Rows, BlockEncoding::Columnar][rng.gen_range(0..2)];
    TableOptions {
        max_versions: 3,
        compression,
        block_size_bytes: 1024,
        encoding,
        ..TableOptions::default()
    }
}

fn check_device(store: &Store, model: &Model, d: u64, rng: &mut SmallRng) {
    let from = rng.gen_range(-TS_SPAN..TS_SPAN);
    let to = rng.gen_range(from..=TS_SPAN);
    let want: Vec<(i64, u64)> = model
        .range((d, from)..=(d, to))
        .filter_map(|((_, ts), vs)| vs.first().map(|v| (*ts, *v)))
        .rev()
        .collect();
    let got: Vec<(i64, u64)> = store
        .scan("m", d, from, to, Order::NewestFirst)
        .unwrap()
        .iter()
        .map(|r| (r.ts, u64::from_le_bytes(r.fields[..8].try_into().unwrap())))
        .collect();
    assert_eq!(got, want, "device {d} [{from}, {to}] newest first");
    for r in store.scan("m", d, from, to, Order::NewestFirst).unwrap() {
        assert_eq!(
            r.fields,
            small_fields(u64::from_le_bytes(r.fields[..8].try_into().unwrap()))
        );
    }
    let asc: Vec<i64> = store
        .scan("m", d, from, to, Order::OldestFirst)
        .unwrap()
        .iter()
        .map(|r| r.ts)
        .collect();
    let mut want_asc: Vec<i64> = want.iter().map(|(t, _)| *t).collect();
    want_asc.reverse();
    assert_eq!(asc, want_asc, "device {d} oldest first");
    let n = rng.gen_range(1..6);
    let latest: Vec<i64> = store
        .latest("m", d, n)
        .unwrap()
        .iter()
        .map(|r| r.ts)
        .collect();
    let want_latest: Vec<i64> = model
        .range((d, i64::MIN)..=(d, i64::MAX))
        .rev()
        .filter(|(_, vs)| !vs.is_empty())
        .take(n)
        .map(|((_, ts), _)| *ts)
        .collect();
    assert_eq!(latest, want_latest, "latest {n} of device {d}");
}

fn check_point(store: &Store, model: &Model, rng: &mut SmallRng) {
    let d = rng.gen_range(0..DEVICES);
    let ts = rng.gen_range(-TS_SPAN..TS_SPAN);
    let want: Vec<u64> = model
        .get(&(d, ts))
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .take(3)
        .collect();
    let got: Vec<u64> = store
        .get_versions("m", d, ts, 5)
        .unwrap()
        .iter()
        .map(|r| u64::from_le_bytes(r.fields[..8].try_into().unwrap()))
        .collect();
    assert_eq!(got, want, "versions of ({d}, {ts})");
    let one = store
        .get("m", d, ts)
        .unwrap()
        .map(|r| u64::from_le_bytes(r.fields[..8].try_into().unwrap()));
    assert_eq!(one, want.first().copied());
}

fn check_window(store: &Store, model: &Model, rng: &mut SmallRng) {
    let from = rng.gen_range(-TS_SPAN..TS_SPAN);
    let to = rng.gen_range(from..=TS_SPAN);
    let mut got = Vec::new();
    store
        .scan_all("m", from, to, |r| {
            got.push((
                r.device.0,
                r.ts,
                u64::from_le_bytes(r.fields[..8].try_into().unwrap()),
            ));
            true
        })
        .unwrap();
    got.sort();
    let want: Vec<(u64, i64, u64)> = model
        .iter()
        .filter(|((_, ts), vs)| *ts >= from && *ts <= to && !vs.is_empty())
        .map(|((d, ts), vs)| (*d, *ts, vs[0]))
        .collect();
    assert_eq!(got, want, "window [{from}, {to}]");
}

fn run(seed: u64, steps: usize) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path(), tiny_options());
    store
        .create_table(small_schema("m", options(&mut rng)))
        .unwrap();
    let schema = store.schema("m").unwrap();
    let mut model = Model::new();
    let mut next_v = 1u64;
    for step in 0..steps {
        let durability = if rng.gen_bool(0.7) {
            Durability::Sync
        } else {
            Durability::Async
        };
        match rng.gen_range(0..100) {
            0..=49 => {
                let n = rng.gen_range(1..40);
                let rows: Vec<(u64, i64, u64)> = (0..n)
                    .map(|_| {
                        next_v += 1;
                        (rng.gen_range(0..DEVICES), rng.gen_range(0..TS_SPAN), next_v)
                    })
                    .collect();
                store.write("m", &small_rows(&rows), durability).unwrap();
                for (d, ts, v) in rows {
                    model.entry((d, ts)).or_default().insert(0, v);
                }
            }
            50..=61 => {
                let pts: Vec<(u64, i64)> = (0..rng.gen_range(1..5))
                    .map(|_| (rng.gen_range(0..DEVICES), rng.gen_range(0..TS_SPAN)))
                    .collect();
                store.delete("m", &pts, durability).unwrap();
                for p in pts {
                    model.remove(&p);
                }
            }
            62..=66 => {
                let d = rng.gen_range(0..DEVICES);
                let from = rng.gen_range(-TS_SPAN..TS_SPAN);
                let to = rng.gen_range(from..from + 20);
                store.delete_range("m", d, from, to, durability).unwrap();
                let keys: Vec<_> = model.range((d, from)..=(d, to)).map(|(k, _)| *k).collect();
                for k in keys {
                    model.remove(&k);
                }
            }
            67..=69 => store.flush().unwrap(),
            // A major compaction writes long runs: columnar blocks then
            // carry run heads, which `latest` and gets read first.
            70..=71 => {
                store.compact("m", true).unwrap();
            }
            72..=74 => {
                drop(store);
                store = open(dir.path(), tiny_options());
                assert_eq!(
                    store.schema("m").unwrap(),
                    schema,
                    "schema after reopen (step {step})"
                );
            }
            75..=84 => check_device(&store, &model, rng.gen_range(0..DEVICES), &mut rng),
            85..=94 => check_point(&store, &model, &mut rng),
            _ => check_window(&store, &model, &mut rng),
        }
    }
    for d in 0..DEVICES {
        check_device(&store, &model, d, &mut rng);
    }
    check_window(&store, &model, &mut rng);
    drop(store);
    let store = open(dir.path(), tiny_options());
    for d in 0..DEVICES {
        check_device(&store, &model, d, &mut rng);
    }
}

#[test]
fn model_random_ops_match_btreemap() {
    let base = seed(0x7e1e_5707);
    for i in 0..4 {
        run(base.wrapping_add(i), 600);
    }
}

#[test]
fn model_long_single_seed() {
    run(seed(42), 2_000);
}
