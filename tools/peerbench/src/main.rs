//! Side-by-side benchmark (issue 20): telestore's library beside RocksDB,
//! fjall and a zstd Parquet file, on one seeded TSBS-IoT-like fleet, with
//! the same durability (each write batch fsynced before it returns).
//! Systems alternate within each round; the report gives medians over
//! the rounds and the ratio telestore ÷ peer. See `README.md` here.

mod data;
mod http;
mod systems;

use anyhow::{Context, Result};
use clap::Parser;
use data::{Fleet, Reading};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;
use systems::System;

#[derive(Parser, Debug)]
#[command(about = "telestore beside RocksDB, fjall and Parquet on one truck fleet")]
struct Args {
    /// Systems to run, comma-separated: telestore, rocksdb, fjall, parquet
    /// (libraries and a file), telestore-http, influxdb (servers over
    /// HTTP, line protocol in, JSON out); also telestore-rows (telestore
    /// with row-major blocks, as before columnar blocks).
    #[arg(
        long,
        default_value = "telestore,rocksdb,fjall,parquet,telestore-http,influxdb"
    )]
    systems: String,
    /// Trucks in the fleet.
    #[arg(long, default_value_t = 500)]
    devices: u64,
    /// Readings per truck, one every 10 s (8,640 = one day).
    #[arg(long, default_value_t = 8_640)]
    readings: u64,
    /// Rows per write batch.
    #[arg(long, default_value_t = 1_000)]
    batch: usize,
    /// Readings in a thousand that arrive five batches late.
    #[arg(long, default_value_t = 10)]
    late_per_mille: u64,
    /// Writer threads of the second load (the first has one writer).
    #[arg(long, default_value_t = 4)]
    writers: usize,
    /// Rounds; every system runs once per round, in rotating order.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// One-day range scans of random devices timed per state.
    #[arg(long, default_value_t = 100)]
    ranges: usize,
    /// `latest` lookups of random devices timed per state.
    #[arg(long, default_value_t = 5_000)]
    latest: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The telestore binary `telestore-http` runs (`cargo build --release`
    /// in the repository first).
    #[arg(long, default_value = "../../target/release/telestore")]
    telestore_bin: PathBuf,
    /// Where the systems' directories go (emptied first).
    #[arg(long, default_value = "target/peerbench-data")]
    dir: PathBuf,
}

/// Figures of one system in one round, by name.
type Figures = BTreeMap<&'static str, f64>;

fn main() -> Result<()> {
    let a = Args::parse();
    let fleet = Fleet {
        devices: a.devices,
        readings: a.readings,
        batch: a.batch,
        late_per_mille: a.late_per_mille,
        seed: a.seed,
    };
    let batches = fleet.batches();
    let names: Vec<String> = a.systems.split(',').map(|s| s.trim().to_string()).collect();
    eprintln!(
        "fleet: {} trucks × {} readings = {} rows in {} batches; systems {names:?}; {} rounds",
        fleet.devices,
        fleet.readings,
        fleet.rows(),
        batches.len(),
        a.rounds
    );
    let mut all: BTreeMap<String, Vec<Figures>> = BTreeMap::new();
    for round in 0..a.rounds {
        for k in 0..names.len() {
            let name = &names[(k + round) % names.len()];
            eprintln!("round {round}: {name}");
            let f = run_system(name, &a, &fleet, &batches)
                .with_context(|| format!("{name}, round {round}"))?;
            eprintln!("  {f:?}");
            all.entry(name.clone()).or_default().push(f);
        }
    }
    report(&all, &fleet, &a);
    Ok(())
}

/// Load, read right after the load, settle, measure bytes, read warm.
fn run_system(name: &str, a: &Args, fleet: &Fleet, batches: &[Vec<Reading>]) -> Result<Figures> {
    let mut f = Figures::new();
    // The Parquet file is a storage baseline: written once, not durable
    // per batch, no reads.
    let database = name != "parquet";
    if database {
        // Ingest with several writers, into a directory of its own.
        let dir = a.dir.join(format!("{name}-writers"));
        let _ = std::fs::remove_dir_all(&dir);
        let s = systems::open(name, &dir, &a.telestore_bin)?;
        f.insert("ingest_rows_s_w", load(&*s, batches, a.writers)?);
        drop(s);
        std::fs::remove_dir_all(&dir).ok();
    }
    let dir = a.dir.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let mut s = systems::open(name, &dir, &a.telestore_bin)?;
    let rate = load(&*s, batches, 1)?;
    if database {
        f.insert("ingest_rows_s_1", rate);
    }
    let reads = database;
    if reads {
        reads_into(&mut f, "after_load", &*s, fleet, a)?;
    }
    let t = Instant::now();
    s.settle()?;
    f.insert("settle_s", t.elapsed().as_secs_f64());
    let rows = fleet.rows() as f64;
    f.insert("data_bytes_row", s.data_bytes()? as f64 / rows);
    f.insert(
        "dir_bytes_row",
        systems::dir_bytes(&dir, &|_| true)? as f64 / rows,
    );
    if reads {
        // One pass to warm, then the timed one.
        reads_into(&mut Figures::new(), "warmup", &*s, fleet, a)?;
        reads_into(&mut f, "warm", &*s, fleet, a)?;
    }
    drop(s);
    std::fs::remove_dir_all(&dir).ok();
    Ok(f)
}

/// Write every batch with `writers` threads (batch `i` to writer `i %
/// writers`); rows/s.
fn load(s: &dyn System, batches: &[Vec<Reading>], writers: usize) -> Result<f64> {
    let t = Instant::now();
    std::thread::scope(|scope| -> Result<()> {
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                scope.spawn(move || -> Result<()> {
                    for b in batches.iter().skip(w).step_by(writers) {
                        s.write(b)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| anyhow::anyhow!("a writer panicked"))??;
        }
        Ok(())
    })?;
    let rows: usize = batches.iter().map(Vec::len).sum();
    Ok(rows as f64 / t.elapsed().as_secs_f64())
}

/// Time one-day range scans, `latest` lookups and a fleet-wide one-hour
/// window; figures named `<what>_<state>`.
fn reads_into(f: &mut Figures, state: &str, s: &dyn System, fleet: &Fleet, a: &Args) -> Result<()> {
    let last = fleet.last_ts();
    let day = 86_400_000 - 1;
    let pick = |i: usize| telestore::testkit::mix(i as u64 ^ a.seed) % fleet.devices;
    let t = Instant::now();
    let mut rows = 0;
    for i in 0..a.ranges {
        let (n, _) = s.range(pick(i), last - day, last)?;
        rows += n;
    }
    let want = fleet.readings.min(8_640) * a.ranges as u64;
    anyhow::ensure!(
        rows == want,
        "range scans read {rows} rows, {want} expected"
    );
    f.insert(
        leak(format!("range_rows_s_{state}")),
        rows as f64 / t.elapsed().as_secs_f64(),
    );
    let mut h = Histogram::<u64>::new(3)?;
    for i in 0..a.latest {
        let t = Instant::now();
        let ts = s.latest(pick(i + a.ranges))?;
        h.record(t.elapsed().as_nanos() as u64)?;
        anyhow::ensure!(ts == Some(last), "latest gave {ts:?}, {last} expected");
    }
    f.insert(
        leak(format!("latest_p50_us_{state}")),
        h.value_at_quantile(0.5) as f64 / 1e3,
    );
    f.insert(
        leak(format!("latest_p99_us_{state}")),
        h.value_at_quantile(0.99) as f64 / 1e3,
    );
    let hour = 3_600_000 - 1;
    let t = Instant::now();
    let n = s.window(fleet.devices, last - hour, last)?;
    let want = fleet.devices * fleet.readings.min(360);
    anyhow::ensure!(n == want, "window read {n} rows, {want} expected");
    f.insert(
        leak(format!("window_rows_s_{state}")),
        n as f64 / t.elapsed().as_secs_f64(),
    );
    Ok(())
}

/// Figure names are built once per state; a handful for the whole run.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The markdown table: one row per figure, one column per system
/// (median over rounds), and telestore ÷ each peer.
fn report(all: &BTreeMap<String, Vec<Figures>>, fleet: &Fleet, a: &Args) {
    let names: Vec<&String> = all.keys().collect();
    let mut figures: Vec<&'static str> = Vec::new();
    for runs in all.values() {
        for k in runs.iter().flat_map(|f| f.keys()) {
            if !figures.contains(k) {
                figures.push(k);
            }
        }
    }
    println!(
        "\n{} trucks × {} readings ({} rows), batches of {}, {}‰ late, {} rounds (medians), `--writers {}`\n",
        fleet.devices,
        fleet.readings,
        fleet.rows(),
        fleet.batch,
        fleet.late_per_mille,
        a.rounds,
        a.writers
    );
    println!(
        "Ratios are telestore ÷ peer (its daemon ÷ InfluxDB): above 1 is better for rows/s, below 1 is better for µs, bytes and seconds.\n"
    );
    // Library systems against telestore's library; InfluxDB (a server)
    // against telestore's daemon over the same HTTP client.
    let mut pairs: Vec<(&str, &str)> = names
        .iter()
        .filter(|n| !matches!(n.as_str(), "telestore" | "telestore-http" | "influxdb"))
        .map(|n| ("telestore", n.as_str()))
        .collect();
    if names.iter().any(|n| n.as_str() == "influxdb") {
        pairs.push(("telestore-http", "influxdb"));
    }
    print!("| figure |");
    for n in &names {
        print!(" {n} |");
    }
    for (t, p) in &pairs {
        print!(" {t} ÷ {p} |");
    }
    println!();
    println!("|---|{}", "---:|".repeat(names.len() + pairs.len()));
    for fig in figures {
        let med = |n: &str| -> Option<f64> {
            let v: Vec<f64> = all
                .get(n)?
                .iter()
                .filter_map(|f| f.get(fig).copied())
                .collect();
            (!v.is_empty()).then(|| median(v))
        };
        print!("| {fig} |");
        for n in &names {
            match med(n) {
                Some(x) => print!(" {} |", fmt(x)),
                None => print!(" — |"),
            }
        }
        for (t, p) in &pairs {
            match (med(t), med(p)) {
                (Some(t), Some(x)) if x != 0.0 => print!(" {:.2} |", t / x),
                _ => print!(" — |"),
            }
        }
        println!();
    }
}

fn fmt(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e4 {
        format!("{:.0}", x)
    } else {
        format!("{:.2}", x)
    }
}
