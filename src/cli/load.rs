//! `telestore load`: drive a running daemon with a TSBS-IoT-like truck
//! fleet over the binary protocol and report rows/s and ack latency.

use anyhow::{bail, Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use telestore::ingest::client::{Client, ClientSender};
use telestore::ingest::proto::{ErrorCode, Response};
use telestore::schema::batch::push_row;
use telestore::schema::parse_duration_ms;
use telestore::testkit::{Truck, Values, FLEET_T0_MS, READINGS_FIELDS};
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
    /// Seed of the random walks (each truck's are the same whatever
    /// --connections is) and of the out-of-order choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// sensor: readings rounded to sensor precision (coordinates at 5
    /// decimals, elevation, velocity, heading and grade whole, fuel at 1
    /// decimal: TSBS-like); full-precision: the walks' raw doubles (the
    /// adversarial case for compression).
    #[arg(long, default_value = "sensor", value_parser = ["sensor", "full-precision"])]
    values: String,
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
    /// The daemon's HTTP address: used to create the table when it is
    /// missing (7 f64 fields) and for --line-protocol.
    #[arg(
        long,
        default_value = "http://127.0.0.1:7071",
        env = "TELESTORE_SERVER"
    )]
    http: String,
    /// Send InfluxDB line protocol to /api/v2/write instead of binary
    /// frames (devices are named truck-N, tagged fleet=East|West|North|South,
    /// and registered by the daemon).
    #[arg(long)]
    line_protocol: bool,
    /// Publish to this MQTT broker (mqtt://host:port) instead, for a
    /// daemon subscribed to it (`serve --mqtt URL`); the load waits until
    /// the daemon has acknowledged every message (read from --http's
    /// /metrics), so the rate is end to end.
    #[arg(long, value_name = "URL")]
    mqtt: Option<String>,
    /// With --mqtt: `line` publishes each batch as one line-protocol
    /// message on telestore/TABLE; `json` publishes each reading as one
    /// JSON object on telestore/TABLE/truck-N.
    #[arg(long, value_enum, default_value = "line")]
    mqtt_format: super::load_mqtt::MqttFormat,
    /// Target rows per second over all connections (0: as fast as the
    /// daemon acknowledges). Use it to measure latency below saturation.
    #[arg(long, default_value_t = 0)]
    rate: u64,
}

/// Create the table over HTTP if it does not exist (best effort: a daemon
/// without HTTP, or an existing table, is fine).
fn ensure_table(a: &LoadArgs) {
    let fields: Vec<serde_json::Value> = READINGS_FIELDS
        .iter()
        .map(|n| serde_json::json!({ "name": n, "type": "f64" }))
        .collect();
    let spec = serde_json::json!({ "name": a.table, "fields": fields });
    let url = format!("{}/api/v1/tables", a.http.trim_end_matches('/'));
    let req =
        super::with_token(ureq::post(&url), Some(&a.token)).set("Content-Type", "application/json");
    match req.send_string(&spec.to_string()) {
        Ok(r) if r.status() == 201 => println!("created table {} over {}", a.table, a.http),
        Ok(_) => {}
        Err(ureq::Error::Status(409, _)) => {}
        Err(e) => eprintln!("note: could not check the table over {url}: {e}"),
    }
}

pub(super) struct Totals {
    pub rows: u64,
    /// Frames, requests or MQTT messages.
    pub frames: u64,
    pub busy_retries: u64,
    pub latency: Histogram<u64>,
}

#[expect(
    clippy::too_many_lines,
    reason = "the load command's set-up, run and report in order"
)]
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
    ensure_table(&a);
    let rounds = (span / interval) as u64;
    let total = rounds * a.trucks;
    println!(
        "telestore load: {} trucks x {} readings ({} rows, {} values, seed {}) every {} over {} into {} at {} ({}), {} connections, batches of {} rows, {}",
        a.trucks,
        rounds,
        total,
        a.values,
        a.seed,
        a.interval,
        a.duration,
        a.table,
        target(&a).0,
        target(&a).1,
        a.connections,
        a.batch,
        durability.name()
    );
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} rows {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let acked_before = match &a.mqtt {
        Some(_) => super::load_mqtt::daemon_acked(&a.http, &a.token)?,
        None => 0,
    };
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
    if a.mqtt.is_some() {
        let stall = Duration::from_secs(30);
        super::load_mqtt::wait_daemon(&a.http, &a.token, acked_before, tot.frames, stall)?;
    }
    let secs = t0.elapsed().as_secs_f64();
    let q = |p: f64| tot.latency.value_at_quantile(p) as f64 / 1000.0;
    println!(
        "sent:    {} rows in {} frames in {secs:.2} s = {:.0} rows/s ({} busy retries)",
        tot.rows,
        tot.frames,
        tot.rows as f64 / secs,
        tot.busy_retries
    );
    if a.mqtt.is_some() {
        println!("every message acknowledged by the broker and made durable by the daemon");
        return Ok(());
    }
    println!(
        "ack latency: p50 {:.2} ms, p99 {:.2} ms, p999 {:.2} ms, max {:.2} ms",
        q(0.5),
        q(0.99),
        q(0.999),
        tot.latency.max() as f64 / 1000.0
    );
    Ok(())
}

/// Where the load goes and how, for the opening line.
fn target(a: &LoadArgs) -> (&str, String) {
    match (&a.mqtt, a.line_protocol) {
        (Some(url), _) => (
            url,
            format!("MQTT, {:?} messages", a.mqtt_format).to_lowercase(),
        ),
        (None, true) => (&a.http, "line protocol".into()),
        (None, false) => (&a.addr, "binary".into()),
    }
}

/// One connection: its trucks (`truck % connections == c`), round by
/// round, `window` frames in flight.
#[expect(
    clippy::too_many_lines,
    reason = "one connection's send/ack loop with its retries and latency recording"
)]
fn connection(
    a: &LoadArgs,
    c: u64,
    rounds: u64,
    interval: i64,
    d: Durability,
    bar: &ProgressBar,
) -> Result<Totals> {
    let mut sink = if let Some(url) = &a.mqtt {
        Sink::Mqtt(super::load_mqtt::MqttSink::new(url, a.mqtt_format, c)?)
    } else if a.line_protocol {
        Sink::Http(HttpSink::new(a, d))
    } else {
        let client = Client::connect(a.addr.as_str(), &a.table, d, &a.token)
            .with_context(|| format!("connecting to {}", a.addr))?;
        if client.fields.len() != 7 || client.row_width != 16 + 56 {
            bail!(
                "table {} is not a 7 x f64 readings table (row width {})",
                a.table,
                client.row_width
            );
        }
        Sink::Binary(BinarySink::new(client, a.window, c << 48, bar.clone())?)
    };
    let trucks: Vec<u64> = (c..a.trucks).step_by(a.connections as usize).collect();
    let mut rng = SmallRng::seed_from_u64(a.seed ^ telestore::testkit::mix(c));
    let values = Values::parse(&a.values).map_err(anyhow::Error::msg)?;
    let mut walk: Vec<Truck> = trucks.iter().map(|t| Truck::new(a.seed, *t)).collect();
    let mut t = Totals {
        rows: 0,
        frames: 0,
        busy_retries: 0,
        latency: Histogram::new(3)?,
    };
    let mut buf = Vec::with_capacity(a.batch * 72);
    let (t0, mut sent_rows) = (Instant::now(), 0u64);
    for round in 0..rounds {
        for (k, truck) in trucks.iter().enumerate() {
            let fields = walk[k].next_fields(values);
            let mut ts = FLEET_T0_MS + round as i64 * interval;
            if a.out_of_order > 0.0 && rng.gen_bool(a.out_of_order) {
                ts -= rng.gen_range(1..=10) * interval;
            }
            push_row(&mut buf, *truck, ts, &fields);
            if buf.len() == a.batch * 72 {
                pace(a, t0, sent_rows);
                sent_rows += a.batch as u64;
                let rows = std::mem::take(&mut buf);
                match &mut sink {
                    Sink::Binary(b) => b.send(rows)?,
                    Sink::Http(h) => h.post(&a.table, &rows, &mut t, bar)?,
                    Sink::Mqtt(m) => m.post(&a.table, &rows, &mut t, bar)?,
                }
            }
        }
    }
    match sink {
        Sink::Binary(mut b) => {
            if !buf.is_empty() {
                b.send(buf)?;
            }
            let r = b.finish()?;
            t.rows += r.rows;
            t.frames += r.frames;
            t.busy_retries += r.busy_retries;
            t.latency.add(&r.latency)?;
        }
        Sink::Http(mut h) => {
            if !buf.is_empty() {
                h.post(&a.table, &buf, &mut t, bar)?;
            }
        }
        Sink::Mqtt(mut m) => {
            if !buf.is_empty() {
                m.post(&a.table, &buf, &mut t, bar)?;
            }
            m.finish()?;
        }
    }
    Ok(t)
}

/// With `--rate`, sleep until this connection's share of the rate allows
/// `sent` more rows.
fn pace(a: &LoadArgs, t0: Instant, sent: u64) {
    if a.rate == 0 {
        return;
    }
    let per_conn = (a.rate as f64 / a.connections as f64).max(1.0);
    let due = t0 + Duration::from_secs_f64(sent as f64 / per_conn);
    std::thread::sleep(due.saturating_duration_since(Instant::now()));
}

/// Frames sent and not yet answered, oldest first: id, rows, send time.
type Pending = Arc<Mutex<VecDeque<(u64, Vec<u8>, Instant)>>>;

enum Sink {
    Binary(BinarySink),
    Http(HttpSink),
    Mqtt(super::load_mqtt::MqttSink),
}

/// Binary frames: this thread sends, a second one reads the acks as they
/// arrive (so latency is measured when the ack lands, not when the sender
/// gets around to it); at most `window` frames are unanswered.
struct BinarySink {
    tx: ClientSender,
    /// Frames sent and not yet answered, oldest first.
    pending: Pending,
    /// One token per frame in flight.
    slots: crossbeam_channel::Receiver<()>,
    /// Frames refused `Busy`, to send again.
    retry: crossbeam_channel::Receiver<(u64, Vec<u8>)>,
    reader: Option<std::thread::JoinHandle<Result<Totals>>>,
    next_id: u64,
}

impl BinarySink {
    fn new(client: Client, window: usize, first_id: u64, bar: ProgressBar) -> Result<Self> {
        let (tx, mut rx) = client.split();
        let pending: Pending = Arc::default();
        let (slot_tx, slots) = crossbeam_channel::bounded(window);
        for _ in 0..window {
            let _ = slot_tx.send(());
        }
        let (retry_tx, retry) = crossbeam_channel::unbounded();
        let p = pending.clone();
        let reader = std::thread::spawn(move || -> Result<Totals> {
            let mut t = Totals {
                rows: 0,
                frames: 0,
                busy_retries: 0,
                latency: Histogram::new(3)?,
            };
            loop {
                let resp = match rx.recv() {
                    Ok(r) => r,
                    // The sender closed the connection after the last ack.
                    Err(_) if p.lock().map_or(true, |q| q.is_empty()) => return Ok(t),
                    Err(e) => return Err(e.into()),
                };
                let Some((id, rows, sent)) = p.lock().ok().and_then(|mut q| q.pop_front()) else {
                    bail!("a response to no frame: {resp:?}");
                };
                match resp {
                    Response::Ack {
                        batch_id, rows: n, ..
                    } if batch_id == id => {
                        t.latency.record(sent.elapsed().as_micros() as u64)?;
                        t.rows += u64::from(n);
                        t.frames += 1;
                        bar.inc(u64::from(n));
                        let _ = slot_tx.send(());
                    }
                    Response::Error(e) if e.code == ErrorCode::Busy => {
                        t.busy_retries += 1;
                        let _ = retry_tx.send((id, rows));
                        let _ = slot_tx.send(());
                    }
                    Response::Error(e) => {
                        bail!("frame {id} refused: {} ({})", e.message, e.code.name())
                    }
                    other => bail!("unexpected response to frame {id}: {other:?}"),
                }
            }
        });
        Ok(BinarySink {
            tx,
            pending,
            slots,
            retry,
            reader: Some(reader),
            next_id: first_id,
        })
    }

    fn send(&mut self, rows: Vec<u8>) -> Result<()> {
        while let Ok((id, again)) = self.retry.try_recv() {
            std::thread::sleep(Duration::from_millis(100));
            self.send_frame(id, again)?;
        }
        self.next_id += 1;
        self.send_frame(self.next_id, rows)
    }

    fn send_frame(&mut self, id: u64, rows: Vec<u8>) -> Result<()> {
        // Wait for a free slot (an answered frame).
        self.slots
            .recv()
            .map_err(|_| anyhow::anyhow!("the ack reader stopped"))?;
        if let Ok(mut q) = self.pending.lock() {
            q.push_back((id, rows.clone(), Instant::now()));
        }
        self.tx.send(id, &rows, 72)?;
        Ok(())
    }

    /// Wait for every answer (re-sending `Busy` frames), then the totals.
    fn finish(mut self) -> Result<Totals> {
        loop {
            let empty = self.pending.lock().map_or(true, |q| q.is_empty());
            if let Ok((id, rows)) = self.retry.try_recv() {
                std::thread::sleep(Duration::from_millis(100));
                self.send_frame(id, rows)?;
                continue;
            }
            if empty {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.tx.close();
        match self.reader.take() {
            Some(h) => h
                .join()
                .map_err(|_| anyhow::anyhow!("ack reader panicked"))?,
            None => bail!("no ack reader"),
        }
    }
}

/// TSBS-IoT's fleets: line-protocol trucks carry `fleet=` one of these
/// (truck N in fleet N mod 4), so tag queries have something to select.
const FLEETS: [&str; 4] = ["East", "West", "North", "South"];

/// Line-protocol batches over HTTP (one request at a time per connection).
struct HttpSink {
    agent: ureq::Agent,
    token: String,
    url: String,
    text: String,
}

impl HttpSink {
    fn new(a: &LoadArgs, d: Durability) -> Self {
        HttpSink {
            agent: ureq::AgentBuilder::new().build(),
            token: a.token.clone(),
            url: format!(
                "{}/api/v2/write?bucket=telemetry&precision=ms&durability={}",
                a.http.trim_end_matches('/'),
                d.name()
            ),
            text: String::new(),
        }
    }

    /// Turn fixed-width rows back into lines (tagged with a TSBS-style
    /// fleet) and POST them.
    fn post(&mut self, table: &str, rows: &[u8], t: &mut Totals, bar: &ProgressBar) -> Result<()> {
        self.text.clear();
        lines(&mut self.text, table, rows, "");
        let n = (rows.len() / 72) as u64;
        loop {
            let t0 = Instant::now();
            let req = super::with_token(self.agent.post(&self.url), Some(&self.token))
                .set("Content-Type", "text/plain");
            match req.send_string(&self.text) {
                Ok(_) => {
                    t.latency.record(t0.elapsed().as_micros() as u64)?;
                    t.rows += n;
                    t.frames += 1;
                    bar.inc(n);
                    return Ok(());
                }
                Err(ureq::Error::Status(503, _)) => {
                    t.busy_retries += 1;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(ureq::Error::Status(code, r)) => {
                    let body = r.into_string().unwrap_or_default();
                    bail!("write refused ({code}): {body}")
                }
                Err(e) => bail!("posting to {}: {e}", self.url),
            }
        }
    }
}

/// Fixed-width readings rows as line protocol (devices truck-N, tagged
/// with a TSBS-style fleet); `ts_suffix` turns milliseconds into the
/// precision the receiver expects ("000000": nanoseconds).
pub(super) fn lines(text: &mut String, table: &str, rows: &[u8], ts_suffix: &str) {
    use std::fmt::Write as _;
    for r in rows.chunks_exact(72) {
        let dev = u64::from_le_bytes(r[0..8].try_into().expect("8 bytes"));
        let ts = i64::from_le_bytes(r[8..16].try_into().expect("8 bytes"));
        let fleet = FLEETS[(dev % FLEETS.len() as u64) as usize];
        let _ = write!(text, "{table},device=truck-{dev},fleet={fleet} ");
        for (i, name) in READINGS_FIELDS.iter().enumerate() {
            let v = f64::from_le_bytes(r[16 + i * 8..24 + i * 8].try_into().expect("8 bytes"));
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(text, "{sep}{name}={v}");
        }
        let _ = writeln!(text, " {ts}{ts_suffix}");
    }
}
