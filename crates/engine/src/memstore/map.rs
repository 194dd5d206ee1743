//! The memstore's sorted map, in two levels: device (hash prefix and id,
//! the first 10 key bytes) → that device's cells by (reversed timestamp,
//! sequence descending). The order is exactly that of the full key, but
//! an insert touches a small per-device structure whose newest end is
//! where telemetry arrives, instead of one tree of every cell of the
//! region (measured: the apply thread spent most of its time in a flat
//! `BTreeMap::insert`). Per device, in-order readings are a push onto a
//! vector (`Cells`); the others go to a tree beside it.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::ops::Bound;

/// A full memstore key: the row key's first 16 bytes, its last 2 bytes,
/// then sequence descending (`super::mem_key`).
pub type MemKey = (u128, u16, Reverse<u64>);

/// Bits of the 16-byte head below the device part (6 bytes of the
/// reversed timestamp).
const TS_HEAD_BITS: u32 = 48;

type Outer = u128;
type Inner = (u64, Reverse<u64>);

fn split(k: &MemKey) -> (Outer, Inner) {
    let ts_head = (k.0 & ((1u128 << TS_HEAD_BITS) - 1)) as u64;
    (k.0 >> TS_HEAD_BITS, ((ts_head << 16) | u64::from(k.1), k.2))
}

fn join(o: Outer, i: &Inner) -> MemKey {
    let hi = (o << TS_HEAD_BITS) | u128::from(i.0 >> 16);
    (hi, (i.0 & 0xffff) as u16, i.1)
}

/// A bound of a range: both ends of every memstore range are bounded.
#[derive(Clone, Copy, Debug)]
pub enum Edge {
    Included(MemKey),
    Excluded(MemKey),
}

impl Edge {
    fn key(&self) -> &MemKey {
        match self {
            Edge::Included(k) | Edge::Excluded(k) => k,
        }
    }
    fn split(&self) -> (Outer, Bound<Inner>) {
        let (o, i) = split(self.key());
        match self {
            Edge::Included(_) => (o, Bound::Included(i)),
            Edge::Excluded(_) => (o, Bound::Excluded(i)),
        }
    }
}

/// Would `BTreeMap::range` accept these bounds (and find anything)?
fn nonempty<T: Ord>(lo: &Bound<T>, hi: &Bound<T>) -> bool {
    use Bound::*;
    match (lo, hi) {
        (Included(a), Included(b)) => a <= b,
        (Included(a), Excluded(b)) | (Excluded(a), Included(b)) | (Excluded(a), Excluded(b)) => {
            a < b
        }
        _ => true,
    }
}

pub struct CellMap<V> {
    devices: BTreeMap<Outer, Cells<V>>,
}

/// One device's cells. Keys hold the reversed timestamp, so a device's
/// newest reading has its smallest key: readings arriving in time order
/// come in descending key order. They are kept in a vector in descending
/// order, where that insert is a push (in a tree it went to the front of
/// a leaf, shifting it: 60 % of the apply thread's time). Keys arriving
/// out of that order (back-fill, a late reading) go to a tree beside it;
/// a range merges the two. No key is in both: a key goes to the vector
/// only when it is below every key there, and every key of the tree was
/// at least the vector's smallest key when it arrived.
struct Cells<V> {
    desc: Vec<(Inner, V)>,
    rest: BTreeMap<Inner, V>,
}

impl<V> Default for Cells<V> {
    fn default() -> Self {
        Cells {
            desc: Vec::new(),
            rest: BTreeMap::new(),
        }
    }
}

impl<V> Cells<V> {
    /// Insert or overwrite, like `BTreeMap::insert`.
    fn insert(&mut self, i: Inner, v: V) {
        match self.desc.last() {
            Some((last, _)) if i >= *last => match self.desc.binary_search_by(|(k, _)| i.cmp(k)) {
                Ok(p) => self.desc[p].1 = v,
                Err(_) => {
                    self.rest.insert(i, v);
                }
            },
            _ => self.desc.push((i, v)),
        }
    }

    /// Cells in `(a, b)`, ascending.
    fn range(&self, a: Bound<Inner>, b: Bound<Inner>) -> impl Iterator<Item = (&Inner, &V)> + '_ {
        // `desc` is descending: the cells at most `b` start at `from`,
        // those at least `a` end before `to`.
        let from = match b {
            Bound::Included(h) => self.desc.partition_point(|(k, _)| *k > h),
            Bound::Excluded(h) => self.desc.partition_point(|(k, _)| *k >= h),
            Bound::Unbounded => 0,
        };
        let to = match a {
            Bound::Included(l) => self.desc.partition_point(|(k, _)| *k >= l),
            Bound::Excluded(l) => self.desc.partition_point(|(k, _)| *k > l),
            Bound::Unbounded => self.desc.len(),
        };
        let vec = self.desc[from..to.max(from)]
            .iter()
            .rev()
            .map(|(k, v)| (k, v));
        let tree = (!self.rest.is_empty()).then(|| self.rest.range((a, b)));
        merge_ascending(vec, tree.into_iter().flatten())
    }
}

/// Merge two ascending iterators with disjoint keys.
fn merge_ascending<'a, V: 'a>(
    a: impl Iterator<Item = (&'a Inner, &'a V)>,
    b: impl Iterator<Item = (&'a Inner, &'a V)>,
) -> impl Iterator<Item = (&'a Inner, &'a V)> {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some(x), Some(y)) if y.0 < x.0 => b.next(),
        (Some(_), _) => a.next(),
        (None, _) => b.next(),
    })
}

impl<V> Default for CellMap<V> {
    fn default() -> Self {
        CellMap {
            devices: BTreeMap::new(),
        }
    }
}

impl<V> CellMap<V> {
    pub fn insert(&mut self, k: MemKey, v: V) {
        let (o, i) = split(&k);
        self.devices.entry(o).or_default().insert(i, v);
    }

    /// Cells that went to the devices' side trees (arrived out of
    /// order).
    #[cfg(test)]
    pub fn side_cells(&self) -> usize {
        self.devices.values().map(|c| c.rest.len()).sum()
    }

    /// Cells from `lo` to `hi`, in key order.
    pub fn range(&self, lo: Edge, hi: Edge) -> impl Iterator<Item = (MemKey, &V)> + '_ {
        let (lo_o, lo_i) = lo.split();
        let (hi_o, hi_i) = hi.split();
        let devices = if lo_o <= hi_o {
            Some(self.devices.range(lo_o..=hi_o))
        } else {
            None
        };
        devices.into_iter().flatten().flat_map(move |(o, cells)| {
            let a = if *o == lo_o { lo_i } else { Bound::Unbounded };
            let b = if *o == hi_o { hi_i } else { Bound::Unbounded };
            let inner = if nonempty(&a, &b) {
                Some(cells.range(a, b))
            } else {
                None
            };
            inner
                .into_iter()
                .flatten()
                .map(move |(i, v)| (join(*o, i), v))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn key(rng: &mut impl Rng) -> MemKey {
        // Few distinct devices and timestamps so ranges hit edges.
        let dev =
            u128::from(rng.gen_range(0u8..4)) << 100 | u128::from(rng.gen_range(0u8..3)) << 60;
        let ts_head = u128::from(rng.gen_range(0u8..3)) << 20;
        (
            dev | ts_head,
            rng.gen_range(0..3),
            Reverse(rng.gen_range(0..3)),
        )
    }

    fn edge(rng: &mut impl Rng) -> Edge {
        let k = key(rng);
        if rng.gen() {
            Edge::Included(k)
        } else {
            Edge::Excluded(k)
        }
    }

    fn bound(e: Edge) -> Bound<MemKey> {
        match e {
            Edge::Included(k) => Bound::Included(k),
            Edge::Excluded(k) => Bound::Excluded(k),
        }
    }

    /// The model's answer: a flat map's range (empty where `BTreeMap`
    /// would refuse the bounds).
    fn flat_range<V: Copy>(flat: &BTreeMap<MemKey, V>, lo: Edge, hi: Edge) -> Vec<(MemKey, V)> {
        if !nonempty(&bound(lo), &bound(hi)) {
            return Vec::new();
        }
        flat.range((bound(lo), bound(hi)))
            .map(|(k, v)| (*k, *v))
            .collect()
    }

    /// Same contents and ranges as one flat `BTreeMap` (seeded model).
    #[test]
    fn ranges_equal_a_flat_map() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..200 {
            let (mut m, mut flat) = (CellMap::default(), BTreeMap::new());
            for v in 0..rng.gen_range(0..60) {
                let k = key(&mut rng);
                m.insert(k, v);
                flat.insert(k, v);
            }
            for _ in 0..50 {
                let (lo, hi) = (edge(&mut rng), edge(&mut rng));
                let got: Vec<_> = m.range(lo, hi).map(|(k, v)| (k, *v)).collect();
                assert_eq!(got, flat_range(&flat, lo, hi), "{lo:?}..{hi:?}");
            }
        }
    }

    /// Telemetry order: per device, keys mostly descending (newer
    /// readings), with late readings, repeats and other devices mixed in.
    #[test]
    fn mostly_descending_keys_equal_a_flat_map() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for _ in 0..100 {
            let (mut m, mut flat) = (CellMap::default(), BTreeMap::new());
            let mut next = [u64::MAX / 2; 3];
            let mut seen = Vec::new();
            for v in 0..rng.gen_range(0..200) {
                let dev = rng.gen_range(0..3usize);
                let k = match rng.gen_range(0..10) {
                    0 if !seen.is_empty() => seen[rng.gen_range(0..seen.len())],
                    1 => {
                        let late = next[dev] + rng.gen_range(1..50);
                        join(dev as u128, &(late, Reverse(v)))
                    }
                    _ => {
                        next[dev] -= rng.gen_range(1..4);
                        join(dev as u128, &(next[dev], Reverse(v)))
                    }
                };
                seen.push(k);
                m.insert(k, v);
                flat.insert(k, v);
            }
            let all = |lo, hi| {
                let got: Vec<_> = m.range(lo, hi).map(|(k, v)| (k, *v)).collect();
                got
            };
            let want: Vec<_> = flat.iter().map(|(k, v)| (*k, *v)).collect();
            let (min, max) = ((0, 0, Reverse(u64::MAX)), (u128::MAX, u16::MAX, Reverse(0)));
            assert_eq!(all(Edge::Included(min), Edge::Included(max)), want);
            if seen.is_empty() {
                continue;
            }
            for _ in 0..30 {
                let lo = seen[rng.gen_range(0..seen.len())];
                let hi = seen[rng.gen_range(0..seen.len())];
                for (l, h) in [
                    (Edge::Included(lo), Edge::Included(hi)),
                    (Edge::Excluded(lo), Edge::Excluded(hi)),
                    (Edge::Included(lo), Edge::Excluded(hi)),
                ] {
                    assert_eq!(all(l, h), flat_range(&flat, l, h), "{l:?}..{h:?}");
                }
            }
        }
    }

    #[test]
    fn split_and_join_are_inverse() {
        let k = (
            0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10,
            0x1112,
            Reverse(9),
        );
        let (o, i) = split(&k);
        assert_eq!(o, 0x0102_0304_0506_0708_090a);
        assert_eq!(i.0, 0x0b0c_0d0e_0f10_1112);
        assert_eq!(join(o, &i), k);
    }
}
