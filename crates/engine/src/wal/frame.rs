//! WAL entry framing. Spec: `formats/wal.md`.
//!
//! ```text
//! 0  len          u32  payload length in bytes
//! 4  kind         u8   1 = put rows, 2 = point deletes, 3 = range delete
//! 5  reserved     [u8; 3] zero
//! 8  table_id     u32
//! 12 count        u32  number of rows / deletes in the payload
//! 16 first_seq    u64  sequence number of the first row; rows take consecutive numbers
//! 24 payload_crc  u32  CRC32C of the payload
//! 28 header_crc   u32  CRC32C of bytes 0..28
//! 32 payload
//! ```
//!
//! The header has its own checksum so that a corrupted length is never
//! mistaken for a torn tail: a length is only trusted once its header
//! checksum holds.

use crate::util::bin::{crc, le_u32, le_u64};

/// Frame header length.
pub const FRAME_HEADER_LEN: usize = 32;
/// Largest payload a frame may carry.
pub const FRAME_PAYLOAD_MAX: usize = 64 << 20;
/// Length of one point-delete record in a payload.
pub const POINT_DELETE_LEN: usize = 16;
/// Length of a range-delete payload.
pub const RANGE_DELETE_LEN: usize = 24;

/// What an entry carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum EntryKind {
    /// Ingest rows (`device, ts, fields`), `count` of them.
    Put = 1,
    /// `count` records of `(device u64, ts i64)`.
    DeletePoints = 2,
    /// One `(device u64, from i64, to i64)`, inclusive; `count` = 1.
    DeleteRange = 3,
}

impl EntryKind {
    fn from_code(c: u8) -> Option<Self> {
        match c {
            1 => Some(EntryKind::Put),
            2 => Some(EntryKind::DeletePoints),
            3 => Some(EntryKind::DeleteRange),
            _ => None,
        }
    }
}

/// A decoded entry borrowing its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    pub kind: EntryKind,
    pub table_id: u32,
    pub first_seq: u64,
    pub count: u32,
    pub payload: &'a [u8],
}

impl Entry<'_> {
    /// Encoded length of this entry.
    #[cfg(any(test, feature = "testing"))]
    pub fn encoded_len(&self) -> usize {
        FRAME_HEADER_LEN + self.payload.len()
    }

    /// Last sequence number used by this entry.
    pub fn last_seq(&self) -> u64 {
        self.first_seq + u64::from(self.count.max(1)) - 1
    }
}

/// Append the encoded entry to `out`.
pub fn encode(e: &Entry<'_>, out: &mut Vec<u8>) {
    assert!(e.payload.len() <= FRAME_PAYLOAD_MAX, "payload over limit");
    let start = out.len();
    out.extend_from_slice(&(e.payload.len() as u32).to_le_bytes());
    out.push(e.kind as u8);
    out.extend_from_slice(&[0u8; 3]);
    out.extend_from_slice(&e.table_id.to_le_bytes());
    out.extend_from_slice(&e.count.to_le_bytes());
    out.extend_from_slice(&e.first_seq.to_le_bytes());
    out.extend_from_slice(&crc(e.payload).to_le_bytes());
    let h = crc(&out[start..start + 28]);
    out.extend_from_slice(&h.to_le_bytes());
    out.extend_from_slice(e.payload);
    if cfg!(debug_assertions) {
        match decode(&out[start..]) {
            Decoded::Entry(d, n) => {
                debug_assert_eq!(&d, e);
                debug_assert_eq!(n, out.len() - start);
            }
            _ => panic!("frame failed to decode right after encoding"),
        }
    }
}

/// Outcome of decoding at one position.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A valid entry and the bytes it occupies.
    Entry(Entry<'a>, usize),
    /// Fewer bytes than a header, or a valid header whose payload runs
    /// past the end of the buffer: a torn write at the end of the log.
    Incomplete,
    /// The header checksum fails: nothing in it (the length included) can
    /// be trusted.
    BadHeader { expected: u32, actual: u32 },
    /// The header is valid but the payload checksum fails.
    BadPayload { expected: u32, actual: u32 },
    /// Checksums hold but the fields are impossible.
    Invalid(String),
}

/// Decode one frame at the start of `buf`. Never panics.
pub fn decode(buf: &[u8]) -> Decoded<'_> {
    if buf.len() < FRAME_HEADER_LEN {
        return Decoded::Incomplete;
    }
    let (expected, actual) = (le_u32(buf, 28), crc(&buf[..28]));
    if expected != actual {
        return Decoded::BadHeader { expected, actual };
    }
    let len = le_u32(buf, 0) as usize;
    if len > FRAME_PAYLOAD_MAX {
        return Decoded::Invalid(format!("payload length {len} over limit"));
    }
    let total = FRAME_HEADER_LEN + len;
    if buf.len() < total {
        return Decoded::Incomplete;
    }
    let payload = &buf[FRAME_HEADER_LEN..total];
    let (expected, actual) = (le_u32(buf, 24), crc(payload));
    if expected != actual {
        return Decoded::BadPayload { expected, actual };
    }
    let Some(kind) = EntryKind::from_code(buf[4]) else {
        return Decoded::Invalid(format!("unknown entry kind {}", buf[4]));
    };
    let e = Entry {
        kind,
        table_id: le_u32(buf, 8),
        count: le_u32(buf, 12),
        first_seq: le_u64(buf, 16),
        payload,
    };
    if let Err(msg) = check_shape(&e) {
        return Decoded::Invalid(msg);
    }
    Decoded::Entry(e, total)
}

/// Does a frame header with a valid checksum start at `buf`?
pub fn valid_header_at(buf: &[u8]) -> bool {
    buf.len() >= FRAME_HEADER_LEN
        && le_u32(buf, 28) == crc(&buf[..28])
        && le_u32(buf, 0) as usize <= FRAME_PAYLOAD_MAX
        && EntryKind::from_code(buf[4]).is_some()
}

fn check_shape(e: &Entry<'_>) -> std::result::Result<(), String> {
    let n = e.count as usize;
    let ok = match e.kind {
        EntryKind::Put => n > 0 && e.payload.len().is_multiple_of(n) && e.payload.len() / n >= 16,
        EntryKind::DeletePoints => n > 0 && e.payload.len() == n * POINT_DELETE_LEN,
        EntryKind::DeleteRange => n == 1 && e.payload.len() == RANGE_DELETE_LEN,
    };
    if !ok {
        return Err(format!(
            "{:?} entry with count {n} and payload {} bytes",
            e.kind,
            e.payload.len()
        ));
    }
    if e.first_seq == 0 || e.first_seq.checked_add(u64::from(e.count)).is_none() {
        return Err(format!("sequence number {} out of range", e.first_seq));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let payload: Vec<u8> = (0..48u8).collect();
        let mut out = Vec::new();
        encode(
            &Entry {
                kind: EntryKind::Put,
                table_id: 3,
                first_seq: 10,
                count: 2,
                payload: &payload,
            },
            &mut out,
        );
        out
    }

    #[test]
    fn round_trip() {
        let b = sample();
        match decode(&b) {
            Decoded::Entry(e, n) => {
                assert_eq!(n, b.len());
                assert_eq!(e.first_seq, 10);
                assert_eq!(e.last_seq(), 11);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn truncation_is_incomplete_and_flips_are_invalid() {
        let b = sample();
        for cut in 0..b.len() {
            assert_eq!(decode(&b[..cut]), Decoded::Incomplete, "cut {cut}");
        }
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x40;
            let d = decode(&c);
            let want_header = i < FRAME_HEADER_LEN;
            assert!(
                matches!(d, Decoded::BadHeader { .. }) == want_header
                    && matches!(d, Decoded::BadPayload { .. }) != want_header,
                "flip {i}: {d:?}"
            );
        }
        assert!(valid_header_at(&b));
        assert!(!valid_header_at(&b[1..]));
    }
}
