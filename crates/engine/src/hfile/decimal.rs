//! The decimal chunk codec (codec 4) for `f64` field columns: sensor
//! readings are decimals in disguise (`12.34567`, `87.0`), so each value
//! is stored as the integer `i` with `value = i / 10^e` (one `e` for the
//! chunk), and the integers as first differences within each device run,
//! zigzagged and bit-packed at one width. A run's first integer is a
//! difference from the previous run's first, in a second packed stream.
//! Spec: `formats/hfile.md` § Columnar block body, codec 4.
//!
//! The encoder takes a column only when every value comes back bit for bit
//! through the decoder's very arithmetic (`i as f64 / 10^e`, both IEEE
//! operations, correctly rounded), so NaN, ±inf, −0.0, subnormals and true
//! doubles are simply left to the other codecs. Decoding is a shift, a
//! mask, an add and a division per value: about 2.5× pco's speed on this
//! fleet (`tools/decode-speed`).

use super::columnar::{run_count, RUN_LEN};
use crate::error::{Error, Result};

/// Largest exponent `e` (every `10^e` up to `10^22` is an exact f64).
pub const DECIMAL_EXP_MAX: u8 = 18;
/// Widest packed difference: a value is read as one unaligned u64 shifted
/// by up to 7 bits, which leaves 57 bits.
pub const DECIMAL_WIDTH_MAX: u8 = 56;
/// Bytes before the packed streams: `e u8 | first_width u8 |
/// delta_width u8 | first i64`.
pub const DECIMAL_HEADER_LEN: usize = 11;
/// Largest magnitude of a scaled integer (every such i64 is an exact f64).
const INT_MAX: f64 = (1u64 << 53) as f64;

const POW10: [f64; DECIMAL_EXP_MAX as usize + 1] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18,
];

fn bad(what: impl Into<String>) -> Error {
    Error::decode("columnar block", format!("decimal chunk: {}", what.into()))
}

fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

/// The counts of the runs chunk (`RUN_LEN` bytes per run).
fn counts(runs: &[u8]) -> impl Iterator<Item = usize> + '_ {
    runs.chunks_exact(RUN_LEN).map(run_count)
}

/// Encode the `f64` column `raw` (little-endian values, in cell order) of
/// a block whose runs chunk is `runs`; `None` when some value is not a
/// decimal with at most [`DECIMAL_EXP_MAX`] digits after the point that
/// the decoder gives back bit for bit, or a difference needs more than
/// [`DECIMAL_WIDTH_MAX`] bits.
pub fn encode(raw: &[u8], runs: &[u8]) -> Option<Vec<u8>> {
    let xs: Vec<f64> = raw
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect();
    let mut ints = Vec::with_capacity(xs.len());
    let e = (0..=DECIMAL_EXP_MAX).find(|&e| scaled(&xs, e, &mut ints))?;
    let mut firsts = Vec::new();
    let mut deltas = Vec::with_capacity(ints.len());
    let (mut at, mut prev_first) = (0, None);
    for n in counts(runs) {
        let run = ints.get(at..at + n).filter(|r| !r.is_empty())?;
        if let Some(p) = prev_first {
            firsts.push(zigzag(run[0].wrapping_sub(p)));
        }
        prev_first = Some(run[0]);
        deltas.extend(run.windows(2).map(|w| zigzag(w[1].wrapping_sub(w[0]))));
        at += n;
    }
    if at != ints.len() || at == 0 {
        return None;
    }
    let (fw, dw) = (width_of(&firsts)?, width_of(&deltas)?);
    let mut out = Vec::with_capacity(DECIMAL_HEADER_LEN + packed_len(deltas.len(), dw));
    out.extend_from_slice(&[e, fw, dw]);
    out.extend_from_slice(&ints[0].to_le_bytes());
    pack(&firsts, fw, &mut out);
    pack(&deltas, dw, &mut out);
    Some(out)
}

/// Put `xs` as integers at exponent `e` into `out`; false (and `out` not
/// to be used) unless every value round-trips exactly.
fn scaled(xs: &[f64], e: u8, out: &mut Vec<i64>) -> bool {
    let p = POW10[usize::from(e)];
    out.clear();
    for &x in xs {
        let i = (x * p).round();
        // NaN and the infinities fail here too.
        if i.is_nan() || i.abs() > INT_MAX {
            return false;
        }
        let i = i as i64;
        if (i as f64 / p).to_bits() != x.to_bits() {
            return false;
        }
        out.push(i);
    }
    true
}

/// Bits needed by the largest of `zs`; `None` past the limit.
fn width_of(zs: &[u64]) -> Option<u8> {
    let w = 64 - zs.iter().fold(0, |a, &z| a | z).leading_zeros();
    (w <= u32::from(DECIMAL_WIDTH_MAX)).then_some(w as u8)
}

fn packed_len(n: usize, width: u8) -> usize {
    (n * usize::from(width)).div_ceil(8)
}

/// Append `zs` at `width` bits each, least significant bit first.
fn pack(zs: &[u64], width: u8, out: &mut Vec<u8>) {
    let (mut acc, mut bits) = (0u64, 0u32);
    for &z in zs {
        acc |= z << bits;
        bits += u32::from(width);
        while bits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            bits -= 8;
        }
        // Fewer than 8 bits are pending: the next value (at most 56
        // bits) fits beside them.
    }
    if bits > 0 {
        out.push(acc as u8);
    }
}

/// A packed stream of `width`-bit values.
struct Packed<'a> {
    bytes: &'a [u8],
    width: usize,
    mask: u64,
}

impl<'a> Packed<'a> {
    fn new(bytes: &'a [u8], width: u8) -> Self {
        Packed {
            bytes,
            width: usize::from(width),
            mask: (1u64 << width) - 1,
        }
    }

    /// Value `k` (the caller checked the stream holds it).
    #[inline]
    fn get(&self, k: usize) -> u64 {
        let bit = k * self.width;
        let at = bit / 8;
        let word = match self.bytes.get(at..at + 8) {
            Some(w) => u64::from_le_bytes(w.try_into().expect("8 bytes")),
            None => {
                let mut w = [0u8; 8];
                let tail = &self.bytes[at.min(self.bytes.len())..];
                w[..tail.len()].copy_from_slice(tail);
                u64::from_le_bytes(w)
            }
        };
        (word >> (bit % 8)) & self.mask
    }
}

/// Decode a decimal chunk into `out` (one value per cell of a block whose
/// runs chunk is `runs`, their counts adding up to `out.len()`). Never
/// panics on any input.
pub fn decode(inner: &[u8], runs: &[u8], out: &mut [f64]) -> Result<()> {
    let n = out.len();
    let n_runs = runs.len() / RUN_LEN;
    let Some(head) = inner.get(..DECIMAL_HEADER_LEN) else {
        return Err(bad(format!("{} bytes", inner.len())));
    };
    let (e, fw, dw) = (head[0], head[1], head[2]);
    if e > DECIMAL_EXP_MAX || fw > DECIMAL_WIDTH_MAX || dw > DECIMAL_WIDTH_MAX {
        return Err(bad(format!("exponent {e}, widths {fw} and {dw}")));
    }
    if n_runs == 0 || n_runs > n {
        return Err(bad(format!("{n_runs} runs for {n} values")));
    }
    let flen = packed_len(n_runs - 1, fw);
    let dlen = packed_len(n - n_runs, dw);
    if inner.len() != DECIMAL_HEADER_LEN + flen + dlen {
        return Err(bad(format!(
            "{} bytes, {} expected",
            inner.len(),
            DECIMAL_HEADER_LEN + flen + dlen
        )));
    }
    let firsts = Packed::new(&inner[DECIMAL_HEADER_LEN..DECIMAL_HEADER_LEN + flen], fw);
    let deltas = Packed::new(&inner[DECIMAL_HEADER_LEN + flen..], dw);
    let p = POW10[usize::from(e)];
    let mut first = i64::from_le_bytes(head[3..11].try_into().expect("8 bytes"));
    let (mut at, mut k) = (0usize, 0usize);
    for (r, count) in counts(runs).enumerate() {
        let Some(run) = out.get_mut(at..at + count).filter(|r| !r.is_empty()) else {
            return Err(bad("run lengths disagree with the values"));
        };
        if r > 0 {
            first = first.wrapping_add(unzigzag(firsts.get(r - 1)));
        }
        let mut cur = first;
        run[0] = cur as f64 / p;
        for v in &mut run[1..] {
            cur = cur.wrapping_add(unzigzag(deltas.get(k)));
            k += 1;
            *v = cur as f64 / p;
        }
        at += count;
    }
    if at != n {
        return Err(bad("run lengths disagree with the values"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hfile::columnar::RUN_KEY_LEN;
    use proptest::prelude::*;

    /// A runs chunk of runs of `lens` cells (only the counts matter here).
    fn runs_of(lens: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, &n) in lens.iter().enumerate() {
            out.extend_from_slice(&[i as u8; RUN_KEY_LEN]);
            out.extend_from_slice(&(n as u32).to_le_bytes());
            out.extend_from_slice(&[0; 8]);
        }
        out
    }

    fn raw(xs: &[f64]) -> Vec<u8> {
        xs.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn round_trip(xs: &[f64], lens: &[usize]) -> Option<Vec<u8>> {
        let runs = runs_of(lens);
        let enc = encode(&raw(xs), &runs)?;
        let mut back = vec![0f64; xs.len()];
        decode(&enc, &runs, &mut back).unwrap();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back), bits(xs));
        Some(enc)
    }

    #[test]
    fn decimals_round_trip_and_restart_per_run() {
        // Two devices far apart: the in-run differences stay small.
        let mut xs: Vec<f64> = (0..1000).map(|i| 45.0 + f64::from(i % 7) * 1e-5).collect();
        xs.extend((0..1000).map(|i| -120.5 + f64::from(i % 5) * 1e-5));
        let enc = round_trip(&xs, &[1000, 1000]).unwrap();
        assert_eq!(enc[0], 5, "five decimals");
        assert!(
            enc[2] <= 4,
            "in-run differences of at most 6e-5: {}",
            enc[2]
        );
        // The header, one first difference (-165.5 at 5 decimals: 25
        // bits), 1,998 differences at 4 bits.
        assert_eq!(enc[1], 25);
        assert_eq!(enc.len(), 11 + 4 + 999);
        // Integers, one value, big magnitudes, negative numbers.
        round_trip(&[87.0, 88.0, 0.0, -3.0], &[4]).unwrap();
        round_trip(&[0.1], &[1]).unwrap();
        round_trip(
            &[9_007_199_254_740_992.0, -9_007_199_254_740_992.0],
            &[1, 1],
        )
        .unwrap();
        round_trip(&[1.5e-17, 2.5e-17, 1e-18], &[3]).unwrap();
        round_trip(&[0.0; 100], &[30, 70]).unwrap();
    }

    #[test]
    fn values_it_cannot_keep_are_left_to_other_codecs() {
        for bad in [
            f64::NAN,
            f64::from_bits(0x7ff8_0000_0000_0001),
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            f64::from_bits(1),
            0.043_512_814_005_200_115,
            1e300,
            9_007_199_254_740_994.0,
        ] {
            assert!(round_trip(&[1.0, bad, 2.0], &[3]).is_none(), "{bad:?}");
        }
        // Runs that do not add up to the values.
        assert!(encode(&raw(&[1.0, 2.0]), &runs_of(&[1])).is_none());
        assert!(encode(&raw(&[1.0, 2.0]), &runs_of(&[1, 0, 1])).is_none());
    }

    #[test]
    fn damaged_chunks_are_errors_not_panics() {
        let xs: Vec<f64> = (0..300).map(|i| f64::from(i * 37 % 1001) / 100.0).collect();
        let runs = runs_of(&[100, 150, 50]);
        let enc = encode(&raw(&xs), &runs).unwrap();
        let mut out = vec![0f64; 300];
        for cut in 0..enc.len() {
            assert!(decode(&enc[..cut], &runs, &mut out).is_err(), "cut {cut}");
        }
        let mut longer = enc.clone();
        longer.push(0);
        assert!(decode(&longer, &runs, &mut out).is_err());
        for i in 0..enc.len() {
            for bit in [0x01u8, 0x40, 0x80] {
                let mut b = enc.clone();
                b[i] ^= bit;
                let _ = decode(&b, &runs, &mut out);
            }
        }
        for wrong in [&[100, 150][..], &[100, 150, 51], &[300, 0], &[]] {
            assert!(decode(&enc, &runs_of(wrong), &mut out).is_err());
        }
        assert!(decode(&enc, &runs, &mut vec![0f64; 301]).is_err());
    }

    proptest! {
        #[test]
        /// Under 2^50 the product `x × 10^e` is within 0.5 of the integer,
        /// so every such decimal is found (above, some are not).
        fn random_decimals_round_trip(
            e in 0u8..=DECIMAL_EXP_MAX,
            ints in proptest::collection::vec(-(1i64 << 50)..=(1i64 << 50), 1..500),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
        ) {
            let xs: Vec<f64> = ints.iter().map(|&i| i as f64 / POW10[usize::from(e)]).collect();
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(xs.len())).filter(|&c| c > 0).collect();
            at.push(0);
            at.push(xs.len());
            at.sort_unstable();
            at.dedup();
            let lens: Vec<usize> = at.windows(2).map(|w| w[1] - w[0]).collect();
            prop_assert!(round_trip(&xs, &lens).is_some());
        }

        #[test]
        fn any_bits_round_trip_or_are_refused(
            bits in proptest::collection::vec(any::<u64>(), 1..200),
        ) {
            let xs: Vec<f64> = bits.iter().map(|&b| f64::from_bits(b)).collect();
            let _ = round_trip(&xs, &[xs.len()]);
        }
    }
}
