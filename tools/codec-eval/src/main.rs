//! Issue 18's codec evaluation: how small the fleet's columns get with
//! `pco` (pcodec) and with the codecs we would write ourselves, block by
//! block, before a columnar block format is fixed.
//!
//! The fleet is `telestore_engine::testkit::Truck` (what `load` and `bench ingest`
//! send), sorted by row key as an HFile holds it (hash prefix, device,
//! newest first), cut into blocks of N rows. Per block and column:
//!
//! - keys: device ids as runs (id u64 + run length u32 per run) and
//!   timestamps as delta-of-delta, bit-packed (a constant interval costs
//!   a few bits per block); also pco on the raw ts column;
//! - each f64 field:
//!   - `pco`: `pco::standalone::simple_compress` with the default config
//!     (its float modes find decimals and its delta search finds walks);
//!   - `dec+delta+bp`: hand-written ALP-style — the smallest power of ten
//!     `e <= 10` for which every value round-trips through `round(v·10^e)`
//!     bit-exactly, then first differences, zigzag, one bit width per block;
//!     blocks with no such `e` fall back to `xor`;
//!   - `xor`: Gorilla's XOR with the previous value (leading/trailing zero
//!     counts), for true doubles;
//!   - `zstd(raw)`: today's approach, the raw little-endian column through
//!     zstd level 3;
//!   - and zstd level 3 on top of each, kept only where it is smaller.
//!
//! Every codec's output is decoded and compared bit for bit (pco and the
//! hand-written ones), so a size is never of a lossy encoding.
//!
//! ```text
//! cargo run --release -- [--trucks 1000] [--readings 1000] [--values sensor|full-precision] [--seed 1]
//! ```

use std::collections::BTreeMap;
use telestore_engine::key::{encode, DeviceId};
use telestore_engine::testkit::{Truck, Values, READINGS_FIELDS};

struct Args {
    trucks: u64,
    readings: u64,
    values: Values,
    seed: u64,
}

fn args() -> Args {
    let mut a = Args {
        trucks: 1000,
        readings: 1000,
        values: Values::Sensor,
        seed: 1,
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    for pair in v.chunks(2) {
        let val = pair.get(1).map(String::as_str).unwrap_or("");
        match pair[0].as_str() {
            "--trucks" => a.trucks = val.parse().expect("--trucks N"),
            "--readings" => a.readings = val.parse().expect("--readings N"),
            "--seed" => a.seed = val.parse().expect("--seed N"),
            "--values" => a.values = Values::parse(val).expect("--values"),
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

/// One row: device, ts, the seven readings.
struct Row {
    device: u64,
    ts: i64,
    f: [f64; 7],
}

/// The fleet in row-key order (10 s interval).
fn fleet(a: &Args) -> Vec<Row> {
    let mut rows = Vec::with_capacity((a.trucks * a.readings) as usize);
    for d in 0..a.trucks {
        let mut t = Truck::new(a.seed, d);
        for r in 0..a.readings {
            rows.push(Row {
                device: d,
                ts: 1_700_000_000_000 + r as i64 * 10_000,
                f: t.next_reading(a.values),
            });
        }
    }
    rows.sort_by_key(|r| encode(DeviceId(r.device), r.ts));
    rows
}

// ---- bit packing -------------------------------------------------------

#[derive(Default)]
struct Bits {
    out: Vec<u8>,
    acc: u128,
    n: u32,
}

impl Bits {
    fn put(&mut self, v: u64, bits: u32) {
        if bits == 0 {
            return;
        }
        let v = if bits == 64 { v } else { v & ((1u64 << bits) - 1) };
        self.acc |= (v as u128) << self.n;
        self.n += bits;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }
    fn finish(mut self) -> Vec<u8> {
        if self.n > 0 {
            self.out.push(self.acc as u8);
        }
        self.out
    }
}

struct BitReader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl BitReader<'_> {
    fn get(&mut self, bits: u32) -> u64 {
        let mut v = 0u64;
        for i in 0..bits {
            let byte = self.b[self.pos / 8];
            let bit = (byte >> (self.pos % 8)) & 1;
            v |= (bit as u64) << i;
            self.pos += 1;
        }
        v
    }
}

fn zigzag(x: i64) -> u64 {
    ((x << 1) ^ (x >> 63)) as u64
}

fn unzigzag(x: u64) -> i64 {
    ((x >> 1) as i64) ^ -((x & 1) as i64)
}

fn width(max: u64) -> u32 {
    64 - max.leading_zeros()
}

/// Frame-of-reference bit packing of signed values: 1 byte width, 8 bytes
/// first value, then zigzagged differences at that width.
fn delta_bp(xs: &[i64]) -> Vec<u8> {
    let deltas: Vec<u64> = xs.windows(2).map(|w| zigzag(w[1].wrapping_sub(w[0]))).collect();
    let bits = width(deltas.iter().copied().max().unwrap_or(0));
    let mut out = vec![bits as u8];
    out.extend_from_slice(&xs.first().copied().unwrap_or(0).to_le_bytes());
    let mut b = Bits::default();
    for d in deltas {
        b.put(d, bits);
    }
    out.extend(b.finish());
    out
}

fn undelta_bp(buf: &[u8], n: usize) -> Vec<i64> {
    let bits = buf[0] as u32;
    let mut cur = i64::from_le_bytes(buf[1..9].try_into().expect("8 bytes"));
    let mut r = BitReader { b: &buf[9..], pos: 0 };
    let mut out = vec![cur];
    for _ in 1..n {
        cur = cur.wrapping_add(unzigzag(r.get(bits)));
        out.push(cur);
    }
    out.truncate(n);
    out
}

// ---- float codecs ------------------------------------------------------

/// The smallest `e` (0..=10) with `round(v·10^e) / 10^e == v` bit-exactly
/// for every value, and the scaled integers.
fn decimal_scale(xs: &[f64]) -> Option<(u8, Vec<i64>)> {
    'e: for e in 0..=10u8 {
        let p = 10f64.powi(e as i32);
        let mut ints = Vec::with_capacity(xs.len());
        for &v in xs {
            let k = (v * p).round();
            if !k.is_finite() || k.abs() > 9.0e15 || (k / p).to_bits() != v.to_bits() {
                continue 'e;
            }
            ints.push(k as i64);
        }
        return Some((e, ints));
    }
    None
}

/// ALP-style: decimal scale, then [`delta_bp`]; `None` when no scale fits.
fn dec_delta_bp(xs: &[f64]) -> Option<Vec<u8>> {
    let (e, ints) = decimal_scale(xs)?;
    let mut out = vec![e];
    out.extend(delta_bp(&ints));
    let back: Vec<f64> = undelta_bp(&out[1..], xs.len())
        .iter()
        .map(|k| *k as f64 / 10f64.powi(e as i32))
        .collect();
    assert!(same_bits(&back, xs), "dec+delta+bp round trip");
    Some(out)
}

/// Gorilla's XOR coding (VLDB '15), simplified: per value a control bit
/// (same as before), else 6 bits of leading zeros, 6 of length-1, then the
/// meaningful bits.
fn xor(xs: &[f64]) -> Vec<u8> {
    let mut b = Bits::default();
    let mut prev = 0u64;
    for v in xs {
        let x = v.to_bits() ^ prev;
        prev = v.to_bits();
        if x == 0 {
            b.put(0, 1);
            continue;
        }
        let lead = x.leading_zeros().min(63);
        let trail = x.trailing_zeros();
        let len = 64 - lead - trail;
        b.put(1, 1);
        b.put(lead as u64, 6);
        b.put((len - 1) as u64, 6);
        b.put(x >> trail, len);
    }
    let out = b.finish();
    assert!(same_bits(&unxor(&out, xs.len()), xs), "xor round trip");
    out
}

fn unxor(buf: &[u8], n: usize) -> Vec<f64> {
    let mut r = BitReader { b: buf, pos: 0 };
    let mut prev = 0u64;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        if r.get(1) == 1 {
            let lead = r.get(6) as u32;
            let len = r.get(6) as u32 + 1;
            let trail = 64 - lead - len;
            prev ^= r.get(len) << trail;
        }
        out.push(f64::from_bits(prev));
    }
    out
}

fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

fn raw_f64(xs: &[f64]) -> Vec<u8> {
    xs.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn zstd3(b: &[u8]) -> Vec<u8> {
    zstd::bulk::compress(b, 3).expect("zstd")
}

/// `b`, or zstd of it when that is smaller (what a block would choose).
fn best_with_zstd(b: Vec<u8>) -> usize {
    b.len().min(zstd3(&b).len())
}

fn pco_f64(xs: &[f64]) -> Vec<u8> {
    let c = pco::standalone::simple_compress(xs, &pco::ChunkConfig::default()).expect("pco");
    let back: Vec<f64> = pco::standalone::simple_decompress(&c).expect("pco decode");
    assert!(same_bits(&back, xs), "pco round trip");
    c
}

fn pco_i64(xs: &[i64]) -> Vec<u8> {
    let c = pco::standalone::simple_compress(xs, &pco::ChunkConfig::default()).expect("pco");
    let back: Vec<i64> = pco::standalone::simple_decompress(&c).expect("pco decode");
    assert_eq!(back, xs, "pco round trip");
    c
}

// ---- keys ----------------------------------------------------------------

/// Device runs: (id u64, length u32) per run.
fn device_runs(rows: &[Row]) -> usize {
    let runs = 1 + rows.windows(2).filter(|w| w[0].device != w[1].device).count();
    runs * 12
}

/// Timestamps: delta of delta (within the block), bit-packed.
fn ts_dod(rows: &[Row]) -> Vec<u8> {
    let ts: Vec<i64> = rows.iter().map(|r| r.ts).collect();
    let d: Vec<i64> = ts.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
    let mut out = ts.first().copied().unwrap_or(0).to_le_bytes().to_vec();
    out.extend(delta_bp(&d));
    out
}

// ---- the run ---------------------------------------------------------------

/// Bytes per codec per column, summed over blocks.
type Table = BTreeMap<(String, &'static str), usize>;

fn add(t: &mut Table, col: &str, codec: &'static str, n: usize) {
    *t.entry((col.to_string(), codec)).or_default() += n;
}

fn block(t: &mut Table, rows: &[Row]) {
    add(t, "keys", "runs+dod+bp", device_runs(rows) + best_with_zstd(ts_dod(rows)));
    let ts: Vec<i64> = rows.iter().map(|r| r.ts).collect();
    let dev: Vec<i64> = rows.iter().map(|r| r.device as i64).collect();
    add(t, "keys", "pco", pco_i64(&ts).len() + pco_i64(&dev).len());
    let raw_keys: Vec<u8> = rows
        .iter()
        .flat_map(|r| {
            let mut k = r.device.to_le_bytes().to_vec();
            k.extend_from_slice(&r.ts.to_le_bytes());
            k
        })
        .collect();
    add(t, "keys", "zstd(raw)", zstd3(&raw_keys).len());
    for (i, name) in READINGS_FIELDS.iter().enumerate() {
        let xs: Vec<f64> = rows.iter().map(|r| r.f[i]).collect();
        add(t, name, "pco", pco_f64(&xs).len());
        let hand = dec_delta_bp(&xs).unwrap_or_else(|| xor(&xs));
        add(t, name, "dec+delta+bp", best_with_zstd(hand));
        add(t, name, "xor", best_with_zstd(xor(&xs)));
        add(t, name, "zstd(raw)", zstd3(&raw_f64(&xs)).len());
    }
}

fn main() {
    let a = args();
    let rows = fleet(&a);
    let n = rows.len() as f64;
    println!(
        "codec-eval: {} trucks x {} readings = {} rows, {} values, seed {}",
        a.trucks,
        a.readings,
        rows.len(),
        a.values.name(),
        a.seed
    );
    let codecs = ["pco", "dec+delta+bp", "xor", "zstd(raw)", "runs+dod+bp"];
    for block_rows in [1024usize, 4096, 8192] {
        let mut t = Table::new();
        for b in rows.chunks(block_rows) {
            block(&mut t, b);
        }
        println!("\nblocks of {block_rows} rows: bytes per row (lower is better; '-' = not applicable)");
        print!("{:<18}", "column");
        for c in codecs {
            print!("{c:>14}");
        }
        println!();
        let mut totals: BTreeMap<&str, f64> = BTreeMap::new();
        let mut cols: Vec<String> = vec!["keys".into()];
        cols.extend(READINGS_FIELDS.iter().map(|s| s.to_string()));
        let mut best_total = 0.0;
        for col in &cols {
            print!("{col:<18}");
            let mut best = f64::MAX;
            for c in codecs {
                match t.get(&(col.clone(), c)) {
                    Some(&b) => {
                        let per = b as f64 / n;
                        best = best.min(per);
                        *totals.entry(c).or_default() += per;
                        print!("{per:>14.3}");
                    }
                    None => print!("{:>14}", "-"),
                }
            }
            best_total += best;
            println!();
        }
        print!("{:<18}", "sum of columns");
        for c in codecs {
            print!("{:>14}", totals.get(c).map_or("-".into(), |v| format!("{v:.3}")));
        }
        let hand = t[&("keys".to_string(), "runs+dod+bp")] as f64 / n
            + totals.get("dec+delta+bp").copied().unwrap_or(0.0);
        println!("\nhand-written total (keys runs+dod+bp, fields dec+delta+bp or xor): {hand:.3} bytes per row");
        println!("best codec per column, summed: {best_total:.3} bytes per row");
        // pco decode speed: every field column of every block.
        let compressed: Vec<Vec<u8>> = rows
            .chunks(block_rows)
            .flat_map(|b| (0..7).map(move |i| b.iter().map(|r| r.f[i]).collect::<Vec<f64>>()))
            .map(|xs| pco_f64(&xs))
            .collect();
        let t0 = std::time::Instant::now();
        let mut values = 0usize;
        for c in &compressed {
            let back: Vec<f64> = pco::standalone::simple_decompress(c).expect("pco decode");
            values += back.len();
        }
        let s = t0.elapsed().as_secs_f64();
        println!(
            "pco decode: {values} values in {:.1} ms = {:.0} M rows/s (7 fields per row)",
            s * 1e3,
            values as f64 / 7.0 / s / 1e6
        );
    }
}
