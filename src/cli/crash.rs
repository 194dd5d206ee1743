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
    for h in hs {
        h.join()
            .map_err(|_| anyhow::anyhow!("writer thread panicked"))??;
    }
    Ok(())
}
