//! CPU-only benchmarks of the codecs on the write and read paths: row keys,
//! memstore inserts and HFile data blocks per compression codec.
//!
//! `cargo bench --bench codec` measures; `cargo test --benches` runs each
//! benchmark once (and the checks in the setup), so the benches cannot rot.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "a benchmark or example: a failed unwrap stops it, and it reads top to bottom"
)]

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BatchSize, BenchmarkGroup, BenchmarkId, Criterion, Throughput,
};
use std::hint::black_box;
use telestore::key::{self, DeviceId, KEY_LEN};
use telestore::schema::Batch;
use telestore::schema::FieldType;
use telestore::testkit::{self, FLEET_T0_MS};
use telestore::Compression;
use telestore_engine::cell::{self, CellKind};
use telestore_engine::hfile::block;
use telestore_engine::hfile::columnar::ColumnarConfig;
use telestore_engine::memstore::Memstore;

/// Keys per key-codec iteration.
const KEYS: u64 = 1_000;
/// Rows per ingest batch (one WAL frame, one memstore insert).
const BATCH_ROWS: u64 = 1_000;
/// Spacing of a fleet's readings.
const INTERVAL_MS: i64 = 10_000;
/// Devices × rounds in one data block: 800 readings cells of 83 bytes,
/// about the default 64 KiB block.
const BLOCK_DEVICES: u64 = 8;
const BLOCK_ROUNDS: u64 = 100;

fn readings_fields_width() -> usize {
    testkit::readings_schema("readings").fields_width()
}

/// One ingest batch: round `round` of `rows` devices.
fn fleet_batch(rows: u64, round: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for d in 0..rows {
        testkit::push_fleet_row(&mut out, d, round, INTERVAL_MS);
    }
    out
}

fn bench_key(c: &mut Criterion) {
    let mut g = c.benchmark_group("key");
    g.throughput(Throughput::Elements(KEYS));
    let pairs: Vec<(DeviceId, i64)> = (0..KEYS)
        .map(|i| {
            let d = DeviceId(testkit::mix(i));
            (d, FLEET_T0_MS + i as i64 * INTERVAL_MS)
        })
        .collect();
    g.bench_function("encode", |b| {
        b.iter(|| {
            for (d, ts) in &pairs {
                black_box(key::encode(black_box(*d), black_box(*ts)));
            }
        })
    });
    let encoded: Vec<u8> = pairs
        .iter()
        .flat_map(|(d, ts)| key::encode(*d, *ts))
        .collect();
    for (k, (d, ts)) in encoded.chunks_exact(KEY_LEN).zip(&pairs) {
        let back = key::decode(k).expect("valid key");
        assert_eq!((back.device, back.ts), (*d, *ts));
    }
    g.bench_function("decode", |b| {
        b.iter(|| {
            for k in black_box(&encoded).chunks_exact(KEY_LEN) {
                black_box(key::decode(k).expect("valid key"));
            }
        })
    });
    g.finish();
}

/// Routing a key to its region (binary search over 16 region starts).
fn bench_route(c: &mut Criterion) {
    let mut g = c.benchmark_group("region");
    g.throughput(Throughput::Elements(KEYS));
    let starts = telestore::region::pre_split_starts(16);
    let keys: Vec<_> = (0..KEYS)
        .map(|i| key::encode(DeviceId(testkit::mix(i)), FLEET_T0_MS))
        .collect();
    g.bench_function("route_16", |b| {
        b.iter(|| {
            for k in &keys {
                black_box(telestore::region::route(black_box(&starts), k));
            }
        })
    });
    g.finish();
}

fn bench_memstore(c: &mut Criterion) {
    let fields_width = readings_fields_width();
    let row_width = testkit::readings_schema("readings").row_width();
    let rows = fleet_batch(BATCH_ROWS, 0);
    let batch = Batch::new(&rows, row_width).expect("valid batch");
    assert_eq!(batch.len() as u64, BATCH_ROWS);
    let mut g = c.benchmark_group("memstore");
    g.throughput(Throughput::Elements(BATCH_ROWS));
    // A fresh memstore per insert; building and dropping it is not timed.
    g.bench_function("insert_puts_1000", |b| {
        b.iter_batched(
            || Memstore::new(fields_width),
            |m| {
                m.insert_puts(1, &batch);
                m
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

/// Sorted readings cells for one block, and their count.
fn block_cells() -> (Vec<u8>, u32) {
    let width = cell::cell_width(readings_fields_width());
    let mut rows = Vec::new();
    for r in 0..BLOCK_ROUNDS {
        rows.extend(fleet_batch(BLOCK_DEVICES, r));
    }
    let row_width = testkit::readings_schema("readings").row_width();
    let mut cells: Vec<Vec<u8>> = Batch::new(&rows, row_width)
        .expect("valid batch")
        .rows()
        .enumerate()
        .map(|(i, (head, fields))| {
            let mut c = Vec::with_capacity(width);
            let k = key::encode(DeviceId(head.device), head.ts);
            cell::push(&mut c, &k, i as u64 + 1, CellKind::Put, fields);
            c
        })
        .collect();
    cells.sort_by(|a, b| cell::cmp(a, b));
    (cells.concat(), cells.len() as u32)
}

/// Encode `raw` once with `encode` (checking that it decodes back), print
/// its size, and bench encoding and decoding it; returns the block.
fn bench_encoding(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    (raw, cells): (&[u8], u32),
    encode: impl Fn(&[u8], &mut Vec<u8>),
) -> Vec<u8> {
    let width = cell::cell_width(readings_fields_width());
    let mut encoded = Vec::new();
    encode(raw, &mut encoded);
    assert_eq!(block::decode(&encoded, width).expect("valid block"), raw);
    println!(
        "{name}: {cells} cells, {} raw bytes -> {} bytes ({:.2} bytes/cell)",
        raw.len(),
        encoded.len(),
        encoded.len() as f64 / f64::from(cells)
    );
    let mut out = Vec::with_capacity(encoded.len() * 2);
    g.bench_function(BenchmarkId::new("encode", name), |b| {
        b.iter(|| {
            out.clear();
            encode(black_box(raw), &mut out);
        })
    });
    g.bench_function(BenchmarkId::new("decode", name), |b| {
        b.iter(|| black_box(block::decode(black_box(&encoded), width).expect("valid block")))
    });
    encoded
}

fn bench_block(c: &mut Criterion) {
    let (raw, cells) = block_cells();
    let codecs = [
        ("none", Compression::None),
        ("snappy", Compression::Snappy),
        ("zstd1", Compression::Zstd(1)),
        ("zstd3", Compression::Zstd(3)),
    ];
    let mut g = c.benchmark_group("block");
    g.throughput(Throughput::Elements(u64::from(cells)));
    for (name, codec) in codecs {
        bench_encoding(&mut g, name, (&raw, cells), |r, out| {
            block::encode(r, cells, codec, out).expect("encode block")
        });
    }
    g.finish();
}

/// Cells of the sensor fleet (`testkit::Truck`, as `load` writes it):
/// `devices` trucks × `rounds` readings 10 s apart, in cell order, seqs
/// in arrival order.
fn sensor_cells(devices: u64, rounds: u64) -> (Vec<u8>, u32) {
    let width = cell::cell_width(readings_fields_width());
    let mut trucks: Vec<testkit::Truck> = (0..devices).map(|d| testkit::Truck::new(1, d)).collect();
    let mut cells: Vec<Vec<u8>> = Vec::new();
    for r in 0..rounds {
        for (d, t) in trucks.iter_mut().enumerate() {
            let mut c = Vec::with_capacity(width);
            let k = key::encode(DeviceId(d as u64), FLEET_T0_MS + r as i64 * INTERVAL_MS);
            let seq = cells.len() as u64 + 1;
            cell::push(
                &mut c,
                &k,
                seq,
                CellKind::Put,
                &t.next_fields(testkit::Values::Sensor),
            );
            cells.push(c);
        }
    }
    cells.sort_by(|a, b| cell::cmp(a, b));
    (cells.concat(), cells.len() as u32)
}

/// Rows vs columnar blocks of the sensor fleet, per cell: a rows block as
/// the writer cuts it at 64 KiB (8 trucks × 100 readings = 800 cells),
/// a columnar block at 4,096 cells (4 trucks × 1,024 readings); for
/// columnar also the run heads alone (what `latest` reads). `pco4`/`pco8`
/// name the pco level of the columns that stay pco; since HFile v3 the
/// sensor readings' f64 columns are mostly decimal chunks.
fn bench_columnar(c: &mut Criterion) {
    let width = cell::cell_width(readings_fields_width());
    let types = [FieldType::F64; 7];
    let mut g = c.benchmark_group("sensor_block");
    let (raw, cells) = sensor_cells(8, 100);
    g.throughput(Throughput::Elements(u64::from(cells)));
    for (name, codec) in [
        ("rows_zstd1", Compression::Zstd(1)),
        ("rows_zstd3", Compression::Zstd(3)),
    ] {
        bench_encoding(&mut g, name, (&raw, cells), |r, out| {
            block::encode(r, cells, codec, out).expect("encode block")
        });
    }
    let (raw, cells) = sensor_cells(4, 1024);
    g.throughput(Throughput::Elements(u64::from(cells)));
    for (name, pco_level) in [("columnar_pco4", 4), ("columnar_pco8", 8)] {
        let cfg = ColumnarConfig {
            pco_level,
            compression: Compression::Zstd(3),
        };
        let encoded = bench_encoding(&mut g, name, (&raw, cells), |r, out| {
            block::encode_columnar(r, cells, width, &types, cfg, out).expect("encode")
        });
        g.bench_function(BenchmarkId::new("heads", name), |b| {
            b.iter(|| black_box(block::decode_heads(black_box(&encoded), width).expect("valid")))
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    bench_key,
    bench_route,
    bench_memstore,
    bench_block,
    bench_columnar
);
criterion_main!(benches);
