//! `telestore bench sustained`: continuous ingest for a set time with
//! background flushes and compactions; every interval it prints the file
//! counts per region, the write amplification, stalls, and the latency of
//! sampled reads (`latest` and one-hour device scans), so one can see
//! whether files and read latency stay bounded.

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use telestore::testkit::{push_fleet_row, readings_schema, FLEET_T0_MS};
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
    /// Memstore flush threshold per region, MiB.
    #[arg(long, default_value_t = 64)]
    flush_mib: usize,
    /// Reads sampled per interval (each: one `latest`, one 1-hour scan).
    #[arg(long, default_value_t = 200)]
    samples: usize,
    /// Keep the directory afterwards.
    #[arg(long)]
    keep: bool,
}

pub fn run(a: SustainedArgs) -> Result<()> {
    if a.dir.exists() {
        std::fs::remove_dir_all(&a.dir).with_context(|| format!("removing {}", a.dir.display()))?;
    }
    let opts = Options {
        flush_threshold_bytes: a.flush_mib << 20,
        ..Options::default()
    };
    let store = Arc::new(Store::open(&a.dir, opts)?);
    store.create_table(readings_schema("readings"))?;
    println!(
        "telestore bench sustained: {} s, {} devices, batches of {}, {} writers, sync, flush at {} MiB/region, io {}",
        a.seconds, a.devices, a.batch, a.writers, a.flush_mib, store.io_kind().name()
    );
    println!(
        "{:>6} {:>10} {:>9} {:>7} {:>9} {:>9} {:>6} {:>6} {:>7} {:>11} {:>11} {:>11} {:>11}",
        "t_s",
        "rows",
        "rows/s",
        "hfiles",
        "files/reg",
        "max/reg",
        "compac",
        "w_amp",
        "busy",
        "latest_p50",
        "latest_p99",
        "scan1h_p50",
        "scan1h_p99"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let rows = Arc::new(AtomicU64::new(0));
    let next_batch = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for _ in 0..a.writers {
        let (store, stop, rows, next) = (
            store.clone(),
            stop.clone(),
            rows.clone(),
            next_batch.clone(),
        );
        let (devices, batch) = (a.devices, a.batch);
        writers.push(std::thread::spawn(move || -> Result<()> {
            while !stop.load(Ordering::Relaxed) {
                let b = next.fetch_add(1, Ordering::Relaxed);
                let mut buf = Vec::with_capacity(batch as usize * 72);
                for j in b * batch..(b + 1) * batch {
                    push_fleet_row(&mut buf, j % devices, j / devices, 10_000);
                }
                match store.write("readings", &buf, Durability::Sync) {
                    Ok(_) => {
                        rows.fetch_add(batch, Ordering::Relaxed);
                    }
                    Err(Error::Busy { retry_after_ms }) => {
                        std::thread::sleep(Duration::from_millis(retry_after_ms.min(1000)))
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(())
        }));
    }
    let t0 = Instant::now();
    let mut last = (0u64, t0);
    let mut tick = 1;
    while t0.elapsed() < Duration::from_secs(a.seconds) {
        let due = t0 + Duration::from_secs(a.every * tick);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        tick += 1;
        let n = rows.load(Ordering::Relaxed);
        let rate = (n - last.0) as f64 / last.1.elapsed().as_secs_f64();
        last = (n, Instant::now());
        report(&store, &a, t0.elapsed().as_secs(), n, rate)?;
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().map_err(|_| anyhow::anyhow!("writer panicked"))??;
    }
    Arc::try_unwrap(store)
        .map_err(|_| anyhow::anyhow!("store still shared"))?
        .close()?;
    if !a.keep {
        std::fs::remove_dir_all(&a.dir).ok();
    }
    Ok(())
}

fn pct(v: &mut [Duration], p: f64) -> String {
    v.sort();
    let i = ((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1));
    v.get(i)
        .map_or("-".into(), |d| format!("{:.0}us", d.as_secs_f64() * 1e6))
}

fn report(store: &Store, a: &SustainedArgs, t: u64, rows: u64, rate: f64) -> Result<()> {
    let regions = store.regions("readings")?;
    let st = store.stats();
    let files: Vec<usize> = regions.iter().map(|r| r.files).collect();
    let mean = files.iter().sum::<usize>() as f64 / files.len().max(1) as f64;
    let max = files.iter().max().copied().unwrap_or(0);
    let compactions: u64 = regions.iter().map(|r| r.compactions).sum();
    let (fb, cb): (u64, u64) = regions.iter().fold((0, 0), |(f, c), r| {
        (f + r.flush_bytes, c + r.compaction_bytes_written)
    });
    let wamp = if fb > 0 {
        (fb + cb) as f64 / fb as f64
    } else {
        0.0
    };
    let rounds = (rows / a.devices).max(1);
    let (mut latest, mut scans) = (Vec::new(), Vec::new());
    for i in 0..a.samples as u64 {
        let d = telestore::testkit::mix(t ^ i) % a.devices;
        let t1 = Instant::now();
        store.latest("readings", d, 1)?;
        latest.push(t1.elapsed());
        let to = FLEET_T0_MS + (rounds as i64) * 10_000;
        let t2 = Instant::now();
        store.scan("readings", d, to - 3_600_000, to, Order::NewestFirst)?;
        scans.push(t2.elapsed());
    }
    println!(
        "{t:>6} {rows:>10} {rate:>9.0} {:>7} {mean:>9.1} {max:>9} {compactions:>6} {wamp:>6.2} {:>7} {:>11} {:>11} {:>11} {:>11}",
        st.hfiles,
        st.busy_writes,
        pct(&mut latest, 0.5),
        pct(&mut latest, 0.99),
        pct(&mut scans, 0.5),
        pct(&mut scans, 0.99)
    );
    Ok(())
}
