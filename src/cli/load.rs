//! `telestore load`: drive a running daemon with a TSBS-IoT-like truck
//! fleet over the binary protocol and report rows/s and ack latency.

use anyhow::{bail, Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use telestore::ingest::client::Client;
use telestore::ingest::proto::{ErrorCode, Response};
use telestore::schema::batch::push_row;
use telestore::schema::parse_duration_ms;
use telestore::testkit::FLEET_T0_MS;
use telestore::Durability;

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Daemon address (binary protocol).
    #[arg(long, default_value = "127.0.0.1:7070")]
    addr: String,
    /// Table to load: 7 f64 fields (latitude, longitude, elevation,
    /// velocity, heading, grade, fuel_consumption), e.g. created with
    /// `telestore table create readings --field latitude:f64 ...`.
    #[arg(long, default_value = "readings")]
    table: String,
    /// Trucks in the fleet (device ids 0..N).
    #[arg(long, default_value_t = 1000)]
    trucks: u64,
    /// Time between two readings of a truck (e.g. 10s, 1m).
    #[arg(long, default_value = "10s")]
    interval: String,
    /// Simulated time span to generate (e.g. 1h, 1d).
    #[arg(long, default_value = "1h")]
    duration: String,
    /// Seed of the random walks and the out-of-order choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Parallel connections (each owns a share of the trucks).
    #[arg(long, default_value_t = 4)]
    connections: u64,
    /// Rows per frame.
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// Frames in flight per connection (pipelining).
    #[arg(long, default_value_t = 8)]
    window: usize,
    /// sync, async or skip.
    #[arg(long, default_value = "sync")]
    durability: String,
    /// Fraction of readings sent late, with a timestamp 1-10 intervals in
    /// the past (back-fill).
    #[arg(long, default_value_t = 0.0)]
    out_of_order: f64,
    /// Token, when the daemon requires one.
    #[arg(long, default_value = "", env = "TELESTORE_TOKEN")]
    token: String,
}

/// Bounds of the seven random walks.
const BOUNDS: [(f64, f64, f64); 7] = [
    (-90.0, 90.0, 0.01),   // latitude
    (-180.0, 180.0, 0.01), // longitude
    (0.0, 5000.0, 5.0),    // elevation
    (0.0, 100.0, 2.0),     // velocity
    (0.0, 360.0, 5.0),     // heading
    (-10.0, 10.0, 0.5),    // grade
    (0.0, 50.0, 0.5),      // fuel_consumption
];

struct Totals {
    rows: u64,
    frames: u64,
    busy_retries: u64,
    latency: Histogram<u64>,
}

pub fn run(a: LoadArgs) -> Result<()> {
    let interval = parse_duration_ms(&a.interval)?;
    let span = parse_duration_ms(&a.duration)?;
    if interval <= 0 || span < interval {
        bail!("--interval must be positive and --duration at least one interval");
    }
    if !(0.0..=1.0).contains(&a.out_of_order) || a.connections == 0 || a.batch == 0 || a.window == 0
    {
        bail!("--out-of-order in 0..=1; --connections, --batch and --window at least 1");
    }
    let durability = Durability::parse(&a.durability)?;
    let rounds = (span / interval) as u64;
    let total = rounds * a.trucks;
    println!(
        "telestore load: {} trucks x {} readings ({} rows) every {} over {} into {} at {}, {} connections, frames of {} rows, {}",
        a.trucks, rounds, total, a.interval, a.duration, a.table, a.addr, a.connections, a.batch, durability.name()
    );
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} rows {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let a = Arc::new(a);
    let t0 = Instant::now();
    let handles: Vec<_> = (0..a.connections)
        .map(|c| {
            let (a, bar) = (a.clone(), bar.clone());
            std::thread::spawn(move || connection(&a, c, rounds, interval, durability, &bar))
        })
        .collect();
    let mut tot = Totals {
        rows: 0,
        frames: 0,
        busy_retries: 0,
        latency: Histogram::new(3)?,
    };
    for h in handles {
        let t = h
            .join()
            .map_err(|_| anyhow::anyhow!("load thread panicked"))??;
        tot.rows += t.rows;
        tot.frames += t.frames;
        tot.busy_retries += t.busy_retries;
        tot.latency.add(&t.latency)?;
    }
    bar.finish_and_clear();
    let secs = t0.elapsed().as_secs_f64();
    let q = |p: f64| tot.latency.value_at_quantile(p) as f64 / 1000.0;
    println!(
        "sent:    {} rows in {} frames in {secs:.2} s = {:.0} rows/s ({} busy retries)",
        tot.rows,
        tot.frames,
        tot.rows as f64 / secs,
        tot.busy_retries
    );
    println!(
        "ack latency: p50 {:.2} ms, p99 {:.2} ms, p999 {:.2} ms, max {:.2} ms",
        q(0.5),
        q(0.99),
        q(0.999),
        tot.latency.max() as f64 / 1000.0
    );
    Ok(())
}

/// One connection: its trucks (`truck % connections == c`), round by
/// round, `window` frames in flight.
fn connection(
    a: &LoadArgs,
    c: u64,
    rounds: u64,
    interval: i64,
    d: Durability,
    bar: &ProgressBar,
) -> Result<Totals> {
    let mut client = Client::connect(a.addr.as_str(), &a.table, d, &a.token)
        .with_context(|| format!("connecting to {}", a.addr))?;
    if client.fields.len() != 7 || client.row_width != 16 + 56 {
        bail!(
            "table {} is not a 7 x f64 readings table (row width {})",
            a.table,
            client.row_width
        );
    }
    let trucks: Vec<u64> = (c..a.trucks).step_by(a.connections as usize).collect();
    let mut rng = SmallRng::seed_from_u64(a.seed ^ telestore::testkit::mix(c));
    let mut walk: Vec<[f64; 7]> = trucks
        .iter()
        .map(|_| std::array::from_fn(|i| (BOUNDS[i].0 + BOUNDS[i].1) / 2.0))
        .collect();
    let mut t = Totals {
        rows: 0,
        frames: 0,
        busy_retries: 0,
        latency: Histogram::new(3)?,
    };
    let mut inflight: VecDeque<(u64, Vec<u8>, Instant)> = VecDeque::new();
    let mut buf = Vec::with_capacity(a.batch * 72);
    let mut next_id = c << 48;
    let mut fields = [0u8; 56];
    for round in 0..rounds {
        for (k, truck) in trucks.iter().enumerate() {
            for (i, v) in walk[k].iter_mut().enumerate() {
                let (lo, hi, step) = BOUNDS[i];
                *v = (*v + rng.gen_range(-step..=step)).clamp(lo, hi);
                fields[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
            }
            let mut ts = FLEET_T0_MS + round as i64 * interval;
            if a.out_of_order > 0.0 && rng.gen_bool(a.out_of_order) {
                ts -= rng.gen_range(1..=10) * interval;
            }
            push_row(&mut buf, *truck, ts, &fields);
            if buf.len() == a.batch * 72 {
                send(
                    &mut client,
                    &mut inflight,
                    &mut t,
                    &mut next_id,
                    std::mem::take(&mut buf),
                    a.window,
                    bar,
                )?;
            }
        }
    }
    if !buf.is_empty() {
        send(
            &mut client,
            &mut inflight,
            &mut t,
            &mut next_id,
            buf,
            a.window,
            bar,
        )?;
    }
    while !inflight.is_empty() {
        complete(&mut client, &mut inflight, &mut t, bar)?;
    }
    Ok(t)
}

fn send(
    client: &mut Client,
    inflight: &mut VecDeque<(u64, Vec<u8>, Instant)>,
    t: &mut Totals,
    next_id: &mut u64,
    rows: Vec<u8>,
    window: usize,
    bar: &ProgressBar,
) -> Result<()> {
    while inflight.len() >= window {
        complete(client, inflight, t, bar)?;
    }
    *next_id += 1;
    client.send(*next_id, &rows)?;
    client.flush()?;
    inflight.push_back((*next_id, rows, Instant::now()));
    Ok(())
}

/// Take the oldest frame's response; a `Busy` frame is sent again.
fn complete(
    client: &mut Client,
    inflight: &mut VecDeque<(u64, Vec<u8>, Instant)>,
    t: &mut Totals,
    bar: &ProgressBar,
) -> Result<()> {
    let Some((id, rows, sent)) = inflight.pop_front() else {
        return Ok(());
    };
    match client.recv()? {
        Response::Ack {
            batch_id, rows: n, ..
        } if batch_id == id => {
            t.latency.record(sent.elapsed().as_micros() as u64)?;
            t.rows += u64::from(n);
            t.frames += 1;
            bar.inc(u64::from(n));
        }
        Response::Error(e) if e.code == ErrorCode::Busy => {
            t.busy_retries += 1;
            std::thread::sleep(Duration::from_millis(100));
            client.send(id, &rows)?;
            inflight.push_back((id, rows, Instant::now()));
        }
        Response::Error(e) => bail!("frame {id} refused: {} ({})", e.message, e.code.name()),
        other => bail!("unexpected response to frame {id}: {other:?}"),
    }
    Ok(())
}
