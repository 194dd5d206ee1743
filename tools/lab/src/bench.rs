//! `telestore-lab ingest`: the macro benchmark of ingest and scans.
//! Creates a fresh store, ingests a generated fleet with the
//! chosen durability from several writer threads, flushes, reads it back
//! (checking every value) and prints rows/s, bytes on disk per row and
//! scan rates.

use anyhow::{bail, Context, Result};
use arrow_array::cast::AsArray;
use arrow_array::types::Float64Type;
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use telestore::query::{Kind, Params, Plan, Prepared};
use telestore::schema::batch::push_row;
use telestore::testkit::{readings_schema, Truck, Values, FLEET_T0_MS};
use telestore::{Durability, Options, Order, Store};

use super::keydesign;

#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// Ingest a generated fleet durably, read it back, print rows/s.
    Ingest(IngestArgs),
    /// Compare four row-key designs: region balance, write concentration,
    /// scan footprint, splits.
    KeyDesign(keydesign::KeyDesignArgs),
    /// Run the compaction planner on a simulated flush stream: file counts
    /// and write amplification over time.
    CompactionSim(super::compaction_sim::SimArgs),
    /// Continuous ingest with background flushes and compactions; prints
    /// file counts, write amplification and read latency over time.
    Sustained(super::sustained::SustainedArgs),
    /// Query and export speed: `latest` and one-day range latency
    /// percentiles (warm), export rows/s.
    Query(super::bench_query::QueryBenchArgs),
}

#[derive(Args, Debug)]
pub struct IngestArgs {
    /// Store directory; it is DELETED and recreated at start.
    #[arg(long, default_value = "telestore-data/bench-ingest")]
    dir: PathBuf,
    /// Devices in the fleet.
    #[arg(long, default_value_t = 10_000)]
    devices: u64,
    /// Readings per device (one every 10 s).
    #[arg(long, default_value_t = 100)]
    rows_per_device: u64,
    /// Rows per write batch.
    #[arg(long, default_value_t = 1_000)]
    batch: usize,
    /// Concurrent writer threads.
    #[arg(long, default_value_t = 4)]
    writers: usize,
    /// sync (ack after fdatasync), async or skip.
    #[arg(long, default_value = "sync")]
    durability: String,
    /// Rows written for one device to measure a long single-device scan.
    #[arg(long, default_value_t = 1_000_000)]
    scan_rows: u64,
    /// Table compression: none, snappy, zstd or zstd:LEVEL.
    #[arg(long, default_value = "zstd")]
    compression: String,
    /// Regions the table is pre-split into.
    #[arg(long, default_value_t = 16)]
    regions: u32,
    /// A region splits after a flush once its HFiles exceed this (MiB).
    #[arg(long, default_value_t = 1024)]
    region_split_mib: u64,
    /// Keep the directory afterwards.
    #[arg(long)]
    keep: bool,
    /// sensor: readings at sensor precision (TSBS-like, as `load`);
    /// full-precision: the random walks' raw doubles.
    #[arg(long, default_value = "sensor", value_parser = ["sensor", "full-precision"])]
    values: String,
    /// Seed of the trucks' random walks.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Data block layout of the table: rows or columnar (default: the
    /// table default).
    #[arg(long, default_value_t = telestore::schema::TableOptions::default().encoding.name().to_string())]
    encoding: String,
    /// Table block size in bytes (rows blocks close at this many raw
    /// bytes, columnar blocks at a sixteenth of it in rows).
    #[arg(long, default_value_t = telestore::schema::TableOptions::default().block_size_bytes)]
    block_size: u32,
}

#[expect(
    clippy::too_many_lines,
    reason = "a benchmark driver that prints each measurement as it goes; moves to tools/lab"
)]
pub fn run(cmd: BenchCmd) -> Result<()> {
    let a = match cmd {
        BenchCmd::Ingest(a) => a,
        BenchCmd::KeyDesign(a) => return keydesign::run(a),
        BenchCmd::CompactionSim(a) => return super::compaction_sim::run(a),
        BenchCmd::Sustained(a) => return super::sustained::run(a),
        BenchCmd::Query(a) => return super::bench_query::run(a),
    };
    let durability = Durability::parse(&a.durability)?;
    let values = Values::parse(&a.values).map_err(anyhow::Error::msg)?;
    if a.dir.exists() {
        std::fs::remove_dir_all(&a.dir).with_context(|| format!("removing {}", a.dir.display()))?;
    }
    let opts = Options {
        region_split_bytes: a.region_split_mib << 20,
        ..Options::default()
    };
    let store = Arc::new(Store::open(&a.dir, opts)?);
    let mut schema = readings_schema("readings");
    schema.options.compression = telestore::Compression::parse(&a.compression)?;
    schema.options.regions = a.regions;
    schema.options.encoding = telestore::schema::BlockEncoding::parse(&a.encoding)?;
    schema.options.block_size_bytes = a.block_size;
    store.create_table(schema)?;
    println!(
        "telestore-lab ingest: {} devices x {} rows ({} values, seed {}), batches of {}, {} writers, durability {}, {} {}, io {}",
        a.devices,
        a.rows_per_device,
        a.values,
        a.seed,
        a.batch,
        a.writers,
        durability.name(),
        a.encoding,
        a.compression,
        store.io_kind().name()
    );
    let total = a.devices * a.rows_per_device;
    let batches = make_batches(&a, values, total);
    let t0 = Instant::now();
    ingest(&store, Arc::new(batches), a.writers, durability)?;
    let ingest_s = t0.elapsed().as_secs_f64();
    println!(
        "ingest:  {total} rows in {ingest_s:.2} s = {:.0} rows/s",
        total as f64 / ingest_s
    );
    let t1 = Instant::now();
    store.flush()?;
    println!("flush:   {:.2} s", t1.elapsed().as_secs_f64());
    let hbytes = dir_bytes(&a.dir.join("tables"))?;
    println!(
        "disk:    {hbytes} bytes in HFiles = {:.2} bytes/row after the flush (raw row 72 bytes)",
        hbytes as f64 / total as f64
    );
    verify_and_scan(&store, &a, values, total)?;
    let t2 = Instant::now();
    store.compact("readings", true)?;
    let hbytes = dir_bytes(&a.dir.join("tables"))?;
    println!(
        "major:   {:.2} s; {hbytes} bytes in HFiles = {:.2} bytes/row after a major compaction",
        t2.elapsed().as_secs_f64(),
        hbytes as f64 / total as f64
    );
    print_columns(&a.dir.join("tables"), total)?;
    verify_and_scan(&store, &a, values, total)?;
    long_scan(&store, &a, values)?;
    let st = store.stats();
    println!(
        "files:   {} HFiles, {} WAL segments live, cache hits {} misses {}, stalled writes {}, busy retries {}",
        st.hfiles, st.wal_segments, st.cache.hits, st.cache.misses, st.stalled_writes, st.busy_writes
    );
    Arc::try_unwrap(store)
        .map_err(|_| anyhow::anyhow!("store still shared"))?
        .close()?;
    if !a.keep {
        std::fs::remove_dir_all(&a.dir).ok();
    }
    Ok(())
}

/// Bytes per row of each column of the columnar blocks under `tables`
/// (and of the rest of the files: block headers, index, bloom, info).
fn print_columns(tables: &Path, total: u64) -> Result<()> {
    let s = telestore_engine::hfile::stats::dir_column_bytes(tables)?;
    if s.columns.is_empty() {
        return Ok(());
    }
    println!("columns: bytes/row (codec, outer compression) after the major compaction");
    let names = telestore::testkit::READINGS_FIELDS;
    for c in &s.columns {
        // "field 3 (f64)" -> "velocity (f64)"
        let column = match c
            .column
            .strip_prefix("field ")
            .and_then(|r| r.split_once(' '))
        {
            Some((i, ty)) => i
                .parse::<usize>()
                .ok()
                .and_then(|i| names.get(i))
                .map_or(c.column.clone(), |n| format!("{n} {ty}")),
            None => c.column.clone(),
        };
        println!(
            "  {:<28} {:>7.3}   {}",
            column,
            c.bytes as f64 / total as f64,
            c.codecs
        );
    }
    println!(
        "  {:<28} {:>7.3}   (block headers, index, bloom, info, trailer; rows blocks)",
        "rest of the files",
        s.other_bytes as f64 / total as f64
    );
    Ok(())
}

/// Batches in arrival order: every device reports once per round (10 s),
/// its readings from its [`Truck`].
fn make_batches(a: &IngestArgs, values: Values, total: u64) -> Vec<Vec<u8>> {
    let (devices, batch) = (a.devices, a.batch);
    let mut trucks: Vec<Truck> = (0..devices).map(|d| Truck::new(a.seed, d)).collect();
    let mut out = Vec::new();
    let mut cur = Vec::with_capacity(batch * 72);
    for j in 0..total {
        let (d, round) = (j % devices, j / devices);
        let ts = FLEET_T0_MS + round as i64 * 10_000;
        push_row(&mut cur, d, ts, &trucks[d as usize].next_fields(values));
        if cur.len() == batch * 72 {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn ingest(
    store: &Arc<Store>,
    batches: Arc<Vec<Vec<u8>>>,
    writers: usize,
    d: Durability,
) -> Result<()> {
    let next = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..writers.max(1))
        .map(|_| {
            let (store, batches, next) = (store.clone(), batches.clone(), next.clone());
            std::thread::spawn(move || -> telestore::Result<()> {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(b) = batches.get(i) else {
                        return Ok(());
                    };
                    // A `Busy` write (write stall past its limit) is
                    // retried after the hinted delay, as a client would.
                    while let Err(e) = store.write("readings", b, d) {
                        match e {
                            telestore::Error::Busy { retry_after_ms } => std::thread::sleep(
                                std::time::Duration::from_millis(retry_after_ms.min(1000)),
                            ),
                            other => return Err(other),
                        }
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().map_err(|_| anyhow::anyhow!("writer panicked"))??;
    }
    Ok(())
}

fn dir_bytes(p: &Path) -> Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(p)? {
        let e = e?;
        let m = e.metadata()?;
        n += if m.is_dir() {
            dir_bytes(&e.path())?
        } else {
            m.len()
        };
    }
    Ok(n)
}

/// Read every device back, check every value, time it.
fn verify_and_scan(store: &Store, a: &IngestArgs, values: Values, total: u64) -> Result<()> {
    let t = Instant::now();
    let mut n = 0u64;
    for d in 0..a.devices {
        let mut truck = Truck::new(a.seed, d);
        let wanted: Vec<[f64; 7]> = (0..a.rows_per_device)
            .map(|_| truck.next_reading(values))
            .collect();
        let mut round = a.rows_per_device;
        let mut bad = None;
        store.scan_with("readings", d, i64::MIN, i64::MAX, Order::NewestFirst, |r| {
            round -= 1;
            let want = wanted[round as usize];
            let got: Vec<f64> = r
                .fields
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect();
            if got != want {
                bad = Some(round);
            }
            n += 1;
            true
        })?;
        if let Some(r) = bad {
            bail!("device {d} round {r}: value differs from what was written");
        }
    }
    if n != total {
        bail!("read back {n} rows, wrote {total}");
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "verify:  {n} rows read back and equal, {} device scans, {:.0} rows/s",
        a.devices,
        n as f64 / s
    );
    Ok(())
}

/// One device with many rows: range-scan rate from HFiles, cold and warm.
fn long_scan(store: &Store, a: &IngestArgs, values: Values) -> Result<()> {
    if a.scan_rows == 0 {
        return Ok(());
    }
    let dev = 4_000_000_001u64;
    let mut truck = Truck::new(a.seed, dev);
    let mut buf = Vec::with_capacity(a.batch * 72);
    for r in 0..a.scan_rows {
        let ts = FLEET_T0_MS + r as i64 * 1_000;
        push_row(&mut buf, dev, ts, &truck.next_fields(values));
        if buf.len() == a.batch * 72 || r + 1 == a.scan_rows {
            store.write("readings", &buf, Durability::Async)?;
            buf.clear();
        }
    }
    store.flush()?;
    // Into the table's encoding, and out of every cache: compaction output
    // is written past the page cache and not put in the block cache.
    store.compact("readings", true)?;
    // Through the query layer, as `telestore query --kind range` runs it:
    // Arrow record batches of all seven fields.
    let p = Params {
        kind: Kind::Range,
        table: "readings".into(),
        device: Some(dev.to_string()),
        ..Params::default()
    };
    for label in ["cold cache: compacted, read from disk", "warm cache"] {
        let t = Instant::now();
        let plan = Plan::resolve(store, &p, store.now_ms())?;
        let mut n = 0u64;
        let mut sum = 0f64;
        Prepared::new(store, plan).run(store, &mut |b| {
            n += b.num_rows() as u64;
            if let Some(c) = b.column_by_name("latitude") {
                sum += c.as_primitive::<Float64Type>().values().iter().sum::<f64>();
            }
            Ok(())
        })?;
        let s = t.elapsed().as_secs_f64();
        if n != a.scan_rows {
            bail!("long scan returned {n} rows, wrote {}", a.scan_rows);
        }
        println!("scan:    one device, {n} rows from HFiles as Arrow batches ({label}) in {:.1} ms = {:.0} rows/s (checksum {sum:.1})", s * 1e3, n as f64 / s);
    }
    Ok(())
}
