//! Benchmarks that touch the disk: synced WAL appends on each I/O backend,
//! HFile writes (a flush of N cells) and reads from a flushed store (point
//! get, device range scan).
//!
//! Data lives in a temporary directory under `TELESTORE_BENCH_DIR` (default:
//! the system temp dir). Point it at the disk you care about: on a tmpfs,
//! fsync is free and the sync numbers mean nothing.
//!
//! `cargo bench --bench storage` measures; `cargo test --benches` runs each
//! benchmark once (and the checks in the setup), so the benches cannot rot.
//! Each group builds its store only when one of its benchmarks runs, so a
//! filter (`cargo bench --bench storage -- wal`) skips the other setups.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "a benchmark or example: a failed unwrap stops it, and it reads top to bottom"
)]

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use std::cell::OnceCell;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use telestore::io::{probe_uring, Backend, IoChoice, StdBackend, UringBackend};
use telestore::key::{self, DeviceId};
use telestore::testkit::{self, FLEET_T0_MS};
use telestore::{Durability, Options, Order, Store, TableOptions};
use telestore_engine::cell::{self, CellKind};
use telestore_engine::hfile::{HFileWriter, WriterOptions};

const TABLE: &str = "readings";
/// Rows per write (one WAL frame).
const BATCH_ROWS: u64 = 1_000;
/// Spacing of a fleet's readings.
const INTERVAL_MS: i64 = 10_000;
/// Cells per benchmarked HFile.
const HFILE_CELLS: u64 = 10_000;
/// The flushed fleet the reads run on: devices × readings per device.
const READ_DEVICES: u64 = 1_000;
const READ_ROUNDS: u64 = 100;

fn bench_dir() -> tempfile::TempDir {
    let base = std::env::var_os("TELESTORE_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    tempfile::Builder::new()
        .prefix("telestore-bench-")
        .tempdir_in(base)
        .expect("create bench dir")
}

/// Round `round` of a fleet of `devices`: one row per device.
fn fleet_round(devices: u64, round: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for d in 0..devices {
        testkit::push_fleet_row(&mut out, d, round, INTERVAL_MS);
    }
    out
}

/// The backends to benchmark: std, and io_uring when it works here.
fn available_io() -> Vec<IoChoice> {
    match probe_uring() {
        Ok(()) => vec![IoChoice::Std, IoChoice::Uring],
        Err(reason) => {
            println!("skipping the io_uring benchmarks: {reason}");
            vec![IoChoice::Std]
        }
    }
}

/// A store with the readings table, on a new directory.
fn open_store(io: IoChoice) -> (Store, tempfile::TempDir) {
    let dir = bench_dir();
    let opts = Options {
        io: Some(io),
        ..Default::default()
    };
    let store = Store::open(dir.path(), opts).expect("open store");
    store
        .create_table(testkit::readings_schema(TABLE))
        .expect("create table");
    (store, dir)
}

fn io_name(io: IoChoice) -> &'static str {
    match io {
        IoChoice::Uring => "uring",
        IoChoice::Std => "std",
        IoChoice::Auto => "auto",
    }
}

/// `Store::write` of a 1,000-row batch with `Durability::Sync`: one WAL
/// frame, one fdatasync (group commit has nothing to group here), the
/// memstore insert. Every batch is a new round, so keys never repeat;
/// memstore flushes run in the background as they would under ingest.
fn bench_wal(c: &mut Criterion) {
    let mut g = c.benchmark_group("wal");
    g.throughput(Throughput::Elements(BATCH_ROWS));
    for io in available_io() {
        let store = OnceCell::new();
        let mut round = 0u64;
        g.bench_function(BenchmarkId::new("append_sync_1000", io_name(io)), |b| {
            let (store, _) = store.get_or_init(|| open_store(io));
            b.iter_batched(
                || {
                    round += 1;
                    fleet_round(BATCH_ROWS, round)
                },
                |rows| {
                    let ack = store.write(TABLE, &rows, Durability::Sync).expect("write");
                    assert_eq!(ack.rows, BATCH_ROWS);
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

/// `HFILE_CELLS` sorted readings cells, as a flush would hand them over.
fn hfile_cells() -> Vec<u8> {
    let devices = 100;
    let row_width = testkit::readings_schema(TABLE).row_width();
    let mut keyed: Vec<(key::RowKey, Vec<u8>)> = Vec::new();
    for r in 0..HFILE_CELLS / devices {
        for row in fleet_round(devices, r).chunks_exact(row_width) {
            let d = u64::from_le_bytes(row[0..8].try_into().expect("8 bytes"));
            let ts = i64::from_le_bytes(row[8..16].try_into().expect("8 bytes"));
            keyed.push((key::encode(DeviceId(d), ts), row[16..].to_vec()));
        }
    }
    keyed.sort();
    let mut out = Vec::new();
    for (i, (k, fields)) in keyed.iter().enumerate() {
        cell::push(&mut out, k, i as u64 + 1, CellKind::Put, fields);
    }
    out
}

/// Write, finish (fsync) one HFile of `cells` to a new path; returns the
/// time it took and removes the file.
fn write_hfile(backend: &dyn Backend, dir: &std::path::Path, n: u64, cells: &[u8]) -> Duration {
    let schema = testkit::readings_schema(TABLE);
    let o = TableOptions::default();
    let opts = WriterOptions {
        table_id: 1,
        layout_id: schema.layout_id(),
        fields_width: schema.fields_width(),
        compression: o.compression,
        block_size_bytes: o.block_size_bytes as usize,
        bloom: o.bloom,
        expected_cells: HFILE_CELLS as usize,
        created_ms: FLEET_T0_MS,
        direct: telestore::Options::default().direct_hfile_writes,
        encoding: telestore::schema::BlockEncoding::Rows,
        field_types: Vec::new(),
        pco_level: 0,
        limiter: None,
    };
    let path = dir.join(format!("{n:016}.hfile"));
    let width = cell::cell_width(schema.fields_width());
    let start = Instant::now();
    let mut w = HFileWriter::create(backend, &path, opts).expect("create hfile");
    for c in cells.chunks_exact(width) {
        w.add(c).expect("add cell");
    }
    let (info, _) = w.finish(&[]).expect("finish hfile");
    let took = start.elapsed();
    assert_eq!(info.cells, HFILE_CELLS);
    std::fs::remove_file(&path).expect("remove hfile");
    took
}

/// An HFile of 10,000 readings cells with the default table options
/// (zstd:3, 64 KiB blocks, bloom), written and fsynced through each backend.
fn bench_hfile(c: &mut Criterion) {
    let mut g = c.benchmark_group("hfile");
    g.throughput(Throughput::Elements(HFILE_CELLS));
    let cells = OnceCell::new();
    for io in available_io() {
        let backend: OnceCell<Box<dyn Backend>> = OnceCell::new();
        let dir = OnceCell::new();
        let mut n = 0u64;
        g.bench_function(BenchmarkId::new("write_10000", io_name(io)), |b| {
            let backend = backend.get_or_init(|| match io {
                IoChoice::Uring => Box::new(UringBackend::start().expect("start io_uring")),
                _ => Box::new(StdBackend),
            });
            let cells = cells.get_or_init(hfile_cells);
            let dir = dir.get_or_init(bench_dir);
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    n += 1;
                    total += write_hfile(backend.as_ref(), dir.path(), n, cells);
                }
                total
            })
        });
    }
    g.finish();
}

/// A store holding `READ_DEVICES × READ_ROUNDS` readings, flushed to
/// HFiles (memstores empty).
fn flushed_fleet() -> (Store, tempfile::TempDir) {
    let (store, dir) = open_store(IoChoice::Std);
    for r in 0..READ_ROUNDS {
        let rows = fleet_round(READ_DEVICES, r);
        store.write(TABLE, &rows, Durability::Async).expect("write");
    }
    store.flush().expect("flush");
    let stats = store.stats();
    assert!(stats.hfiles >= 1, "flush wrote no hfile");
    assert_eq!(stats.memstore_bytes, 0, "reads must come from hfiles");
    (store, dir)
}

fn ts_of_round(r: u64) -> i64 {
    FLEET_T0_MS + r as i64 * INTERVAL_MS
}

/// Point gets of random readings and full-history device scans
/// (100 rows, newest first) on the flushed fleet; the block cache is warm
/// after the first touches.
fn bench_reads(c: &mut Criterion) {
    let fleet = OnceCell::new();
    let mut g = c.benchmark_group("read");
    g.throughput(Throughput::Elements(1));
    let mut i = 0u64;
    g.bench_function("get", |b| {
        let (store, _) = fleet.get_or_init(flushed_fleet);
        b.iter(|| {
            i += 1;
            let h = testkit::mix(i);
            let (d, r) = (h % READ_DEVICES, (h >> 32) % READ_ROUNDS);
            let row = store.get(TABLE, d, ts_of_round(r)).expect("get");
            assert!(row.is_some(), "device {d} round {r} missing");
            black_box(row)
        })
    });
    g.throughput(Throughput::Elements(READ_ROUNDS));
    let mut i = 0u64;
    g.bench_function("scan_device_100", |b| {
        let (store, _) = fleet.get_or_init(flushed_fleet);
        b.iter(|| {
            i += 1;
            let d = testkit::mix(i) % READ_DEVICES;
            let mut rows = 0u64;
            let from = ts_of_round(0);
            let to = ts_of_round(READ_ROUNDS - 1);
            store
                .scan_with(TABLE, d, from, to, Order::NewestFirst, |row| {
                    rows += 1;
                    black_box(row.fields);
                    true
                })
                .expect("scan");
            assert_eq!(rows, READ_ROUNDS, "device {d}");
        })
    });
    // Table-wide time-range scan: one sub-scan per region on the worker
    // pool, merged in key order.
    g.throughput(Throughput::Elements(READ_DEVICES * READ_ROUNDS));
    g.bench_function("scan_table", |b| {
        let (store, _) = fleet.get_or_init(flushed_fleet);
        b.iter(|| {
            let mut rows = 0u64;
            let (from, to) = (ts_of_round(0), ts_of_round(READ_ROUNDS - 1));
            store
                .scan_all(TABLE, from, to, |row| {
                    rows += 1;
                    black_box(row.fields);
                    true
                })
                .expect("scan");
            assert_eq!(rows, READ_DEVICES * READ_ROUNDS);
        })
    });
    g.finish();
}

criterion_group!(benches, bench_wal, bench_hfile, bench_reads);
criterion_main!(benches);
