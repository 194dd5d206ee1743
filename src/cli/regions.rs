//! `telestore regions`: the region map of a table, manual split and merge.

use super::DirArg;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use telestore::engine::RegionInfo;
use telestore::region::parse_key_hex;
use telestore::util::text::human_bytes;
use telestore::{Options, Store};

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct RegionsCmd {
    #[command(subcommand)]
    pub action: Option<RegionsAction>,
    #[command(flatten)]
    pub show: ShowArgs,
}

/// Print the region map (the default action).
#[derive(Args, Debug)]
pub struct ShowArgs {
    /// Table whose regions to show.
    #[arg(long)]
    pub table: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    #[command(flatten)]
    pub dir: DirArg,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Format {
    /// Aligned columns for a terminal.
    Table,
    /// One JSON document (an array of regions), for scripts.
    Json,
}

#[derive(Subcommand, Debug)]
pub enum RegionsAction {
    /// Split a region in two (flushed data is shared until compaction).
    Split {
        #[arg(long)]
        table: String,
        /// Region id (see `telestore regions --table T`).
        #[arg(long)]
        region: u32,
        /// First key of the right half, hex: a 2-byte hash prefix such as
        /// `8000`, optionally `:device` (16 hex digits) and `:reversed ts`.
        /// Default: the automatic split point (prefix boundary nearest the
        /// middle of the region's flushed data).
        #[arg(long)]
        at: Option<String>,
        #[command(flatten)]
        dir: DirArg,
    },
    /// Merge a region with the region after it (both are flushed first).
    Merge {
        #[arg(long)]
        table: String,
        /// Id of the left region; it merges with its right neighbour.
        #[arg(long)]
        region: u32,
        #[command(flatten)]
        dir: DirArg,
    },
}

fn open(dir: &DirArg) -> Result<Store> {
    Store::open(&dir.dir, Options::default())
        .with_context(|| format!("opening {}", dir.dir.display()))
}

pub fn run(cmd: RegionsCmd) -> Result<()> {
    match cmd.action {
        None => {
            let Some(table) = cmd.show.table else {
                bail!("--table is required (tables: `telestore table list`)");
            };
            let store = super::query::open_store(&cmd.show.dir.dir, Options::default())?;
            let regions = store.regions(&table)?;
            match cmd.show.format {
                Format::Json => println!("{}", serde_json::to_string_pretty(&regions)?),
                Format::Table => print!("{}", render(&regions)),
            }
            store.close()?;
        }
        Some(RegionsAction::Split {
            table,
            region,
            at,
            dir,
        }) => {
            let at = match at {
                Some(s) => Some(parse_key_hex(&s).with_context(|| {
                    format!(
                        "--at {s:?}: expected hex key bytes such as 8000 or 8000:00000000000000ff"
                    )
                })?),
                None => None,
            };
            let store = open(&dir)?;
            let (a, b) = store.split_region(&table, region, at)?;
            println!("region {region} split into {a} and {b}");
            store.close()?;
        }
        Some(RegionsAction::Merge { table, region, dir }) => {
            let store = open(&dir)?;
            let m = store.merge_regions(&table, region)?;
            println!("region {region} and the next one merged into {m}");
            store.close()?;
        }
    }
    Ok(())
}

/// The region map as aligned text.
pub fn render(regions: &[RegionInfo]) -> String {
    let head = [
        "id",
        "start",
        "end",
        "size",
        "files",
        "runs",
        "memstore",
        "rows_written",
        "flushes",
        "compactions",
        "debt",
        "write_amp",
        "writes/s",
        "reads/s",
        "share",
        "hot",
    ];
    let rows: Vec<Vec<String>> = regions
        .iter()
        .map(|r| {
            vec![
                r.id.to_string(),
                r.start.clone(),
                r.end.clone().unwrap_or_else(|| "(end)".into()),
                human_bytes(r.size_bytes),
                r.files.to_string(),
                r.runs.to_string(),
                human_bytes(r.memstore_bytes as u64),
                r.rows_written.to_string(),
                r.flushes.to_string(),
                format!(
                    "{}{}",
                    r.compactions,
                    if r.compaction_running { "*" } else { "" }
                ),
                human_bytes(r.compaction_debt_bytes),
                format!("{:.2}", r.write_amplification),
                format!("{:.0}", r.write_rate),
                format!("{:.0}", r.read_rate),
                format!("{:.1}%", r.load_share * 100.0),
                if r.hot { "HOT".into() } else { String::new() },
            ]
        })
        .collect();
    debug_assert!(rows.iter().all(|r| r.len() == head.len()));
    let mut w: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.len());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let s: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<width$}", width = w[i]))
            .collect();
        out.push_str(s.join("  ").trim_end());
        out.push('\n');
    };
    line(head.to_vec(), &mut out);
    for r in &rows {
        line(r.iter().map(|s| s.as_str()).collect(), &mut out);
    }
    out
}
