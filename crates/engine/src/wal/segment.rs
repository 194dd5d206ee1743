//! WAL segment files: a 20-byte header, then frames. Spec: `formats/wal.md`.

use crate::error::{Error, Result};
use crate::ids::{SeqNo, TableId};
use crate::util::bin::{crc, le_u32, le_u64};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Segment magic.
pub const SEGMENT_MAGIC: [u8; 4] = *b"TSWL";
/// Current segment format version (2: a segment may end in zero bytes,
/// its preallocated space).
pub const SEGMENT_VERSION: u32 = 2;
/// Oldest segment version still read (1: frames only, no zero tail).
pub const SEGMENT_VERSION_MIN: u32 = 1;
/// Segment header length.
pub const SEGMENT_HEADER_LEN: usize = 20;

/// Encode the header of segment `no`.
pub fn encode_header(no: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(SEGMENT_HEADER_LEN);
    h.extend_from_slice(&SEGMENT_MAGIC);
    h.extend_from_slice(&SEGMENT_VERSION.to_le_bytes());
    h.extend_from_slice(&no.to_le_bytes());
    let c = crc(&h);
    h.extend_from_slice(&c.to_le_bytes());
    h
}

/// Validate a segment header; returns the segment number.
#[cfg(any(test, feature = "testing"))]
pub fn decode_header(buf: &[u8], file: &Path) -> Result<u64> {
    decode_header_versioned(buf, file).map(|(no, _)| no)
}

/// Validate a segment header; returns the segment number and version.
pub fn decode_header_versioned(buf: &[u8], file: &Path) -> Result<(u64, u32)> {
    if buf.len() < SEGMENT_HEADER_LEN {
        return Err(Error::corrupt("wal segment header (short)", file, 0));
    }
    if buf[0..4] != SEGMENT_MAGIC {
        return Err(Error::corrupt("wal segment magic", file, 0));
    }
    let expected = le_u32(buf, 16);
    let actual = crc(&buf[..16]);
    if expected != actual {
        return Err(Error::ChecksumMismatch {
            file: file.to_path_buf(),
            offset: 0,
            expected,
            actual,
        });
    }
    let version = le_u32(buf, 4);
    if !(SEGMENT_VERSION_MIN..=SEGMENT_VERSION).contains(&version) {
        return Err(Error::UnsupportedVersion {
            what: "wal segment",
            version,
        });
    }
    Ok((le_u64(buf, 8), version))
}

/// File name of segment `no`.
pub fn file_name(no: u64) -> String {
    format!("{no:016}.wal")
}

/// Name of the segment being preallocated (zero-filled) in the
/// background; it becomes the next segment when the active one rolls.
/// Never replayed: a leftover one is deleted at open.
pub const PREALLOC_NAME: &str = "next.wal.prealloc";

/// Parse a segment file name.
pub fn parse_name(name: &str) -> Option<u64> {
    let n = name.strip_suffix(".wal")?;
    if n.len() != 16 {
        return None;
    }
    n.parse().ok()
}

/// What the store knows about one segment: which tables it holds edits
/// for, and the highest sequence number per table.
#[derive(Clone, Debug, Default)]
pub struct SegmentInfo {
    pub no: u64,
    pub path: PathBuf,
    pub table_max_seq: HashMap<TableId, SeqNo>,
}

impl SegmentInfo {
    /// A segment with no entries noted yet.
    pub fn new(no: u64, path: PathBuf) -> Self {
        SegmentInfo {
            no,
            path,
            table_max_seq: HashMap::new(),
        }
    }

    /// Note an entry for `table` up to `seq`.
    pub fn note(&mut self, table: TableId, seq: SeqNo) {
        let e = self.table_max_seq.entry(table).or_default();
        *e = (*e).max(seq);
    }

    /// True when every edit in the segment is covered by a flush.
    pub fn retirable(&self, flushed: &dyn Fn(TableId) -> SeqNo) -> bool {
        self.table_max_seq.iter().all(|(t, s)| flushed(*t) >= *s)
    }
}

/// List `(no, path)` of the segments in `dir`, ascending.
pub fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for ent in rd {
        let ent = ent.map_err(|e| Error::io(dir, e))?;
        if let Some(no) = ent.file_name().to_str().and_then(parse_name) {
            out.push((no, ent.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Whether a segment's bytes show it was never written: shorter than its
/// header, or all zeros (a crash while it was created, before its header
/// reached the disk). Nothing in such a segment was acknowledged.
pub fn never_written(data: &[u8]) -> bool {
    data.len() < SEGMENT_HEADER_LEN || data.iter().all(|b| *b == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_corruption() {
        let h = encode_header(42);
        let p = Path::new("x.wal");
        assert_eq!(decode_header(&h, p).unwrap(), 42);
        for i in 0..h.len() {
            let mut c = h.clone();
            c[i] ^= 1;
            assert!(decode_header(&c, p).is_err());
        }
        assert!(decode_header(&h[..10], p).is_err());
        assert_eq!(parse_name(&file_name(7)), Some(7));
        assert_eq!(parse_name("7.wal"), None);
    }
}
