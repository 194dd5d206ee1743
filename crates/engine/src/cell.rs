//! The cell: one versioned entry as stored in memstore chunks and HFile
//! blocks. Fixed width per table:
//!
//! ```text
//! 0  key    [u8; 18]  row key (big-endian, see formats/key.md)
//! 18 seq    u64 LE    sequence number
//! 26 kind   u8        1 = put, 2 = delete (point tombstone)
//! 27 fields           the table's field bytes (zero for tombstones)
//! ```

use crate::key::{self, DeviceId, RowKey, KEY_LEN};
use crate::util::bin::le_u64;
use std::cmp::Ordering;

/// Bytes before the fields.
pub const CELL_HEAD_LEN: usize = KEY_LEN + 8 + 1;

/// Width of a cell for a table whose fields take `fields_width` bytes.
pub fn cell_width(fields_width: usize) -> usize {
    CELL_HEAD_LEN + fields_width
}

/// Cell kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum CellKind {
    Put = 1,
    Delete = 2,
}

impl CellKind {
    pub fn from_code(c: u8) -> Option<Self> {
        match c {
            1 => Some(CellKind::Put),
            2 => Some(CellKind::Delete),
            _ => None,
        }
    }
}

/// Append a cell to `out`.
pub fn push(out: &mut Vec<u8>, key: &RowKey, seq: u64, kind: CellKind, fields: &[u8]) {
    out.extend_from_slice(key);
    out.extend_from_slice(&seq.to_le_bytes());
    out.push(kind as u8);
    out.extend_from_slice(fields);
}

/// A borrowed cell (the caller guarantees `bytes.len() >= CELL_HEAD_LEN`).
#[derive(Clone, Copy, Debug)]
pub struct CellRef<'a>(pub &'a [u8]);

impl<'a> CellRef<'a> {
    pub fn key(&self) -> &'a RowKey {
        self.0[..KEY_LEN]
            .try_into()
            .expect("cell shorter than its head")
    }
    pub fn seq(&self) -> u64 {
        le_u64(self.0, KEY_LEN)
    }
    /// Kind byte; decoders validate it before cells reach readers.
    pub fn kind(&self) -> CellKind {
        CellKind::from_code(self.0[KEY_LEN + 8]).unwrap_or(CellKind::Put)
    }
    pub fn fields(&self) -> &'a [u8] {
        &self.0[CELL_HEAD_LEN..]
    }
    pub fn device(&self) -> DeviceId {
        key::device_of(self.key())
    }
    pub fn ts(&self) -> i64 {
        key::ts_of(self.key())
    }
}

/// Cell order: key ascending, then sequence number descending (newest first).
/// (Integer compares of the big-endian key: same order as the bytes.)
pub fn cmp(a: &[u8], b: &[u8]) -> Ordering {
    key_words(a)
        .cmp(&key_words(b))
        .then_with(|| CellRef(b).seq().cmp(&CellRef(a).seq()))
}

/// The 18-byte key as (first 16 bytes, last 2 bytes), big-endian.
fn key_words(c: &[u8]) -> (u128, u16) {
    let mut hi = [0u8; 16];
    hi.copy_from_slice(&c[..16]);
    (u128::from_be_bytes(hi), u16::from_be_bytes([c[16], c[17]]))
}

/// A range tombstone: hides cells of `device` with `from <= ts <= to` and a
/// lower sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeTombstone {
    pub device: DeviceId,
    pub from: i64,
    pub to: i64,
    pub seq: u64,
}

impl RangeTombstone {
    /// Does this tombstone hide a cell of `device` at `ts` with `seq`?
    pub fn hides(&self, device: DeviceId, ts: i64, seq: u64) -> bool {
        self.device == device && self.from <= ts && ts <= self.to && self.seq > seq
    }
}
