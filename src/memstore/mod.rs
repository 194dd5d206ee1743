//! The memstore: a table's in-memory sorted buffer of recent cells, ordered
//! by (row key asc, sequence desc). Written by the commit thread, read
//! concurrently; readers copy out bounded chunks of cells so a long scan
//! never holds the lock for long. Frozen memstores keep serving reads until
//! their HFile is durable and recorded in the manifest.

use crate::cell::{self, CellKind, RangeTombstone, CELL_HEAD_LEN};
use crate::key::{self, DeviceId, RowKey};
use crate::schema::Batch;
use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::RwLock;

/// Per-cell bookkeeping cost charged on top of the cell bytes.
const CELL_OVERHEAD_BYTES: usize = 48;

/// The map key: the row key split into integers (comparisons are a few
/// integer compares instead of a `memcmp` call), then sequence descending.
type MemKey = (u128, u16, Reverse<u64>);

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
    map: BTreeMap<MemKey, (CellKind, u64)>,
    /// Field bytes of every put, appended; the map holds offsets.
    arena: Vec<u8>,
    range_dels: Vec<RangeTombstone>,
}

/// One memstore.
pub struct Memstore {
    fields_width: usize,
    inner: RwLock<Inner>,
    bytes: AtomicUsize,
    max_seq: AtomicU64,
    cells: AtomicUsize,
}

impl Memstore {
    pub fn new(fields_width: usize) -> Self {
        Memstore {
            fields_width,
            inner: RwLock::new(Inner::default()),
            bytes: AtomicUsize::new(0),
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
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    fn account(&self, n: usize, last_seq: u64) {
        self.cells.fetch_add(n, Ordering::Relaxed);
        self.bytes.fetch_add(
            n * (cell::cell_width(self.fields_width) + CELL_OVERHEAD_BYTES),
            Ordering::Relaxed,
        );
        self.max_seq.fetch_max(last_seq, Ordering::Relaxed);
    }

    /// Insert a batch of puts numbered from `first_seq`.
    pub fn insert_puts(&self, first_seq: u64, batch: &Batch<'_>) {
        debug_assert_eq!(
            batch.width() - crate::schema::ROW_HEAD_LEN,
            self.fields_width
        );
        // Keys are computed and sorted outside the lock: inserting in key
        // order walks neighbouring tree paths (far fewer cache misses than
        // random order) and keeps the write lock short.
        let mut keys = Vec::with_capacity(batch.len());
        let mut last = (u64::MAX, 0u16);
        for (i, (head, _)) in batch.rows().enumerate() {
            if head.device != last.0 {
                last = (head.device, key::prefix(DeviceId(head.device)));
            }
            let k = key::encode_with_prefix(last.1, DeviceId(head.device), head.ts);
            keys.push((mem_key(&k, first_seq + i as u64), i as u32));
        }
        keys.sort_unstable_by_key(|(k, _)| *k);
        let width = self.fields_width;
        let mut g = self.write();
        let inner = &mut *g;
        let base = inner.arena.len();
        inner.arena.reserve(batch.len() * width);
        for (_, fields) in batch.rows() {
            inner.arena.extend_from_slice(fields);
        }
        for (k, i) in keys {
            let off = (base + i as usize * width) as u64;
            inner.map.insert(k, (CellKind::Put, off));
        }
        drop(g);
        self.account(batch.len(), first_seq + batch.len() as u64 - 1);
    }

    /// Insert point tombstones numbered from `first_seq`.
    pub fn insert_deletes(&self, first_seq: u64, points: &[(DeviceId, i64)]) {
        let mut g = self.write();
        for (i, (d, ts)) in points.iter().enumerate() {
            let k = key::encode(*d, *ts);
            g.map
                .insert(mem_key(&k, first_seq + i as u64), (CellKind::Delete, 0));
        }
        drop(g);
        self.account(points.len(), first_seq + points.len() as u64 - 1);
    }

    /// Insert a range tombstone.
    pub fn insert_range_delete(&self, rt: RangeTombstone) {
        self.write().range_dels.push(rt);
        self.bytes.fetch_add(64, Ordering::Relaxed);
        self.max_seq.fetch_max(rt.seq, Ordering::Relaxed);
    }

    /// Range tombstones held.
    pub fn range_tombstones(&self) -> Vec<RangeTombstone> {
        self.read().range_dels.clone()
    }

    /// Copy up to `max` cells with keys in `[lo, hi]` that come after
    /// `after` (exclusive, in cell order) into `out`, encoded as cells.
    /// Returns the number copied.
    pub fn copy_range(
        &self,
        lo: &RowKey,
        hi: &RowKey,
        after: Option<(RowKey, u64)>,
        max: usize,
        out: &mut Vec<u8>,
    ) -> usize {
        let g = self.read();
        let start = match after {
            Some((k, s)) => Bound::Excluded(mem_key(&k, s)),
            None => Bound::Included(mem_key(lo, u64::MAX)),
        };
        let end = Bound::Included(mem_key(hi, 0));
        let empty = match &start {
            Bound::Excluded(s) => *s >= mem_key(hi, 0),
            Bound::Included(s) => *s > mem_key(hi, 0),
            Bound::Unbounded => false,
        };
        if empty {
            return 0;
        }
        let zero = vec![0u8; self.fields_width];
        let mut n = 0;
        for ((hi, lo, Reverse(seq)), (kind, off)) in g.map.range((start, end)).take(max) {
            let k = &row_key(*hi, *lo);
            let fields = match kind {
                CellKind::Put => {
                    let o = *off as usize;
                    &g.arena[o..o + self.fields_width]
                }
                CellKind::Delete => &zero[..],
            };
            cell::push(out, k, *seq, *kind, fields);
            n += 1;
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
            let n = m.copy_range(&lo, &hi, after, 4, &mut out);
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
}
