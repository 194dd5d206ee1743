//! Ingest batches: a byte slice of fixed-width rows, read with `bytemuck`
//! without per-row parsing and without unaligned access.

use crate::error::{Error, Result};
use bytemuck::{Pod, Zeroable};

/// The first 16 bytes of every ingest row.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct RowHead {
    /// Device id (little-endian on the wire).
    pub device: u64,
    /// Timestamp in milliseconds since the Unix epoch (little-endian).
    pub ts: i64,
}

/// Width of [`RowHead`].
pub const ROW_HEAD_LEN: usize = std::mem::size_of::<RowHead>();
const _: () = assert!(ROW_HEAD_LEN == 16);

impl RowHead {
    /// Read a row head from any (possibly unaligned) slice of >= 16 bytes.
    /// Host byte order is little-endian on every supported target.
    pub fn read(row: &[u8]) -> RowHead {
        let h: RowHead = bytemuck::pod_read_unaligned(&row[..ROW_HEAD_LEN]);
        RowHead {
            device: u64::from_le(h.device),
            ts: i64::from_le(h.ts),
        }
    }
}

/// The timestamps a store takes: 1970-01-01T00:00:00Z ..=
/// 9999-12-31T23:59:59.999Z, in ms (every protocol and the engine's
/// write path check them; time arithmetic needs no overflow checks
/// inside this range).
pub const TS_MIN: i64 = 0;
/// The latest timestamp a row may carry: 9999-12-31T23:59:59.999Z.
pub const TS_MAX: i64 = 253_402_300_799_999;

/// A validated batch of ingest rows.
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    bytes: &'a [u8],
    width: usize,
}

impl<'a> Batch<'a> {
    /// Validate that `bytes` is a whole number of `width`-byte rows.
    pub fn new(bytes: &'a [u8], width: usize) -> Result<Self> {
        assert!(width >= ROW_HEAD_LEN);
        if bytes.is_empty() {
            return Err(Error::invalid("batch", "empty batch"));
        }
        if !bytes.len().is_multiple_of(width) {
            return Err(Error::invalid(
                "batch",
                format!(
                    "length {} is not a multiple of the row width {width} ({} whole rows and {} extra bytes)",
                    bytes.len(),
                    bytes.len() / width,
                    bytes.len() % width
                ),
            ));
        }
        Ok(Batch { bytes, width })
    }
    /// Rows in the batch.
    pub fn len(&self) -> usize {
        self.bytes.len() / self.width
    }
    /// Whether the batch has no rows.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    /// Bytes per row.
    pub fn width(&self) -> usize {
        self.width
    }
    /// The batch's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
    /// Iterate `(head, field bytes)` per row.
    /// The field bytes of row `i` (panics when `i` is out of range: row
    /// indexes come from this batch).
    pub fn fields(&self, i: usize) -> &'a [u8] {
        let at = i * self.width;
        &self.bytes[at + ROW_HEAD_LEN..at + self.width]
    }
    /// Every row's timestamp is within [`TS_MIN`]`..=`[`TS_MAX`]; the
    /// error names the first row that is not.
    pub fn check_timestamps(&self) -> Result<()> {
        for (i, (head, _)) in self.rows().enumerate() {
            let ts = head.ts;
            if !(TS_MIN..=TS_MAX).contains(&ts) {
                return Err(Error::invalid(
                    "batch",
                    format!(
                        "row {i}: timestamp {ts} ms is outside {TS_MIN}..={TS_MAX} (1970-01-01 to 9999-12-31)"
                    ),
                ));
            }
        }
        Ok(())
    }
    /// Each row's head (device, timestamp) and field bytes.
    pub fn rows(&self) -> impl Iterator<Item = (RowHead, &'a [u8])> + 'a {
        self.bytes
            .chunks_exact(self.width)
            .map(|r| (RowHead::read(r), &r[ROW_HEAD_LEN..]))
    }
}

/// Append one row to an ingest buffer (helper for clients and tests).
pub fn push_row(buf: &mut Vec<u8>, device: u64, ts: i64, fields: &[u8]) {
    buf.extend_from_slice(&device.to_le_bytes());
    buf.extend_from_slice(&ts.to_le_bytes());
    buf.extend_from_slice(fields);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unaligned_batches_read_correctly() {
        let mut buf = vec![0u8]; // force misalignment
        push_row(&mut buf, 7, -3, &[1, 2, 3]);
        push_row(&mut buf, 8, 4, &[4, 5, 6]);
        let b = Batch::new(&buf[1..], 19).unwrap();
        let rows: Vec<_> = b.rows().collect();
        assert_eq!(rows[0].0, RowHead { device: 7, ts: -3 });
        assert_eq!(rows[1].1, &[4, 5, 6]);
        assert!(Batch::new(&buf[1..buf.len() - 1], 19).is_err());
        assert!(Batch::new(&[], 19).is_err());
    }
}
