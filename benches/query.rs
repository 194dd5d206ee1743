//! The query layer of issue 6 on a flushed one-day fleet (warm cache):
//! `latest` of one device, a one-day range of one device (8,640 rows at
//! 10 s), and a whole-table export to Arrow IPC (encoded into memory, so
//! the disk is not what is measured; `telestore bench query` measures the
//! export to a real, fsynced file and the latency percentiles).
//!
//! `cargo bench --bench query` measures; `cargo test --benches` runs each
//! once.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "a benchmark or example: a failed unwrap stops it, and it reads top to bottom"
)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::cell::OnceCell;
use std::hint::black_box;
use telestore::query::output::{Format, Printer};
use telestore::query::{Kind, Params, Plan, Prepared};
use telestore::testkit::{self, FLEET_T0_MS};
use telestore::{Durability, Options, Store};

const TABLE: &str = "readings";
const DEVICES: u64 = 100;
/// One day at 10 s.
const ROUNDS: u64 = 8_640;

fn fleet() -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), Options::default()).expect("open");
    store
        .create_table(testkit::readings_schema(TABLE))
        .expect("create");
    let mut batch = Vec::new();
    for r in 0..ROUNDS {
        for d in 0..DEVICES {
            testkit::push_fleet_row(&mut batch, d, r, 10_000);
        }
        if batch.len() > 4 << 20 {
            store
                .write(TABLE, &batch, Durability::Async)
                .expect("write");
            batch.clear();
        }
    }
    store.write(TABLE, &batch, Durability::Sync).expect("write");
    store.flush().expect("flush");
    (store, dir)
}

fn params(kind: Kind) -> Params {
    Params {
        kind,
        table: TABLE.into(),
        ..Params::default()
    }
}

/// Run `p` and return the rows it produced.
fn rows(store: &Store, p: &Params) -> u64 {
    let plan = Plan::resolve(store, p, store.now_ms()).expect("plan");
    Prepared::new(store, plan)
        .run(store, &mut |b| {
            black_box(b);
            Ok(())
        })
        .expect("run")
        .rows_out
}

fn bench_query(c: &mut Criterion) {
    let cell = OnceCell::new();
    let mut g = c.benchmark_group("query");
    g.sample_size(20);
    let mut i = 0u64;
    g.bench_function("latest", |b| {
        let (store, _) = cell.get_or_init(fleet);
        let mut p = params(Kind::Latest);
        b.iter(|| {
            i += 1;
            p.device = Some((testkit::mix(i) % DEVICES).to_string());
            assert_eq!(rows(store, &p), 1);
        })
    });
    g.throughput(Throughput::Elements(ROUNDS));
    g.bench_function("range_1day", |b| {
        let (store, _) = cell.get_or_init(fleet);
        let mut p = params(Kind::Range);
        p.from = Some(format!("{FLEET_T0_MS}ms"));
        p.to = Some(format!("{}ms", FLEET_T0_MS + 86_400_000));
        b.iter(|| {
            i += 1;
            p.device = Some((testkit::mix(i) % DEVICES).to_string());
            assert_eq!(rows(store, &p), ROUNDS);
        })
    });
    g.throughput(Throughput::Elements(DEVICES * ROUNDS));
    g.bench_function("export_arrow_ipc", |b| {
        let (store, _) = cell.get_or_init(fleet);
        let p = params(Kind::Scan);
        let mut buf: Vec<u8> = Vec::with_capacity(80 << 20);
        b.iter(|| {
            buf.clear();
            let plan = Plan::resolve(store, &p, store.now_ms()).expect("plan");
            let prepared = Prepared::new(store, plan);
            let mut out = Printer::new(Format::Arrow, prepared.schema(), &mut buf).expect("ipc");
            let stats = prepared.run(store, &mut |b| out.write(&b)).expect("run");
            out.finish().expect("finish");
            assert_eq!(stats.rows_out, DEVICES * ROUNDS);
        })
    });
    g.finish();
}

criterion_group!(benches, bench_query);
criterion_main!(benches);
