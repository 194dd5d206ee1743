//! Regions: a table's key space cut into contiguous, non-overlapping
//! ranges. Pure logic lives here — boundaries, routing, the split-point
//! rule, load windows and the hotspot detector — so it can be tested and
//! simulated without a store; the engine (`engine/region.rs`) holds the
//! live state.
//!
//! A region is `[start, end)` over row keys, `end = None` meaning "to the
//! end of the key space". A table's regions are kept sorted by `start`;
//! the first starts at the all-zero key and each one ends where the next
//! starts, so every key lands in exactly one region.

pub mod hotspot;
pub mod split;
pub mod stats;

use crate::key::{RowKey, KEY_LEN};

/// The all-zero key: where the first region starts.
pub const KEY_MIN: RowKey = [0; KEY_LEN];

/// The start key of a boundary at hash prefix `p`.
pub fn prefix_start(p: u16) -> RowKey {
    let mut k = KEY_MIN;
    k[..2].copy_from_slice(&p.to_be_bytes());
    k
}

/// The start key of a boundary at the first key of `device` under prefix
/// `p` (every reading of the device sorts at or after it).
pub fn device_start(p: u16, device: u64) -> RowKey {
    let mut k = prefix_start(p);
    k[2..10].copy_from_slice(&device.to_be_bytes());
    k
}

/// Start keys of `n` regions of equal width over the 2-byte hash prefix
/// (region `i` starts at prefix `floor(i * 65536 / n)`).
pub fn pre_split_starts(n: u32) -> Vec<RowKey> {
    let n = n.clamp(1, 1 << 16) as u64;
    (0..n)
        .map(|i| prefix_start(((i << 16) / n) as u16))
        .collect()
}

/// Index of the region holding `key`, given the sorted start keys (the
/// first of which is [`KEY_MIN`]).
pub fn route(starts: &[RowKey], key: &RowKey) -> usize {
    starts.partition_point(|s| s <= key).saturating_sub(1)
}

/// The last key before `k` (`None` for the all-zero key): turns an
/// exclusive region end into an inclusive bound.
pub fn key_before(k: &RowKey) -> Option<RowKey> {
    let mut out = *k;
    for b in out.iter_mut().rev() {
        if *b > 0 {
            *b -= 1;
            return Some(out);
        }
        *b = 0xff;
    }
    None
}

/// Intersect the inclusive key range `[lo, hi]` with the region
/// `[start, end)`; `None` when they do not meet.
pub fn clip(
    lo: &RowKey,
    hi: &RowKey,
    start: &RowKey,
    end: Option<&RowKey>,
) -> Option<(RowKey, RowKey)> {
    let lo = (*lo).max(*start);
    let hi = match end {
        Some(e) => (*hi).min(key_before(e)?),
        None => *hi,
    };
    (lo <= hi).then_some((lo, hi))
}

/// A key as hex: the 2-byte prefix, then the device and timestamp parts
/// when they are not zero (region boundaries are mostly bare prefixes).
pub fn key_hex(k: &RowKey) -> String {
    let mut s = format!("{:02x}{:02x}", k[0], k[1]);
    if k[2..].iter().any(|b| *b != 0) {
        s.push(':');
        for b in &k[2..10] {
            s.push_str(&format!("{b:02x}"));
        }
        if k[10..].iter().any(|b| *b != 0) {
            s.push(':');
            for b in &k[10..] {
                s.push_str(&format!("{b:02x}"));
            }
        }
    }
    s
}

/// Parse a boundary key: hex digits (colons allowed as separators), at
/// most 18 bytes, padded with zeros on the right.
pub fn parse_key_hex(s: &str) -> Option<RowKey> {
    let digits: String = s.chars().filter(|c| *c != ':').collect();
    if digits.is_empty() || !digits.len().is_multiple_of(2) || digits.len() > 2 * KEY_LEN {
        return None;
    }
    let mut k = KEY_MIN;
    for (i, pair) in digits.as_bytes().chunks(2).enumerate() {
        let hex = std::str::from_utf8(pair).ok()?;
        k[i] = u8::from_str_radix(hex, 16).ok()?;
    }
    Some(k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{self, DeviceId};

    #[test]
    fn pre_split_is_uniform_over_the_prefix() {
        let s = pre_split_starts(16);
        assert_eq!(s.len(), 16);
        assert_eq!(s[0], KEY_MIN);
        assert_eq!(s[1], prefix_start(0x1000));
        assert_eq!(s[15], prefix_start(0xf000));
        let three = pre_split_starts(3);
        assert_eq!(three[1], prefix_start(21845));
        assert_eq!(pre_split_starts(1), vec![KEY_MIN]);
    }

    #[test]
    fn every_key_lands_in_exactly_one_region() {
        let starts = pre_split_starts(7);
        for d in 0..5000u64 {
            let k = key::encode(DeviceId(d), d as i64 * 1000);
            let i = route(&starts, &k);
            assert!(starts[i] <= k);
            assert!(i + 1 == starts.len() || k < starts[i + 1]);
            let end = starts.get(i + 1);
            assert!(clip(&k, &k, &starts[i], end).is_some());
            for (j, s) in starts.iter().enumerate().filter(|(j, _)| *j != i) {
                assert!(clip(&k, &k, s, starts.get(j + 1)).is_none());
            }
        }
        assert_eq!(route(&starts, &[0xff; KEY_LEN]), 6);
        assert_eq!(route(&starts, &KEY_MIN), 0);
    }

    #[test]
    fn key_before_and_hex_round_trip() {
        assert_eq!(key_before(&KEY_MIN), None);
        let k = prefix_start(0x1000);
        let b = key_before(&k).unwrap();
        assert_eq!(&b[..2], &[0x0f, 0xff]);
        assert!(b[2..].iter().all(|x| *x == 0xff));
        for k in [
            prefix_start(0xabcd),
            device_start(7, 42),
            key::encode(DeviceId(9), 5),
        ] {
            assert_eq!(parse_key_hex(&key_hex(&k)), Some(k));
        }
        assert_eq!(parse_key_hex("8"), None);
        assert_eq!(parse_key_hex("zz"), None);
        assert_eq!(parse_key_hex("80"), Some(prefix_start(0x8000)));
    }
}
