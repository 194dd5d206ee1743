//! `telestore-lab compaction-sim`: run the compaction planner (the same
//! pure function the engine uses) on a simulated stream of flushes into
//! one region and print file counts and write amplification over time.
//! Compactions are applied instantly; the point is what the policy does,
//! not how fast the disk is.

use anyhow::Result;
use clap::Args;
use telestore::testkit::mix;
use telestore_engine::compaction::plan::{plan, FileStat, Policy, Task};

#[derive(Args, Debug)]
pub struct SimArgs {
    /// Flushes to simulate.
    #[arg(long, default_value_t = 2000)]
    flushes: u64,
    /// Mean flushed file size in MiB (each varies ±25 %, seeded).
    #[arg(long, default_value_t = 64)]
    flush_mib: u64,
    /// Run a major compaction every N flushes (0: never).
    #[arg(long, default_value_t = 0)]
    major_every: u64,
    /// Planner: fewest files in a minor compaction.
    #[arg(long, default_value_t = 3)]
    min_files: usize,
    /// Planner: most files in a minor compaction.
    #[arg(long, default_value_t = 10)]
    max_files: usize,
    /// Planner: a file may be at most RATIO x the sum of the others.
    #[arg(long, default_value_t = 1.2)]
    ratio: f64,
    /// Print a line every N flushes.
    #[arg(long, default_value_t = 100)]
    every: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(a: SimArgs) -> Result<()> {
    let policy = Policy {
        min_files: a.min_files,
        max_files: a.max_files.max(a.min_files),
        ratio: a.ratio,
        ..Policy::default()
    };
    println!(
        "compaction-sim: {} flushes of ~{} MiB, min {} max {} ratio {}, major every {}",
        a.flushes, a.flush_mib, policy.min_files, policy.max_files, policy.ratio, a.major_every
    );
    println!(
        "{:>8} {:>6} {:>9} {:>11} {:>10} {:>8}",
        "flushes", "files", "max_files", "data_GiB", "written_GiB", "w_amp"
    );
    let mut files: Vec<FileStat> = Vec::new();
    let (mut next_id, mut seq) = (1u64, 0u64);
    let (mut flushed, mut written, mut max_files) = (0u64, 0u64, 0usize);
    for n in 1..=a.flushes {
        let mib = a.flush_mib << 20;
        let bytes = mib - mib / 4 + mix(a.seed ^ n) % (mib / 2).max(1);
        seq += 1;
        files.push(FileStat::alone(next_id, bytes, seq));
        next_id += 1;
        flushed += bytes;
        written += bytes;
        max_files = max_files.max(files.len());
        let major = a.major_every > 0 && n % a.major_every == 0;
        let mut first = true;
        while let Some(task) = plan(&files, &policy, None, major && first) {
            first = false;
            let ids = match task {
                Task::Minor(ids) | Task::Major(ids) | Task::DropExpired(ids) => ids,
            };
            let merged: u64 = files
                .iter()
                .filter(|f| ids.contains(&f.file_id))
                .map(|f| f.bytes)
                .sum();
            let top = files
                .iter()
                .filter(|f| ids.contains(&f.file_id))
                .map(|f| f.max_seq)
                .max()
                .unwrap_or(0);
            files.retain(|f| !ids.contains(&f.file_id));
            files.push(FileStat::alone(next_id, merged, top));
            next_id += 1;
            written += merged;
        }
        if n % a.every.max(1) == 0 || n == a.flushes {
            let data: u64 = files.iter().map(|f| f.bytes).sum();
            println!(
                "{n:>8} {:>6} {max_files:>9} {:>11.1} {:>10.1} {:>8.2}",
                files.len(),
                data as f64 / (1u64 << 30) as f64,
                written as f64 / (1u64 << 30) as f64,
                written as f64 / flushed as f64
            );
        }
    }
    Ok(())
}
