//! Command-line interface. `main` only calls [`run`].

mod compact;
mod crash;
mod devices;
mod examples;
mod export;
mod flush;
mod load;
mod load_mqtt;
mod query;
mod regions;
mod serve;
mod settings;
mod sql;
mod table;
mod top;
mod verify;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;

/// Default data directory, under the current folder.
pub const DEFAULT_DIR: &str = telestore::settings::DEFAULT_DIR;

#[derive(Parser, Debug)]
#[command(
    name = "telestore",
    version,
    about = "telestore: a time-series store for device telemetry",
    long_about = "telestore: a time-series store for device telemetry.\n\n\
        Data lives in a directory (default ./telestore-data). The I/O backend is \
        chosen by TELESTORE_IO=auto|uring|std (default auto: io_uring when the \
        kernel allows it, else pwrite). Logs go to stderr; RUST_LOG=debug for more."
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Create and list tables.
    #[command(subcommand)]
    Table(table::TableCmd),
    /// Show a table's regions (map, sizes, load, hotspots); split or merge
    /// them. Load rates are those of the process holding the store open —
    /// for this command, its own (idle) session.
    Regions(regions::RegionsCmd),
    /// A running daemon's status in the terminal: ingest rate, memstores,
    /// compactions, caches and every region busiest first, hot ones
    /// marked; refreshed every second (q quits).
    Top(top::TopArgs),
    /// Run the ingest daemon (binary TCP protocol on 127.0.0.1:7070) until
    /// SIGINT/SIGTERM.
    Serve(Box<serve::ServeArgs>),
    /// Drive a running daemon with a generated truck fleet (binary
    /// protocol, line protocol or MQTT); prints rows/s and ack latency
    /// percentiles.
    Load(load::LoadArgs),
    /// List the device registry (names, ids, tags), optionally by tag.
    Devices(devices::DevicesArgs),
    /// Compact a table's regions now (minor by default, --major for all,
    /// which flushes the table's memstores first).
    Compact(compact::CompactArgs),
    /// Flush memstores to HFiles now (embedded, or a daemon with --server),
    /// so the WAL need not be replayed at the next open.
    Flush(flush::FlushArgs),
    /// Read a table: latest, range, scan or agg (embedded, or --server).
    #[command(subcommand)]
    Query(query::QueryCmd),
    /// Run a SQL query (DataFusion) over the tables and the device
    /// registry (embedded, or --server).
    Sql(sql::SqlArgs),
    /// Export a table's rows over a window to Arrow IPC or Parquet.
    Export(export::ExportArgs),
    /// Check every checksum of every live file (manifest, WAL, HFiles)
    /// and report; changes nothing. Exit 1 when a file is damaged. Run it
    /// on a stopped store or a copy (a running daemon holds the lock).
    Verify(verify::VerifyArgs),
    /// Open the store read-write once to repair what a crash leaves
    /// (torn WAL and manifest tails, orphaned files), then verify it.
    /// Read commands never repair; the daemon's start does the same.
    Repair(verify::RepairArgs),
    /// Test helpers (used by the crash tests).
    #[command(subcommand, hide = true)]
    Debug(crash::DebugCmd),
    /// Print every command's help as Markdown: docs/cli.md.
    #[command(hide = true)]
    CliMarkdown,
}

/// `req` with `Authorization: Token …` when a token is given.
pub fn with_token(req: ureq::Request, token: Option<&str>) -> ureq::Request {
    match token.filter(|t| !t.is_empty()) {
        Some(t) => req.set("Authorization", &format!("Token {t}")),
        None => req,
    }
}

/// Data directory argument shared by subcommands.
#[derive(clap::Args, Debug, Clone)]
pub struct DirArg {
    /// Data directory (created if missing).
    #[arg(long, default_value = DEFAULT_DIR, env = "TELESTORE_DIR")]
    pub dir: PathBuf,
}

/// Parse arguments and run; returns the process exit code.
pub fn run() -> i32 {
    let matches = examples::attach(Cli::command()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Query and export print results: only warnings go to stderr.
    let quiet = matches!(
        cli.cmd,
        Cmd::Query(_) | Cmd::Sql(_) | Cmd::Export(_) | Cmd::Verify(_)
    );
    init_logging(if quiet { "warn" } else { "info" });
    let res: Result<()> = match cli.cmd {
        Cmd::Table(t) => table::run(t),
        Cmd::Regions(r) => regions::run(r),
        Cmd::Top(t) => top::run(t),
        Cmd::Compact(c) => compact::run(c),
        Cmd::Flush(f) => flush::run(f),
        Cmd::Serve(s) => serve::run(*s),
        Cmd::Load(l) => load::run(l),
        Cmd::Devices(d) => devices::run(d),
        Cmd::Query(q) => query::run(q),
        Cmd::Export(e) => export::run(e),
        Cmd::Sql(q) => sql::run(q),
        Cmd::Verify(v) => verify::run_verify(v),
        Cmd::Repair(r) => verify::run_repair(r),
        Cmd::Debug(d) => crash::run(d),
        Cmd::CliMarkdown => {
            let cmd = examples::attach(Cli::command());
            print!("{}", clap_markdown::help_markdown_command(&cmd));
            Ok(())
        }
    };
    match res {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            if is_usage_error(&e) {
                2
            } else {
                1
            }
        }
    }
}

/// A mistake in the command's arguments (exit code 2), as opposed to a
/// failure while running it (exit code 1).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn is_usage_error(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.is::<UsageError>()
            || matches!(
                c.downcast_ref::<telestore::Error>(),
                Some(telestore::Error::InvalidInput { .. } | telestore::Error::UnknownTable(_))
            )
    })
}

fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only on a terminal: a log file or journald gets plain text.
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
