//! `telestore query latest|range|scan|agg`: read a table embedded (taking
//! the data directory's lock) or from a running daemon (`--server`), and
//! print it as a table, CSV, JSON lines or an Arrow IPC stream. Both
//! paths run the same [`telestore::query`] code: the daemon sends Arrow,
//! this process formats it.

use super::UsageError;
use anyhow::{Context, Result};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use clap::{Args, Subcommand};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use telestore::query::output::{Format, Printer};
use telestore::query::{Kind, Params, Plan, Prepared};
use telestore::{Options, Store};

/// Daemon HTTP address used in hints.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:7071";

#[derive(Subcommand, Debug)]
pub enum QueryCmd {
    /// The newest N rows of one device (one seek).
    Latest {
        /// Device, by registered name or numeric id.
        #[arg(long)]
        device: String,
        /// How many rows, newest first.
        #[arg(long, default_value_t = 1)]
        n: u64,
        #[command(flatten)]
        common: Common,
    },
    /// One device over a time window.
    Range {
        /// Device, by registered name or numeric id.
        #[arg(long)]
        device: String,
        #[command(flatten)]
        window: Window,
        /// Row order: desc (newest first, the key order) or asc.
        #[arg(long, default_value = "desc", value_parser = ["asc", "desc"])]
        order: String,
        /// Stop after this many rows.
        #[arg(long)]
        limit: Option<u64>,
        #[command(flatten)]
        common: Common,
    },
    /// All devices (or those selected) over a time window, read by the
    /// per-region parallel scan. Rows come in key order: devices by hash
    /// prefix, each device newest first.
    Scan {
        #[command(flatten)]
        window: Window,
        #[command(flatten)]
        select: Select,
        /// Stop after this many rows.
        #[arg(long)]
        limit: Option<u64>,
        #[command(flatten)]
        common: Common,
    },
    /// Downsample: one row per time bucket (and group), computed where the
    /// data is — the engine, or the daemon with --server.
    Agg {
        /// Aggregate function.
        #[arg(long = "fn", default_value = "avg",
              value_parser = ["avg", "min", "max", "sum", "count", "first", "last"])]
        func: String,
        /// Bucket width, aligned to the epoch (e.g. 10m, 1h, 1d).
        #[arg(long, default_value = "1h")]
        every: String,
        /// One series per `device`, or per value of a registry tag (e.g.
        /// fleet); default one series over all selected devices.
        #[arg(long)]
        group_by: Option<String>,
        /// One device (by name or id) instead of --devices/--where.
        #[arg(long)]
        device: Option<String>,
        #[command(flatten)]
        window: Window,
        #[command(flatten)]
        select: Select,
        /// Stop after this many output rows.
        #[arg(long)]
        limit: Option<u64>,
        #[command(flatten)]
        common: Common,
    },
}

/// Options every query takes.
#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Table to read.
    #[arg(long)]
    pub table: String,
    /// Comma-separated fields to return (default: all, in schema order).
    #[arg(long)]
    pub fields: Option<String>,
    /// Output format. `arrow` writes an Arrow IPC stream (to --out or a
    /// pipe, not to a terminal).
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Write the output to this file instead of stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Ask a running daemon (its HTTP address, e.g. http://127.0.0.1:7071)
    /// instead of opening the data directory.
    #[arg(long, env = "TELESTORE_SERVER")]
    pub server: Option<String>,
    /// Token for --server, when the daemon requires one (a read-only
    /// token is enough).
    #[arg(long, env = "TELESTORE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Rows per Arrow record batch.
    #[arg(long)]
    pub batch_rows: Option<usize>,
    /// Data directory (embedded mode).
    #[arg(long, default_value = super::DEFAULT_DIR, env = "TELESTORE_DIR")]
    pub dir: PathBuf,
}

/// A time window. Both ends accept RFC 3339 (2026-12-03T10:00:00Z), an
/// epoch with a unit (1700000000s, …ms, …us, …ns) or a time relative to
/// now (now, -1h, -7d, now-15m).
#[derive(Args, Debug, Clone)]
pub struct Window {
    /// Start of the window, inclusive (default: the beginning).
    #[arg(long, allow_hyphen_values = true)]
    pub from: Option<String>,
    /// End of the window, exclusive (default: no end).
    #[arg(long, allow_hyphen_values = true)]
    pub to: Option<String>,
}

/// Which devices to read (default: all).
#[derive(Args, Debug, Clone)]
pub struct Select {
    /// Comma-separated devices, by registered name or numeric id.
    #[arg(long)]
    pub devices: Option<String>,
    /// Devices carrying a registry tag, as TAG=VALUE (e.g. fleet=East).
    #[arg(long = "where")]
    pub where_: Option<String>,
}

fn to_params(cmd: QueryCmd) -> (Params, Common) {
    let mut p = Params::default();
    let common = match cmd {
        QueryCmd::Latest { device, n, common } => {
            p.kind = Kind::Latest;
            p.device = Some(device);
            p.n = Some(n);
            common
        }
        QueryCmd::Range {
            device,
            window,
            order,
            limit,
            common,
        } => {
            p.kind = Kind::Range;
            p.device = Some(device);
            set_window(&mut p, window);
            p.order = Some(order);
            p.limit = limit;
            common
        }
        QueryCmd::Scan {
            window,
            select,
            limit,
            common,
        } => {
            p.kind = Kind::Scan;
            set_window(&mut p, window);
            set_select(&mut p, select);
            p.limit = limit;
            common
        }
        QueryCmd::Agg {
            func,
            every,
            group_by,
            device,
            window,
            select,
            limit,
            common,
        } => {
            p.kind = Kind::Agg;
            p.func = Some(func);
            p.every = Some(every);
            p.group_by = group_by;
            p.device = device;
            set_window(&mut p, window);
            set_select(&mut p, select);
            p.limit = limit;
            common
        }
    };
    p.table = common.table.clone();
    p.fields = common.fields.clone();
    p.batch_rows = common.batch_rows;
    (p, common)
}

pub fn set_window(p: &mut Params, w: Window) {
    p.from = w.from;
    p.to = w.to;
}

pub fn set_select(p: &mut Params, s: Select) {
    p.devices = s.devices;
    p.where_ = s.where_;
}

pub fn run(cmd: QueryCmd) -> Result<()> {
    let (params, common) = to_params(cmd);
    let out = open_output(common.out.as_deref(), common.format)?;
    let res = match &common.server {
        Some(url) => fetch(url, common.token.as_deref(), "query", &params, |schema| {
            Printer::new(common.format, schema, out)
        }),
        None => embedded(&common.dir, &params, |schema| {
            Printer::new(common.format, schema, out)
        }),
    };
    match res {
        Err(e) if is_broken_pipe(&e) => Ok(()),
        other => other,
    }
}

/// Where a result goes: `--out FILE`, or stdout (binary Arrow is refused
/// on a terminal).
pub fn open_output(out: Option<&Path>, format: Format) -> Result<Box<dyn Write>> {
    Ok(match out {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        None => {
            if format == Format::Arrow && std::io::stdout().is_terminal() {
                return Err(UsageError(
                    "--format arrow writes binary Arrow IPC: give --out FILE or pipe it".into(),
                )
                .into());
            }
            Box::new(std::io::BufWriter::new(std::io::stdout().lock()))
        }
    })
}

pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Something batches can be written to.
pub trait BatchSink {
    fn put(&mut self, b: &RecordBatch) -> telestore::Result<()>;
    fn done(self: Box<Self>) -> telestore::Result<()>;
}

impl<W: Write> BatchSink for Printer<W> {
    fn put(&mut self, b: &RecordBatch) -> telestore::Result<()> {
        self.write(b)
    }
    fn done(self: Box<Self>) -> telestore::Result<()> {
        self.finish().map(|_| ())
    }
}

/// Open the store read-only (it changes nothing: no torn tail cut, no
/// WAL segment created; other readers may open it too), with hints when
/// that is not possible.
pub fn open_store(dir: &Path, opts: Options) -> Result<Store> {
    let opts = Options {
        read_only: true,
        ..opts
    };
    if !dir.exists() {
        return Err(UsageError(format!(
            "no data directory at {} (give --dir, or --server {DEFAULT_SERVER} for a daemon)",
            dir.display()
        ))
        .into());
    }
    Store::open(dir, opts).map_err(|e| match e {
        telestore::Error::Locked { dir } => UsageError(format!(
            "data directory {} is locked by another process (a running `telestore serve`?); \
             query the daemon with --server {DEFAULT_SERVER}",
            dir.display()
        ))
        .into(),
        e => anyhow::Error::new(e).context(format!("opening {}", dir.display())),
    })
}

/// Run `params` on the store in `dir`.
pub fn embedded<S: BatchSink>(
    dir: &Path,
    params: &Params,
    make: impl FnOnce(SchemaRef) -> telestore::Result<S>,
) -> Result<()> {
    embedded_with(dir, Options::default(), params, make)
}

pub fn embedded_with<S: BatchSink>(
    dir: &Path,
    opts: Options,
    params: &Params,
    make: impl FnOnce(SchemaRef) -> telestore::Result<S>,
) -> Result<()> {
    let store = open_store(dir, opts)?;
    let res = (|| {
        let plan = Plan::resolve(&store, params, store.now_ms())?;
        let prepared = Prepared::new(&store, plan);
        let mut sink = Box::new(make(prepared.schema())?);
        prepared.run(&store, &mut |b| sink.put(&b))?;
        sink.done()
    })();
    store.close()?;
    Ok(res?)
}

/// Run `params` on a daemon: `GET {server}/api/v1/{endpoint}` as Arrow.
pub fn fetch<S: BatchSink>(
    server: &str,
    token: Option<&str>,
    endpoint: &str,
    params: &Params,
    make: impl FnOnce(SchemaRef) -> telestore::Result<S>,
) -> Result<()> {
    let url = format!("{}/api/v1/{endpoint}", server.trim_end_matches('/'));
    let mut req = super::with_token(ureq::get(&url), token).query("format", "arrow");
    let json = serde_json::to_value(params)?;
    for (k, v) in json.as_object().into_iter().flatten() {
        let v = match v {
            serde_json::Value::Null => continue,
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if k != "format" {
            req = req.query(k, &v);
        }
    }
    let resp = answer_of(&url, req.call())?;
    read_arrow(&url, resp, make)
}

/// A daemon's answer, or its error: a `400`'s or `404`'s (an unknown
/// table) message as a usage error, as the embedded command reports it.
pub fn answer_of(
    url: &str,
    res: std::result::Result<ureq::Response, ureq::Error>,
) -> Result<ureq::Response> {
    match res {
        Ok(r) => Ok(r),
        Err(ureq::Error::Status(code, r)) => {
            let body: serde_json::Value = r
                .into_string()
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default();
            let msg = body["message"]
                .as_str()
                .unwrap_or("(no message)")
                .to_string();
            if code == 400 || code == 404 {
                return Err(UsageError(msg).into());
            }
            anyhow::bail!("{url}: HTTP {code}: {msg}");
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!("cannot reach the daemon at {url}"))),
    }
}

/// Hand an Arrow IPC stream answer to the sink `make` builds.
pub fn read_arrow<S: BatchSink>(
    url: &str,
    resp: ureq::Response,
    make: impl FnOnce(SchemaRef) -> telestore::Result<S>,
) -> Result<()> {
    let reader = arrow_ipc::reader::StreamReader::try_new(resp.into_reader(), None)
        .with_context(|| format!("reading the Arrow stream from {url}"))?;
    let mut sink = Box::new(make(reader.schema())?);
    for b in reader {
        let b = b.with_context(|| format!("reading the Arrow stream from {url}"))?;
        sink.put(&b)?;
    }
    sink.done()?;
    Ok(())
}
