//! Where to split a region. The rule, in order:
//!
//! 1. Find the weighted median key `K` of the region's data (weights are
//!    HFile blocks' stored bytes, attributed to each block's first key).
//! 2. If `K`'s hash prefix holds at most `threshold` bytes, split on a
//!    prefix boundary (the start of `K`'s prefix or of the next one,
//!    whichever balances better): no device straddles two regions.
//! 3. Otherwise (one prefix alone is over the threshold) split on a
//!    device boundary next to `K`, if `K`'s device holds at most
//!    `threshold` bytes.
//! 4. Otherwise (one device alone is over the threshold) split at `K`
//!    itself, inside that device's run: its newer readings stay left,
//!    older ones go right.
//!
//! A candidate must lie strictly inside the region and leave data on both
//! sides; when no candidate does, the region is not split.

use super::{device_start, prefix_start};
use crate::key::RowKey;

/// How a split point was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Prefix,
    Device,
    InsideDevice,
}

/// A chosen split point: the right daughter starts at `key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitPoint {
    pub key: RowKey,
    pub level: Level,
}

fn prefix_of(k: &RowKey) -> u16 {
    u16::from_be_bytes([k[0], k[1]])
}

fn device_of(k: &RowKey) -> u64 {
    let mut d = [0u8; 8];
    d.copy_from_slice(&k[2..10]);
    u64::from_be_bytes(d)
}

/// Choose a split point for the region `[start, end)` whose data weighs
/// `weights` (first key of a block, bytes), in any order.
pub fn choose(
    start: &RowKey,
    end: Option<&RowKey>,
    weights: &[(RowKey, u64)],
    threshold: u64,
) -> Option<SplitPoint> {
    let mut w: Vec<(RowKey, u64)> = weights
        .iter()
        .filter(|(k, _)| k >= start && end.is_none_or(|e| k < e))
        .copied()
        .collect();
    w.sort_unstable();
    let total: u64 = w.iter().map(|(_, b)| b).sum();
    if total == 0 {
        return None;
    }
    let mut acc = 0;
    let median = w
        .iter()
        .find(|(_, b)| {
            acc += b;
            acc * 2 >= total
        })
        .map(|(k, _)| *k)?;
    let p = prefix_of(&median);
    let d = device_of(&median);
    let weight_where = |f: &dyn Fn(&RowKey) -> bool| -> u64 {
        w.iter().filter(|(k, _)| f(k)).map(|(_, b)| b).sum()
    };
    let left_of = |c: &RowKey| -> u64 { w.iter().filter(|(k, _)| k < c).map(|(_, b)| b).sum() };
    let inside = |c: &RowKey| c > start && end.is_none_or(|e| c < e);
    let best = |cands: Vec<RowKey>| -> Option<RowKey> {
        cands
            .into_iter()
            .filter(|c| inside(c))
            .filter(|c| {
                let l = left_of(c);
                l > 0 && l < total
            })
            .min_by_key(|c| (2 * left_of(c)).abs_diff(total))
    };
    if weight_where(&|k| prefix_of(k) == p) <= threshold {
        let mut c = vec![prefix_start(p)];
        c.extend(p.checked_add(1).map(prefix_start));
        if let Some(key) = best(c) {
            return Some(SplitPoint {
                key,
                level: Level::Prefix,
            });
        }
    }
    if weight_where(&|k| prefix_of(k) == p && device_of(k) == d) <= threshold {
        let mut c = vec![device_start(p, d)];
        c.extend(d.checked_add(1).map(|n| device_start(p, n)));
        if let Some(key) = best(c) {
            return Some(SplitPoint {
                key,
                level: Level::Device,
            });
        }
    }
    best(vec![median]).map(|key| SplitPoint {
        key,
        level: Level::InsideDevice,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{self, DeviceId};
    use crate::region::KEY_MIN;

    fn block(prefix: u16, device: u64, ts: i64, bytes: u64) -> (RowKey, u64) {
        (key::encode_with_prefix(prefix, DeviceId(device), ts), bytes)
    }

    #[test]
    fn spread_data_splits_on_a_prefix_boundary_near_the_middle() {
        let w: Vec<_> = (0..100u16)
            .map(|p| block(p * 600, p as u64, 0, 10))
            .collect();
        let s = choose(&KEY_MIN, None, &w, 100).unwrap();
        assert_eq!(s.level, Level::Prefix);
        let left: u64 = w.iter().filter(|(k, _)| *k < s.key).map(|(_, b)| b).sum();
        assert!((490..=510).contains(&left), "left {left}");
        assert_eq!(&s.key[2..], &[0u8; 16]);
    }

    #[test]
    fn one_heavy_prefix_splits_on_a_device_boundary() {
        let mut w: Vec<_> = (0..50u64).map(|d| block(0x4000, d, 0, 10)).collect();
        w.push(block(0x1000, 1000, 0, 10));
        let s = choose(&KEY_MIN, None, &w, 100).unwrap();
        assert_eq!(s.level, Level::Device);
        assert_eq!(&s.key[..2], &[0x40, 0x00]);
        assert_eq!(&s.key[10..], &[0u8; 8]);
    }

    #[test]
    fn one_heavy_device_splits_inside_its_run() {
        let w: Vec<_> = (0..50i64)
            .map(|ts| block(0x4000, 7, ts * 1000, 10))
            .collect();
        let s = choose(&KEY_MIN, None, &w, 100).unwrap();
        assert_eq!(s.level, Level::InsideDevice);
        assert_eq!(key::device_of(&s.key), DeviceId(7));
    }

    #[test]
    fn no_split_without_data_on_both_sides() {
        assert_eq!(choose(&KEY_MIN, None, &[], 1), None);
        let one = [block(0x4000, 7, 0, 10)];
        assert_eq!(choose(&KEY_MIN, None, &one, 1), None);
        // Data outside the region is ignored.
        let start = prefix_start(0x8000);
        let w: Vec<_> = (0..10u16).map(|p| block(p, p as u64, 0, 10)).collect();
        assert_eq!(choose(&start, None, &w, 1), None);
    }

    #[test]
    fn split_point_stays_strictly_inside_the_region() {
        let (start, end) = (prefix_start(0x4000), prefix_start(0x4002));
        let w = [block(0x4000, 1, 0, 10), block(0x4001, 2, 0, 10)];
        let s = choose(&start, Some(&end), &w, 100).unwrap();
        assert_eq!(s.key, prefix_start(0x4001));
    }
}
