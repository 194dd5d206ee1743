//! `telestore flush`: memstores to HFiles now.

use super::DirArg;
use anyhow::{Context, Result};
use clap::Args;
use telestore::{Options, Store};

#[derive(Args, Debug)]
pub struct FlushArgs {
    /// Only this table [default: every table].
    #[arg(long)]
    pub table: Option<String>,
    /// Ask a running daemon (its HTTP address, e.g. http://127.0.0.1:7071)
    /// instead of opening the data directory.
    #[arg(long, env = "TELESTORE_SERVER")]
    pub server: Option<String>,
    /// Token for --server (a read-write one), when the daemon requires one.
    #[arg(long, env = "TELESTORE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    #[command(flatten)]
    pub dir: DirArg,
}

pub fn run(a: FlushArgs) -> Result<()> {
    let t0 = std::time::Instant::now();
    let (memstore_bytes, wal_segments) = match &a.server {
        Some(url) => remote(url, a.token.as_deref(), a.table.as_deref())?,
        None => {
            let store = Store::open(&a.dir.dir, Options::default())
                .with_context(|| format!("opening {}", a.dir.dir.display()))?;
            store.flush_tables(a.table.as_deref())?;
            let st = store.stats();
            store.close()?;
            (st.memstore_bytes as u64, st.wal_segments as u64)
        }
    };
    println!(
        "flushed in {:.2} s; memstores now hold {memstore_bytes} bytes, {wal_segments} WAL segments live",
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

fn remote(url: &str, token: Option<&str>, table: Option<&str>) -> Result<(u64, u64)> {
    let url = format!("{}/api/v1/flush", url.trim_end_matches('/'));
    let mut req = super::with_token(ureq::post(&url), token);
    if let Some(t) = table {
        req = req.query("table", t);
    }
    let body: serde_json::Value = match req.call() {
        Ok(r) => serde_json::from_str(&r.into_string()?)?,
        Err(ureq::Error::Status(code, r)) => {
            let text = r.into_string().unwrap_or_default();
            anyhow::bail!("{url}: HTTP {code}: {text}")
        }
        Err(e) => return Err(anyhow::Error::new(e).context(format!("cannot reach {url}"))),
    };
    let n = |k: &str| body[k].as_u64().unwrap_or(0);
    Ok((n("memstore_bytes"), n("wal_segments")))
}
