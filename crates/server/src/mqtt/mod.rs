//! The daemon as a durable MQTT subscriber (`serve --mqtt URL`): readings
//! from the broker devices publish to, at least once.
//!
//! One client (rumqttc) with a persistent session (`clean_session =
//! false`) and manual acknowledgements subscribes at QoS 1 (`session`).
//! Messages are gathered into batches (by count, bytes and a short delay);
//! a batch is written, made durable with one WAL fsync, and only then
//! PUBACKed, in order. A `kill -9` before the fsync loses only messages
//! not acknowledged, which the broker delivers again to the same session;
//! a message that comes again rewrites the same keys (last write wins).
//! A payload that cannot be read (`payload`) is counted by reason, logged,
//! republished to the dead-letter topic if one is set, and acknowledged
//! (it would fail again); it never stops the subscriber. When the store is
//! busy the subscriber waits and retries, and reads nothing from the
//! broker meanwhile. A lost connection is retried with backoff.

pub mod config;
pub mod payload;
mod session;
mod tls;

pub use config::{MqttConfig, Subscription};
pub use session::run;

use crate::frontend::metric::{label, Metric};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use telestore_engine::util::sync::LockExt;

/// Version of formats/mqtt.md (topics, payloads, the dead-letter
/// envelope's `"v"`).
pub const MQTT_FORMAT_VERSION: u32 = 1;
/// Most messages in one batch (one fsync).
pub const BATCH_MESSAGES: usize = 4096;
/// Most payload bytes in one batch.
pub const BATCH_BYTES: usize = 16 << 20;
/// How long the first message of a batch waits for others before the
/// batch is made durable.
pub const BATCH_DELAY: Duration = Duration::from_millis(2);
/// Longest wait between reconnection attempts.
pub const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// Largest MQTT packet read: the largest MQTT 3.1.1 can frame (a remaining
/// length of 268,435,455 bytes and 5 bytes of fixed header). Whatever the
/// broker delivers is read, so no message can fail the connection (one
/// over a smaller limit did, and the broker redelivered it on every
/// reconnect: ingest stopped for good).
pub const PACKET_MAX: usize = 268_435_455 + 5;
/// Largest payload taken; a bigger message is refused (reason `size`) and
/// dead-lettered with its first [`DEAD_LETTER_PREFIX`] bytes. The sample
/// broker configuration sets `message_size_limit` to this.
pub const MESSAGE_MAX: usize = 64 << 20;
/// How much of a message refused for its size the dead letter holds.
pub const DEAD_LETTER_PREFIX: usize = 1024;

/// The MQTT subscriber's state in `/health`.
#[derive(Clone, Debug, serde::Serialize, utoipa::ToSchema)]
#[schema(as = MqttHealth)]
pub struct Health {
    /// The broker's URL.
    pub broker: String,
    /// Whether a broker connection is up.
    pub connected: bool,
    /// Messages taken since start.
    pub messages: u64,
    /// Messages taken and not yet durable.
    pub pending: u64,
    /// Why the last connection attempt or the subscriber failed.
    pub last_error: Option<String>,
    /// Messages refused since start, by reason (`topic`, `table`,
    /// `encoding`, `fields`, `size`).
    pub refused: std::collections::BTreeMap<String, u64>,
    /// The last refused message: its topic and why.
    pub last_refused: Option<String>,
}

/// What the subscriber did, for `/metrics` and `/health`.
#[derive(Debug, Default)]
pub struct Stats {
    /// The broker URL, set when a subscriber runs.
    pub broker: std::sync::OnceLock<String>,
    /// Whether a broker connection is up.
    pub connected: AtomicBool,
    /// Messages taken, rows written from them, messages acknowledged.
    pub messages: AtomicU64,
    /// Rows written from messages.
    pub rows: AtomicU64,
    /// Messages acknowledged to the broker.
    pub acked: AtomicU64,
    /// Messages that came again (DUP flag set by the broker).
    pub redeliveries: AtomicU64,
    /// Connection losses (each followed by a retry).
    pub reconnects: AtomicU64,
    /// Refused payloads by reason (index = [`payload::Bad`]), and those
    /// republished to the dead-letter topic.
    pub bad: [AtomicU64; payload::Bad::ALL.len()],
    /// Refused messages republished to the dead-letter topic.
    pub dead_letters: AtomicU64,
    /// Messages taken and not yet durable, and when the oldest of them
    /// arrived (Unix ms, 0: none).
    pub pending: AtomicU64,
    /// When the oldest of them arrived (Unix ms, 0: none).
    pub oldest_pending_ms: AtomicI64,
    /// Why the last connection attempt or the subscriber failed.
    pub last_error: Mutex<Option<String>>,
    /// The last refused message: its topic and why.
    pub last_refused: Mutex<Option<String>>,
}

impl Stats {
    /// `/health`'s `mqtt` member; `None` without a subscriber.
    pub fn health(&self) -> Option<Health> {
        use std::sync::atomic::Ordering::Relaxed;
        let broker = self.broker.get()?;
        let err = self.last_error.lock_or_recover();
        let last = self.last_refused.lock_or_recover();
        let refused = payload::Bad::ALL
            .iter()
            .map(|&b| (b.name().to_string(), self.bad[b as usize].load(Relaxed)))
            .collect();
        Some(Health {
            broker: broker.clone(),
            connected: self.connected.load(Relaxed),
            messages: self.messages.load(Relaxed),
            pending: self.pending.load(Relaxed),
            last_error: err.clone(),
            refused,
            last_refused: last.clone(),
        })
    }

    /// Seconds since the oldest message not yet durable arrived (0: none).
    pub fn lag_seconds(&self, now_ms: i64) -> f64 {
        let t = self
            .oldest_pending_ms
            .load(std::sync::atomic::Ordering::Relaxed);
        if t == 0 {
            0.0
        } else {
            (now_ms - t).max(0) as f64 / 1000.0
        }
    }

    fn set_error(&self, e: String) {
        *self.last_error.lock_or_recover() = Some(e);
    }

    /// The subscriber's metrics, read from these counters at a scrape.
    pub const METRICS: &'static [Metric<Scrape>] = &[
        Metric::counter("mqtt_messages", "MQTT messages taken", |s: &Scrape| {
            load(&s.0.messages)
        }),
        Metric::counter(
            "mqtt_acked",
            "MQTT messages acknowledged to the broker (after their rows were durable)",
            |s: &Scrape| load(&s.0.acked),
        ),
        Metric::counter(
            "mqtt_redeliveries",
            "MQTT messages that came again (DUP flag)",
            |s: &Scrape| load(&s.0.redeliveries),
        ),
        Metric::counter(
            "mqtt_reconnects",
            "MQTT connection losses (each followed by a retry)",
            |s: &Scrape| load(&s.0.reconnects),
        ),
        Metric::counter(
            "mqtt_dead_letters",
            "Refused MQTT payloads republished to the dead-letter topic",
            |s: &Scrape| load(&s.0.dead_letters),
        ),
        Metric::counter_each(
            "mqtt_bad_payloads",
            "MQTT payloads refused, by reason",
            |s: &Scrape| {
                payload::Bad::ALL
                    .iter()
                    .map(|&b| (label("reason", b.name()), load(&s.0.bad[b as usize])))
                    .collect()
            },
        ),
        Metric::gauge(
            "mqtt_connected",
            "1 while the MQTT subscriber is connected",
            |s: &Scrape| {
                f64::from(u8::from(
                    s.0.connected.load(std::sync::atomic::Ordering::Relaxed),
                ))
            },
        ),
        Metric::gauge(
            "mqtt_pending_messages",
            "MQTT messages taken and not yet durable (so not yet acknowledged)",
            |s: &Scrape| load(&s.0.pending),
        ),
        Metric::gauge(
            "mqtt_lag",
            "Age of the oldest MQTT message taken and not yet durable (0: none)",
            |s: &Scrape| s.0.lag_seconds(s.1),
        )
        .in_unit("seconds"),
    ];
}

/// What the MQTT metrics read at a scrape: the counters and the store's
/// clock now (Unix ms), which `oldest_pending_ms` is measured by.
pub struct Scrape(pub Arc<Stats>, pub i64);

fn load(a: &AtomicU64) -> f64 {
    a.load(std::sync::atomic::Ordering::Relaxed) as f64
}
