//! Row key codec — the only big-endian module. Spec: `formats/key.md`.
//!
//! `key = prefix: u16 BE | device: u64 BE | reversed ts: u64 BE` (18 bytes).
//! Byte order equals sort order: (prefix asc, device asc, ts desc).

use crate::error::{Error, Result};

/// Length of an encoded row key in bytes.
pub const KEY_LEN: usize = 18;

/// An encoded row key.
pub type RowKey = [u8; KEY_LEN];

/// Version of the prefix hash. Changing the hash would move every device to
/// another place in the key space, so it is frozen: xxh3-64 (xxhash spec
/// v0.8), seed 0, over the device id's 8 little-endian bytes; the prefix is
/// the top 16 bits of the hash.
pub const PREFIX_HASH_VERSION: u32 = 1;

/// A device identifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DeviceId(pub u64);

/// The 2-byte hash prefix of a device (xxh3-64 seed 0 of LE bytes, top 16 bits).
pub fn prefix(device: DeviceId) -> u16 {
    (xxhash_rust::xxh3::xxh3_64(&device.0.to_le_bytes()) >> 48) as u16
}

/// Order-reversing map from i64 timestamps to u64: newer sorts first.
/// Flip the sign bit (order-preserving i64→u64), then complement (reverse).
pub fn reverse_ts(ts: i64) -> u64 {
    !((ts as u64) ^ (1 << 63))
}

/// Inverse of [`reverse_ts`].
pub fn unreverse_ts(rev: u64) -> i64 {
    ((!rev) ^ (1 << 63)) as i64
}

/// Encode `(device, ts)` into its row key.
pub fn encode(device: DeviceId, ts: i64) -> RowKey {
    encode_with_prefix(prefix(device), device, ts)
}

/// Encode with a precomputed prefix (hot loops compute it once per device).
pub fn encode_with_prefix(prefix: u16, device: DeviceId, ts: i64) -> RowKey {
    let mut k = [0u8; KEY_LEN];
    k[0..2].copy_from_slice(&prefix.to_be_bytes());
    k[2..10].copy_from_slice(&device.0.to_be_bytes());
    k[10..18].copy_from_slice(&reverse_ts(ts).to_be_bytes());
    k
}

/// A decoded row key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodedKey {
    /// The hash prefix (formats/key.md).
    pub prefix: u16,
    /// The device.
    pub device: DeviceId,
    /// The timestamp, Unix milliseconds.
    pub ts: i64,
}

/// Decode a key; any length other than [`KEY_LEN`], or a prefix that is
/// not the hash of the key's device, is an error.
pub fn decode(bytes: &[u8]) -> Result<DecodedKey> {
    let k: &RowKey = bytes.try_into().map_err(|_| {
        Error::decode(
            "row key",
            format!("expected {KEY_LEN} bytes, got {}", bytes.len()),
        )
    })?;
    let d = decode_fixed(k);
    let want = prefix(d.device);
    if d.prefix != want {
        return Err(Error::decode(
            "row key",
            format!(
                "prefix {:#06x} is not device {}'s hash prefix {want:#06x}",
                d.prefix, d.device.0
            ),
        ));
    }
    Ok(d)
}

/// Decode a key of the right length (infallible).
pub fn decode_fixed(k: &RowKey) -> DecodedKey {
    let p = u16::from_be_bytes([k[0], k[1]]);
    let mut d = [0u8; 8];
    d.copy_from_slice(&k[2..10]);
    let mut t = [0u8; 8];
    t.copy_from_slice(&k[10..18]);
    DecodedKey {
        prefix: p,
        device: DeviceId(u64::from_be_bytes(d)),
        ts: unreverse_ts(u64::from_be_bytes(t)),
    }
}

/// The device id stored in a key.
pub fn device_of(k: &RowKey) -> DeviceId {
    let mut d = [0u8; 8];
    d.copy_from_slice(&k[2..10]);
    DeviceId(u64::from_be_bytes(d))
}

/// The timestamp stored in a key.
pub fn ts_of(k: &RowKey) -> i64 {
    let mut t = [0u8; 8];
    t.copy_from_slice(&k[10..18]);
    unreverse_ts(u64::from_be_bytes(t))
}

/// The keys of one device's readings with `from <= ts <= to` form the
/// contiguous, inclusive key range `[encode(d, to), encode(d, from)]`
/// (newest first). Returns `None` when `from > to` (empty range).
pub fn device_range(device: DeviceId, from: i64, to: i64) -> Option<(RowKey, RowKey)> {
    if from > to {
        return None;
    }
    Some((encode(device, to), encode(device, from)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reverse_is_order_reversing_at_edges() {
        let v = [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX];
        for w in v.windows(2) {
            assert!(reverse_ts(w[0]) > reverse_ts(w[1]));
            assert_eq!(unreverse_ts(reverse_ts(w[0])), w[0]);
        }
        assert_eq!(reverse_ts(i64::MAX), 0);
        assert_eq!(reverse_ts(i64::MIN), u64::MAX);
    }

    #[test]
    fn wrong_length_is_an_error() {
        assert!(decode(&[0u8; 17]).is_err());
        assert!(decode(&[0u8; 19]).is_err());
        assert!(decode(&[]).is_err());
        let zero = encode(DeviceId(0), i64::MAX);
        assert!(decode(&zero).is_ok());
        let mut wrong = zero;
        wrong[0] ^= 1;
        assert!(decode(&wrong).is_err(), "prefix not matching the device");
    }

    proptest! {
        #[test]
        fn byte_order_equals_logical_order(a in any::<u64>(), ta in any::<i64>(), b in any::<u64>(), tb in any::<i64>()) {
            let (da, db) = (DeviceId(a), DeviceId(b));
            let ka = encode(da, ta);
            let kb = encode(db, tb);
            let la = (prefix(da), a, std::cmp::Reverse(ta));
            let lb = (prefix(db), b, std::cmp::Reverse(tb));
            prop_assert_eq!(ka.cmp(&kb), la.cmp(&lb));
            let back = decode(&ka).unwrap();
            prop_assert_eq!(back.device, da);
            prop_assert_eq!(back.ts, ta);
        }

        #[test]
        fn same_device_orders_by_ts_desc(d in any::<u64>(), ta in any::<i64>(), tb in any::<i64>()) {
            let ka = encode(DeviceId(d), ta);
            let kb = encode(DeviceId(d), tb);
            prop_assert_eq!(ka.cmp(&kb), tb.cmp(&ta));
        }

        #[test]
        fn device_range_is_contiguous(d in any::<u64>(), from in any::<i64>(), to in any::<i64>(), t in any::<i64>()) {
            let k = encode(DeviceId(d), t);
            match device_range(DeviceId(d), from, to) {
                None => prop_assert!(from > to),
                Some((lo, hi)) => {
                    let inside = lo <= k && k <= hi;
                    prop_assert_eq!(inside, from <= t && t <= to);
                }
            }
        }
    }
}
