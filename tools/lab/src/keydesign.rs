//! `telestore-lab key-design`: the key-design study (benches/RESULTS.md, "Key-design study").
//!
//! Writes the same two fleets (uniform and Zipf) under four row-key
//! designs into tables of `--regions` regions and reports, per design:
//! stored rows per region, the instantaneous write concentration, the
//! flush-path ingest rate, and the regions and blocks a one-hour scan of
//! one device touches. Then simulates automatic splits of hot regions with
//! the engine's split rule, and runs design (c) — the engine's own key —
//! through a real store end to end.
//!
//! Designs, all 18 bytes, big-endian, unique per (device, ts):
//! (a) `device | revts | 00 00`, (b) `swap_bytes(device) | revts | 00 00`,
//! (c) `hash prefix | device | revts` (`key::encode`), (d) `ts | device | 00 00`.

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use telestore::io::StdBackend;
use telestore::key::{self, DeviceId, RowKey, KEY_LEN};
use telestore::region::split::{self, Level};
use telestore::region::{self, KEY_MIN};
use telestore::schema::batch::push_row;
use telestore::testkit::{fleet_fields, mix, readings_schema, FLEET_T0_MS};
use telestore::{Durability, Options, Store, TableOptions};
use telestore_engine::cell::{self, CellKind};
use telestore_engine::hfile::{HFileWriter, WriterOptions};

/// Field bytes of a `readings` row (7 × f64).
const FIELDS_WIDTH: usize = 56;
/// Rows per engine write batch and writer threads of the end-to-end run.
const ENGINE_BATCH: usize = 1_000;
const ENGINE_WRITERS: usize = 4;
/// Most automatic splits simulated per design.
const SPLITS_MAX: usize = 16;

#[derive(Args, Debug)]
pub struct KeyDesignArgs {
    /// Devices per fleet (sequential ids 0..devices).
    #[arg(long, default_value_t = 10_000)]
    devices: u64,
    /// Simulated hours.
    #[arg(long, default_value_t = 1)]
    hours: u64,
    /// Uniform fleet: every device reports every this many seconds.
    #[arg(long, default_value_t = 10)]
    interval_s: u64,
    /// Seed of the timestamp jitter and phases, and of the Zipf ranking
    /// with `--hot-ids shuffled`.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Which ids the Zipf fleet's hot devices get.
    #[arg(long, value_enum, default_value_t = HotIds::Ranked)]
    hot_ids: HotIds,
    /// Regions per table.
    #[arg(long, default_value_t = 16)]
    regions: u32,
    /// Scratch directory for HFiles and the engine run; DELETED at start
    /// and removed at the end.
    #[arg(long, default_value = "telestore-data/bench-key-design")]
    dir: PathBuf,
    /// Rows per (fleet, design) written as HFiles for the flush-path
    /// figure (0 = all rows).
    #[arg(long, default_value_t = 0)]
    ingest_rows: usize,
    /// Skip the end-to-end engine run of design (c).
    #[arg(long)]
    no_engine: bool,
}

/// Where the busy devices of the Zipf fleet sit in the id space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum HotIds {
    /// Rank = id order: device 0 is the busiest, activity ∝ (id+1)^-alpha
    /// — the hot devices are the lowest ids, as when ids are issued in
    /// order and the oldest / first-provisioned units are the busiest.
    Ranked,
    /// Ranks dealt to ids by a shuffle seeded by `--seed`: the hot devices
    /// are scattered over the id space.
    Shuffled,
}

impl HotIds {
    fn name(self) -> &'static str {
        match self {
            HotIds::Ranked => "ranked",
            HotIds::Shuffled => "shuffled",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Design {
    DeviceTs,
    Reversed,
    Hashed,
    TsDevice,
}

const DESIGNS: [Design; 4] = [
    Design::DeviceTs,
    Design::Reversed,
    Design::Hashed,
    Design::TsDevice,
];

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

impl Design {
    fn label(self) -> &'static str {
        match self {
            Design::DeviceTs => "(a) device + ts",
            Design::Reversed => "(b) reversed device + ts",
            Design::Hashed => "(c) hash prefix + device + ts (ours)",
            Design::TsDevice => "(d) ts + device",
        }
    }

    fn key(self, device: u64, ts: i64) -> RowKey {
        let mut k = [0u8; KEY_LEN];
        let rev = key::reverse_ts(ts).to_be_bytes();
        match self {
            Design::DeviceTs => {
                k[..8].copy_from_slice(&device.to_be_bytes());
                k[8..16].copy_from_slice(&rev);
            }
            Design::Reversed => {
                k[..8].copy_from_slice(&device.swap_bytes().to_be_bytes());
                k[8..16].copy_from_slice(&rev);
            }
            Design::Hashed => return key::encode(DeviceId(device), ts),
            Design::TsDevice => {
                k[..8].copy_from_slice(&((ts as u64) ^ (1 << 63)).to_be_bytes());
                k[8..16].copy_from_slice(&device.to_be_bytes());
            }
        }
        k
    }

    /// Region start keys. (c): the engine's pre-split of the hash-prefix
    /// space, blind to the data. Others, their best case: `n` equal slices
    /// of the occupied range of the key's first 8 bytes.
    fn starts(self, keys: &[RowKey], n: u32) -> Vec<RowKey> {
        if self == Design::Hashed {
            return region::pre_split_starts(n);
        }
        let lo = keys.iter().map(|k| be_u64(k)).min().unwrap_or(0) as u128;
        let hi = keys.iter().map(|k| be_u64(k)).max().unwrap_or(0) as u128;
        let width = hi - lo + 1;
        (0..n as u128)
            .map(|i| {
                let mut k = KEY_MIN;
                if i > 0 {
                    k[..8].copy_from_slice(&((lo + width * i / n as u128) as u64).to_be_bytes());
                }
                k
            })
            .collect()
    }

    /// The key in the engine's layout (`prefix | device | revts`), so that
    /// `split::choose` sees each design's device field where it looks for
    /// it: (a) and (b) get a constant zero prefix ("no prefix"). The map
    /// preserves order (the last two bytes of (a) and (b) are zero).
    fn engine_layout(self, k: &RowKey) -> RowKey {
        match self {
            Design::DeviceTs | Design::Reversed => {
                let mut out = KEY_MIN;
                out[2..].copy_from_slice(&k[..16]);
                out
            }
            Design::Hashed | Design::TsDevice => *k,
        }
    }
}

/// A generated fleet: rows `(device, ts_ms)` sorted by time.
struct Fleet {
    name: &'static str,
    rows: Vec<(u64, i64)>,
    /// Rows per device.
    counts: Vec<u64>,
}

fn second_of(ts: i64) -> i64 {
    (ts - FLEET_T0_MS).div_euclid(1000)
}

impl Fleet {
    /// Every device reports every `interval` s at phase `device % interval`,
    /// with a jitter of up to 999 ms inside its second.
    fn uniform(devices: u64, secs: u64, interval: u64, seed: u64) -> Fleet {
        let mut rows = Vec::with_capacity((devices * secs / interval) as usize);
        let mut counts = vec![0u64; devices as usize];
        for s in 0..secs {
            for d in ((s % interval)..devices).step_by(interval as usize) {
                let jitter = (mix(seed ^ mix(d) ^ s.rotate_left(32)) % 1000) as i64;
                rows.push((d, FLEET_T0_MS + s as i64 * 1000 + jitter));
                counts[d as usize] += 1;
            }
        }
        rows.sort_unstable_by_key(|&(d, ts)| (ts, d));
        Fleet {
            name: "uniform",
            rows,
            counts,
        }
    }

    /// `total` rows; the device of rank `r` reports at a rate ∝
    /// `(r+1)^-alpha`, `alpha` tuned so the top 1% of devices produce half
    /// of the rows. Ranks are ids (`Ranked`: device 0 busiest) or dealt by
    /// a seeded shuffle (`Shuffled`). Each device's readings are evenly
    /// spaced in ms over the window, at a seeded phase.
    fn zipf(devices: u64, secs: u64, total: u64, seed: u64, hot: HotIds) -> Fleet {
        let n = devices as usize;
        let alpha = zipf_alpha(n, 0.5);
        let w: Vec<f64> = (0..n).map(|r| ((r + 1) as f64).powf(-alpha)).collect();
        let wsum: f64 = w.iter().sum();
        let span_ms = secs * 1000;
        let mut by_rank: Vec<u64> = w
            .iter()
            .map(|x| ((total as f64 * x / wsum) as u64).min(span_ms))
            .collect();
        let mut missing = total.saturating_sub(by_rank.iter().sum());
        // Rounding remainder: one more row for the top ranks.
        for c in by_rank.iter_mut().filter(|c| **c < span_ms) {
            if missing == 0 {
                break;
            }
            *c += 1;
            missing -= 1;
        }
        // Device of each rank: the identity for `Ranked`.
        let mut perm: Vec<u64> = (0..devices).collect();
        if hot == HotIds::Shuffled {
            for i in (1..n).rev() {
                let j = (mix(seed.wrapping_mul(0x5851_f42d) ^ i as u64) % (i as u64 + 1)) as usize;
                perm.swap(i, j);
            }
        }
        let mut rows = Vec::with_capacity(total as usize);
        let mut counts = vec![0u64; n];
        for (rank, &c) in by_rank.iter().enumerate() {
            let d = perm[rank];
            counts[d as usize] = c;
            if c == 0 {
                continue;
            }
            let period = span_ms as f64 / c as f64;
            let phase = (mix(seed ^ mix(d + 1)) >> 11) as f64 / (1u64 << 53) as f64 * period;
            for j in 0..c {
                let t = ((phase + j as f64 * period) as u64).min(span_ms - 1);
                rows.push((d, FLEET_T0_MS + t as i64));
            }
        }
        rows.sort_unstable_by_key(|&(d, ts)| (ts, d));
        rows.dedup();
        Fleet {
            name: "zipf",
            rows,
            counts,
        }
    }

    /// Share of the rows produced by the busiest 1% of devices.
    fn top_share(&self) -> f64 {
        let mut c = self.counts.clone();
        c.sort_unstable_by(|a, b| b.cmp(a));
        let top = (c.len() / 100).max(1);
        c[..top].iter().sum::<u64>() as f64 / self.rows.len().max(1) as f64
    }

    /// The busiest device and a median one (by rows, ties by id).
    fn busiest_and_median(&self) -> (u64, u64) {
        let mut ids: Vec<u64> = (0..self.counts.len() as u64).collect();
        ids.sort_by_key(|&d| (self.counts[d as usize], d));
        let busiest = ids.last().copied().unwrap_or(0);
        (busiest, ids.get(ids.len() / 2).copied().unwrap_or(0))
    }
}

/// Zipf exponent at which the top 1% of `n` ranks carry `share` of the weight.
fn zipf_alpha(n: usize, share: f64) -> f64 {
    let top = (n / 100).max(1);
    let share_at = |a: f64| {
        let w: Vec<f64> = (0..n).map(|r| ((r + 1) as f64).powf(-a)).collect();
        w[..top].iter().sum::<f64>() / w.iter().sum::<f64>()
    };
    let (mut lo, mut hi) = (0.0, 4.0);
    for _ in 0..50 {
        let mid = (lo + hi) / 2.0;
        if share_at(mid) < share {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// A fleet's keys under one design, routed to regions.
struct Layout {
    design: Design,
    starts: Vec<RowKey>,
    /// Key and region of each row, in row (time) order.
    keys: Vec<RowKey>,
    region: Vec<u32>,
    /// All keys sorted, and where each region begins in that order.
    sorted: Vec<RowKey>,
    offsets: Vec<usize>,
}

impl Layout {
    fn new(design: Design, fleet: &Fleet, n: u32) -> Layout {
        let keys: Vec<RowKey> = fleet
            .rows
            .iter()
            .map(|&(d, ts)| design.key(d, ts))
            .collect();
        let starts = design.starts(&keys, n);
        let region = keys
            .iter()
            .map(|k| region::route(&starts, k) as u32)
            .collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        let offsets = starts
            .iter()
            .map(|s| sorted.partition_point(|k| k < s))
            .collect();
        Layout {
            design,
            starts,
            keys,
            region,
            sorted,
            offsets,
        }
    }

    fn rows_per_region(&self) -> Vec<u64> {
        let mut c = vec![0u64; self.starts.len()];
        for r in &self.region {
            c[*r as usize] += 1;
        }
        c
    }

    /// Regions and blocks holding `device`'s rows of the last hour.
    fn scan_footprint(
        &self,
        fleet: &Fleet,
        device: u64,
        from_ts: i64,
        cpb: usize,
    ) -> (usize, usize) {
        let mut regions = BTreeSet::new();
        let mut blocks = BTreeSet::new();
        for (i, &(d, ts)) in fleet.rows.iter().enumerate() {
            if d != device || ts < from_ts {
                continue;
            }
            let r = self.region[i] as usize;
            let pos = self.sorted.partition_point(|k| k < &self.keys[i]);
            regions.insert(r);
            blocks.insert((r, (pos - self.offsets[r]) / cpb));
        }
        (regions.len(), blocks.len())
    }
}

fn max_over_mean(counts: &[u64]) -> f64 {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return 0.0;
    }
    counts.iter().copied().max().unwrap_or(0) as f64 * counts.len() as f64 / total as f64
}

/// Per simulated second, max/mean of rows per region (seconds without rows
/// skipped): (mean over seconds, worst second).
fn instantaneous(rows: &[(u64, i64)], region_of: impl Fn(usize) -> usize, n: usize) -> (f64, f64) {
    windowed(rows, region_of, n, 1)
}

/// As [`instantaneous`] over windows of `window_s` simulated seconds.
fn windowed(
    rows: &[(u64, i64)],
    region_of: impl Fn(usize) -> usize,
    n: usize,
    window_s: i64,
) -> (f64, f64) {
    let mut counts = vec![0u64; n];
    let (mut sum, mut seconds, mut worst) = (0.0, 0u64, 0.0f64);
    let mut i = 0;
    while i < rows.len() {
        let s = second_of(rows[i].1).div_euclid(window_s);
        counts.fill(0);
        let mut j = i;
        while j < rows.len() && second_of(rows[j].1).div_euclid(window_s) == s {
            counts[region_of(j)] += 1;
            j += 1;
        }
        let r = max_over_mean(&counts);
        sum += r;
        worst = worst.max(r);
        seconds += 1;
        i = j;
    }
    (sum / seconds.max(1) as f64, worst)
}

fn key_of_cell(c: &[u8]) -> RowKey {
    let mut k = KEY_MIN;
    k.copy_from_slice(&c[..KEY_LEN]);
    k
}

fn field_bytes(device: u64, round: u64) -> [u8; FIELDS_WIDTH] {
    let mut b = [0u8; FIELDS_WIDTH];
    for (i, v) in fleet_fields(device, round).iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    b
}

/// Flush-path ingest: cells grouped by region, then (timed) each region's
/// cells sorted by key and written as one HFile with the engine's default
/// table options. Returns (rows, seconds).
fn flush_path(lay: &Layout, fleet: &Fleet, limit: usize, dir: &Path) -> Result<(usize, f64)> {
    let n = if limit == 0 {
        fleet.rows.len()
    } else {
        limit.min(fleet.rows.len())
    };
    let w = cell::cell_width(FIELDS_WIDTH);
    let mut per_region = vec![0usize; lay.starts.len()];
    for r in &lay.region[..n] {
        per_region[*r as usize] += 1;
    }
    let mut cells: Vec<Vec<u8>> = per_region
        .iter()
        .map(|c| Vec::with_capacity(c * w))
        .collect();
    for (i, &(d, _)) in fleet.rows[..n].iter().enumerate() {
        let f = field_bytes(d, i as u64);
        cell::push(
            &mut cells[lay.region[i] as usize],
            &lay.keys[i],
            i as u64,
            CellKind::Put,
            &f,
        );
    }
    let o = TableOptions::default();
    let layout_id = readings_schema("readings").layout_id();
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let t = Instant::now();
    for (r, c) in cells.iter().enumerate() {
        if c.is_empty() {
            continue;
        }
        let mut order: Vec<(RowKey, u32)> = c
            .chunks_exact(w)
            .enumerate()
            .map(|(i, cl)| (key_of_cell(cl), i as u32))
            .collect();
        order.sort_unstable();
        let path = dir.join(format!("region-{r}.hfile"));
        let mut wr = HFileWriter::create(
            &StdBackend,
            &path,
            WriterOptions {
                table_id: 1,
                layout_id,
                fields_width: FIELDS_WIDTH,
                compression: o.compression,
                block_size_bytes: o.block_size_bytes as usize,
                bloom: o.bloom,
                expected_cells: order.len(),
                created_ms: 0,
                direct: false, // a study: files are read right back
                encoding: telestore::schema::BlockEncoding::Rows,
                field_types: Vec::new(),
                pco_level: 0,
                limiter: None,
            },
        )?;
        for (_, i) in order {
            let i = i as usize;
            wr.add(&c[i * w..(i + 1) * w])?;
        }
        wr.finish(&[])?;
    }
    let secs = t.elapsed().as_secs_f64();
    std::fs::remove_dir_all(dir).ok();
    Ok((n, secs))
}

/// Result of the automatic-split simulation of one design.
struct SplitSim {
    before: f64,
    after: f64,
    regions: usize,
    levels: [usize; 3],
    inst_after: f64,
    /// Heaviest device's rows over the mean region load after splitting.
    device_floor: f64,
    stop: &'static str,
}

/// Split the largest region with `split::choose` (weights = first key and
/// cells of each block, threshold = total/n rows) while it holds more than
/// 1.5 × total/n rows, at most [`SPLITS_MAX`] times.
fn simulate_splits(lay: &Layout, fleet: &Fleet, n: usize, cpb: usize) -> SplitSim {
    let d = lay.design;
    let keys: Vec<RowKey> = lay.sorted.iter().map(|k| d.engine_layout(k)).collect();
    let mut starts: Vec<RowKey> = lay.starts.iter().map(|k| d.engine_layout(k)).collect();
    let total = keys.len() as u64;
    let target = total / n as u64;
    let counts_of = |starts: &[RowKey]| -> Vec<u64> {
        let off: Vec<usize> = starts
            .iter()
            .map(|s| keys.partition_point(|k| k < s))
            .collect();
        (0..starts.len())
            .map(|i| (off.get(i + 1).copied().unwrap_or(keys.len()) - off[i]) as u64)
            .collect()
    };
    let before = max_over_mean(&counts_of(&starts));
    let mut levels = [0usize; 3];
    let mut stop = "largest region at most 1.5 × total/16";
    for split_no in 0..=SPLITS_MAX {
        let counts = counts_of(&starts);
        let (i, &max) = counts
            .iter()
            .enumerate()
            .max_by_key(|(i, c)| (**c, std::cmp::Reverse(*i)))
            .unwrap_or((0, &0));
        if max * 2 <= target * 3 {
            break;
        }
        if split_no == SPLITS_MAX {
            stop = "16 splits done";
            break;
        }
        let lo = keys.partition_point(|k| k < &starts[i]);
        let hi = lo + max as usize;
        let weights: Vec<(RowKey, u64)> = keys[lo..hi]
            .chunks(cpb)
            .map(|b| (b[0], b.len() as u64))
            .collect();
        match split::choose(&starts[i], starts.get(i + 1), &weights, target) {
            Some(p) => {
                levels[match p.level {
                    Level::Prefix => 0,
                    Level::Device => 1,
                    Level::InsideDevice => 2,
                }] += 1;
                starts.insert(i + 1, p.key);
            }
            None => {
                stop = "no split point";
                break;
            }
        }
    }
    let after_counts = counts_of(&starts);
    let (inst_after, _) = instantaneous(
        &fleet.rows,
        |j| region::route(&starts, &d.engine_layout(&lay.keys[j])),
        starts.len(),
    );
    let heaviest = fleet.counts.iter().copied().max().unwrap_or(0);
    SplitSim {
        before,
        after: max_over_mean(&after_counts),
        regions: starts.len(),
        levels,
        inst_after,
        device_floor: heaviest as f64 * starts.len() as f64 / total.max(1) as f64,
        stop,
    }
}

/// Design (c) through a real store: `readings` table with `regions`
/// regions, batches of 1,000 rows, `sync`, 4 writer threads. Rows/s.
fn engine_ingest(dir: &Path, fleet: &Fleet, regions: u32) -> Result<(usize, f64, &'static str)> {
    let store = Arc::new(Store::open(dir, Options::default())?);
    let io = store.io_kind().name();
    let mut schema = readings_schema("readings");
    schema.options.regions = regions;
    store.create_table(schema)?;
    let batches: Vec<Vec<u8>> = fleet
        .rows
        .chunks(ENGINE_BATCH)
        .enumerate()
        .map(|(b, chunk)| {
            let mut buf = Vec::with_capacity(chunk.len() * (16 + FIELDS_WIDTH));
            for (i, &(d, ts)) in chunk.iter().enumerate() {
                push_row(
                    &mut buf,
                    d,
                    ts,
                    &field_bytes(d, (b * ENGINE_BATCH + i) as u64),
                );
            }
            buf
        })
        .collect();
    let batches = Arc::new(batches);
    let next = Arc::new(AtomicUsize::new(0));
    let t = Instant::now();
    let hs: Vec<_> = (0..ENGINE_WRITERS)
        .map(|_| {
            let (store, batches, next) = (store.clone(), batches.clone(), next.clone());
            std::thread::spawn(move || -> telestore::Result<()> {
                while let Some(b) = batches.get(next.fetch_add(1, Ordering::Relaxed)) {
                    store.write("readings", b, Durability::Sync)?;
                }
                Ok(())
            })
        })
        .collect();
    for h in hs {
        h.join().map_err(|_| anyhow::anyhow!("writer panicked"))??;
    }
    let secs = t.elapsed().as_secs_f64();
    Arc::try_unwrap(store)
        .map_err(|_| anyhow::anyhow!("store still shared"))?
        .close()?;
    Ok((fleet.rows.len(), secs, io))
}

/// Reference for a hash: mean max/mean when `m` rows fall into `n`
/// regions independently at random (Monte Carlo, 2,000 trials).
fn random_placement(m: u64, n: usize, seed: u64) -> f64 {
    let trials = 2_000u64;
    let mut counts = vec![0u64; n];
    let mut sum = 0.0;
    for t in 0..trials {
        counts.fill(0);
        for i in 0..m {
            counts[(mix(seed ^ (t << 32) ^ i) % n as u64) as usize] += 1;
        }
        sum += max_over_mean(&counts);
    }
    sum / trials as f64
}

/// `1234567.8` → `"1,234,568"`.
fn thousands(x: f64) -> String {
    let s = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[expect(
    clippy::too_many_lines,
    reason = "a study driver that prints each table as it goes; moves to tools/lab"
)]
pub fn run(a: KeyDesignArgs) -> Result<()> {
    if a.devices == 0 || a.hours == 0 || a.interval_s == 0 {
        bail!("--devices, --hours and --interval-s must be positive");
    }
    if !(2..=4096).contains(&a.regions) {
        bail!("--regions must be in 2..=4096");
    }
    let secs = a.hours * 3600;
    let n = a.regions as usize;
    let cpb = (TableOptions::default().block_size_bytes as usize)
        .div_ceil(cell::cell_width(FIELDS_WIDTH));
    if a.dir.exists() {
        std::fs::remove_dir_all(&a.dir).with_context(|| format!("removing {}", a.dir.display()))?;
    }
    println!(
        "telestore-lab key-design: {} devices, {} h simulated, uniform interval {} s, seed {}, {} regions, Zipf hot ids {}",
        a.devices,
        a.hours,
        a.interval_s,
        a.seed,
        a.regions,
        a.hot_ids.name()
    );
    println!(
        "Region boundaries: (c) uses the engine's pre-split of the hash-prefix space (no knowledge of the data); \
         (a), (b), (d) get their best case: {n} equal slices of the occupied range [min, max] of the key's first 8 bytes \
         (an operator who knows the id range / time window)."
    );
    println!(
        "Blocks: {} cells of {} bytes (the writer closes a block at 64 KiB).",
        cpb,
        cell::cell_width(FIELDS_WIDTH)
    );
    let uniform = Fleet::uniform(a.devices, secs, a.interval_s, a.seed);
    let zipf = Fleet::zipf(
        a.devices,
        secs,
        uniform.rows.len() as u64,
        a.seed,
        a.hot_ids,
    );
    let from_ts = FLEET_T0_MS + (secs as i64 - 3600) * 1000;
    let mut sims = Vec::new();
    let mut uniform_c = (0.0, 0.0, 0.0);
    let mut zipf_totals = Vec::new();
    let iv = a.interval_s;
    for fleet in [&uniform, &zipf] {
        let (busy, median) = fleet.busiest_and_median();
        println!(
            "\n### Fleet {}: {} rows; top 1% of devices produce {:.1}% of rows; busiest device {} ({} rows), median device {} ({} rows)\n",
            fleet.name,
            fleet.rows.len(),
            fleet.top_share() * 100.0,
            busy,
            fleet.counts[busy as usize],
            median,
            fleet.counts[median as usize]
        );
        println!("| design | rows/region max/mean | instantaneous max/mean per second (mean over s / worst s) | max/mean per reporting cycle ({iv}-s windows, mean over windows) | scale-out bound | ingest rows/s (flush path) | 1-h scan, busiest device: regions / blocks | median device: regions / blocks |");
        println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
        for design in DESIGNS {
            let lay = Layout::new(design, fleet, a.regions);
            let total = max_over_mean(&lay.rows_per_region());
            let (inst, worst) = instantaneous(&fleet.rows, |j| lay.region[j] as usize, n);
            let (cycle, _) = windowed(&fleet.rows, |j| lay.region[j] as usize, n, iv as i64);
            let (bz, bb) = lay.scan_footprint(fleet, busy, from_ts, cpb);
            let (mz, mb) = lay.scan_footprint(fleet, median, from_ts, cpb);
            let (rows, s) = flush_path(&lay, fleet, a.ingest_rows, &a.dir.join("hfiles"))?;
            println!(
                "| {} | {total:.3} | {inst:.3} / {worst:.3} | {cycle:.3} | {:.0}% | {} | {bz} / {bb} | {mz} / {mb} |",
                design.label(),
                100.0 / inst.max(1.0),
                thousands(rows as f64 / s)
            );
            if design == Design::Hashed && fleet.name == "uniform" {
                uniform_c = (total, inst, cycle);
            }
            if fleet.name == "zipf" && design != Design::TsDevice {
                zipf_totals.push((design, total));
            }
            if fleet.name == "zipf" && design != Design::TsDevice {
                sims.push((design, simulate_splits(&lay, fleet, n, cpb)));
            }
        }
    }
    let ingest_note = if a.ingest_rows == 0 {
        "all rows".to_string()
    } else {
        format!("the first {} rows", a.ingest_rows)
    };
    println!(
        "\nscale-out bound = 1 / (instantaneous max/mean per second): the share of the ideal {n}-way parallel write rate left when regions sit on different servers \
         and the hottest region of each second sets the pace. Per reporting cycle: max/mean of rows per region over each window of {iv} simulated s \
         (one report from every uniform-fleet device), averaged over windows. Flush path: {ingest_note} per (fleet, design): cells grouped by region, \
         then each region's cells sorted and written as one HFile (zstd:3, 64 KiB blocks, bloom) — sort + write timed."
    );
    if let Some((best, best_total)) = zipf_totals
        .iter()
        .copied()
        .min_by(|x, y| x.1.total_cmp(&y.1))
    {
        let others: Vec<String> = zipf_totals
            .iter()
            .map(|(d, t)| format!("{} {t:.3}", &d.label()[..3]))
            .collect();
        println!(
            "\nZipf ({} hot ids), rows/region max/mean of the designs that keep a device in one region: {}; best {} at {best_total:.3}.",
            a.hot_ids.name(),
            others.join(", "),
            &best.label()[..3]
        );
    }
    println!("\n### Automatic splits, Zipf fleet (engine rule `region::split::choose`, threshold total/{n} rows, split while the largest region > 1.5 × total/{n}, at most {SPLITS_MAX} splits)\n");
    println!("| design | rows/region max/mean before | after | regions after | splits: prefix / device / inside device | instantaneous max/mean after | heaviest device / mean region after | stopped because |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (d, s) in &sims {
        println!(
            "| {} | {:.3} | {:.3} | {} | {} / {} / {} | {:.3} | {:.3} | {} |",
            d.label(),
            s.before,
            s.after,
            s.regions,
            s.levels[0],
            s.levels[1],
            s.levels[2],
            s.inst_after,
            s.device_floor,
            s.stop
        );
    }
    println!(
        "\nA device's rows are contiguous under (a), (b), (c), so a region can never hold less than its heaviest device: the floor of max/mean \
         is that device's rows over the mean region load. A split inside a device (engine rule step 4) moves its older rows to a new region \
         but its new writes still all land in one region (the newest-first daughter), so the instantaneous figure keeps that floor."
    );
    if a.no_engine {
        println!("\nEngine end to end: skipped (--no-engine).");
    } else {
        let (rows, s, io) = engine_ingest(&a.dir.join("engine"), &uniform, a.regions)?;
        println!(
            "\nEngine end to end, design (c), uniform fleet: {rows} rows, batches of {ENGINE_BATCH}, {ENGINE_WRITERS} writers, sync, io {io}: {} rows/s",
            thousands(rows as f64 / s)
        );
    }
    println!(
        "(a), (b), (d) cannot run through the engine (its key codec is fixed to (c)); their ingest figure is the flush-path one. \
         On one node one WAL and one apply thread serialise all regions, so the key design barely changes single-node ingest; \
         the concentration matters when regions are spread over servers (scale-out bound)."
    );
    let verdict = |x: f64| if x <= 1.10 { "target met" } else { "NOT met" };
    println!(
        "\nTargets for (c), uniform fleet: total max/mean {:.3} ≤ 1.10: {}; instantaneous max/mean per second (mean over seconds) {:.3} ≤ 1.10: {}",
        uniform_c.0,
        verdict(uniform_c.0),
        uniform_c.1,
        verdict(uniform_c.1)
    );
    let per_s = (a.devices / a.interval_s).max(1);
    println!(
        "Reference: {per_s} devices report each second; {per_s} rows placed in {n} regions independently at random give max/mean {:.3} on average \
         (what a good hash gives each second; (a) and (b) do better only because sequential ids with phase = id % interval stripe evenly over id slices). Over windows of one reporting cycle ({} s) (c) is at {:.3}: {}.",
        random_placement(per_s, n, a.seed),
        a.interval_s,
        uniform_c.2,
        verdict(uniform_c.2)
    );
    std::fs::remove_dir_all(&a.dir).ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ts_first_sends_each_second_to_one_region() {
        let f = Fleet::uniform(2_000, 600, 10, 1);
        let lay = Layout::new(Design::TsDevice, &f, 16);
        let (mean, worst) = instantaneous(&f.rows, |j| lay.region[j] as usize, 16);
        assert!(mean > 15.0, "mean {mean}");
        assert!((worst - 16.0).abs() < 1e-9);
        assert!(max_over_mean(&lay.rows_per_region()) < 1.05);
    }

    #[test]
    fn hash_prefix_balances_a_uniform_fleet() {
        let f = Fleet::uniform(10_000, 60, 10, 1);
        let lay = Layout::new(Design::Hashed, &f, 16);
        let total = max_over_mean(&lay.rows_per_region());
        assert!(total < 1.10, "max/mean {total}");
    }

    #[test]
    fn zipf_top_percent_is_about_half() {
        let f = Fleet::zipf(2_000, 3_600, 720_000, 7, HotIds::Shuffled);
        assert_eq!(f.rows.len(), 720_000);
        let s = f.top_share();
        assert!((0.45..=0.55).contains(&s), "share {s}");
        let (busy, _) = f.busiest_and_median();
        assert_ne!(busy, 0, "ranks come from a shuffle");

        let f = Fleet::zipf(2_000, 3_600, 720_000, 7, HotIds::Ranked);
        assert_eq!(f.rows.len(), 720_000);
        let s = f.top_share();
        assert!((0.45..=0.55).contains(&s), "share {s}");
        let (busy, _) = f.busiest_and_median();
        assert_eq!(busy, 0, "rank = id order");
        assert!(
            f.counts.windows(2).all(|w| w[0] >= w[1]),
            "activity falls with id"
        );
    }

    #[test]
    fn designs_keep_device_and_time_order() {
        for d in [Design::DeviceTs, Design::Reversed, Design::Hashed] {
            assert!(d.key(5, 2_000) < d.key(5, 1_000), "{d:?}: newest first");
            let (a, b) = (
                d.engine_layout(&d.key(5, 2_000)),
                d.engine_layout(&d.key(5, 1_000)),
            );
            assert!(a < b);
        }
        assert!(Design::TsDevice.key(9, 1_000) < Design::TsDevice.key(1, 2_000));
        assert!(Design::DeviceTs.key(1, 9) < Design::DeviceTs.key(2, 0));
    }
}
