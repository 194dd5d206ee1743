//! The memstore: a table's in-memory sorted buffer of recent cells, ordered
//! by (row key asc, sequence desc). Written by the commit thread, read
//! concurrently; readers copy out bounded chunks of cells so a long scan
//! never holds the lock for long. Frozen memstores keep serving reads until
//! their HFile is durable and recorded in the manifest.

use crate::cell::{self, CellKind, RangeTombstone, CELL_HEAD_LEN};
use crate::key::{self, DeviceId, RowKey};
use crate::schema::Batch;
use crate::util::sync::RwLockExt;
mod map;

use map::{CellMap, Edge, MemKey};
use std::cmp::Reverse;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::RwLock;

/// A [`Memstore::copy_range`] window that skips nothing.
pub const ALL_TIME: (i64, i64) = (i64::MIN, i64::MAX);

/// Per-cell bookkeeping cost charged on top of the cell bytes.
const CELL_OVERHEAD_BYTES: usize = 48;

/// The map key ([`MemKey`]): the row key split into integers
/// (comparisons are a few integer compares instead of a `memcmp` call),
/// then sequence descending.
fn mem_key(k: &RowKey, seq: u64) -> MemKey {
    let mut hi = [0u8; 16];
    hi.copy_from_slice(&k[..16]);
    (
        u128::from_be_bytes(hi),
        u16::from_be_bytes([k[16], k[17]]),
        Reverse(seq),
    )
}

fn row_key(hi: u128, lo: u16) -> RowKey {
    let mut k = [0u8; crate::key::KEY_LEN];
    k[..16].copy_from_slice(&hi.to_be_bytes());
    k[16..].copy_from_slice(&lo.to_be_bytes());
    k
}

#[derive(Default)]
struct Inner {
    /// Value: kind and the offset of the fields in `arena` (u64: a
    /// memstore rebuilt from a long WAL may exceed 4 GiB).
    map: CellMap<(CellKind, u64)>,
    /// Field bytes of every put, appended; the map holds offsets.
    arena: Vec<u8>,
    range_dels: Vec<RangeTombstone>,
}

/// One memstore.
pub struct Memstore {
    fields_width: usize,
    inner: RwLock<Inner>,
    bytes: AtomicUsize,
    min_seq: AtomicU64,
    max_seq: AtomicU64,
    cells: AtomicUsize,
}

/// One put of a batch, keyed: its memstore key and its row in the batch.
#[derive(Clone, Copy, Debug)]
pub struct KeyedRow {
    mk: MemKey,
    row: u32,
}

impl KeyedRow {
    pub fn key(&self) -> RowKey {
        row_key(self.mk.0, self.mk.1)
    }
    pub fn seq(&self) -> u64 {
        self.mk.2 .0
    }
    /// The row's index in its batch.
    pub fn row(&self) -> usize {
        self.row as usize
    }
    /// Is this row's key before `k`?
    pub fn before(&self, k: &RowKey) -> bool {
        self.mk < mem_key(k, u64::MAX)
    }
}

/// Key every row of `batch` (numbered from `first_seq`) and sort them in
/// memstore order (key ascending, sequence descending).
pub fn keyed_rows(first_seq: u64, batch: &Batch<'_>) -> Vec<KeyedRow> {
    let mut keys = Vec::with_capacity(batch.len());
    let mut last = (u64::MAX, 0u16);
    for (i, (head, _)) in batch.rows().enumerate() {
        if head.device != last.0 {
            last = (head.device, key::prefix(DeviceId(head.device)));
        }
        let k = key::encode_with_prefix(last.1, DeviceId(head.device), head.ts);
        keys.push(KeyedRow {
            mk: mem_key(&k, first_seq + i as u64),
            row: i as u32,
        });
    }
    keys.sort_unstable_by_key(|r| r.mk);
    keys
}

impl Memstore {
    pub fn new(fields_width: usize) -> Self {
        Memstore {
            fields_width,
            inner: RwLock::new(Inner::default()),
            bytes: AtomicUsize::new(0),
            min_seq: AtomicU64::new(u64::MAX),
            max_seq: AtomicU64::new(0),
            cells: AtomicUsize::new(0),
        }
    }

    /// Approximate memory use in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }
    /// Highest sequence number inserted (0 when empty).
    pub fn max_seq(&self) -> u64 {
        self.max_seq.load(Ordering::Relaxed)
    }
    /// Lowest sequence number inserted (`u64::MAX` when empty).
    pub fn min_seq(&self) -> u64 {
        self.min_seq.load(Ordering::Relaxed)
    }
    /// Number of cells (puts and tombstones).
    pub fn cell_count(&self) -> usize {
        self.cells.load(Ordering::Relaxed)
    }
    pub fn is_empty(&self) -> bool {
        self.cell_count() == 0 && self.read().range_dels.is_empty()
    }
    pub fn fields_width(&self) -> usize {
        self.fields_width
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read_or_recover()
    }
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write_or_recover()
    }

    fn account(&self, n: usize, first_seq: u64, last_seq: u64) {
        self.min_seq.fetch_min(first_seq, Ordering::Relaxed);
        self.cells.fetch_add(n, Ordering::Relaxed);
        self.bytes.fetch_add(
            n * (cell::cell_width(self.fields_width) + CELL_OVERHEAD_BYTES),
            Ordering::Relaxed,
        );
        self.max_seq.fetch_max(last_seq, Ordering::Relaxed);
    }

    /// Insert a batch of puts numbered from `first_seq`.
    pub fn insert_puts(&self, first_seq: u64, batch: &Batch<'_>) {
        self.insert_rows(batch, &keyed_rows(first_seq, batch));
    }

    /// Insert the rows of `batch` that `rows` (sorted, from [`keyed_rows`])
    /// names. Sorted keys walk neighbouring tree paths (far fewer cache
    /// misses than random order) and keep the write lock short.
    pub fn insert_rows(&self, batch: &Batch<'_>, rows: &[KeyedRow]) {
        if rows.is_empty() {
            return;
        }
        debug_assert_eq!(
            batch.width() - crate::schema::ROW_HEAD_LEN,
            self.fields_width
        );
        let width = self.fields_width;
        let (mut lo, mut hi) = (u64::MAX, 0);
        let mut g = self.write();
        let inner = &mut *g;
        inner.arena.reserve(rows.len() * width);
        // Descending: a device's rows of one batch then arrive oldest
        // first (keys hold the reversed timestamp), so each one is below
        // the device's smallest key and is a push onto its vector
        // (`map::Cells`); ascending, every row after a device's first in
        // the batch went the slow way (a search, then the side tree).
        for r in rows.iter().rev() {
            let off = inner.arena.len() as u64;
            inner.arena.extend_from_slice(batch.fields(r.row as usize));
            inner.map.insert(r.mk, (CellKind::Put, off));
            lo = lo.min(r.seq());
            hi = hi.max(r.seq());
        }
        drop(g);
        self.account(rows.len(), lo, hi);
    }

    /// Insert point tombstones `(key, seq)`.
    pub fn insert_deletes(&self, points: &[(RowKey, u64)]) {
        if points.is_empty() {
            return;
        }
        let (mut lo, mut hi) = (u64::MAX, 0);
        let mut g = self.write();
        for (k, seq) in points {
            g.map.insert(mem_key(k, *seq), (CellKind::Delete, 0));
            lo = lo.min(*seq);
            hi = hi.max(*seq);
        }
        drop(g);
        self.account(points.len(), lo, hi);
    }

    /// A new memstore holding this one's cells with keys in `[lo, hi]` and
    /// the range tombstones that reach into it; it keeps this memstore's
    /// highest sequence number (used when a region splits).
    pub fn copy_range_into_new(&self, lo: &RowKey, hi: &RowKey) -> Memstore {
        let out = Memstore::new(self.fields_width);
        let g = self.read();
        let (from, to) = (
            Edge::Included(mem_key(lo, u64::MAX)),
            Edge::Included(mem_key(hi, 0)),
        );
        let (mut n, mut min) = (0, u64::MAX);
        {
            let mut o = out.write();
            let o = &mut *o;
            for (k, (kind, off)) in g.map.range(from, to) {
                let new_off = o.arena.len() as u64;
                if *kind == CellKind::Put {
                    let at = *off as usize;
                    o.arena
                        .extend_from_slice(&g.arena[at..at + self.fields_width]);
                }
                o.map.insert(k, (*kind, new_off));
                min = min.min(k.2 .0);
                n += 1;
            }
            for rt in &g.range_dels {
                let reaches = key::device_range(rt.device, rt.from, rt.to)
                    .is_some_and(|(a, b)| a <= *hi && b >= *lo);
                if reaches {
                    o.range_dels.push(*rt);
                    min = min.min(rt.seq);
                }
            }
        }
        if n > 0 || min != u64::MAX {
            out.account(n, min, self.max_seq());
        }
        out
    }

    /// Insert a range tombstone.
    pub fn insert_range_delete(&self, rt: RangeTombstone) {
        // Sequence bounds first: the tombstone must never be visible with
        // `min_seq` still unset (WAL retirement reads it).
        self.min_seq.fetch_min(rt.seq, Ordering::Relaxed);
        self.max_seq.fetch_max(rt.seq, Ordering::Relaxed);
        self.write().range_dels.push(rt);
        self.bytes.fetch_add(64, Ordering::Relaxed);
    }

    /// Range tombstones held.
    pub fn range_tombstones(&self) -> Vec<RangeTombstone> {
        self.read().range_dels.clone()
    }

    /// Copy up to `max` cells with keys in `[lo, hi]` and timestamps in
    /// `window` (inclusive) that come after `after` (exclusive, in cell
    /// order) into `out`, encoded as cells. Returns the number copied.
    /// Cells outside the window are skipped by seeking, not visited: past
    /// a device's cells newer than the window to its first cell inside
    /// it, and from its first cell older than the window to the next
    /// device.
    pub fn copy_range(
        &self,
        lo: &RowKey,
        hi: &RowKey,
        window: (i64, i64),
        after: Option<(RowKey, u64)>,
        max: usize,
        out: &mut Vec<u8>,
    ) -> usize {
        let g = self.read();
        let mut start = match after {
            Some((k, s)) => Edge::Excluded(mem_key(&k, s)),
            None => Edge::Included(mem_key(lo, u64::MAX)),
        };
        let last = mem_key(hi, 0);
        let (from, to) = window;
        let whole = window == ALL_TIME;
        let zero = vec![0u8; self.fields_width];
        let mut n = 0;
        'seek: while n < max {
            let empty = match &start {
                Edge::Excluded(s) => *s >= last,
                Edge::Included(s) => *s > last,
            };
            if empty {
                break;
            }
            for ((khi, klo, Reverse(seq)), (kind, off)) in g.map.range(start, Edge::Included(last))
            {
                let k = &row_key(khi, klo);
                if !whole {
                    let ts = key::ts_of(k);
                    if ts > to || ts < from {
                        let d = key::device_of(k);
                        start = match key::device_range(d, from, to) {
                            // Newer than the window: to its first cell.
                            Some((first, _)) if ts > to => {
                                Edge::Included(mem_key(&first, u64::MAX))
                            }
                            // Older (or an empty window): past the device.
                            _ => Edge::Excluded(mem_key(&key::encode(d, i64::MIN), 0)),
                        };
                        continue 'seek;
                    }
                }
                let fields = match kind {
                    CellKind::Put => {
                        let o = *off as usize;
                        &g.arena[o..o + self.fields_width]
                    }
                    CellKind::Delete => &zero[..],
                };
                cell::push(out, k, seq, *kind, fields);
                n += 1;
                if n == max {
                    break 'seek;
                }
            }
            break;
        }
        debug_assert!(out.len().is_multiple_of(CELL_HEAD_LEN + self.fields_width));
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::CellRef;
    use crate::schema::batch::push_row;

    #[test]
    fn newest_version_first_and_chunked_reads() {
        let m = Memstore::new(8);
        let mut buf = Vec::new();
        for ts in 0..10i64 {
            push_row(&mut buf, 5, ts, &(ts as f64).to_le_bytes());
        }
        m.insert_puts(1, &Batch::new(&buf, 24).unwrap());
        let mut buf2 = Vec::new();
        push_row(&mut buf2, 5, 3, &99f64.to_le_bytes());
        m.insert_puts(11, &Batch::new(&buf2, 24).unwrap());
        let (lo, hi) = key::device_range(DeviceId(5), 0, 9).unwrap();
        let mut out = Vec::new();
        let mut after = None;
        loop {
            let start = out.len();
            let n = m.copy_range(&lo, &hi, ALL_TIME, after, 4, &mut out);
            if n == 0 {
                break;
            }
            let last = CellRef(&out[out.len() - 35..]);
            after = Some((*last.key(), last.seq()));
            assert!(out.len() - start == n * 35);
        }
        let cells: Vec<_> = out.chunks(35).map(CellRef).collect();
        assert_eq!(cells.len(), 11);
        assert_eq!(cells[0].ts(), 9);
        let at3: Vec<_> = cells.iter().filter(|c| c.ts() == 3).collect();
        assert_eq!(at3[0].seq(), 11);
        assert_eq!(at3[1].seq(), 4);
        assert_eq!(m.max_seq(), 11);
    }

    /// Every cell of `m` in `[lo, hi]` and `window`, copied `chunk` at a
    /// time.
    fn copy_all(
        m: &Memstore,
        lo: &RowKey,
        hi: &RowKey,
        window: (i64, i64),
        chunk: usize,
    ) -> Vec<u8> {
        let (mut out, mut after) = (Vec::new(), None);
        let w = cell::cell_width(m.fields_width());
        while m.copy_range(lo, hi, window, after, chunk, &mut out) > 0 {
            let last = CellRef(&out[out.len() - w..]);
            after = Some((*last.key(), last.seq()));
        }
        out
    }

    /// A window copy equals the full copy with the cells outside the
    /// window removed: seeded devices, versions, deletes and windows,
    /// every chunk size.
    #[test]
    fn a_window_copy_skips_exactly_the_cells_outside_it() {
        let mut x = 0x5eed_u64;
        let mut next = |n: u64| {
            x = crate::util::hash::splitmix64(x);
            x % n
        };
        for round in 0..40u64 {
            let m = Memstore::new(8);
            let mut buf = Vec::new();
            for _ in 0..300 {
                push_row(
                    &mut buf,
                    next(12),
                    next(200) as i64 - 50,
                    &round.to_le_bytes(),
                );
            }
            m.insert_puts(1, &Batch::new(&buf, 24).unwrap());
            let dels: Vec<(RowKey, u64)> = (0..20)
                .map(|i| {
                    (
                        key::encode(DeviceId(next(12)), next(200) as i64 - 50),
                        1000 + i,
                    )
                })
                .collect();
            m.insert_deletes(&dels);
            let (a, b) = (next(220) as i64 - 60, next(220) as i64 - 60);
            let window = (a.min(b), a.max(b));
            let (lo, hi) = ([0u8; key::KEY_LEN], [0xffu8; key::KEY_LEN]);
            let want: Vec<u8> = copy_all(&m, &lo, &hi, ALL_TIME, 1 << 20)
                .chunks(35)
                .filter(|c| (window.0..=window.1).contains(&CellRef(c).ts()))
                .flatten()
                .copied()
                .collect();
            for chunk in [1, 3, 1024] {
                assert_eq!(
                    copy_all(&m, &lo, &hi, window, chunk),
                    want,
                    "round {round} chunk {chunk}"
                );
            }
            // One device's range, clipped by the same window.
            let d = DeviceId(next(12));
            let (dlo, dhi) = key::device_range(d, i64::MIN, i64::MAX).unwrap();
            let one: Vec<u8> = want
                .chunks(35)
                .filter(|c| key::device_of(CellRef(c).key()) == d)
                .flatten()
                .copied()
                .collect();
            assert_eq!(copy_all(&m, &dlo, &dhi, window, 2), one);
        }
    }

    /// Readings arriving in time order, several per device in a batch,
    /// are pushes onto the devices' vectors: nothing goes to the side
    /// trees (the slow path).
    #[test]
    fn in_order_batches_with_several_rows_per_device_stay_on_the_fast_path() {
        let m = Memstore::new(8);
        let mut seq = 1;
        for round in 0..20i64 {
            let mut buf = Vec::new();
            for d in 0..30u64 {
                for ts in [round * 3, round * 3 + 1, round * 3 + 2] {
                    push_row(&mut buf, d, ts, &ts.to_le_bytes());
                }
            }
            let b = Batch::new(&buf, 24).unwrap();
            m.insert_puts(seq, &b);
            seq += b.len() as u64;
        }
        assert_eq!(m.read().map.side_cells(), 0);
        let (lo, hi) = key::device_range(DeviceId(7), 0, 59).unwrap();
        let got = copy_all(&m, &lo, &hi, ALL_TIME, 7);
        let ts: Vec<i64> = got.chunks(35).map(|c| CellRef(c).ts()).collect();
        assert_eq!(ts, (0..60).rev().collect::<Vec<_>>());
    }
}
