//! `telestore compact`: compact a table's regions now.

use super::DirArg;
use anyhow::{Context, Result};
use clap::Args;
use telestore::{Options, Store};

#[derive(Args, Debug)]
pub struct CompactArgs {
    /// Table to compact.
    #[arg(long)]
    pub table: String,
    /// Rewrite every region's files into one, dropping cells past the TTL,
    /// versions beyond max_versions and deleted cells. Without it, drop
    /// expired files and merge runs of small files (minor compactions)
    /// until the planner finds nothing more.
    #[arg(long)]
    pub major: bool,
    #[command(flatten)]
    pub dir: DirArg,
}

pub fn run(a: CompactArgs) -> Result<()> {
    let store = Store::open(&a.dir.dir, Options::default())
        .with_context(|| format!("opening {}", a.dir.dir.display()))?;
    let before = store.stats();
    let t0 = std::time::Instant::now();
    let done = store.compact(&a.table, a.major)?;
    let after = store.stats();
    let (cells_in, cells_out): (u64, u64) = done
        .iter()
        .fold((0, 0), |(i, o), c| (i + c.cells_in, o + c.cells_out));
    println!(
        "{} compactions in {:.2} s: {} HFiles ({} bytes) -> {} HFiles ({} bytes); {} cells read, {} written",
        done.len(),
        t0.elapsed().as_secs_f64(),
        before.hfiles,
        before.hfile_bytes,
        after.hfiles,
        after.hfile_bytes,
        cells_in,
        cells_out
    );
    store.close()?;
    Ok(())
}
