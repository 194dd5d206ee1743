//! Decode speed of one column block: pco against a hand-written
//! decimal + delta + bit-packing codec, on the sensor fleet's seven walks
//! (`telestore_engine::testkit::Truck`, the walks of
//! `crates/engine/src/testkit.rs`). One device per block, as a
//! single-device scan reads them: `--blocks` blocks of `--rows` rows per
//! field. Every decoded block is compared bit for bit with its input.
//!
//! `cargo run --release --manifest-path tools/decode-speed/Cargo.toml --
//! [--blocks 256] [--rows 4096] [--rounds 7]`

use std::time::Instant;
use telestore_engine::testkit::{Truck, Values, READINGS_FIELDS};

/// `rows` readings of one truck, per field: the engine's own sensor fleet
/// (`testkit::Truck`, what `load` and `bench ingest` write).
fn truck(seed: u64, id: u64, rows: usize) -> Vec<Vec<f64>> {
    let mut t = Truck::new(seed, id);
    let mut cols = vec![Vec::with_capacity(rows); READINGS_FIELDS.len()];
    for _ in 0..rows {
        for (col, v) in cols.iter_mut().zip(t.next_reading(Values::Sensor)) {
            col.push(v);
        }
    }
    cols
}

fn pco_encode(xs: &[f64]) -> Vec<u8> {
    pco::standalone::simple_compress(xs, &pco::ChunkConfig::default()).expect("pco encodes")
}

fn pco_decode(buf: &[u8]) -> Vec<f64> {
    pco::standalone::simple_decompress::<f64>(buf).expect("pco decodes")
}

/// Decimal + delta + bit-packing: the smallest `e` under which every
/// value is `i / 10^e` exactly (bit for bit), then `i`'s differences,
/// zigzagged, at one bit width. Layout: e (1), width (1), first i (8),
/// then the packed differences and 8 bytes of slack. `None` when no `e`
/// fits (NaN, infinities, -0.0, true doubles).
fn ddb_encode(xs: &[f64]) -> Option<Vec<u8>> {
    let (e, ints) = (0..=10u8).find_map(|e| {
        let p = 10f64.powi(e as i32);
        let ints: Option<Vec<i64>> = xs
            .iter()
            .map(|&x| {
                let i = (x * p).round();
                let ok = i.abs() < 9.0e15 && (i / p).to_bits() == x.to_bits();
                ok.then_some(i as i64)
            })
            .collect();
        ints.map(|v| (e, v))
    })?;
    let zz: Vec<u64> = ints
        .windows(2)
        .map(|w| {
            let d = w[1].wrapping_sub(w[0]);
            ((d << 1) ^ (d >> 63)) as u64
        })
        .collect();
    let width = 64 - zz.iter().fold(0u64, |a, &z| a | z).leading_zeros();
    if width > 56 {
        return None;
    }
    let mut out = vec![e, width as u8];
    out.extend_from_slice(&ints.first().copied().unwrap_or(0).to_le_bytes());
    let mut packed = vec![0u8; (zz.len() * width as usize).div_ceil(8) + 8];
    for (k, &z) in zz.iter().enumerate() {
        let bit = k * width as usize;
        let at = bit / 8;
        let word = u64::from_le_bytes(packed[at..at + 8].try_into().unwrap()) | (z << (bit % 8));
        packed[at..at + 8].copy_from_slice(&word.to_le_bytes());
    }
    out.extend_from_slice(&packed);
    Some(out)
}

fn ddb_decode(buf: &[u8], n: usize, out: &mut Vec<f64>) {
    out.clear();
    let (e, width) = (buf[0], buf[1] as usize);
    let p = 10f64.powi(e as i32);
    let mut cur = i64::from_le_bytes(buf[2..10].try_into().unwrap());
    let packed = &buf[10..];
    let mask = if width == 0 {
        0
    } else {
        u64::MAX >> (64 - width)
    };
    out.push(cur as f64 / p);
    for k in 0..n.saturating_sub(1) {
        let bit = k * width;
        let at = bit / 8;
        let word = u64::from_le_bytes(packed[at..at + 8].try_into().unwrap());
        let z = (word >> (bit % 8)) & mask;
        cur = cur.wrapping_add(((z >> 1) as i64) ^ -((z & 1) as i64));
        out.push(cur as f64 / p);
    }
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

fn main() {
    let blocks = arg("--blocks", 256);
    let rows = arg("--rows", 4096);
    let rounds = arg("--rounds", 7);
    // One block per truck: `blocks` trucks, seed 1.
    let data: Vec<Vec<Vec<f64>>> = (0..blocks as u64).map(|t| truck(1, t, rows)).collect();
    println!(
        "{blocks} blocks x {rows} rows of one device, best of {rounds} rounds; M values/s decoded (one thread), bytes/value"
    );
    println!(
        "{:<18} {:>10} {:>10} {:>10} {:>10}",
        "column", "pco", "pco B/v", "ddb", "ddb B/v"
    );
    let (mut pco_s, mut ddb_s, mut pco_b, mut ddb_b) = (0f64, 0f64, 0usize, 0usize);
    for (f, name) in READINGS_FIELDS.iter().enumerate() {
        let cols: Vec<&Vec<f64>> = data.iter().map(|b| &b[f]).collect();
        let pco_bufs: Vec<Vec<u8>> = cols.iter().map(|c| pco_encode(c)).collect();
        let ddb_bufs: Vec<Vec<u8>> = cols
            .iter()
            .map(|c| ddb_encode(c).expect("sensor values are decimals"))
            .collect();
        let values = (blocks * rows) as f64;
        let mut best_pco = f64::MAX;
        let mut best_ddb = f64::MAX;
        let mut out = Vec::with_capacity(rows);
        for _ in 0..rounds {
            let t = Instant::now();
            for (b, c) in pco_bufs.iter().zip(&cols) {
                let d = pco_decode(b);
                assert!(d
                    .iter()
                    .zip(c.iter())
                    .all(|(a, b)| a.to_bits() == b.to_bits()));
            }
            best_pco = best_pco.min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            for (b, c) in ddb_bufs.iter().zip(&cols) {
                ddb_decode(b, rows, &mut out);
                assert!(out
                    .iter()
                    .zip(c.iter())
                    .all(|(a, b)| a.to_bits() == b.to_bits()));
            }
            best_ddb = best_ddb.min(t.elapsed().as_secs_f64());
        }
        let pb: usize = pco_bufs.iter().map(Vec::len).sum();
        let db: usize = ddb_bufs.iter().map(Vec::len).sum();
        println!(
            "{name:<18} {:>10.1} {:>10.3} {:>10.1} {:>10.3}",
            values / best_pco / 1e6,
            pb as f64 / values,
            values / best_ddb / 1e6,
            db as f64 / values
        );
        pco_s += best_pco;
        ddb_s += best_ddb;
        pco_b += pb;
        ddb_b += db;
    }
    let rows_total = (blocks * rows) as f64;
    println!(
        "{:<18} {:>10.1} {:>10.3} {:>10.1} {:>10.3}   (M rows/s of 7 fields, bytes/row)",
        "all seven",
        rows_total / pco_s / 1e6,
        pco_b as f64 / rows_total,
        rows_total / ddb_s / 1e6,
        ddb_b as f64 / rows_total
    );
}
