//! `telestore-lab sustained`: continuous ingest for a set time with
//! background flushes and compactions. Every interval it prints the
//! ingest rate, files and sorted runs per region, compaction debt, write
//! amplification, slowed and refused writes, the write acknowledgement
//! latency, the disk's own fdatasync latency (a probe file beside the
//! store, synced every 100 ms) and the latency of sampled reads (`latest`
//! and one-hour device scans). At the end: a summary line over the whole
//! run, and the `latest` probe right after a flush against its warm
//! latency (2,000 devices per pass, pending compactions finished first).
//!
//! `--rate` paces the writers (e.g. at half the peak, for ack latency);
//! the background flags (`--subcompactions`, `--background-io-priority`,
//! `--background-write-mib-s`, ...) and `--compaction-threads`,
//! `--cache-flushed-blocks` switch each measure off in turn.

use super::settings::SettingFlags;
use anyhow::{Context, Result};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use telestore::testkit::{push_fleet_row, readings_schema, FLEET_T0_MS};
use telestore::util::sync::LockExt;
use telestore::{Durability, Error, Options, Order, Store};

#[derive(Args, Debug)]
pub struct SustainedArgs {
    /// Store directory; it is DELETED and recreated at start.
    #[arg(long, default_value = "telestore-data/bench-sustained")]
    dir: PathBuf,
    /// How long to ingest, in seconds.
    #[arg(long, default_value_t = 600)]
    seconds: u64,
    /// Print a line every N seconds.
    #[arg(long, default_value_t = 30)]
    every: u64,
    /// Devices in the fleet (each reports every 10 s of simulated time).
    #[arg(long, default_value_t = 10_000)]
    devices: u64,
    /// Rows per write batch.
    #[arg(long, default_value_t = 1000)]
    batch: u64,
    /// Writer threads.
    #[arg(long, default_value_t = 4)]
    writers: u64,
    /// Rows per second for all writers together (0: as fast as acks
    /// come back).
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// Memstore flush threshold per region, MiB.
    #[arg(long, default_value_t = 64)]
    flush_mib: usize,
    /// Memory for all memstores together, MiB (raise it with a large
    /// --flush-mib and --compaction-threads 0 to pause background work).
    #[arg(long, default_value_t = 512)]
    memstore_global_mib: usize,
    /// Compaction workers [default: the store's default for the cores].
    #[arg(long)]
    compaction_threads: Option<usize>,
    /// Put flushed blocks into the block cache as they are written.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    cache_flushed_blocks: bool,
    /// Devices per table in the latest-row cache (0: off)
    /// [default: the store's, 1048576].
    #[arg(long)]
    latest_cache_devices: Option<usize>,
    /// Nice value of the apply, flush and compaction threads
    /// [default: the store's, 19].
    #[arg(long, value_parser = clap::value_parser!(i32).range(0..=19))]
    background_nice: Option<i32>,
    #[command(flatten)]
    background: SettingFlags<true>,
    /// Reads sampled per interval (each: one `latest`, one 1-hour scan).
    #[arg(long, default_value_t = 200)]
    samples: usize,
    /// Keep the directory afterwards.
    #[arg(long)]
    keep: bool,
}

/// What the writers and the probe collect between two report lines.
#[derive(Default)]
struct Window {
    acks_us: Vec<u32>,
    fsyncs_us: Vec<u32>,
}

/// Both windows: the current interval's and the whole run's.
#[derive(Default)]
struct Samples {
    now: Window,
    all: Window,
}

impl Window {
    /// Ack p50/p99/p999 and disk fdatasync p50/p99, formatted.
    fn quantiles(&mut self) -> [String; 5] {
        [
            us(&mut self.acks_us, 0.5),
            us(&mut self.acks_us, 0.99),
            us(&mut self.acks_us, 0.999),
            us(&mut self.fsyncs_us, 0.5),
            us(&mut self.fsyncs_us, 0.99),
        ]
    }
}

impl Samples {
    fn ack(&mut self, d: Duration) {
        let us = d.as_micros().min(u32::MAX as u128) as u32;
        self.now.acks_us.push(us);
        self.all.acks_us.push(us);
    }
    fn fsync(&mut self, d: Duration) {
        let us = d.as_micros().min(u32::MAX as u128) as u32;
        self.now.fsyncs_us.push(us);
        self.all.fsyncs_us.push(us);
    }
}

fn options(a: &SustainedArgs) -> Result<Options> {
    let mut opts = Options {
        flush_threshold_bytes: a.flush_mib << 20,
        memstore_global_bytes: a.memstore_global_mib << 20,
        cache_flushed_blocks: a.cache_flushed_blocks,
        ..Options::default()
    };
    if let Some(n) = a.compaction_threads {
        opts.compaction_threads = n;
    }
    if let Some(n) = a.background_nice {
        opts.background_nice = n;
    }
    if let Some(n) = a.latest_cache_devices {
        opts.latest_cache_devices = n;
    }
    telestore::settings::DaemonConfig::load(None, &a.background.given)?
        .apply_background(&mut opts)?;
    Ok(opts)
}

#[expect(
    clippy::too_many_lines,
    reason = "a study driver that prints each phase as it goes; moves to tools/lab"
)]
pub fn run(a: SustainedArgs) -> Result<()> {
    if a.dir.exists() {
        std::fs::remove_dir_all(&a.dir).with_context(|| format!("removing {}", a.dir.display()))?;
    }
    let opts = options(&a)?;
    let store = Arc::new(Store::open(&a.dir, opts.clone())?);
    store.create_table(readings_schema("readings"))?;
    println!(
        "telestore-lab sustained: {} s, {} devices, batches of {}, {} writers, rate {}, sync, flush at {} MiB/region, io {}",
        a.seconds,
        a.devices,
        a.batch,
        a.writers,
        if a.rate > 0 { a.rate.to_string() } else { "unpaced".into() },
        a.flush_mib,
        store.io_kind().name()
    );
    println!(
        "options: compaction_threads {} nice {} subcompactions {} young-rows-below {} MiB io_priority {} write_limit {} MiB/s (auto {}) slowdown from {} runs, debt slowdown/stop {}/{} MiB cache_flushed_blocks {} latest_cache_devices {}",
        opts.compaction_threads,
        opts.background_nice,
        opts.subcompactions,
        opts.columnar_min_compaction_bytes >> 20,
        opts.background_io_priority.name(),
        opts.background_write_bytes_per_sec >> 20,
        opts.background_write_auto,
        opts.slowdown_file_count,
        opts.compaction_debt_slowdown_bytes >> 20,
        opts.compaction_debt_stop_bytes >> 20,
        opts.cache_flushed_blocks,
        opts.latest_cache_devices
    );
    println!(
        "{:>5} {:>10} {:>8} {:>5} {:>5} {:>4} {:>5} {:>8} {:>5} {:>5} {:>5} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8}",
        "t_s", "rows", "rows/s", "files", "f/reg", "max", "runs", "debt_MiB", "w_amp",
        "slow", "busy", "ack_p50", "ack_p99", "ack_999", "sync50", "sync99", "lat_p50", "lat_p99",
        "scan_p50", "scan_p99"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let rows = Arc::new(AtomicU64::new(0));
    let samples = Arc::new(Mutex::new(Samples::default()));
    let t0 = Instant::now();
    let writers = spawn_writers(&a, &store, &stop, &rows, &samples, t0);
    let probe = spawn_fsync_probe(&a.dir, &stop, &samples)?;
    let mut last = (0u64, t0);
    let mut tick = 1;
    while t0.elapsed() < Duration::from_secs(a.seconds) {
        let due = t0 + Duration::from_secs(a.every * tick);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        tick += 1;
        let n = rows.load(Ordering::Relaxed);
        let rate = (n - last.0) as f64 / last.1.elapsed().as_secs_f64();
        last = (n, Instant::now());
        let window = std::mem::take(&mut lock(&samples).now);
        report(&store, &a, t0.elapsed().as_secs(), n, rate, window)?;
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().map_err(|_| anyhow::anyhow!("writer panicked"))??;
    }
    probe
        .join()
        .map_err(|_| anyhow::anyhow!("fsync probe panicked"))??;
    let total = rows.load(Ordering::Relaxed);
    let all = std::mem::take(&mut lock(&samples).all);
    summary(&store, total, t0.elapsed(), all)?;
    after_flush_probe(&store, &a, total)?;
    Arc::try_unwrap(store)
        .map_err(|_| anyhow::anyhow!("store still shared"))?
        .close()?;
    if !a.keep {
        std::fs::remove_dir_all(&a.dir).ok();
    }
    Ok(())
}

fn lock(s: &Mutex<Samples>) -> std::sync::MutexGuard<'_, Samples> {
    s.lock_or_recover()
}

type Worker = std::thread::JoinHandle<Result<()>>;

/// Writer threads: batch `b` holds rows `b*batch..(b+1)*batch` of the
/// fleet (device = row % devices); with a rate, batch `b` is not sent
/// before `t0 + b*batch/rate`.
fn spawn_writers(
    a: &SustainedArgs,
    store: &Arc<Store>,
    stop: &Arc<AtomicBool>,
    rows: &Arc<AtomicU64>,
    samples: &Arc<Mutex<Samples>>,
    t0: Instant,
) -> Vec<Worker> {
    let next_batch = Arc::new(AtomicU64::new(0));
    (0..a.writers)
        .map(|_| {
            let (store, stop, rows, next, samples) = (
                store.clone(),
                stop.clone(),
                rows.clone(),
                next_batch.clone(),
                samples.clone(),
            );
            let (devices, batch, rate) = (a.devices, a.batch, a.rate);
            std::thread::spawn(move || -> Result<()> {
                while !stop.load(Ordering::Relaxed) {
                    let b = next.fetch_add(1, Ordering::Relaxed);
                    if rate > 0 {
                        let due = t0 + Duration::from_secs_f64((b * batch) as f64 / rate as f64);
                        std::thread::sleep(due.saturating_duration_since(Instant::now()));
                    }
                    let mut buf = Vec::with_capacity(batch as usize * 72);
                    for j in b * batch..(b + 1) * batch {
                        push_fleet_row(&mut buf, j % devices, j / devices, 10_000);
                    }
                    let sent = Instant::now();
                    match store.write("readings", &buf, Durability::Sync) {
                        Ok(_) => {
                            lock(&samples).ack(sent.elapsed());
                            rows.fetch_add(batch, Ordering::Relaxed);
                        }
                        Err(Error::Busy { retry_after_ms }) => {
                            std::thread::sleep(Duration::from_millis(retry_after_ms.min(1000)))
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                Ok(())
            })
        })
        .collect()
}

/// The disk's own fdatasync latency while the store runs: 4 KiB written
/// and fdatasync'ed every 100 ms to a file beside the store.
fn spawn_fsync_probe(
    dir: &std::path::Path,
    stop: &Arc<AtomicBool>,
    samples: &Arc<Mutex<Samples>>,
) -> Result<Worker> {
    let path = dir.join("fsync-probe");
    let mut f = std::fs::File::create(&path).with_context(|| format!("{}", path.display()))?;
    let (stop, samples) = (stop.clone(), samples.clone());
    Ok(std::thread::spawn(move || -> Result<()> {
        let page = [0x5au8; 4096];
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            f.write_all(&page)?;
            f.sync_data()?;
            lock(&samples).fsync(t.elapsed());
            std::thread::sleep(Duration::from_millis(100));
        }
        drop(f);
        std::fs::remove_file(&path).ok();
        Ok(())
    }))
}

/// The `p` quantile of `v` (sorts it), or `None` when empty.
fn quantile<T: Ord + Copy>(v: &mut [T], p: f64) -> Option<T> {
    v.sort_unstable();
    let i = ((v.len() as f64 * p) as usize).min(v.len().checked_sub(1)?);
    Some(v[i])
}

fn us(v: &mut [u32], p: f64) -> String {
    quantile(v, p).map_or("-".into(), fmt_us)
}

fn fmt_us(us: u32) -> String {
    if us >= 10_000 {
        format!("{:.0}ms", us as f64 / 1000.0)
    } else {
        format!("{us}us")
    }
}

fn dur(v: &mut [Duration], p: f64) -> String {
    quantile(v, p).map_or("-".into(), |d| fmt_us(d.as_micros() as u32))
}

/// Files, sorted runs and write amplification of the table.
struct Shape {
    files: usize,
    mean: f64,
    max: usize,
    runs_max: usize,
    wamp: f64,
}

fn shape(store: &Store) -> Result<Shape> {
    let regions = store.regions("readings")?;
    let files: Vec<usize> = regions.iter().map(|r| r.files).collect();
    let (fb, cb): (u64, u64) = regions.iter().fold((0, 0), |(f, c), r| {
        (f + r.flush_bytes, c + r.compaction_bytes_written)
    });
    Ok(Shape {
        files: store.stats().hfiles,
        mean: files.iter().sum::<usize>() as f64 / files.len().max(1) as f64,
        max: files.iter().max().copied().unwrap_or(0),
        runs_max: regions.iter().map(|r| r.runs).max().unwrap_or(0),
        wamp: if fb > 0 {
            (fb + cb) as f64 / fb as f64
        } else {
            0.0
        },
    })
}

/// `latest` and 1-hour scans of `n` devices picked by `salt`.
fn sample_reads(
    store: &Store,
    a: &SustainedArgs,
    rows: u64,
    salt: u64,
    n: usize,
) -> Result<(Vec<Duration>, Vec<Duration>)> {
    let rounds = (rows / a.devices).max(1);
    let (mut latest, mut scans) = (Vec::new(), Vec::new());
    for i in 0..n as u64 {
        let d = telestore::testkit::mix(salt ^ i) % a.devices;
        let t1 = Instant::now();
        store.latest("readings", d, 1)?;
        latest.push(t1.elapsed());
        let to = FLEET_T0_MS + (rounds as i64) * 10_000;
        let t2 = Instant::now();
        store.scan("readings", d, to - 3_600_000, to, Order::NewestFirst)?;
        scans.push(t2.elapsed());
    }
    Ok((latest, scans))
}

fn report(
    store: &Store,
    a: &SustainedArgs,
    t: u64,
    rows: u64,
    rate: f64,
    mut w: Window,
) -> Result<()> {
    let s = shape(store)?;
    let st = store.stats();
    let (mut latest, mut scans) = sample_reads(store, a, rows, t, a.samples)?;
    let [ack50, ack99, ack999, sync50, sync99] = w.quantiles();
    println!(
        "{t:>5} {rows:>10} {rate:>8.0} {:>5} {:>5.1} {:>4} {:>5} {:>8} {:>5.2} {:>5} {:>5} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8}",
        s.files,
        s.mean,
        s.max,
        s.runs_max,
        st.compaction_debt_bytes >> 20,
        s.wamp,
        st.slowed_writes,
        st.busy_writes,
        ack50,
        ack99,
        ack999,
        sync50,
        sync99,
        dur(&mut latest, 0.5),
        dur(&mut latest, 0.99),
        dur(&mut scans, 0.5),
        dur(&mut scans, 0.99)
    );
    Ok(())
}

fn summary(store: &Store, rows: u64, took: Duration, mut all: Window) -> Result<()> {
    let s = shape(store)?;
    let st = store.stats();
    let [ack50, ack99, ack999, sync50, sync99] = all.quantiles();
    println!(
        "summary: {rows} rows in {:.0} s = {:.0} rows/s; files {} (max/region {}, runs max {}); debt {} MiB; w_amp {:.2}; slowed {} busy {} stalled {}; ack p50/p99/p999 {}/{}/{}; disk fdatasync p50/p99 {}/{}; limiter waited {} ms",
        took.as_secs_f64(),
        rows as f64 / took.as_secs_f64(),
        s.files,
        s.max,
        s.runs_max,
        st.compaction_debt_bytes >> 20,
        s.wamp,
        st.slowed_writes,
        st.busy_writes,
        st.stalled_writes,
        ack50,
        ack99,
        ack999,
        sync50,
        sync99,
        st.background_write_wait_ms
    );
    Ok(())
}

/// Devices read per pass of the after-flush probe: enough that its p99
/// is not simply the largest sample.
const PROBE_DEVICES: u64 = 2_000;

/// `latest` right after a flush against its warm latency, both on a
/// quiet store: the pending minor compactions are finished first (the
/// flush below starts new ones, as any flush does); the same devices are
/// read twice (the second pass warm), then one more round of every
/// device is written and flushed, and the devices are read again at once.
fn after_flush_probe(store: &Store, a: &SustainedArgs, rows: u64) -> Result<()> {
    let settle = Instant::now();
    store.compact("readings", false)?;
    let settle = settle.elapsed();
    let n = PROBE_DEVICES.min(a.devices);
    let probed: Vec<u64> = (0..n)
        .map(|i| telestore::testkit::mix(7 ^ i) % a.devices)
        .collect();
    let read = |devices: &[u64]| -> Result<Vec<Duration>> {
        devices
            .iter()
            .map(|&d| {
                let t = Instant::now();
                store.latest("readings", d, 1)?;
                Ok(t.elapsed())
            })
            .collect()
    };
    let pass = || read(&probed);
    pass()?;
    let mut warm = pass()?;
    let round = rows / a.devices + 1;
    let mut buf = Vec::with_capacity(a.devices as usize * 72);
    for d in 0..a.devices {
        push_fleet_row(&mut buf, d, round, 10_000);
    }
    store.write("readings", &buf, Durability::Sync)?;
    store.flush()?;
    let mut fresh = pass()?;
    // Devices no read asked for before: not in the latest-row cache.
    let seen: std::collections::HashSet<u64> = probed.iter().copied().collect();
    let unread: Vec<u64> = (0..a.devices)
        .filter(|d| !seen.contains(d))
        .take(n as usize)
        .collect();
    let mut first = read(&unread)?;
    let ratio = |f: &mut [Duration], w: &mut [Duration]| {
        let (f, w) = (quantile(f, 0.99), quantile(w, 0.99));
        match (f, w) {
            (Some(f), Some(w)) if !w.is_zero() => {
                format!("{:.2}", f.as_secs_f64() / w.as_secs_f64())
            }
            _ => "-".into(),
        }
    };
    println!(
        "latest after a flush ({n} devices, after {:.1} s settling compactions): p50/p99 {}/{} against warm {}/{} (p99 ratio {})",
        settle.as_secs_f64(),
        dur(&mut fresh, 0.5),
        dur(&mut fresh, 0.99),
        dur(&mut warm, 0.5),
        dur(&mut warm, 0.99),
        ratio(&mut fresh, &mut warm)
    );
    println!(
        "latest after that flush of {} devices read for the first time (not in the latest-row cache): p50/p99 {}/{} (p99 ratio to warm {})",
        unread.len(),
        dur(&mut first, 0.5),
        dur(&mut first, 0.99),
        ratio(&mut first, &mut warm)
    );
    Ok(())
}
