//! Hidden test helpers. `crash-writer` ingests deterministic batches with
//! `sync` (or `async`) durability from several threads and prints `ACK <thread> <batch>`
//! after each acknowledgement, so a parent can `SIGKILL` it at any moment
//! and check that every acknowledged row survived.

use anyhow::Result;
use clap::Subcommand;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use telestore::schema::{Field, FieldType, TableOptions, TableSchema};
use telestore::{Durability, Options, Store};

/// Rows per crash-test batch.
pub const CRASH_ROWS: u64 = 10;
/// Devices in the crash-test fleet.
pub const CRASH_DEVICES: u64 = 64;

#[derive(Subcommand, Debug)]
pub enum DebugCmd {
    /// Write deterministic batches until killed (or `--batches` done).
    CrashWriter {
        #[arg(long)]
        dir: PathBuf,
        /// Batch id base for this run (distinct per run).
        #[arg(long)]
        base: u64,
        #[arg(long, default_value_t = 4)]
        threads: u64,
        #[arg(long, default_value_t = u64::MAX)]
        batches: u64,
        /// sync or async (both must survive SIGKILL of the process).
        #[arg(long, default_value = "sync")]
        durability: String,
        /// Also flush and split or merge a region every N ms (0: never).
        /// With TELESTORE_PAUSE_AT=<point> the process stops at that step
        /// of a split or merge (see `telestore_engine::failpoint`).
        #[arg(long, default_value_t = 0)]
        split_every_ms: u64,
        /// Also flush and compact (minor and major in turn) every N ms
        /// (0: never); pause points as for splits.
        #[arg(long, default_value_t = 0)]
        compact_every_ms: u64,
    },
}

/// The crash-test table.
pub fn crash_schema() -> TableSchema {
    TableSchema::new(
        "crash",
        vec![
            Field::new("value", FieldType::U64),
            Field::new("check", FieldType::F64),
        ],
        TableOptions {
            block_size_bytes: 4096,
            compression: telestore::Compression::Snappy,
            ..TableOptions::default()
        },
    )
    .expect("valid schema")
}

pub fn run(cmd: DebugCmd) -> Result<()> {
    let DebugCmd::CrashWriter {
        dir,
        base,
        threads,
        batches,
        durability,
        split_every_ms,
        compact_every_ms,
    } = cmd;
    let durability = Durability::parse(&durability)?;
    let opts = Options {
        flush_threshold_bytes: 96 << 10,
        wal_segment_bytes: 128 << 10,
        ..Options::default()
    };
    let store = Arc::new(Store::open(&dir, opts)?);
    store.create_table(crash_schema())?;
    println!("READY {}", store.io_kind().name());
    std::io::stdout().flush()?;
    let mut hs = Vec::new();
    for t in 0..threads {
        let store = store.clone();
        hs.push(std::thread::spawn(move || -> Result<()> {
            for n in 0..batches {
                let b = base + t * 100_000 + n;
                let rows = telestore::testkit::crash_batch(b, CRASH_ROWS, CRASH_DEVICES);
                store.write("crash", &rows, durability)?;
                let mut out = std::io::stdout().lock();
                writeln!(out, "ACK {t} {b}")?;
                out.flush()?;
            }
            Ok(())
        }));
    }
    if split_every_ms > 0 {
        let store = store.clone();
        std::thread::spawn(move || reshape_regions(&store, split_every_ms, base));
    }
    if compact_every_ms > 0 {
        let store = store.clone();
        std::thread::spawn(move || {
            for n in 0u64.. {
                std::thread::sleep(std::time::Duration::from_millis(compact_every_ms));
                let ok = store.flush().is_ok() && store.compact("crash", n % 2 == 1).is_ok();
                if !ok {
                    return;
                }
            }
        });
    }
    for h in hs {
        h.join()
            .map_err(|_| anyhow::anyhow!("writer thread panicked"))??;
    }
    Ok(())
}

/// Flush, then split a region at its automatic point or merge two, in a
/// loop; errors other than "no split point" end the loop (the writers
/// then report the poisoned store).
fn reshape_regions(store: &Store, every_ms: u64, seed: u64) {
    let mut n = seed;
    loop {
        std::thread::sleep(std::time::Duration::from_millis(every_ms));
        n = telestore::testkit::mix(n);
        if store.flush().is_err() {
            return;
        }
        let Ok(regions) = store.regions("crash") else {
            return;
        };
        let r = &regions[(n % regions.len() as u64) as usize];
        let res = if regions.len() > 8 && n.is_multiple_of(3) {
            store.merge_regions("crash", r.id).map(|_| ())
        } else {
            store.split_region("crash", r.id, None).map(|_| ())
        };
        if let Err(e) = res {
            if !matches!(e, telestore::Error::InvalidInput { .. }) {
                return;
            }
        }
    }
}
