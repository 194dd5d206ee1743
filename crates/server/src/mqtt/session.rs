//! The subscriber's loop: one task polls the MQTT connection, gathers
//! messages into batches, makes each batch durable, then acknowledges it.
//!
//! rumqttc sends what the client asks for (acks, subscriptions,
//! dead letters) only while the connection is polled, so this task never
//! waits on the client's queue: requests go to `out` and are handed over
//! with `try_*` between polls, in order.

use super::config::{MqttConfig, Subscription};
use super::payload::{self, Bad, Decoded, Format};
use super::{
    Stats, BACKOFF_MAX, BATCH_BYTES, BATCH_DELAY, BATCH_MESSAGES, DEAD_LETTER_PREFIX, MESSAGE_MAX,
    PACKET_MAX,
};
use crate::classes::MqttAction;
use crate::ingest::lineproto::{self, Rules};
use rumqttc::{AsyncClient, Event, EventLoop, MqttOptions, Packet, Publish, QoS};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use telestore_engine::error::{Error, Result};
use telestore_engine::util::sync::LockExt;
use telestore_engine::{Durability, Store};
use tokio::sync::watch;
use tokio::time::Instant;

/// A request for the client, waiting for room in its queue.
enum Out {
    Subscribe(String, QoS),
    Ack(Publish),
    DeadLetter(String, Vec<u8>),
}

/// Messages taken and not yet durable.
#[derive(Default)]
struct Batch {
    msgs: Vec<Publish>,
    /// Rows per table, and how many messages brought them.
    tables: BTreeMap<String, (Vec<u8>, u64)>,
    bytes: usize,
    since: Option<Instant>,
    /// A message of a `sync` subscription is in the batch.
    sync: bool,
}

struct Session {
    store: Arc<Store>,
    client: AsyncClient,
    subs: Vec<Subscription>,
    stats: Arc<Stats>,
    rules: Arc<Rules>,
    dead_letter: Option<String>,
    batch: Batch,
    /// Messages taken and not yet applied, oldest first.
    decoding: VecDeque<(Publish, Taken)>,
    out: VecDeque<Out>,
}

type Decoding = std::result::Result<Decoded, (Bad, Error)>;

/// A message's payload, read or being read.
enum Taken {
    Ready(Decoding),
    Running(tokio::task::JoinHandle<Decoding>),
}

/// Line-protocol messages parsed at once, ahead of being applied.
const DECODE_AHEAD: usize = 8;

/// Run the subscriber until `stop` changes. Returns an error only when
/// the store fails (an I/O error, a stopped write path): then nothing
/// more is acknowledged, and the broker keeps the rest for the next start.
pub async fn run(
    store: Arc<Store>,
    cfg: MqttConfig,
    stats: Arc<Stats>,
    rules: Arc<Rules>,
    mut stop: watch::Receiver<bool>,
) -> Result<()> {
    let (host, port) = cfg.validate()?;
    let _ = stats.broker.set(cfg.url.clone());
    let mut opts = MqttOptions::new(cfg.client_id.clone(), host, port);
    opts.set_clean_session(false)
        .set_manual_acks(true)
        .set_keep_alive(Duration::from_secs(15))
        .set_max_packet_size(PACKET_MAX, PACKET_MAX);
    if let Some(u) = &cfg.username {
        opts.set_credentials(u.clone(), cfg.password.clone().unwrap_or_default());
    }
    if cfg.tls() {
        let tls = super::tls::client_config(cfg.ca_file.as_deref())?;
        let tls = rumqttc::TlsConfiguration::Rustls(Arc::new(tls));
        opts.set_transport(rumqttc::Transport::tls_with_config(tls));
    }
    let (client, mut events) = AsyncClient::new(opts, BATCH_MESSAGES + 64);
    let mut s = Session {
        store,
        client,
        subs: cfg.subscriptions(),
        stats,
        rules,
        dead_letter: cfg.dead_letter.clone(),
        batch: Batch::default(),
        decoding: VecDeque::new(),
        out: VecDeque::new(),
    };
    let res = s.run(&cfg.url, &mut events, &mut stop).await;
    s.stats.connected.store(false, Relaxed);
    if let Err(e) = &res {
        s.stats.set_error(format!("subscriber stopped: {e}"));
    }
    res
}

impl Session {
    async fn run(
        &mut self,
        url: &str,
        events: &mut EventLoop,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<()> {
        let mut backoff = Duration::from_millis(100);
        loop {
            let due = self.batch.since.map(|t| t + BATCH_DELAY);
            tokio::select! {
                biased;
                _ = stop.changed() => return Ok(()),
                _ = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                    self.commit().await?;
                }
                ev = events.poll() => match ev {
                    Ok(Event::Incoming(Packet::ConnAck(_))) => {
                        self.stats.connected.store(true, Relaxed);
                        backoff = Duration::from_millis(100);
                        tracing::info!("mqtt: connected to {url}");
                        for s in &self.subs {
                            let qos = if s.qos == 0 { QoS::AtMostOnce } else { QoS::AtLeastOnce };
                            self.out.push_back(Out::Subscribe(s.topic.clone(), qos));
                        }
                    }
                    Ok(Event::Incoming(Packet::Publish(p))) => self.take(p).await?,
                    Ok(_) => {}
                    Err(e) => {
                        self.lost(url, e.to_string());
                        // A stop during the wait is taken at once.
                        tokio::select! {
                            _ = stop.changed() => return Ok(()),
                            _ = tokio::time::sleep(backoff) => {}
                        }
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                    }
                }
            }
            self.hand_over();
        }
    }

    /// The connection is gone: what was not acknowledged comes again in
    /// the session, so the batch is dropped (rows written from it are
    /// rewritten, last write wins), and so are acks not yet sent.
    fn lost(&mut self, url: &str, why: String) {
        if self.stats.connected.swap(false, Relaxed) {
            tracing::warn!("mqtt: connection to {url} lost: {why}");
        }
        self.stats.set_error(why);
        self.stats.reconnects.fetch_add(1, Relaxed);
        self.batch = Batch::default();
        self.decoding.clear();
        self.set_pending();
        self.out.retain(|o| !matches!(o, Out::Ack(_)));
    }

    /// Hand queued requests to the client while its queue has room.
    fn hand_over(&mut self) {
        while let Some(o) = self.out.front() {
            let done = match o {
                Out::Subscribe(t, q) => self.client.try_subscribe(t.clone(), *q),
                Out::Ack(p) => self.client.try_ack(p),
                Out::DeadLetter(t, body) => {
                    self.client
                        .try_publish(t.clone(), QoS::AtLeastOnce, false, body.clone())
                }
            };
            if done.is_err() {
                return;
            }
            if let Some(Out::Ack(_)) = self.out.pop_front() {
                self.stats.acked.fetch_add(1, Relaxed);
            }
        }
    }

    /// Take one message: line protocol is parsed on a blocking thread
    /// (up to [`DECODE_AHEAD`] messages at once), the rest here; messages
    /// are then applied in the order they came ([`Session::settle_one`]).
    async fn take(&mut self, p: Publish) -> Result<()> {
        self.stats.messages.fetch_add(1, Relaxed);
        if p.dup {
            self.stats.redeliveries.fetch_add(1, Relaxed);
        }
        if self.batch.since.is_none() {
            self.batch.since = Some(Instant::now());
            let ms = self.store.now_ms();
            self.stats.oldest_pending_ms.store(ms, Relaxed);
        }
        let sub = self
            .subs
            .iter()
            .find(|s| rumqttc::matches(&p.topic, &s.topic));
        self.batch.sync |= sub.is_none_or(Subscription::sync);
        let taken = match sub {
            _ if p.payload.len() > MESSAGE_MAX => Taken::Ready(Err((Bad::Size, too_large(&p)))),
            Some(sub) if sub.format == Format::Line => {
                let (store, sub, rules) = (self.store.clone(), sub.clone(), self.rules.clone());
                let (topic, payload) = (p.topic.clone(), p.payload.clone());
                Taken::Running(tokio::task::spawn_blocking(move || {
                    payload::decode(&store, &sub, &topic, &payload, &rules)
                }))
            }
            Some(sub) => Taken::Ready(tokio::task::block_in_place(|| {
                payload::decode(&self.store, sub, &p.topic, &p.payload, &self.rules)
            })),
            None => Taken::Ready(Err((
                Bad::Topic,
                Error::invalid("topic", format!("{:?} matches no subscription", p.topic)),
            ))),
        };
        self.decoding.push_back((p, taken));
        if self.decoding.len() >= DECODE_AHEAD {
            self.settle_one().await?;
        }
        self.set_pending();
        let n = self.batch.msgs.len() + self.decoding.len();
        if n >= BATCH_MESSAGES || self.batch.bytes >= BATCH_BYTES {
            self.commit().await?;
        }
        Ok(())
    }

    /// Apply the oldest message taken: its rows join the batch (line
    /// protocol is written now, without waiting for the fsync), or it is
    /// refused.
    async fn settle_one(&mut self) -> Result<()> {
        let Some((p, taken)) = self.decoding.pop_front() else {
            return Ok(());
        };
        let decoded = match taken {
            Taken::Ready(d) => d,
            Taken::Running(h) => h
                .await
                .map_err(|e| Error::io("<mqtt decode>", std::io::Error::other(e)))?,
        };
        match decoded {
            Ok(Decoded::Rows { table, rows, n }) => {
                self.stats.rows.fetch_add(n as u64, Relaxed);
                let e = self.batch.tables.entry(table).or_default();
                e.0.extend_from_slice(&rows);
                e.1 += 1;
            }
            Ok(Decoded::Lines(prep)) => match self.write_lines(&p, prep).await {
                Ok(n) => _ = self.stats.rows.fetch_add(n as u64, Relaxed),
                Err(e) if refused(&e) => self.refuse(&p, Bad::Fields, &e),
                Err(e) => return Err(e),
            },
            Err((why, e)) if refused(&e) => self.refuse(&p, why, &e),
            Err((_, e)) => return Err(e),
        }
        self.batch.bytes += p.payload.len();
        self.batch.msgs.push(p);
        Ok(())
    }

    fn refuse(&mut self, p: &Publish, why: Bad, e: &Error) {
        self.stats.bad[why as usize].fetch_add(1, Relaxed);
        tracing::warn!("mqtt: message on {} refused ({}): {e}", p.topic, why.name());
        let last = format!("{}: {} ({e})", p.topic, why.name());
        *self.stats.last_refused.lock_or_recover() = Some(last);
        // A message that came from the dead-letter topic itself (a broker
        // bridge, say: the configuration refuses subscriptions matching it)
        // is never wrapped a second time.
        if let Some(dl) = self.dead_letter.as_ref().filter(|dl| **dl != *p.topic) {
            let body = serde_json::json!({
                "v": super::MQTT_FORMAT_VERSION,
                "topic": p.topic,
                "reason": why.name(),
                "error": e.to_string(),
                "payload": String::from_utf8_lossy(kept(why, &p.payload)),
            });
            self.out
                .push_back(Out::DeadLetter(dl.clone(), body.to_string().into_bytes()));
            self.stats.dead_letters.fetch_add(1, Relaxed);
        }
    }

    /// Apply a parsed line-protocol message, waiting while the store is
    /// busy. `apply` consumes what it writes, so a busy store (rare) means
    /// parsing the message again rather than copying every message; so
    /// does (once) a table the message was creating that another message
    /// created meanwhile with other fields (parsed ahead of this one):
    /// then the message is checked against that table.
    async fn write_lines(&self, p: &Publish, mut prep: lineproto::Prepared) -> Result<usize> {
        let mut conflicted = false;
        loop {
            let creates = prep.creates();
            let r = tokio::task::block_in_place(|| {
                lineproto::apply(&self.store, prep, Durability::Async)
            });
            match (busy(&r), &r) {
                (Some(retry_after_ms), _) => pause(retry_after_ms).await,
                (None, Err(Error::SchemaConflict { .. })) if creates && !conflicted => {
                    conflicted = true;
                }
                (None, _) => return r,
            }
            let sub = self
                .subs
                .iter()
                .find(|s| rumqttc::matches(&p.topic, &s.topic));
            let again = sub.map(|sub| {
                tokio::task::block_in_place(|| {
                    payload::decode(&self.store, sub, &p.topic, &p.payload, &self.rules)
                })
            });
            prep = match again {
                Some(Ok(Decoded::Lines(prep))) => prep,
                Some(Err((_, e))) => return Err(e),
                _ => return Err(Error::invalid("payload", "not line protocol on a retry")),
            };
        }
    }

    /// Write the batch's rows, make everything durable with one fsync
    /// (unless every message came from an `async` subscription), then
    /// queue the acks in order. A failed fsync stops the subscriber
    /// with nothing of the batch acknowledged.
    async fn commit(&mut self) -> Result<()> {
        while !self.decoding.is_empty() {
            self.settle_one().await?;
        }
        let batch = std::mem::take(&mut self.batch);
        for (table, (rows, msgs)) in batch.tables {
            if let Err(e) = self.write_rows(&table, rows).await {
                if !refused(&e) {
                    return Err(e);
                }
                let why = if matches!(e, Error::UnknownTable(_)) {
                    Bad::Table
                } else {
                    Bad::Fields
                };
                self.stats.bad[why as usize].fetch_add(msgs, Relaxed);
                tracing::warn!("mqtt: {msgs} messages for table {table} refused: {e}");
            }
        }
        if batch.sync {
            tokio::task::block_in_place(|| self.store.sync())?;
        }
        let acks = batch.msgs.into_iter().filter(|p| p.qos != QoS::AtMostOnce);
        self.out.extend(acks.map(Out::Ack));
        self.stats.oldest_pending_ms.store(0, Relaxed);
        self.set_pending();
        Ok(())
    }

    /// One table's rows, in writes the WAL takes, waiting while busy.
    async fn write_rows(&self, table: &str, rows: Vec<u8>) -> Result<()> {
        let width = self.store.schema(table)?.row_width();
        let per = (self.store.batch_bytes_max() / width).max(1) * width;
        for chunk in rows.chunks(per) {
            loop {
                let r = tokio::task::block_in_place(|| {
                    self.store.write(table, chunk, Durability::Async)
                });
                match busy(&r) {
                    Some(retry_after_ms) => pause(retry_after_ms).await,
                    None => {
                        r?;
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    fn set_pending(&self) {
        let n = self.batch.msgs.len() + self.decoding.len();
        self.stats.pending.store(n as u64, Relaxed);
    }
}

/// A message over [`MESSAGE_MAX`], as an error.
fn too_large(p: &Publish) -> Error {
    let m = format!(
        "{} bytes, over the {} MiB a message may hold; the dead letter keeps its first {} bytes",
        p.payload.len(),
        MESSAGE_MAX >> 20,
        DEAD_LETTER_PREFIX
    );
    Error::invalid("payload", m)
}

/// What of a refused payload its dead letter holds: all of it, but the
/// first bytes of one refused for its size.
fn kept(why: Bad, payload: &[u8]) -> &[u8] {
    match why {
        Bad::Size => &payload[..payload.len().min(DEAD_LETTER_PREFIX)],
        _ => payload,
    }
}

/// Errors that refuse a message rather than stop the subscriber
/// ([`crate::classes::mqtt`]).
fn refused(e: &Error) -> bool {
    crate::classes::mqtt(e.class()) == MqttAction::Refuse
}

/// The pause a result asks for before the same write is tried again.
fn busy<T>(r: &Result<T>) -> Option<u64> {
    match r.as_ref().map_err(|e| crate::classes::mqtt(e.class())) {
        Err(MqttAction::Retry { after_ms }) => Some(after_ms),
        _ => None,
    }
}

async fn pause(retry_after_ms: u64) {
    tokio::time::sleep(Duration::from_millis(retry_after_ms.max(1))).await;
}
