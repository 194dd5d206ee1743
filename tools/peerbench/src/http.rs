//! Systems behind HTTP, written to and read from by the same client code:
//! InfluxDB 1.x (Debian's `influxd`, TSM engine) and telestore's daemon.
//! Writes are InfluxDB line protocol (`POST /write?db=bench&precision=ms`,
//! one kept-alive connection per writer), every batch fsynced before the
//! answer (`wal-fsync-delay = "0s"` for InfluxDB, `durability=sync` for
//! telestore); reads are each server's query API returning JSON, parsed
//! here (InfluxQL for InfluxDB, `/api/v1/query?format=jsonl` for
//! telestore). Each harness starts its server on a free loopback port
//! with a data directory of its own and stops it when dropped.

use crate::data::{Reading, FIELDS};
use crate::systems::{dir_bytes, System};
use anyhow::{bail, Context, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free loopback port (bound, then released for the server).
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Wait until `url` answers (any status).
fn wait_up(agent: &ureq::Agent, url: &str, child: &mut Child) -> Result<()> {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) {
        if let Some(status) = child.try_wait()? {
            bail!("server exited at start-up: {status}");
        }
        match agent.get(url).call() {
            Ok(_) | Err(ureq::Error::Status(..)) => return Ok(()),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    bail!("{url} did not answer within 30 s")
}

/// A batch as line protocol, devices named `truck-N`.
fn line_protocol(batch: &[Reading]) -> String {
    let mut s = String::with_capacity(batch.len() * 200);
    for r in batch {
        let _ = write!(s, "readings,device=truck-{} ", r.device);
        for (i, name) in FIELDS.iter().enumerate() {
            let v = f64::from_le_bytes(r.fields[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(s, "{sep}{name}={v:?}");
        }
        let _ = writeln!(s, " {}", r.ts);
    }
    s
}

/// The write both servers get: a batch as line protocol to `/write`.
fn write_lines(agent: &ureq::Agent, base: &str, batch: &[Reading]) -> Result<()> {
    agent
        .post(&format!("{base}/write?db=bench&precision=ms"))
        .send_string(&line_protocol(batch))?;
    Ok(())
}

/// Stop a server: SIGTERM, then wait (a kill after 60 s).
fn stop(child: &mut Child) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(60) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

// ---- InfluxDB 1.x ----------------------------------------------------------

/// `influxd` with its data under `dir`, every WAL write fsynced; a cold
/// shard's cache is written out as TSM files and fully compacted after a
/// second.
pub struct Influx {
    dir: PathBuf,
    base: String,
    agent: ureq::Agent,
    child: Child,
}

impl Influx {
    pub fn open(dir: &Path) -> Result<Self> {
        let (http, rpc) = (free_port()?, free_port()?);
        let conf = dir.join("influxdb.conf");
        std::fs::write(
            &conf,
            format!(
                "reporting-disabled = true\nbind-address = \"127.0.0.1:{rpc}\"\n\
                 [meta]\n  dir = \"{d}/meta\"\n\
                 [data]\n  dir = \"{d}/data\"\n  wal-dir = \"{d}/wal\"\n  wal-fsync-delay = \"0s\"\n  \
                 cache-snapshot-write-cold-duration = \"1s\"\n  compact-full-write-cold-duration = \"1s\"\n  \
                 query-log-enabled = false\n\
                 [http]\n  bind-address = \"127.0.0.1:{http}\"\n  log-enabled = false\n\
                 [monitor]\n  store-enabled = false\n",
                d = dir.display()
            ),
        )?;
        let base = format!("http://127.0.0.1:{http}");
        let agent = ureq::AgentBuilder::new().build();
        let child = Self::start(&conf, dir)?;
        let mut s = Influx {
            dir: dir.to_path_buf(),
            base,
            agent,
            child,
        };
        wait_up(&s.agent, &format!("{}/ping", s.base), &mut s.child)?;
        s.agent
            .post(&format!("{}/query", s.base))
            .send_form(&[("q", "CREATE DATABASE bench")])?;
        Ok(s)
    }

    fn start(conf: &Path, dir: &Path) -> Result<Child> {
        let log = std::fs::File::create(dir.join("influxd.log"))?;
        Command::new("influxd")
            .arg("-config")
            .arg(conf)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("starting influxd (Debian package `influxdb`)")
    }

    fn query(&self, q: &str) -> Result<(u64, f64)> {
        let body: serde_json::Value = self
            .agent
            .get(&format!("{}/query", self.base))
            .query("db", "bench")
            .query("epoch", "ms")
            .query("q", q)
            .call()?
            .into_json()?;
        let mut n = 0u64;
        let mut sum = 0f64;
        for series in body["results"][0]["series"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let cols = series["columns"].as_array().context("columns")?;
            let lat = cols.iter().position(|c| c == FIELDS[0]);
            for v in series["values"].as_array().into_iter().flatten() {
                n += 1;
                if let Some(i) = lat {
                    sum += v[i].as_f64().unwrap_or(0.0);
                }
            }
        }
        if let Some(e) = body["results"][0]["error"].as_str() {
            bail!("influxdb: {e}");
        }
        Ok((n, sum))
    }
}

impl System for Influx {
    fn write(&self, batch: &[Reading]) -> Result<()> {
        write_lines(&self.agent, &self.base, batch)
    }

    /// A restart writes the cache out as TSM files; the cold shard is then
    /// fully compacted a second later (waited for: until the files stop
    /// changing).
    fn settle(&mut self) -> Result<()> {
        stop(&mut self.child);
        self.child = Self::start(&self.dir.join("influxdb.conf"), &self.dir)?;
        wait_up(&self.agent, &format!("{}/ping", self.base), &mut self.child)?;
        wait_still(&self.dir.join("data"))
    }

    fn data_bytes(&self) -> Result<u64> {
        dir_bytes(&self.dir.join("data"), &|p| {
            p.extension()
                .is_some_and(|e| e == "tsm" || e == "tsi" || e == "tombstone")
        })
    }

    fn range(&self, device: u64, from: i64, to: i64) -> Result<(u64, f64)> {
        self.query(&format!(
            "SELECT * FROM readings WHERE device = 'truck-{device}' AND time >= {from}ms AND time <= {to}ms ORDER BY time DESC"
        ))
    }

    fn latest(&self, device: u64) -> Result<Option<i64>> {
        let body: serde_json::Value = self
            .agent
            .get(&format!("{}/query", self.base))
            .query("db", "bench")
            .query("epoch", "ms")
            .query(
                "q",
                &format!("SELECT * FROM readings WHERE device = 'truck-{device}' ORDER BY time DESC LIMIT 1"),
            )
            .call()?
            .into_json()?;
        Ok(body["results"][0]["series"][0]["values"][0][0].as_i64())
    }

    fn window(&self, _devices: u64, from: i64, to: i64) -> Result<u64> {
        Ok(self
            .query(&format!(
                "SELECT * FROM readings WHERE time >= {from}ms AND time <= {to}ms"
            ))?
            .0)
    }
}

impl Drop for Influx {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

/// Wait until the bytes under `dir` stay the same for 3 s (at most 120 s).
fn wait_still(dir: &Path) -> Result<()> {
    let t = Instant::now();
    let mut last = (dir_bytes(dir, &|_| true)?, Instant::now());
    while t.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(500));
        let now = dir_bytes(dir, &|_| true)?;
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() >= Duration::from_secs(3) {
            return Ok(());
        }
    }
    Ok(())
}

// ---- telestore's daemon ----------------------------------------------------

/// `telestore serve` with its data under `dir`; the table created over
/// HTTP with the default options.
pub struct Daemon {
    bin: PathBuf,
    dir: PathBuf,
    base: String,
    http: u16,
    agent: ureq::Agent,
    child: Child,
}

impl Daemon {
    pub fn open(bin: &Path, dir: &Path) -> Result<Self> {
        let http = free_port()?;
        let agent = ureq::AgentBuilder::new().build();
        let child = Self::start(bin, dir, http)?;
        let mut s = Daemon {
            bin: bin.to_path_buf(),
            dir: dir.to_path_buf(),
            base: format!("http://127.0.0.1:{http}"),
            http,
            agent,
            child,
        };
        wait_up(&s.agent, &format!("{}/health", s.base), &mut s.child)?;
        let fields: Vec<String> = FIELDS
            .iter()
            .map(|f| format!(r#"{{"name":"{f}","type":"f64"}}"#))
            .collect();
        let spec = format!(r#"{{"name":"readings","fields":[{}]}}"#, fields.join(","));
        s.agent
            .post(&format!("{}/api/v1/tables", s.base))
            .set("Content-Type", "application/json")
            .send_string(&spec)?;
        Ok(s)
    }

    fn start(bin: &Path, dir: &Path, http: u16) -> Result<Child> {
        let log = std::fs::File::create(dir.with_extension("log"))?;
        Command::new(bin)
            .arg("serve")
            .arg("--dir")
            .arg(dir)
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", free_port()?))
            .arg("--http-listen")
            .arg(format!("127.0.0.1:{http}"))
            .arg("--flight-listen")
            .arg("off")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))
    }

    fn query(&self, params: &[(&str, String)]) -> Result<(u64, f64)> {
        let mut req = self
            .agent
            .get(&format!("{}/api/v1/query", self.base))
            .query("table", "readings")
            .query("format", "jsonl");
        for (k, v) in params {
            req = req.query(k, v);
        }
        let body = std::io::BufReader::new(req.call()?.into_reader());
        let mut n = 0u64;
        let mut sum = 0f64;
        for line in std::io::BufRead::lines(body) {
            let line = line?;
            if line.is_empty() {
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(&line)?;
            n += 1;
            sum += v[FIELDS[0]].as_f64().unwrap_or(0.0);
        }
        Ok((n, sum))
    }
}

impl System for Daemon {
    fn write(&self, batch: &[Reading]) -> Result<()> {
        write_lines(&self.agent, &self.base, batch)
    }

    /// Stop the daemon (it flushes on a clean stop), major-compact the
    /// table with the CLI, start it again.
    fn settle(&mut self) -> Result<()> {
        stop(&mut self.child);
        let st = Command::new(&self.bin)
            .args(["compact", "--table", "readings", "--major", "--dir"])
            .arg(&self.dir)
            .stdout(Stdio::null())
            .status()?;
        anyhow::ensure!(st.success(), "telestore compact failed: {st}");
        self.child = Self::start(&self.bin, &self.dir, self.http)?;
        wait_up(
            &self.agent,
            &format!("{}/health", self.base),
            &mut self.child,
        )
    }

    fn data_bytes(&self) -> Result<u64> {
        dir_bytes(&self.dir.join("tables"), &|_| true)
    }

    fn range(&self, device: u64, from: i64, to: i64) -> Result<(u64, f64)> {
        self.query(&[
            ("kind", "range".into()),
            ("device", format!("truck-{device}")),
            ("from", format!("{from}ms")),
            ("to", format!("{}ms", to + 1)),
        ])
    }

    fn latest(&self, device: u64) -> Result<Option<i64>> {
        let body = self
            .agent
            .get(&format!("{}/api/v1/query", self.base))
            .query("kind", "latest")
            .query("table", "readings")
            .query("device", &format!("truck-{device}"))
            .query("format", "jsonl")
            .call()?
            .into_string()?;
        let Some(line) = body.lines().next() else {
            return Ok(None);
        };
        let v: serde_json::Value = serde_json::from_str(line)?;
        Ok(v["ts"]
            .as_str()
            .and_then(|s| telestore::query::time::parse_time("ts", s, 0).ok()))
    }

    fn window(&self, _devices: u64, from: i64, to: i64) -> Result<u64> {
        Ok(self
            .query(&[
                ("kind", "scan".into()),
                ("from", format!("{from}ms")),
                ("to", format!("{}ms", to + 1)),
            ])?
            .0)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}
