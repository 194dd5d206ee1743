//! Reads: point gets, latest-N, device time ranges and full-table time
//! scans, merged over memstores and HFiles with newest-version-wins,
//! tombstones, TTL and version limits.

use super::region::{Region, RegionVersion};
use super::table::Table;
use super::Store;
use crate::cell::RangeTombstone;
use crate::error::{Error, Result};
use crate::hfile::columns::{slots_of, BlockColumns, FieldSlot};
use crate::hfile::writer::KEY_MAX;
use crate::hfile::HFileReader;
use crate::key::{self, DeviceId, RowKey, KEY_LEN};
use crate::read::columns::{self, Piece, RunSlice};
use crate::read::source::{CellSource, FileSource, MemSource};
use crate::read::{merge_visible, Order, Row, RowView, Visibility};
use crate::region;
use crate::schema::BlockEncoding;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What a read touched (for tests and benchmarks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Regions the read touched.
    pub regions: usize,
    /// Memstores read.
    pub memstores: usize,
    /// HFiles whose key range overlapped the read.
    pub files_considered: usize,
    /// HFiles read (the others were skipped by key or time range, or by
    /// their bloom filter).
    pub files_read: usize,
    /// Rows returned.
    pub rows: u64,
}

/// A read of one region: the region, its snapshot state, the query
/// clipped to it, the read's sequence number, and a flag to clear to
/// stop the read.
type RegionRun<'a> =
    dyn FnMut(&Region, Arc<RegionVersion>, &Query, u64, &mut bool) -> Result<ReadStats> + 'a;

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
        self.shared.catalog.table(table)
    }

    /// The table of a read over `[from, to]`, which must not be reversed.
    fn range_table(&self, table: &str, from: i64, to: i64) -> Result<Arc<Table>> {
        let t = self.read_table(table)?;
        if from > to {
            return Err(Error::invalid(
                "time range",
                format!("from {from} > to {to}"),
            ));
        }
        Ok(t)
    }

    /// Run `q` over every region it reaches, in key order.
    fn run(
        &self,
        t: &Table,
        q: &Query,
        mut visit: impl FnMut(RowView<'_>) -> bool,
    ) -> Result<ReadStats> {
        self.each_region(t, q, &mut |r, st, sub, read_seq, more| {
            self.run_region(t, r, st, sub, read_seq, |v| {
                *more = visit(v);
                *more
            })
        })
    }

    /// [`Store::run`] as a batch read of the fields in `slots`.
    fn run_pieces(
        &self,
        t: &Table,
        q: &Query,
        slots: &Arc<[FieldSlot]>,
        visit: &mut dyn FnMut(Piece<'_>) -> bool,
    ) -> Result<ReadStats> {
        self.each_region(t, q, &mut |r, st, sub, read_seq, more| {
            let mut v = |p: Piece<'_>| {
                *more = visit(p);
                *more
            };
            self.run_region_pieces(t, r, st, sub, read_seq, slots, &mut v)
        })
    }

    /// Call `each` with every region `q` reaches (in key order, `q`
    /// clipped to it, one snapshot for all) until it clears its `more`.
    fn each_region(&self, t: &Table, q: &Query, each: &mut RegionRun<'_>) -> Result<ReadStats> {
        // Every write acknowledged before this point is applied before the
        // regions are listed (a split meanwhile moves pending writes to
        // the daughters, not to the parents a read would have listed).
        self.shared.write.gate.wait_caught_up();
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
        let (read_seq, states) = t.read_snapshot(&self.shared.write.gate, &regions);
        let mut total = ReadStats::default();
        let mut more = true;
        for (r, st) in regions.iter().zip(states) {
            let Some((lo, hi)) = region::clip(&q.lo, &q.hi, &r.start, r.end.as_ref()) else {
                continue;
            };
            let sub = Query { lo, hi, ..*q };
            let st = each(r, st, &sub, read_seq, &mut more)?;
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
        st: Arc<RegionVersion>,
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
            sources.push(Box::new(MemSource::new(
                m.clone(),
                q.lo,
                q.hi,
                (q.from, q.to),
            )));
        }
        for f in &st.files {
            tombs.extend_from_slice(f.range_tombstones());
            if wants_file(f, q) {
                stats.files_read += 1;
                let pf = Some(self.shared.background.prefetch.clone());
                let src = match q.first_rows {
                    true => FileSource::first_rows(f.clone(), q.lo, q.hi, pf)?,
                    false => FileSource::new(f.clone(), q.lo, q.hi, pf)?,
                };
                sources.push(Box::new(src));
            }
        }
        let (vis, now) = self.visibility(t, q, read_seq, tombs);
        stats.rows = merge_visible(sources, &vis, visit)?;
        r.stats.on_read(now, stats.rows);
        Ok(stats)
    }

    /// The visibility rules of `q` at `read_seq`, with the range
    /// tombstones that apply to it; and the clock's now.
    fn visibility(
        &self,
        t: &Table,
        q: &Query,
        read_seq: u64,
        mut tombs: Vec<RangeTombstone>,
    ) -> (Visibility, i64) {
        if let Some(d) = q.device {
            tombs.retain(|t| t.device == d);
        }
        let o = &t.schema.options;
        let now = self.shared.opts.clock.now_ms();
        let vis = Visibility {
            from: q.from,
            to: q.to,
            ttl_cutoff: o.ttl_cutoff(now),
            versions: q.versions.clamp(1, o.max_versions),
            tombstones: Visibility::group(tombs.into_iter().filter(|t| t.seq <= read_seq)),
            read_seq,
        };
        (vis, now)
    }

    /// Run `q` over one region as a batch read: as columns
    /// ([`columns::scan_file`]) when one columnar HFile is the region's
    /// only source for `q`, else row by row through the merge.
    #[allow(clippy::too_many_arguments)]
    fn run_region_pieces(
        &self,
        t: &Table,
        r: &Region,
        st: Arc<RegionVersion>,
        q: &Query,
        read_seq: u64,
        slots: &Arc<[FieldSlot]>,
        visit: &mut dyn FnMut(Piece<'_>) -> bool,
    ) -> Result<ReadStats> {
        let Some(file) = only_columnar_source(&st, q, read_seq) else {
            return self.run_region(t, r, st, q, read_seq, |v| visit(Piece::Row(v)));
        };
        let (vis, now) = self.visibility(t, q, read_seq, Vec::new());
        let pf = self.shared.background.prefetch.clone();
        let rows = columns::scan_file(&file, &q.lo, &q.hi, &vis, slots, Some(&pf), visit)?;
        r.stats.on_read(now, rows);
        Ok(ReadStats {
            regions: 1,
            memstores: 1 + st.frozen.len(),
            files_considered: st.files.len(),
            files_read: 1,
            rows,
        })
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

    /// The newest `n` readings of a device (one seek: keys are newest
    /// first). The newest one alone comes from the table's latest-row
    /// cache when the device is in it (`latest.rs`), and fills it when not.
    pub fn latest(&self, table: &str, device: u64, n: usize) -> Result<Vec<Row>> {
        let mut out = Vec::new();
        if n == 0 {
            return Ok(out);
        }
        let t = self.read_table(table)?;
        let mut fill = None;
        if n == 1 {
            // Every acknowledged write is applied, and so in the cache.
            self.shared.write.gate.wait_caught_up();
            if let Some(r) = t.latest.get(device) {
                return Ok(self.cached_latest(&t, r));
            }
            // The ticket is taken before the read below waits for the
            // writes logged so far: any edit the apply thread noted
            // before the ticket is in that read's snapshot.
            fill = t.latest.begin_fill(device);
        }
        let mut q = Self::device_query(device, i64::MIN, i64::MAX);
        q.first_rows = n == 1;
        self.run(&t, &q, |r| {
            out.push(r.into());
            out.len() < n
        })?;
        if let Some(f) = fill {
            f.finish(out.first());
        }
        Ok(out)
    }

    /// A cached newest row, unless the TTL has expired it (then every
    /// older row has expired too); counted as a read of its region.
    fn cached_latest(&self, t: &Table, r: Row) -> Vec<Row> {
        let now = self.shared.opts.clock.now_ms();
        let live = t
            .schema
            .options
            .ttl_cutoff(now)
            .is_none_or(|cut| r.ts >= cut);
        let k = key::encode(DeviceId(r.device), r.ts);
        let regions = t.regions();
        let i = regions.partition_point(|x| x.start <= k).saturating_sub(1);
        if let Some(region) = regions.get(i) {
            region.stats.on_read(now, live as u64);
        }
        if live {
            vec![r]
        } else {
            Vec::new()
        }
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
        let t = self.range_table(table, from, to)?;
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
        mut visit: impl FnMut(RowView<'_>) -> bool,
    ) -> Result<ReadStats> {
        let t = self.range_table(table, from, to)?;
        parallel::scan(self, &t, &whole_table(from, to), None, |p| match p {
            Piece::Row(v) => visit(v),
            Piece::Run(_) => unreachable!("runs come only from batch reads"),
        })
    }

    /// A batch read of `[from, to]` (inclusive) for the query layer: one
    /// device's readings or (`device` = `None`) every device's, in key
    /// order, each device newest first, with the table's fields `fields`
    /// (indexes, in output order). A region whose only source is a
    /// columnar HFile hands over [`Piece::Run`]s holding just those
    /// fields, decoded as columns; other regions hand over
    /// [`Piece::Row`]s (all the row's field bytes). `visit` returns false
    /// to stop.
    pub fn scan_pieces(
        &self,
        table: &str,
        device: Option<u64>,
        from: i64,
        to: i64,
        fields: &[usize],
        visit: impl FnMut(Piece<'_>) -> bool,
    ) -> Result<ReadStats> {
        if device.is_some() {
            return self.scan_pieces_in(table, &KeySpan::ALL, device, from, to, fields, visit);
        }
        let t = self.range_table(table, from, to)?;
        let slots = slots_of(&t.schema, fields)?;
        parallel::scan(self, &t, &whole_table(from, to), Some(slots), visit)
    }
}

/// A contiguous slice of a table's key space, `[start, end)` (`end`
/// `None`: to the end of the key space): a region's range when it was
/// listed. Flight tickets and SQL partitions name the keys they read by
/// span rather than by region id, so a split or merge between planning
/// and reading changes nothing about which rows they return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpan {
    /// The first key, included.
    pub start: RowKey,
    /// The key after the last (`None`: to the end).
    pub end: Option<RowKey>,
}

impl KeySpan {
    /// The whole key space.
    pub const ALL: KeySpan = KeySpan {
        start: [0; KEY_LEN],
        end: None,
    };

    /// Could the span hold a key of `device`?
    pub fn may_hold(&self, device: u64) -> bool {
        let d = DeviceId(device);
        region::clip(
            &key::encode(d, i64::MAX),
            &key::encode(d, i64::MIN),
            &self.start,
            self.end.as_ref(),
        )
        .is_some()
    }
}

impl Store {
    /// The key spans of `table`'s regions that may hold a cell with
    /// `from <= ts <= to` (of one of `devices`, when given), in key order:
    /// a region with anything in a memstore, or with a file overlapping
    /// its keys and the window.
    pub fn spans_with_data(
        &self,
        table: &str,
        from: i64,
        to: i64,
        devices: Option<&[u64]>,
    ) -> Result<Vec<KeySpan>> {
        let t = self.range_table(table, from, to)?;
        self.shared.write.gate.wait_caught_up();
        let mut out = Vec::new();
        for r in t.regions().iter() {
            let span = KeySpan {
                start: r.start,
                end: r.end,
            };
            if devices.is_some_and(|ids| !ids.iter().any(|&d| span.may_hold(d))) {
                continue;
            }
            let Some((lo, hi)) = region::clip(&[0; KEY_LEN], &KEY_MAX, &r.start, r.end.as_ref())
            else {
                continue;
            };
            let st = r.version();
            let in_memory = std::iter::once(&st.active)
                .chain(st.frozen.iter())
                .any(|m| !m.is_empty());
            let in_files = st
                .files
                .iter()
                .any(|f| f.overlaps(&lo, &hi) && f.ts_overlaps(from, to));
            if in_memory || in_files {
                out.push(span);
            }
        }
        Ok(out)
    }

    /// [`Store::scan_pieces`] of the keys in `span` only, read in the
    /// calling thread (the caller runs spans in parallel).
    #[allow(clippy::too_many_arguments)]
    pub fn scan_pieces_in(
        &self,
        table: &str,
        span: &KeySpan,
        device: Option<u64>,
        from: i64,
        to: i64,
        fields: &[usize],
        mut visit: impl FnMut(Piece<'_>) -> bool,
    ) -> Result<ReadStats> {
        let t = self.range_table(table, from, to)?;
        let slots = slots_of(&t.schema, fields)?;
        let q = match device {
            Some(d) => Self::device_query(d, from, to),
            None => whole_table(from, to),
        };
        let Some((lo, hi)) = region::clip(&q.lo, &q.hi, &span.start, span.end.as_ref()) else {
            return Ok(ReadStats::default());
        };
        self.run_pieces(&t, &Query { lo, hi, ..q }, &slots, &mut visit)
    }
}

/// Every key, over `[from, to]`.
fn whole_table(from: i64, to: i64) -> Query {
    Query {
        lo: [0; KEY_LEN],
        hi: KEY_MAX,
        from,
        to,
        device: None,
        exact_key: None,
        versions: 1,
        first_rows: false,
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

/// Could `f` hold cells `q` reads?
fn wants_file(f: &HFileReader, q: &Query) -> bool {
    f.overlaps(&q.lo, &q.hi)
        && f.ts_overlaps(q.from, q.to)
        && q.exact_key.is_none_or(|k| f.may_contain_key(&k))
        && q.device.is_none_or(|d| f.may_contain_device(d))
}

/// The one columnar HFile that is the only source of `q`'s cells in a
/// region, when it is: no memstore holds a cell in the range, no range
/// tombstone of the snapshot applies, one file is read and every cell of
/// it is in the snapshot (a batch read then needs no merge).
fn only_columnar_source(st: &RegionVersion, q: &Query, read_seq: u64) -> Option<Arc<HFileReader>> {
    let applies = |t: &RangeTombstone| t.seq <= read_seq && q.device.is_none_or(|d| t.device == d);
    let mut probe = Vec::new();
    for m in std::iter::once(&st.active).chain(st.frozen.iter()) {
        if m.copy_range(&q.lo, &q.hi, (q.from, q.to), None, 1, &mut probe) > 0
            || m.range_tombstones().iter().any(applies)
        {
            return None;
        }
    }
    if st
        .files
        .iter()
        .any(|f| f.range_tombstones().iter().any(applies))
    {
        return None;
    }
    let mut read = st.files.iter().filter(|f| wants_file(f, q));
    let f = read.next()?;
    let alone = read.next().is_none();
    let columnar = f.info().encoding == BlockEncoding::Columnar;
    (alone && columnar && f.info().max_seq <= read_seq).then(|| f.clone())
}

/// The parallel table-wide scan.
mod parallel {
    use super::*;
    use crossbeam_channel::{bounded, Receiver, Sender};
    use std::sync::atomic::AtomicUsize;

    /// Rows per chunk handed from a worker to the caller.
    const CHUNK_ROWS: usize = 4096;
    /// Rows per message of runs: they share the cached columns instead of
    /// copying them, so a region can run further ahead of the caller.
    const RUN_CHUNK_ROWS: usize = 8 * CHUNK_ROWS;
    /// Chunks buffered per region ahead of the caller.
    const CHUNKS_AHEAD: usize = 2;

    /// What a worker hands over, in key order.
    enum Msg {
        /// Rows packed as `device u64 | ts i64 | seq u64 | fields`.
        Rows(Vec<u8>),
        /// Device runs as columns.
        Runs(Runs),
        Done(Result<ReadStats>),
    }

    /// Runs of a batch read, each holding its block's columns (shared
    /// with the cache, not copied) and its rows.
    #[derive(Default)]
    struct Runs {
        runs: Vec<(DeviceId, BlockColumns, (usize, usize))>,
        rows: usize,
    }

    impl Runs {
        fn push(&mut self, r: &RunSlice<'_>) {
            self.runs.push((r.device, r.block.clone(), r.rows));
            self.rows += r.len();
        }

        /// Hand each run to `visit`; false when it stopped.
        fn visit(&self, visit: &mut impl FnMut(Piece<'_>) -> bool) -> bool {
            self.runs.iter().all(|(device, block, rows)| {
                visit(Piece::Run(RunSlice {
                    device: *device,
                    block,
                    rows: *rows,
                }))
            })
        }
    }

    pub(super) fn scan(
        store: &Store,
        t: &Table,
        q: &Query,
        slots: Option<Arc<[FieldSlot]>>,
        mut visit: impl FnMut(Piece<'_>) -> bool,
    ) -> Result<ReadStats> {
        // As in `Store::run`: applied up to now, then list the regions.
        store.shared.write.gate.wait_caught_up();
        let regions = t.regions();
        // All regions are snapshotted now, not when their sub-scan starts:
        // the scan is one point in time however slowly it is consumed.
        let (read_seq, states) = t.read_snapshot(&store.shared.write.gate, &regions);
        let fw = t.schema.fields_width();
        let (senders, receivers): (Vec<Sender<Msg>>, Vec<Receiver<Msg>>) =
            regions.iter().map(|_| bounded(CHUNKS_AHEAD)).unzip();
        let next = AtomicUsize::new(0);
        let workers = store.shared.opts.scan_threads.min(regions.len()).max(1);
        let job = Job {
            store,
            t,
            q,
            read_seq,
            fw,
            slots: slots.as_ref(),
        };
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
                    let run = std::panic::AssertUnwindSafe(|| job.region(r, st, tx));
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

    /// What every region's sub-scan shares.
    struct Job<'a> {
        store: &'a Store,
        t: &'a Table,
        q: &'a Query,
        read_seq: u64,
        fw: usize,
        /// Set for a batch read.
        slots: Option<&'a Arc<[FieldSlot]>>,
    }

    impl Job<'_> {
        /// Scan one region into its channel; false when the caller stopped.
        fn region(&self, r: &Region, st: Arc<RegionVersion>, tx: &Sender<Msg>) -> bool {
            let Some((lo, hi)) = region::clip(&self.q.lo, &self.q.hi, &r.start, r.end.as_ref())
            else {
                return tx.send(Msg::Done(Ok(ReadStats::default()))).is_ok();
            };
            let sub = Query { lo, hi, ..*self.q };
            let row = 24 + self.fw;
            let mut rows = Vec::with_capacity(CHUNK_ROWS * row);
            let mut runs = Runs::default();
            let mut alive = true;
            // Whichever buffer is not being filled is sent first, so the
            // caller sees pieces in key order.
            let mut piece = |p: Piece<'_>| {
                match p {
                    Piece::Row(v) => {
                        if runs.rows > 0 {
                            alive &= tx.send(Msg::Runs(std::mem::take(&mut runs))).is_ok();
                        }
                        rows.extend_from_slice(&v.device.0.to_le_bytes());
                        rows.extend_from_slice(&v.ts.to_le_bytes());
                        rows.extend_from_slice(&v.seq.to_le_bytes());
                        rows.extend_from_slice(v.fields);
                        if rows.len() >= CHUNK_ROWS * row {
                            let full =
                                std::mem::replace(&mut rows, Vec::with_capacity(CHUNK_ROWS * row));
                            alive &= tx.send(Msg::Rows(full)).is_ok();
                        }
                    }
                    Piece::Run(r) => {
                        if !rows.is_empty() {
                            alive &= tx.send(Msg::Rows(std::mem::take(&mut rows))).is_ok();
                        }
                        runs.push(&r);
                        if runs.rows >= RUN_CHUNK_ROWS {
                            alive &= tx.send(Msg::Runs(std::mem::take(&mut runs))).is_ok();
                        }
                    }
                }
                alive
            };
            let (store, t, seq) = (self.store, self.t, self.read_seq);
            let res = match self.slots {
                Some(slots) => store.run_region_pieces(t, r, st, &sub, seq, slots, &mut piece),
                None => store.run_region(t, r, st, &sub, seq, |v| piece(Piece::Row(v))),
            };
            if alive && !rows.is_empty() {
                alive = tx.send(Msg::Rows(rows)).is_ok();
            }
            if alive && runs.rows > 0 {
                alive = tx.send(Msg::Runs(runs)).is_ok();
            }
            alive && tx.send(Msg::Done(res)).is_ok()
        }
    }

    fn consume(
        receivers: &[Receiver<Msg>],
        fw: usize,
        visit: &mut impl FnMut(Piece<'_>) -> bool,
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
                            if !visit(Piece::Row(v)) {
                                return Ok(());
                            }
                        }
                    }
                    Ok(Msg::Runs(r)) => {
                        if !r.visit(visit) {
                            return Ok(());
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
