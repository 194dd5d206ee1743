//! `telestore load --mqtt URL`: the demo fleet through an MQTT broker, to
//! a daemon subscribed to it (`serve --mqtt URL`). Each connection is one
//! MQTT client publishing at QoS 1; the load ends when the broker has
//! acknowledged every message and the daemon has acknowledged them too
//! (its `telestore_mqtt_acked_total`, read over HTTP), so the rate it
//! reports is end to end: broker in, rows durable in the store.

use super::load::{lines, Totals};
use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;
use rumqttc::{Client, Event, MqttOptions, Packet, QoS};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use telestore::mqtt::PACKET_MAX;

/// Messages a load client has published and the broker not yet
/// acknowledged, at most.
const INFLIGHT: u16 = 256;

/// How each batch of rows goes out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MqttFormat {
    /// One line-protocol message per batch, on `telestore/TABLE`.
    Line,
    /// One JSON object per row, on `telestore/TABLE/truck-N`.
    Json,
}

/// One connection's MQTT client.
pub struct MqttSink {
    client: Client,
    reader: Option<std::thread::JoinHandle<Result<()>>>,
    acked: Arc<AtomicU64>,
    format: MqttFormat,
    sent: u64,
}

fn host_port(url: &str) -> Result<(String, u16)> {
    let cfg = telestore::mqtt::MqttConfig::new(url);
    if cfg.tls() {
        bail!(
            "load --mqtt publishes over plain MQTT (mqtt://); TLS is for the daemon's subscriber"
        );
    }
    cfg.validate().map_err(anyhow::Error::from)
}

impl MqttSink {
    pub fn new(url: &str, format: MqttFormat, conn: u64) -> Result<Self> {
        let (host, port) = host_port(url)?;
        let id = format!("telestore-load-{}-{conn}", std::process::id());
        let mut opts = MqttOptions::new(id, host, port);
        opts.set_keep_alive(Duration::from_secs(30))
            .set_inflight(INFLIGHT)
            .set_max_packet_size(PACKET_MAX, PACKET_MAX);
        let (client, mut conn) = Client::new(opts, 1024);
        let url = url.to_string();
        let acked = Arc::new(AtomicU64::new(0));
        let count = acked.clone();
        let reader = std::thread::spawn(move || -> Result<()> {
            for ev in conn.iter() {
                match ev.with_context(|| format!("MQTT connection to {url}"))? {
                    Event::Incoming(Packet::PubAck(_)) => _ = count.fetch_add(1, Relaxed),
                    Event::Outgoing(rumqttc::Outgoing::Disconnect) => return Ok(()),
                    _ => {}
                }
            }
            Ok(())
        });
        Ok(MqttSink {
            client,
            reader: Some(reader),
            acked,
            format,
            sent: 0,
        })
    }

    /// Publish one batch of 72-byte readings rows.
    pub fn post(
        &mut self,
        table: &str,
        rows: &[u8],
        t: &mut Totals,
        bar: &ProgressBar,
    ) -> Result<()> {
        let n = (rows.len() / 72) as u64;
        match self.format {
            MqttFormat::Line => {
                let mut text = String::with_capacity(rows.len() * 2);
                lines(&mut text, table, rows, "000000");
                self.publish(format!("telestore/{table}"), text.into_bytes())?;
            }
            MqttFormat::Json => {
                for r in rows.chunks_exact(72) {
                    let (dev, body) = json_row(r);
                    self.publish(format!("telestore/{table}/truck-{dev}"), body)?;
                }
            }
        }
        t.rows += n;
        t.frames += match self.format {
            MqttFormat::Line => 1,
            MqttFormat::Json => n,
        };
        bar.inc(n);
        Ok(())
    }

    fn publish(&mut self, topic: String, body: Vec<u8>) -> Result<()> {
        self.client
            .publish(topic, QoS::AtLeastOnce, false, body)
            .context("publishing")?;
        self.sent += 1;
        Ok(())
    }

    /// Wait until the broker has acknowledged every message; returns the
    /// messages published.
    pub fn finish(mut self) -> Result<u64> {
        let reader = self.reader.take().context("no ack reader")?;
        while self.acked.load(Relaxed) < self.sent {
            if reader.is_finished() {
                reader
                    .join()
                    .map_err(|_| anyhow::anyhow!("MQTT reader panicked"))??;
                bail!("the MQTT connection ended before every message was acknowledged");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.client.disconnect().context("disconnecting")?;
        let _ = reader.join();
        Ok(self.sent)
    }
}

/// One row as `{"ts": ms, "latitude": …, …}`.
fn json_row(r: &[u8]) -> (u64, Vec<u8>) {
    use std::fmt::Write as _;
    let dev = u64::from_le_bytes(r[0..8].try_into().expect("8 bytes"));
    let ts = i64::from_le_bytes(r[8..16].try_into().expect("8 bytes"));
    let mut s = format!("{{\"ts\":{ts}");
    for (i, name) in telestore::testkit::READINGS_FIELDS.iter().enumerate() {
        let v = f64::from_le_bytes(r[16 + i * 8..24 + i * 8].try_into().expect("8 bytes"));
        let _ = write!(s, ",\"{name}\":{v:?}");
    }
    s.push('}');
    (dev, s.into_bytes())
}

/// The daemon's `telestore_mqtt_acked_total`, over HTTP.
pub fn daemon_acked(http: &str, token: &str) -> Result<u64> {
    let url = format!("{}/metrics", http.trim_end_matches('/'));
    let body = super::with_token(ureq::get(&url), Some(token))
        .call()
        .with_context(|| format!("reading {url}"))?
        .into_string()?;
    body.lines()
        .find_map(|l| {
            l.strip_prefix("telestore_mqtt_acked_total ")?
                .parse::<f64>()
                .ok()
        })
        .map(|v| v as u64)
        .with_context(|| {
            format!("{url} has no telestore_mqtt_acked_total: is the daemon started with --mqtt?")
        })
}

/// Wait until the daemon has acknowledged `messages` more than `before`;
/// gives up when its count has not moved for `stall`.
pub fn wait_daemon(
    http: &str,
    token: &str,
    before: u64,
    messages: u64,
    stall: Duration,
) -> Result<()> {
    let (mut last, mut moved) = (before, Instant::now());
    loop {
        let now = daemon_acked(http, token)?;
        if now >= before + messages {
            return Ok(());
        }
        if now != last {
            (last, moved) = (now, Instant::now());
        } else if moved.elapsed() > stall {
            bail!(
                "the daemon acknowledged {} of {messages} messages and then nothing for {stall:?}: is it subscribed to the same broker?",
                now - before
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
