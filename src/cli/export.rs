//! `telestore export`: a table's rows over a window to an Arrow IPC file,
//! an Arrow IPC stream or Parquet, streamed batch by batch (memory stays
//! bounded) under a temporary name that is renamed into place when done.

use super::query::{embedded_with, fetch, set_select, set_window, BatchSink, Select, Window};
use super::UsageError;
use anyhow::Result;
use arrow_array::RecordBatch;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use telestore::query::export::{BackgroundSink, Codec, FileFormat, FileSink};
use telestore::query::{Kind, Params};
use telestore::Options;

/// Block cache of an export's store: a bulk read gains nothing from a
/// big one, and this keeps the export's memory bounded.
const EXPORT_BLOCK_CACHE_BYTES: u64 = 32 << 20;

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Table to export.
    #[arg(long)]
    table: String,
    #[command(flatten)]
    window: Window,
    #[command(flatten)]
    select: Select,
    /// Comma-separated fields (default: all).
    #[arg(long)]
    fields: Option<String>,
    /// File to write; it appears only when complete.
    #[arg(long)]
    out: PathBuf,
    /// File format (default from --out's extension: .parquet → parquet,
    /// .arrows → arrow-stream, anything else → arrow).
    #[arg(long, value_enum)]
    format: Option<FileFormat>,
    /// Compression inside the file (default: none for Arrow, zstd for
    /// Parquet).
    #[arg(long, value_enum)]
    compression: Option<Codec>,
    /// Rows per record batch (Parquet: per row-group write).
    #[arg(long, default_value_t = telestore::query::columns::BATCH_ROWS_DEFAULT)]
    batch_rows: usize,
    /// Export from a running daemon (its HTTP address) instead of opening
    /// the data directory.
    #[arg(long, env = "TELESTORE_SERVER")]
    server: Option<String>,
    /// Token for --server, when the daemon requires one (a read-only
    /// token is enough).
    #[arg(long, env = "TELESTORE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Data directory (embedded mode).
    #[arg(long, default_value = super::DEFAULT_DIR, env = "TELESTORE_DIR")]
    dir: PathBuf,
}

fn format_from_path(p: &Path) -> FileFormat {
    match p.extension().and_then(|e| e.to_str()) {
        Some("parquet") | Some("pq") => FileFormat::Parquet,
        Some("arrows") => FileFormat::ArrowStream,
        _ => FileFormat::Arrow,
    }
}

/// The file plus a progress bar and the interrupt flag.
struct Exporter {
    file: BackgroundSink,
    bar: ProgressBar,
    stop: Arc<AtomicBool>,
}

impl BatchSink for Exporter {
    fn put(&mut self, b: &RecordBatch) -> telestore::Result<()> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(telestore::Error::invalid("export", "interrupted"));
        }
        self.file.write(b.clone())?;
        self.bar.set_position(self.file.rows());
        Ok(())
    }
    fn done(self: Box<Self>) -> telestore::Result<()> {
        let Exporter { file, bar, .. } = *self;
        let rows = file.rows();
        let path = file.commit()?;
        bar.finish_and_clear();
        eprintln!("exported {rows} rows to {}", path.display());
        Ok(())
    }
}

pub fn run(a: ExportArgs) -> Result<()> {
    let format = a.format.unwrap_or_else(|| format_from_path(&a.out));
    let codec = a.compression.unwrap_or(format.default_codec());
    let mut p = Params {
        kind: Kind::Scan,
        table: a.table.clone(),
        fields: a.fields.clone(),
        batch_rows: Some(a.batch_rows),
        ..Params::default()
    };
    set_window(&mut p, a.window.clone());
    set_select(&mut p, a.select.clone());
    if a.out.is_dir() {
        return Err(UsageError(format!("--out {} is a directory", a.out.display())).into());
    }
    // Ctrl-C / SIGTERM: stop at the next batch and remove the partial
    // file; a second signal exits at once.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())?;
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let started = Instant::now();
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {human_pos} rows  {per_sec}  {elapsed}")
            .expect("static template"),
    );
    let make = |schema| {
        Ok(Exporter {
            file: BackgroundSink::spawn(FileSink::create(&a.out, format, codec, &schema)?),
            bar: bar.clone(),
            stop: stop.clone(),
        })
    };
    let res = match &a.server {
        Some(url) => fetch(url, a.token.as_deref(), "export", &p, make),
        None => {
            let opts = Options {
                block_cache_bytes: EXPORT_BLOCK_CACHE_BYTES,
                ..Options::default()
            };
            embedded_with(&a.dir, opts, &p, make)
        }
    };
    bar.finish_and_clear();
    if stop.load(Ordering::Relaxed) {
        eprintln!("export interrupted; no file written");
        std::process::exit(130);
    }
    res?;
    tracing::debug!("export took {:?}", started.elapsed());
    Ok(())
}
