//! `telestore-lab query`: the read targets (benches/RESULTS.md) — `latest` and a
//! one-day range of one device (warm cache, through the same query layer
//! the CLI and daemon use, Arrow batches included), and export to an Arrow
//! IPC file. Prints p50/p99/p999 and rows/s. Between them it times
//! `latest` right after flushes of new readings (warm after
//! flush), written after the table's day; the exports then include those
//! rows (`--fresh-flushes 0` skips that phase).

use anyhow::{Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use std::path::PathBuf;
use std::time::Instant;
use telestore::query::export::{BackgroundSink, Codec, FileFormat, FileSink};
use telestore::query::{Kind, Params, Plan, Prepared};
use telestore::schema::batch::push_row;
use telestore::testkit::{mix, readings_schema, Truck, Values, FLEET_T0_MS};
use telestore::{Durability, Options, Store};

const TABLE: &str = "readings";

#[derive(Args, Debug)]
pub struct QueryBenchArgs {
    /// Store directory; reused when it already holds the table (so a big
    /// fleet is built once), else created.
    #[arg(long, default_value = "telestore-data/bench-query")]
    dir: PathBuf,
    /// Devices in the fleet.
    #[arg(long, default_value_t = 200)]
    devices: u64,
    /// Readings per device, one every 10 s (8,640 = one day).
    #[arg(long, default_value_t = 8_640)]
    rows_per_device: u64,
    /// `latest` queries to time.
    #[arg(long, default_value_t = 100_000)]
    latest: u64,
    /// One-day range queries to time.
    #[arg(long, default_value_t = 2_000)]
    ranges: u64,
    /// Export the whole table this many times to an Arrow IPC file.
    #[arg(long, default_value_t = 3)]
    exports: u32,
    /// Measure the table as it is, without first compacting it to one
    /// HFile per region (reads then also compete with the background
    /// compactions a fresh bulk load triggers).
    #[arg(long)]
    no_compact: bool,
    /// Delete the directory afterwards.
    #[arg(long)]
    clean: bool,
    /// Put flushed blocks into the block cache as they are written
    /// (`Options::cache_flushed_blocks`); compare `latest` right after a
    /// flush with true and false.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    cache_flushed_blocks: bool,
    /// Flushes after which every device's `latest` is timed once (0: skip).
    #[arg(long, default_value_t = 5)]
    fresh_flushes: u64,
    /// Readings per device written before each of those flushes (360 =
    /// one hour: files big enough that most of each is written past the
    /// page cache, as a daemon's flushes are).
    #[arg(long, default_value_t = 360)]
    fresh_rounds: u64,
    /// Data block layout of the table when it is created: rows or columnar.
    #[arg(long, default_value_t = telestore::schema::TableOptions::default().encoding.name().to_string())]
    encoding: String,
    /// sensor: readings at sensor precision (TSBS-like, as `load`);
    /// full-precision: the random walks' raw doubles.
    #[arg(long, default_value = "sensor", value_parser = ["sensor", "full-precision"])]
    values: String,
    /// Table block size in bytes (rows blocks close at this many raw
    /// bytes, columnar blocks at a sixteenth of it in rows).
    #[arg(long, default_value_t = telestore::schema::TableOptions::default().block_size_bytes)]
    block_size: u32,
}

/// The fleet's trucks (their random walks go on from batch to batch).
struct Fleet {
    trucks: Vec<Truck>,
    values: Values,
}

impl Fleet {
    fn new(a: &QueryBenchArgs) -> Result<Self> {
        Ok(Fleet {
            trucks: (0..a.devices).map(|d| Truck::new(1, d)).collect(),
            values: Values::parse(&a.values).map_err(anyhow::Error::msg)?,
        })
    }
}

/// `latest` of every device right after a flush that wrote
/// `fresh_rounds` new readings for each: the first read of the newest
/// file.
fn latest_after_flush(store: &Store, a: &QueryBenchArgs, fleet: &mut Fleet) -> Result<()> {
    if a.fresh_flushes == 0 {
        return Ok(());
    }
    let mut h = Histogram::<u64>::new(3)?;
    let mut p = Params {
        kind: Kind::Latest,
        table: TABLE.into(),
        ..Params::default()
    };
    let (mut hits, mut misses) = (0, 0);
    for k in 0..a.fresh_flushes {
        // After the table's day (the range queries' window), whatever
        // --rows-per-device is.
        let first = a.rows_per_device.max(8_640) + k * a.fresh_rounds;
        write_rounds(store, fleet, first..first + a.fresh_rounds)?;
        let before = store.stats().cache;
        for d in 0..a.devices {
            p.device = Some(d.to_string());
            let t = Instant::now();
            let n = run_query(store, &p)?;
            h.record(t.elapsed().as_nanos() as u64)?;
            anyhow::ensure!(n == 1, "latest returned {n} rows");
        }
        let after = store.stats().cache;
        misses += after.misses - before.misses;
        hits += after.hits - before.hits;
    }
    println!("  block cache during those reads: {hits} hits, {misses} misses");
    let label = format!(
        "latest (n=1, first read after a flush, cache_flushed_blocks {})",
        a.cache_flushed_blocks
    );
    report(&label, &h);
    Ok(())
}

/// Write one reading of every device per round of `rounds` (the last
/// batch synced), then flush.
fn write_rounds(store: &Store, fleet: &mut Fleet, rounds: std::ops::Range<u64>) -> Result<()> {
    let mut batch = Vec::with_capacity(8 << 20);
    for round in rounds {
        let ts = FLEET_T0_MS + round as i64 * 10_000;
        for (d, t) in fleet.trucks.iter_mut().enumerate() {
            push_row(&mut batch, d as u64, ts, &t.next_fields(fleet.values));
        }
        if batch.len() >= 4 << 20 {
            store.write(TABLE, &batch, Durability::Async)?;
            batch.clear();
        }
    }
    store.write(TABLE, &batch, Durability::Sync)?;
    store.flush()?;
    Ok(())
}

fn build(store: &Store, a: &QueryBenchArgs, fleet: &mut Fleet) -> Result<()> {
    if store.table_names().iter().any(|t| t == TABLE) {
        println!("reusing the table in {}", a.dir.display());
        return Ok(());
    }
    let mut schema = readings_schema(TABLE);
    schema.options.encoding = telestore::schema::BlockEncoding::parse(&a.encoding)?;
    schema.options.block_size_bytes = a.block_size;
    store.create_table(schema)?;
    let t0 = Instant::now();
    write_rounds(store, fleet, 0..a.rows_per_device)?;
    println!(
        "built {} rows in {:.1} s",
        a.devices * a.rows_per_device,
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Run one query through the query layer; returns the rows produced.
fn run_query(store: &Store, p: &Params) -> Result<u64> {
    let plan = Plan::resolve(store, p, store.now_ms())?;
    let stats = Prepared::new(store, plan).run(store, &mut |b| {
        std::hint::black_box(b);
        Ok(())
    })?;
    Ok(stats.rows_out)
}

fn report(name: &str, h: &Histogram<u64>) {
    println!(
        "{name}: n={} p50 {:.1} µs, p99 {:.1} µs, p999 {:.1} µs, max {:.1} µs",
        h.len(),
        h.value_at_quantile(0.5) as f64 / 1e3,
        h.value_at_quantile(0.99) as f64 / 1e3,
        h.value_at_quantile(0.999) as f64 / 1e3,
        h.max() as f64 / 1e3
    );
}

#[expect(
    clippy::too_many_lines,
    reason = "a benchmark driver that prints each measurement as it goes; moves to tools/lab"
)]
pub fn run(a: QueryBenchArgs) -> Result<()> {
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    let opts = Options {
        cache_flushed_blocks: a.cache_flushed_blocks,
        ..Options::default()
    };
    let store = Store::open(&a.dir, opts)?;
    let mut fleet = Fleet::new(&a)?;
    build(&store, &a, &mut fleet)?;
    if !a.no_compact {
        let t = Instant::now();
        store.compact(TABLE, true)?;
        println!("major compaction: {:.1} s", t.elapsed().as_secs_f64());
    }
    let total = store.scan_all(TABLE, i64::MIN, i64::MAX, |_| true)?.rows;
    let st = store.stats();
    let encoding = store.schema(TABLE)?.options.encoding;
    println!(
        "table {TABLE}: {total} rows in {} HFiles ({encoding}, {} values), io {}",
        st.hfiles,
        a.values,
        store.io_kind().name()
    );

    let mut p = Params {
        kind: Kind::Latest,
        table: TABLE.into(),
        ..Params::default()
    };
    // Warm the cache: every device once.
    for d in 0..a.devices {
        p.device = Some(d.to_string());
        run_query(&store, &p)?;
    }
    let mut h = Histogram::<u64>::new(3)?;
    for i in 0..a.latest {
        p.device = Some((mix(i) % a.devices).to_string());
        let t = Instant::now();
        let n = run_query(&store, &p)?;
        h.record(t.elapsed().as_nanos() as u64)?;
        anyhow::ensure!(n == 1, "latest returned {n} rows");
    }
    report("latest (n=1, warm)", &h);
    latest_after_flush(&store, &a, &mut fleet)?;

    let day = 86_400_000i64;
    let mut p = Params {
        kind: Kind::Range,
        table: TABLE.into(),
        from: Some(format!("{FLEET_T0_MS}ms")),
        to: Some(format!("{}ms", FLEET_T0_MS + day)),
        ..Params::default()
    };
    let expect = a.rows_per_device.min(8_640);
    let mut h = Histogram::<u64>::new(3)?;
    let mut before = store.stats().cache;
    for i in 0..a.ranges + a.devices {
        p.device = Some((mix(i) % a.devices).to_string());
        if i == a.devices {
            before = store.stats().cache;
        }
        let t = Instant::now();
        let n = run_query(&store, &p)?;
        if i >= a.devices {
            h.record(t.elapsed().as_nanos() as u64)?;
        }
        anyhow::ensure!(n == expect, "range returned {n} rows, expected {expect}");
    }
    report(&format!("range (1 day = {expect} rows, warm)"), &h);
    let after = store.stats().cache;
    println!(
        "  block cache during the timed ranges: {} hits, {} misses, {} MB held",
        after.hits - before.hits,
        after.misses - before.misses,
        after.bytes >> 20
    );

    let out = a.dir.join("bench-export.arrow");
    for _ in 0..a.exports {
        let p = Params {
            kind: Kind::Scan,
            table: TABLE.into(),
            ..Params::default()
        };
        let t = Instant::now();
        let plan = Plan::resolve(&store, &p, store.now_ms())?;
        let prepared = Prepared::new(&store, plan);
        let file = FileSink::create(&out, FileFormat::Arrow, Codec::None, &prepared.schema())?;
        let mut sink = BackgroundSink::spawn(file);
        let stats = prepared.run(&store, &mut |b| sink.write(b))?;
        sink.commit()?;
        let s = t.elapsed().as_secs_f64();
        let bytes = std::fs::metadata(&out)?.len();
        println!(
            "export to Arrow IPC file: {} rows in {s:.2} s = {:.2} M rows/s ({:.0} MB written, fsynced)",
            stats.rows_out,
            stats.rows_out as f64 / s / 1e6,
            bytes as f64 / 1e6
        );
    }
    std::fs::remove_file(&out).ok();
    store.close()?;
    if a.clean {
        std::fs::remove_dir_all(&a.dir).ok();
    }
    Ok(())
}
