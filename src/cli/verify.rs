//! `telestore verify` and `telestore repair`.

use super::DirArg;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::Path;
use telestore::engine::verify::{verify, Finding, Report};
use telestore::util::text::escape_control;
use telestore::{Options, Store};

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// Also list the files that are fine.
    #[arg(long, short)]
    pub verbose: bool,
    #[command(flatten)]
    pub dir: DirArg,
}

#[derive(Args, Debug)]
pub struct RepairArgs {
    #[command(flatten)]
    pub dir: DirArg,
}

/// Print the report; fail (exit 1) when a file is damaged.
pub fn run_verify(a: VerifyArgs) -> Result<()> {
    let report =
        verify(&a.dir.dir).with_context(|| format!("verifying {}", a.dir.dir.display()))?;
    print_report(&a.dir.dir, &report, a.verbose);
    match report.damaged() {
        0 => Ok(()),
        n => bail!("{n} damaged files in {}", a.dir.dir.display()),
    }
}

fn print_report(dir: &Path, r: &Report, verbose: bool) {
    let (mut ok, mut notes) = (0, 0);
    for c in &r.files {
        let path = c
            .path
            .strip_prefix(dir)
            .unwrap_or(&c.path)
            .display()
            .to_string();
        let path = escape_control(&path);
        match &c.finding {
            Finding::Ok => {
                ok += 1;
                if verbose {
                    println!("ok       {path}  ({})", c.what);
                }
            }
            Finding::Note(n) => {
                notes += 1;
                println!("note     {path}  ({}): {n}", c.what);
            }
            Finding::Damaged(e) => println!("DAMAGED  {path}  ({}): {e}", c.what),
        }
    }
    println!(
        "{} files checked: {ok} ok, {notes} with notes, {} damaged",
        r.files.len(),
        r.damaged()
    );
}

/// Open the store read-write once (which cuts torn tails, removes orphans
/// and cut-short segments, replays the WAL), close it, and verify.
pub fn run_repair(a: RepairArgs) -> Result<()> {
    let dir = &a.dir.dir;
    if !dir.join("MANIFEST").exists() {
        bail!("no telestore store at {}", dir.display());
    }
    let store = Store::open(dir, Options::default())
        .with_context(|| format!("opening {}", dir.display()))?;
    store.close()?;
    let report = verify(dir)?;
    print_report(dir, &report, false);
    match report.damaged() {
        0 => Ok(()),
        n => bail!("{n} damaged files remain in {}", dir.display()),
    }
}
