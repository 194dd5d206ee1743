//! `telestore sql "SELECT …"`: a SQL query (DataFusion over the store's
//! tables and its `devices` registry) embedded or on a daemon
//! (`--server`, `POST /api/v1/sql`), printed like `telestore query`.

use super::query::{is_broken_pipe, open_output, open_store, BatchSink};
use anyhow::{Context, Result};
use clap::Args;
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use telestore::query::output::{Format, Printer};
use telestore::sql::pool::spill_dir_of;
use telestore::sql::{QueryLimits, QueryPool};
use telestore::Options;

#[derive(Args, Debug)]
#[command(
    after_help = "Tables: every telestore table (device_id, device, ts, its fields, \
    and one column per device tag key) and `devices` (device_id, device, tags).\n\
    Filters on device, device_id, tags and ts are applied by the scan; \
    `EXPLAIN SELECT …` shows how many regions a query reads. More \
    examples: docs/queries.md."
)]
pub struct SqlArgs {
    /// The query (`-`: read it from stdin).
    pub query: String,
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
    /// Token for --server (a read-only token is enough).
    #[arg(long, env = "TELESTORE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Data directory (embedded mode).
    #[arg(long, default_value = super::DEFAULT_DIR, env = "TELESTORE_DIR")]
    pub dir: PathBuf,
}

pub fn run(a: SqlArgs) -> Result<()> {
    let sql = if a.query == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading the query from stdin")?;
        s
    } else {
        a.query.clone()
    };
    let out = open_output(a.out.as_deref(), a.format)?;
    let make = |schema| Printer::new(a.format, schema, out);
    let res = match &a.server {
        Some(url) => remote(url, a.token.as_deref(), &sql, make),
        None => embedded(&a.dir, &sql, make),
    };
    match res {
        Err(e) if is_broken_pipe(&e) => Ok(()),
        other => other,
    }
}

fn embedded<S: BatchSink>(
    dir: &std::path::Path,
    sql: &str,
    make: impl FnOnce(arrow_schema::SchemaRef) -> telestore::Result<S>,
) -> Result<()> {
    let store = Arc::new(open_store(dir, Options::default())?);
    // Alone in its process, the query may use every core at normal
    // priority, with the daemon's memory and spill limits.
    let limits = QueryLimits {
        nice: 0,
        timeout: None,
        ..QueryLimits::default()
    };
    let pool = QueryPool::new(Some(spill_dir_of(dir)), limits.clone())
        .or_else(|e| {
            tracing::warn!("no spill directory ({e}): a query that would spill fails instead");
            QueryPool::new(None, limits)
        })
        .context("starting the query runtime")?;
    let res = pool.admit_blocking().and_then(|admission| {
        let forever = std::future::pending();
        telestore::sql::run_blocking(&store, &pool, admission, sql, forever, make, |s, b| {
            s.put(&b)
        })
        .and_then(|s| Box::new(s).done())
    });
    drop(pool);
    match Arc::try_unwrap(store) {
        Ok(s) => s.close()?,
        Err(_) => tracing::warn!("the store is still in use at exit"),
    }
    Ok(res?)
}

fn remote<S: BatchSink>(
    server: &str,
    token: Option<&str>,
    sql: &str,
    make: impl FnOnce(arrow_schema::SchemaRef) -> telestore::Result<S>,
) -> Result<()> {
    let url = format!("{}/api/v1/sql", server.trim_end_matches('/'));
    let req = super::with_token(ureq::post(&url), token)
        .query("format", "arrow")
        .set("Content-Type", "text/plain; charset=utf-8");
    let resp = super::query::answer_of(&url, req.send_string(sql))?;
    super::query::read_arrow(&url, resp, make)
}
