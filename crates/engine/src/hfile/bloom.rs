//! Bloom filter over row keys and device ids. Spec: `formats/hfile.md`
//! § Bloom section. Bits per entry 10, 7 probes (≈ 0.8 % false positives);
//! probe `i` sets bit `(h1 + i·h2) mod m` where `h = xxh3_64_with_seed(x,
//! BLOOM_SEED)`, `h1` its low and `h2` its high 32 bits (odd-forced).

use crate::error::{Error, Result};
use crate::key::{DeviceId, RowKey};
use crate::util::bin::{le_u32, le_u64};

pub const BLOOM_SEED: u64 = 0x7e1e_5707_b100_0001;
pub const BITS_PER_ENTRY: u64 = 10;
pub const PROBES: u32 = 7;
/// Largest filter a reader accepts (bits).
pub const BLOOM_BITS_MAX: u64 = 1 << 34;

/// Bytes before the bit array in the encoded filter.
const HEADER_LEN: usize = 12;

/// A bloom filter. It is kept in its encoded form (`probes | bits | bit
/// array`, the array as little-endian u64 words, so bit `b` is bit `b % 8`
/// of byte `b / 8`): a reader adopts the section it read without copying
/// it, which halves the peak memory of opening a large file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bloom {
    probes: u32,
    bits: u64,
    encoded: Vec<u8>,
}

fn hash(x: &[u8]) -> (u64, u64) {
    let h = xxhash_rust::xxh3::xxh3_64_with_seed(x, BLOOM_SEED);
    (h & 0xffff_ffff, (h >> 32) | 1)
}

impl Bloom {
    /// A filter sized for `entries` insertions.
    pub fn with_capacity(entries: usize) -> Self {
        let bits = ((entries as u64).max(1) * BITS_PER_ENTRY).div_ceil(64) * 64;
        let mut encoded = vec![0u8; HEADER_LEN + (bits / 8) as usize];
        encoded[..4].copy_from_slice(&PROBES.to_le_bytes());
        encoded[4..HEADER_LEN].copy_from_slice(&bits.to_le_bytes());
        Bloom {
            probes: PROBES,
            bits,
            encoded,
        }
    }
    fn insert_raw(&mut self, x: &[u8]) {
        let (h1, h2) = hash(x);
        for i in 0..u64::from(self.probes) {
            let b = h1.wrapping_add(i.wrapping_mul(h2)) % self.bits;
            self.encoded[HEADER_LEN + (b / 8) as usize] |= 1 << (b % 8);
        }
    }
    fn contains_raw(&self, x: &[u8]) -> bool {
        let (h1, h2) = hash(x);
        (0..u64::from(self.probes)).all(|i| {
            let b = h1.wrapping_add(i.wrapping_mul(h2)) % self.bits;
            self.encoded[HEADER_LEN + (b / 8) as usize] & (1 << (b % 8)) != 0
        })
    }
    pub fn insert_key(&mut self, k: &RowKey) {
        self.insert_raw(k);
    }
    pub fn insert_device(&mut self, d: DeviceId) {
        self.insert_raw(&d.0.to_le_bytes());
    }
    pub fn may_contain_key(&self, k: &RowKey) -> bool {
        self.contains_raw(k)
    }
    pub fn may_contain_device(&self, d: DeviceId) -> bool {
        self.contains_raw(&d.0.to_le_bytes())
    }

    /// `probes u32 | bits u64 | words (bits/64 × u64 LE)`.
    #[cfg(any(test, feature = "testing"))]
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.encoded);
    }

    /// The encoded filter (what [`Bloom::encode`] writes), by value.
    pub fn into_bytes(self) -> Vec<u8> {
        self.encoded
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn decode(b: &[u8]) -> Result<Self> {
        Self::decode_owned(b.to_vec())
    }

    /// Decode, adopting `b` as the filter's storage.
    pub fn decode_owned(b: Vec<u8>) -> Result<Self> {
        if b.len() < 12 {
            return Err(Error::decode("bloom", "short"));
        }
        let probes = le_u32(&b, 0);
        let bits = le_u64(&b, 4);
        if !(1..=32).contains(&probes)
            || bits == 0
            || !bits.is_multiple_of(64)
            || bits > BLOOM_BITS_MAX
        {
            return Err(Error::decode(
                "bloom",
                format!("{probes} probes, {bits} bits"),
            ));
        }
        let n = (bits / 64) as usize;
        if b.len() != 12 + n * 8 {
            return Err(Error::decode("bloom", "length does not match bit count"));
        }
        Ok(Bloom {
            probes,
            bits,
            encoded: b,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_low_false_positives() {
        let mut b = Bloom::with_capacity(20_000);
        for d in 0..10_000u64 {
            b.insert_device(DeviceId(d));
        }
        assert!((0..10_000u64).all(|d| b.may_contain_device(DeviceId(d))));
        let fp = (10_000..110_000u64)
            .filter(|d| b.may_contain_device(DeviceId(*d)))
            .count();
        assert!(fp < 2_000, "{fp} false positives in 100k");
        let mut enc = Vec::new();
        b.encode(&mut enc);
        assert_eq!(Bloom::decode(&enc).unwrap(), b);
        assert!(Bloom::decode(&enc[..enc.len() - 1]).is_err());
    }
}
