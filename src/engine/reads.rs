//! Reads: point gets, latest-N, device time ranges and full-table time
//! scans, merged over memstores and HFiles with newest-version-wins,
//! tombstones, TTL and version limits.

use super::table::{Region, Table, TableState};
use super::Store;
use crate::error::{Error, Result};
use crate::hfile::writer::KEY_MAX;
use crate::key::{self, DeviceId, RowKey, KEY_LEN};
use crate::read::source::{CellSource, FileSource, MemSource};
use crate::read::{merge_visible, Order, Row, RowView, Visibility};
use crate::region;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What a read touched (for tests and benchmarks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Regions the read touched.
    pub regions: usize,
    pub memstores: usize,
    pub files_considered: usize,
    pub files_read: usize,
    pub rows: u64,
}

/// Which cells a read wants.
#[derive(Clone, Copy)]
struct Query {
    lo: RowKey,
    hi: RowKey,
    from: i64,
    to: i64,
    device: Option<DeviceId>,
    exact_key: Option<RowKey>,
    versions: u32,
    /// The read usually stops at its first row (`latest`, a get): files
    /// serve it from run heads where they can ([`FileSource::first_rows`]).
    first_rows: bool,
}

impl Store {
    fn read_table(&self, table: &str) -> Result<Arc<Table>> {
        self.shared.table(table)
    }

    /// Run `q` over every region it reaches, in key order.
    fn run(
        &self,
        t: &Table,
        q: &Query,
        mut visit: impl FnMut(RowView<'_>) -> bool,
    ) -> Result<ReadStats> {
        // Every write acknowledged before this point is applied before the
        // regions are listed (a split meanwhile moves pending writes to
        // the daughters, not to the parents a read would have listed).
        self.shared.gate.wait_caught_up();
        let all = t.regions();
        // Regions are sorted by start: begin at the one holding `lo`.
        let first = all.partition_point(|r| r.start <= q.lo).saturating_sub(1);
        let regions: Vec<Arc<Region>> = all[first..]
            .iter()
            .take_while(|r| r.start <= q.hi)
            .cloned()
            .collect();
        // Everything applied before this point (every acknowledged write,
        // after the wait above) is visible; anything applied later is
        // ignored, even if a memstore chunk copied below already holds it.
        let (read_seq, states) = t.read_snapshot(&self.shared.gate, &regions);
        let mut total = ReadStats::default();
        let mut more = true;
        for (r, st) in regions.iter().zip(states) {
            let Some((lo, hi)) = region::clip(&q.lo, &q.hi, &r.start, r.end.as_ref()) else {
                continue;
            };
            let sub = Query { lo, hi, ..*q };
            let st = self.run_region(t, r, st, &sub, read_seq, |v| {
                more = visit(v);
                more
            })?;
            total.add(&st);
            if !more {
                break;
            }
        }
        Ok(total)
    }

    /// Run `q` (already clipped to the region) over one region.
    fn run_region(
        &self,
        t: &Table,
        r: &Region,
        st: TableState,
        q: &Query,
        read_seq: u64,
        visit: impl FnMut(RowView<'_>) -> bool,
    ) -> Result<ReadStats> {
        let mut stats = ReadStats {
            regions: 1,
            memstores: 1 + st.frozen.len(),
            files_considered: st.files.len(),
            ..Default::default()
        };
        let mut tombs = Vec::new();
        let mut sources: Vec<Box<dyn CellSource>> = Vec::new();
        for m in std::iter::once(&st.active).chain(st.frozen.iter()) {
            tombs.extend(m.range_tombstones());
            sources.push(Box::new(MemSource::new(m.clone(), q.lo, q.hi)));
        }
        for f in &st.files {
            tombs.extend_from_slice(f.range_tombstones());
            let skip = !f.overlaps(&q.lo, &q.hi)
                || !f.ts_overlaps(q.from, q.to)
                || q.exact_key.is_some_and(|k| !f.may_contain_key(&k))
                || q.device.is_some_and(|d| !f.may_contain_device(d));
            if !skip {
                stats.files_read += 1;
                let pf = Some(self.shared.prefetch.clone());
                let src = match q.first_rows {
                    true => FileSource::first_rows(f.clone(), q.lo, q.hi, pf)?,
                    false => FileSource::new(f.clone(), q.lo, q.hi, pf)?,
                };
                sources.push(Box::new(src));
            }
        }
        if let Some(d) = q.device {
            tombs.retain(|t| t.device == d);
        }
        let o = &t.schema.options;
        let now = self.shared.opts.clock.now_ms();
        let vis = Visibility {
            from: q.from,
            to: q.to,
            ttl_cutoff: o.ttl_ms.map(|ttl| now.saturating_sub(ttl)),
            versions: q.versions.clamp(1, o.max_versions),
            tombstones: Visibility::group(tombs.into_iter().filter(|t| t.seq <= read_seq)),
            read_seq,
        };
        stats.rows = merge_visible(sources, &vis, visit)?;
        r.stats.on_read(now, stats.rows);
        Ok(stats)
    }

    /// The newest visible version of `(device, ts)`.
    pub fn get(&self, table: &str, device: u64, ts: i64) -> Result<Option<Row>> {
        Ok(self.get_versions(table, device, ts, 1)?.into_iter().next())
    }

    /// Up to `versions` (capped by the table's `max_versions`) visible
    /// versions of `(device, ts)`, newest first.
    pub fn get_versions(
        &self,
        table: &str,
        device: u64,
        ts: i64,
        versions: u32,
    ) -> Result<Vec<Row>> {
        let t = self.read_table(table)?;
        let k = key::encode(DeviceId(device), ts);
        let q = Query {
            lo: k,
            hi: k,
            from: ts,
            to: ts,
            device: Some(DeviceId(device)),
            exact_key: Some(k),
            versions,
            first_rows: true,
        };
        let mut out = Vec::new();
        self.run(&t, &q, |r| {
            out.push(r.into());
            true
        })?;
        Ok(out)
    }

    /// The newest `n` readings of a device (one seek: keys are newest first).
    pub fn latest(&self, table: &str, device: u64, n: usize) -> Result<Vec<Row>> {
        let mut out = Vec::new();
        if n == 0 {
            return Ok(out);
        }
        let t = self.read_table(table)?;
        let mut q = Self::device_query(device, i64::MIN, i64::MAX);
        q.first_rows = n == 1;
        self.run(&t, &q, |r| {
            out.push(r.into());
            out.len() < n
        })?;
        Ok(out)
    }

    /// The query of a device's readings in `[from, to]` (`from <= to`).
    fn device_query(device: u64, from: i64, to: i64) -> Query {
        let (lo, hi) = key::device_range(DeviceId(device), from, to).expect("from <= to checked");
        Query {
            lo,
            hi,
            from,
            to,
            device: Some(DeviceId(device)),
            exact_key: None,
            versions: 1,
            first_rows: false,
        }
    }

    /// A device's readings with `from <= ts <= to` (both inclusive).
    pub fn scan(
        &self,
        table: &str,
        device: u64,
        from: i64,
        to: i64,
        order: Order,
    ) -> Result<Vec<Row>> {
        let mut out = Vec::new();
        self.scan_with(table, device, from, to, order, |r| {
            out.push(r.into());
            true
        })?;
        Ok(out)
    }

    /// Visit a device's readings in `[from, to]` until `visit` returns
    /// false. `OldestFirst` gathers the window in memory, then reverses.
    pub fn scan_with(
        &self,
        table: &str,
        device: u64,
        from: i64,
        to: i64,
        order: Order,
        mut visit: impl FnMut(RowView<'_>) -> bool,
    ) -> Result<ReadStats> {
        let t = self.read_table(table)?;
        if from > to {
            return Err(Error::invalid(
                "time range",
                format!("from {from} > to {to}"),
            ));
        }
        let q = Self::device_query(device, from, to);
        match order {
            Order::NewestFirst => self.run(&t, &q, visit),
            Order::OldestFirst => {
                let mut rows: Vec<Row> = Vec::new();
                let stats = self.run(&t, &q, |r| {
                    rows.push(r.into());
                    true
                })?;
                for r in rows.iter().rev() {
                    if !visit(r.view()) {
                        break;
                    }
                }
                Ok(stats)
            }
        }
    }

    /// Visit every device's readings with `from <= ts <= to`, in key order
    /// (by hash prefix, then device, each device newest first), until
    /// `visit` returns false. One sub-scan per region runs on up to
    /// `scan_threads` workers; since regions are contiguous key ranges,
    /// handing their results over in region order *is* key order, so the
    /// merge costs only a bounded buffer per running sub-scan.
    pub fn scan_all(
        &self,
        table: &str,
        from: i64,
        to: i64,
        visit: impl FnMut(RowView<'_>) -> bool,
    ) -> Result<ReadStats> {
        let t = self.read_table(table)?;
        if from > to {
            return Err(Error::invalid(
                "time range",
                format!("from {from} > to {to}"),
            ));
        }
        let q = Query {
            lo: [0; KEY_LEN],
            hi: KEY_MAX,
            from,
            to,
            device: None,
            exact_key: None,
            versions: 1,
            first_rows: false,
        };
        parallel::scan(self, &t, &q, visit)
    }
}

impl ReadStats {
    fn add(&mut self, o: &ReadStats) {
        self.regions += o.regions;
        self.memstores += o.memstores;
        self.files_considered += o.files_considered;
        self.files_read += o.files_read;
        self.rows += o.rows;
    }
}

/// The parallel table-wide scan.
mod parallel {
    use super::*;
    use crossbeam_channel::{bounded, Receiver, Sender};
    use std::sync::atomic::AtomicUsize;

    /// Rows per chunk handed from a worker to the caller.
    const CHUNK_ROWS: usize = 4096;
    /// Chunks buffered per region ahead of the caller.
    const CHUNKS_AHEAD: usize = 2;

    /// Rows of one region, packed: `device u64 | ts i64 | seq u64 | fields`.
    enum Msg {
        Rows(Vec<u8>),
        Done(Result<ReadStats>),
    }

    pub(super) fn scan(
        store: &Store,
        t: &Table,
        q: &Query,
        mut visit: impl FnMut(RowView<'_>) -> bool,
    ) -> Result<ReadStats> {
        // As in `Store::run`: applied up to now, then list the regions.
        store.shared.gate.wait_caught_up();
        let regions = t.regions();
        // All regions are snapshotted now, not when their sub-scan starts:
        // the scan is one point in time however slowly it is consumed.
        let (read_seq, states) = t.read_snapshot(&store.shared.gate, &regions);
        let fw = t.schema.fields_width();
        let (senders, receivers): (Vec<Sender<Msg>>, Vec<Receiver<Msg>>) =
            regions.iter().map(|_| bounded(CHUNKS_AHEAD)).unzip();
        let next = AtomicUsize::new(0);
        let workers = store.shared.opts.scan_threads.min(regions.len()).max(1);
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let (Some(r), Some(st), Some(tx)) =
                        (regions.get(i), states.get(i), senders.get(i))
                    else {
                        break;
                    };
                    let st = st.clone();
                    let run = std::panic::AssertUnwindSafe(|| {
                        worker(store, t, r, st, q, read_seq, fw, tx)
                    });
                    let alive = std::panic::catch_unwind(run).unwrap_or_else(|_| {
                        let e = Error::invalid("scan", "a scan worker panicked (a bug)");
                        tx.send(Msg::Done(Err(e))).is_ok()
                    });
                    if !alive {
                        break;
                    }
                });
            }
            let mut total = ReadStats::default();
            let res = consume(&receivers, fw, &mut visit, &mut total);
            // Stop the workers: every send fails once its receiver is gone.
            next.store(usize::MAX / 2, Ordering::Relaxed);
            drop(receivers);
            res.map(|()| total)
        })
    }

    /// Scan one region into its channel; false when the caller stopped.
    #[allow(clippy::too_many_arguments)]
    fn worker(
        store: &Store,
        t: &Table,
        r: &Region,
        st: TableState,
        q: &Query,
        read_seq: u64,
        fw: usize,
        tx: &Sender<Msg>,
    ) -> bool {
        let Some((lo, hi)) = region::clip(&q.lo, &q.hi, &r.start, r.end.as_ref()) else {
            return tx.send(Msg::Done(Ok(ReadStats::default()))).is_ok();
        };
        let sub = Query { lo, hi, ..*q };
        let row = 24 + fw;
        let mut buf = Vec::with_capacity(CHUNK_ROWS * row);
        let mut alive = true;
        let res = store.run_region(t, r, st, &sub, read_seq, |v| {
            buf.extend_from_slice(&v.device.0.to_le_bytes());
            buf.extend_from_slice(&v.ts.to_le_bytes());
            buf.extend_from_slice(&v.seq.to_le_bytes());
            buf.extend_from_slice(v.fields);
            if buf.len() >= CHUNK_ROWS * row {
                let full = std::mem::replace(&mut buf, Vec::with_capacity(CHUNK_ROWS * row));
                alive = tx.send(Msg::Rows(full)).is_ok();
            }
            alive
        });
        if !buf.is_empty() && alive {
            alive = tx.send(Msg::Rows(buf)).is_ok();
        }
        alive && tx.send(Msg::Done(res)).is_ok()
    }

    fn consume(
        receivers: &[Receiver<Msg>],
        fw: usize,
        visit: &mut impl FnMut(RowView<'_>) -> bool,
        total: &mut ReadStats,
    ) -> Result<()> {
        let le = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
        for rx in receivers {
            loop {
                match rx.recv() {
                    Ok(Msg::Rows(b)) => {
                        for c in b.chunks_exact(24 + fw) {
                            let v = RowView {
                                device: DeviceId(le(&c[0..8])),
                                ts: le(&c[8..16]) as i64,
                                seq: le(&c[16..24]),
                                fields: &c[24..],
                            };
                            if !visit(v) {
                                return Ok(());
                            }
                        }
                    }
                    Ok(Msg::Done(r)) => {
                        total.add(&r?);
                        break;
                    }
                    Err(_) => return Err(Error::invalid("scan", "a scan worker stopped")),
                }
            }
        }
        Ok(())
    }
}
