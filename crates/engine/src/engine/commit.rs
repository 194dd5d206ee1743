//! The commit thread: group commit. Writers send requests; while earlier
//! groups are being synced, new requests queue up and are coalesced into
//! the next group: one WAL write and at most one fdatasync for the whole
//! group. Sequence numbers are assigned here, in WAL order. The thread
//! writes a group's frames and hands it to a sync worker (`syncer.rs`),
//! which fdatasyncs when a writer asked for `sync`, then, in group order,
//! passes the group to the apply thread (`apply.rs`), which updates the
//! memstores, and acknowledges the group's writers. So ack latency is the WAL's
//! alone; up to `Options::wal_syncs_in_flight` fdatasyncs overlap one
//! another and the memstore inserts; and memstores still see edits in
//! sequence order. Reads wait for the apply thread to reach what was
//! acknowledged before they began (`visibility.rs`).

use super::apply::ApplyMsg;
use super::budget::ByteBudget;
use super::options::Durability;
use super::region::Region;
use super::syncer::{SyncJob, SyncPool};
use super::table::Table;
use super::Shared;
use crate::cell::RangeTombstone;
use crate::error::{Error, Result};
use crate::ids::{SeqNo, TableId};
use crate::io::IoFile;
use crate::key::{self, DeviceId, RowKey};
use crate::memstore::{keyed_rows, KeyedRow};
use crate::region;
use crate::schema::Batch;
use crate::wal::frame::{self, Entry, EntryKind};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest number of WAL bytes coalesced into one group.
const GROUP_BYTES_MAX: usize = 32 << 20;

/// One edit.
pub enum Op {
    Put(Vec<u8>),
    DeletePoints(Vec<(DeviceId, i64)>),
    DeleteRange {
        device: DeviceId,
        from: i64,
        to: i64,
    },
}

impl Op {
    /// Bytes of the edit's payload (what it holds in memory until applied).
    pub(super) fn payload_bytes(&self) -> usize {
        match self {
            Op::Put(b) => b.len(),
            Op::DeletePoints(p) => p.len() * std::mem::size_of::<(DeviceId, i64)>(),
            Op::DeleteRange { .. } => std::mem::size_of::<Op>(),
        }
    }

    pub(super) fn count(&self, row_width: usize) -> u64 {
        match self {
            Op::Put(b) => (b.len() / row_width) as u64,
            Op::DeletePoints(p) => p.len() as u64,
            Op::DeleteRange { .. } => 1,
        }
    }
}

/// A write request.
pub struct WriteReq {
    pub table: Arc<Table>,
    pub op: Op,
    pub durability: Durability,
    pub reply: Sender<Result<u64>>,
}

/// A handle the group's fdatasync goes through (`WalWriter::syncer`).
type SyncHandle = Arc<dyn IoFile>;

/// A logged edit on its way to the memstores (its writer is acknowledged
/// once the group is queued for the apply thread).
pub struct Logged {
    pub table: Arc<Table>,
    pub op: Op,
    pub first_seq: u64,
}

/// Messages to the commit thread.
pub enum Msg {
    Write(WriteReq),
    /// Freeze the active memstore of the table (all tables when `None`)
    /// and hand the frozen memstores to the flusher. Ordered after every
    /// acknowledged write (those are queued for the apply thread before
    /// their writers are told), not after groups still being synced.
    Freeze(Option<TableId>, Sender<()>),
    /// fdatasync now (used by `Store::sync`).
    Sync(Sender<Result<()>>),
    /// Check whether idle tables pin the oldest WAL segment (sent by the
    /// monitor thread, so a pinned WAL is freed even when writes stop).
    Unpin,
    /// Writers are stalled over the global memstore limit: have the apply
    /// thread freeze memstores for the flusher (nothing else would while
    /// no write gets through, e.g. right after recovery).
    Relieve,
    Shutdown,
}

pub struct Committer {
    pub shared: Arc<Shared>,
    pub rx: Receiver<Msg>,
    apply_tx: Sender<ApplyMsg>,
    syncers: SyncPool,
    pub next_seq: u64,
    buf: Vec<u8>,
    unsynced_since: Option<Instant>,
    /// Oldest segment whose pinning tables were last asked to flush.
    forced_for_segment: Option<u64>,
}

impl Committer {
    pub fn new(
        shared: Arc<Shared>,
        rx: Receiver<Msg>,
        apply_tx: Sender<ApplyMsg>,
        apply_budget: Arc<ByteBudget>,
        next_seq: u64,
    ) -> Result<Self> {
        let syncers = SyncPool::start(
            shared.opts.wal_syncs_in_flight,
            shared.clone(),
            apply_tx.clone(),
            apply_budget,
        )?;
        Ok(Committer {
            shared,
            rx,
            apply_tx,
            syncers,
            next_seq,
            buf: Vec::with_capacity(1 << 20),
            unsynced_since: None,
            forced_for_segment: None,
        })
    }

    /// Run until shutdown or until every sender is gone.
    pub fn run(mut self) {
        // WAL writes are issued here and waited for: no hop to a ring thread.
        let _ring = self.shared.backend.thread_ring();
        let interval = Duration::from_millis(self.shared.opts.async_sync_interval_ms);
        loop {
            let first = match self.unsynced_since {
                Some(t0) => match self.rx.recv_deadline(t0 + interval) {
                    Ok(m) => m,
                    Err(RecvTimeoutError::Timeout) => {
                        let _ = self.sync_wal();
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                },
                None => match self.rx.recv() {
                    Ok(m) => m,
                    Err(_) => break,
                },
            };
            if !self.group(first) {
                break;
            }
        }
        // Every group written is acknowledged (or failed) and on its way
        // to the apply thread before the apply thread is told to stop.
        self.syncers.shutdown();
        if self.unsynced_since.is_some() {
            let _ = self.sync_wal();
        }
        let _ = self.apply_tx.send(ApplyMsg::Shutdown);
    }

    /// Gather a group starting with `first`; returns false on shutdown.
    /// A group of writes waits for a free sync worker before it is
    /// gathered, so requests arriving meanwhile join it.
    fn group(&mut self, first: Msg) -> bool {
        let slot = match first {
            Msg::Write(_) => self.syncers.take_slot(),
            _ => None,
        };
        let mut writes = Vec::new();
        let mut controls = Vec::new();
        let mut bytes = 0usize;
        let mut next = Some(first);
        while let Some(m) = next {
            match m {
                Msg::Write(w) => {
                    if let Op::Put(b) = &w.op {
                        bytes += b.len();
                    }
                    writes.push(w);
                }
                other => controls.push(other),
            }
            next = if bytes < GROUP_BYTES_MAX && controls.is_empty() {
                self.rx.try_recv().ok()
            } else {
                None
            };
        }
        if !writes.is_empty() {
            self.commit(writes, slot);
            self.sync_if_due();
            self.unpin_wal();
        }
        let mut keep_going = true;
        for c in controls {
            match c {
                Msg::Freeze(t, reply) => {
                    let _ = self.apply_tx.send(ApplyMsg::Freeze(t, reply));
                }
                Msg::Sync(reply) => {
                    let _ = reply.send(self.sync_wal());
                }
                Msg::Unpin => {
                    // Ask again even for a segment already asked about:
                    // writes after that freeze may pin it still.
                    self.forced_for_segment = None;
                    self.unpin_wal();
                }
                Msg::Relieve => {
                    let _ = self.apply_tx.send(ApplyMsg::Relieve);
                }
                Msg::Shutdown => keep_going = false,
                Msg::Write(_) => unreachable!("writes are split out above"),
            }
        }
        keep_going
    }

    /// fdatasync the WAL. Success or failure, nothing is pending any more:
    /// after a failure the store is poisoned and no sync will be retried
    /// (the timer must not spin on it).
    fn sync_wal(&mut self) -> Result<()> {
        self.unsynced_since = None;
        self.shared.poison.check()?;
        let t0 = Instant::now();
        let r = self.shared.write.wal().sync();
        let m = &self.shared.counters.metrics.wal_sync_seconds;
        m.observe(t0.elapsed().as_secs_f64());
        r.map_err(|e| self.shared.poison.stop(&e))
    }

    /// Under sustained `async` load the channel is never empty, so the
    /// receive timeout alone would not fire: check the deadline after every
    /// group too.
    fn sync_if_due(&mut self) {
        let interval = Duration::from_millis(self.shared.opts.async_sync_interval_ms);
        if self
            .unsynced_since
            .is_some_and(|t0| t0.elapsed() >= interval)
        {
            let _ = self.sync_wal();
        }
    }

    /// When more than `wal_segments_max` segments are live, ask the apply
    /// thread to freeze (and so flush) every active memstore still holding
    /// edits of the oldest one — once per oldest segment (the monitor's `Unpin`
    /// message asks again every second).
    fn unpin_wal(&mut self) {
        let oldest = {
            let wal = self.shared.write.wal();
            if wal.segment_count() <= self.shared.opts.wal_segments_max {
                return;
            }
            match wal.oldest_sealed() {
                Some(s) if Some(s.no) != self.forced_for_segment => s.clone(),
                _ => return,
            }
        };
        self.forced_for_segment = Some(oldest.no);
        let flushed = self.shared.durable_seqs();
        for (table, seq) in &oldest.table_max_seq {
            if flushed.get(table).copied().unwrap_or_default() < *seq {
                let _ = self.apply_tx.send(ApplyMsg::Unpin {
                    table: *table,
                    seq: *seq,
                });
            }
        }
    }

    /// Log the group and hand it to the sync worker owning `slot`. Only
    /// possible with a slot: with every worker gone the store is
    /// poisoned, and the writes are failed here.
    fn commit(&mut self, writes: Vec<WriteReq>, slot: Option<usize>) {
        let Some(slot) = slot else {
            let e = self.shared.poison.stop(&Error::Closed);
            return reply_all(writes, &e);
        };
        if let Err(e) = self.shared.poison.check() {
            self.syncers.give_back(slot);
            return reply_all(writes, &e);
        }
        match self.log(&writes, slot) {
            Ok((first_seqs, sync)) => self.syncers.submit(
                slot,
                SyncJob {
                    writes,
                    first_seqs,
                    last_seq: self.next_seq - 1,
                    sync,
                },
            ),
            Err(e) => {
                self.syncers.give_back(slot);
                reply_all(writes, &e)
            }
        }
    }

    /// Assign sequence numbers and write the WAL frames. Returns the first
    /// sequence number of each write and, when any writer asked for
    /// `sync`, the handle its worker fdatasyncs through (the sync covers
    /// earlier `async` writes too).
    fn log(&mut self, writes: &[WriteReq], slot: usize) -> Result<(Vec<u64>, Option<SyncHandle>)> {
        self.buf.clear();
        let mut seqs = Vec::with_capacity(writes.len());
        let mut tables = Vec::new();
        let mut need_sync = false;
        for w in writes {
            let first = self.next_seq;
            let count = w.op.count(w.table.schema.row_width());
            self.next_seq += count;
            seqs.push(first);
            if w.durability == Durability::Skip {
                continue;
            }
            need_sync |= w.durability == Durability::Sync;
            encode_op(&mut self.buf, w.table.id, first, count as u32, &w.op);
            tables.push((w.table.id, SeqNo(first + count - 1)));
        }
        if self.buf.is_empty() {
            return Ok((seqs, None));
        }
        let buf = std::mem::take(&mut self.buf);
        let (res, sync) = {
            let mut wal = self.shared.write.wal();
            let res = wal.write(buf, &tables, false);
            // Taken under the same lock: the handle is on the segment
            // the frames went to.
            (res, need_sync.then(|| wal.syncer(slot)))
        };
        match res {
            Ok(b) => self.buf = b,
            Err(e) => return Err(self.shared.poison.stop(&e)),
        }
        if need_sync {
            self.unsynced_since = None;
        } else if self.unsynced_since.is_none() {
            self.unsynced_since = Some(Instant::now());
        }
        Ok((seqs, sync))
    }
}

pub(super) fn reply_all(writes: Vec<WriteReq>, e: &Error) {
    for w in writes {
        let _ = w.reply.send(Err(clone_err(e)));
    }
}

/// Errors are not `Clone` (they may hold `io::Error`); rebuild the
/// variants a group shares.
fn clone_err(e: &Error) -> Error {
    match e {
        Error::Poisoned { cause } => Error::Poisoned {
            cause: cause.clone(),
        },
        other => Error::Poisoned {
            cause: other.to_string(),
        },
    }
}

fn encode_op(buf: &mut Vec<u8>, table_id: TableId, first_seq: u64, count: u32, op: &Op) {
    let mut tmp = Vec::new();
    let (kind, payload): (EntryKind, &[u8]) = match op {
        Op::Put(b) => (EntryKind::Put, b),
        Op::DeletePoints(p) => {
            for (d, ts) in p {
                tmp.extend_from_slice(&d.0.to_le_bytes());
                tmp.extend_from_slice(&ts.to_le_bytes());
            }
            (EntryKind::DeletePoints, &tmp)
        }
        Op::DeleteRange { device, from, to } => {
            tmp.extend_from_slice(&device.0.to_le_bytes());
            tmp.extend_from_slice(&from.to_le_bytes());
            tmp.extend_from_slice(&to.to_le_bytes());
            (EntryKind::DeleteRange, &tmp)
        }
    };
    frame::encode(
        &Entry {
            kind,
            table_id: table_id.0,
            first_seq,
            count,
            payload,
        },
        buf,
    );
}

/// Insert `rows` (all in `r`'s range) but those `r` already has in files
/// into its active memstore; whether any was.
fn insert_rows(r: &Region, batch: &Batch<'_>, rows: &[KeyedRow], now_ms: i64) -> bool {
    let v = r.version();
    let fresh: Vec<KeyedRow>;
    let rows = if rows.iter().any(|k| k.seq() <= v.flushed_seq) {
        fresh = rows
            .iter()
            .filter(|k| k.seq() > v.flushed_seq)
            .copied()
            .collect();
        &fresh[..]
    } else {
        rows
    };
    if rows.is_empty() {
        return false;
    }
    v.active.insert_rows(batch, rows);
    r.stats.on_write(now_ms, rows.len() as u64);
    true
}

/// Apply an op: route its cells to the regions holding their keys, skip
/// what a region already has in files (WAL replay), insert the rest into
/// the regions' active memstores. Returns the regions touched. The region
/// map is held for reading throughout, so a split or merge never sees a
/// write half-applied.
pub fn apply(t: &Table, first_seq: u64, op: &Op, now_ms: i64) -> Vec<Arc<Region>> {
    let regions = t.regions_for_write();
    let mut touched = Vec::new();
    match op {
        Op::Put(b) => {
            let batch = Batch::new(b, t.schema.row_width()).expect("validated before commit");
            let rows = keyed_rows(first_seq, &batch);
            note_puts(t, &batch, &rows);
            let mut rest = &rows[..];
            for r in regions.iter() {
                let n = match &r.end {
                    Some(e) => rest.partition_point(|k| k.before(e)),
                    None => rest.len(),
                };
                let (mine, after) = rest.split_at(n);
                rest = after;
                if insert_rows(r, &batch, mine, now_ms) {
                    touched.push(r.clone());
                }
            }
        }
        Op::DeletePoints(p) => {
            let starts: Vec<RowKey> = regions.iter().map(|r| r.start).collect();
            let mut by_region: Vec<Vec<(RowKey, u64)>> = vec![Vec::new(); regions.len()];
            for (i, (d, ts)) in p.iter().enumerate() {
                t.latest.on_delete(*d, *ts, *ts);
                let k = key::encode(*d, *ts);
                by_region[region::route(&starts, &k)].push((k, first_seq + i as u64));
            }
            for (r, mut pts) in regions.iter().zip(by_region) {
                let v = r.version();
                pts.retain(|(_, s)| *s > v.flushed_seq);
                if !pts.is_empty() {
                    v.active.insert_deletes(&pts);
                    r.stats.on_write(now_ms, pts.len() as u64);
                    touched.push(r.clone());
                }
            }
        }
        Op::DeleteRange { device, from, to } => {
            t.latest.on_delete(*device, *from, *to);
            let Some((lo, hi)) = key::device_range(*device, *from, *to) else {
                return touched;
            };
            let rt = RangeTombstone {
                device: *device,
                from: *from,
                to: *to,
                seq: first_seq,
            };
            for r in regions.iter() {
                let reaches = region::clip(&lo, &hi, &r.start, r.end.as_ref()).is_some();
                let v = r.version();
                if reaches && first_seq > v.flushed_seq {
                    v.active.insert_range_delete(rt);
                    r.stats.on_write(now_ms, 1);
                    touched.push(r.clone());
                }
            }
        }
    }
    touched
}

/// Tell the table's latest-row cache about a put batch: the first of each
/// device's rows in key order (`rows`) is its newest in the batch.
fn note_puts(t: &Table, batch: &Batch<'_>, rows: &[KeyedRow]) {
    let mut last = None;
    for k in rows {
        let key = k.key();
        let device = key::device_of(&key);
        if last == Some(device) {
            continue;
        }
        last = Some(device);
        let fields = batch.fields(k.row());
        t.latest.on_put(device.0, key::ts_of(&key), k.seq(), fields);
    }
}
