//! HFile metadata sections and the fixed-size trailer. Spec:
//! `formats/hfile.md`. All decoders are pure functions over byte slices and
//! never panic.

use crate::cell::RangeTombstone;
use crate::error::{Error, Result};
use crate::key::{DeviceId, RowKey, KEY_LEN};
use crate::schema::BlockEncoding;
use crate::util::bin::{crc, le_u32, BinReader, BinWriter};

pub const TRAILER_MAGIC: [u8; 4] = *b"TSHF";
/// Current version of a file with columnar blocks: version 2 plus the
/// decimal chunk codec (4), which a version 2 reader does not know.
pub const HFILE_VERSION: u32 = 3;
/// The first version with columnar blocks and the info section's
/// `encoding` (still read; never holds decimal chunks).
pub const HFILE_VERSION_COLUMNAR: u32 = 2;
/// The version a file of row-major blocks only is written as (byte for
/// byte the format before columnar blocks, so older readers read it).
pub const HFILE_VERSION_ROWS: u32 = 1;
/// Info section length in version 1 and in versions 2 and 3.
#[cfg(any(test, feature = "testing"))]
pub const INFO_LEN_V1: usize = 109;
#[cfg(any(test, feature = "testing"))]
pub const INFO_LEN_V2: usize = 110;
pub const TRAILER_LEN: usize = 76;
/// Largest metadata section a reader accepts.
pub const SECTION_LEN_MAX: u32 = 1 << 30;
/// Longest stored block (header + body) a reader accepts: an
/// incompressible raw body plus codec overhead.
pub const BLOCK_STORED_MAX: usize = 2 * super::block::BLOCK_RAW_MAX;
/// Encoded size of one index entry.
pub const INDEX_ENTRY_LEN: usize = 2 * KEY_LEN + 8 + 4 + 4 + 4;

/// Location and checksum of one section.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SectionRef {
    pub offset: u64,
    pub len: u32,
    pub crc: u32,
}

/// The trailer: the four sections, in this order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trailer {
    /// [`HFILE_VERSION_ROWS`], [`HFILE_VERSION_COLUMNAR`] or [`HFILE_VERSION`].
    pub version: u32,
    pub index: SectionRef,
    pub bloom: SectionRef,
    pub info: SectionRef,
    pub tombstones: SectionRef,
}

impl Trailer {
    fn sections(&self) -> [&SectionRef; 4] {
        [&self.index, &self.bloom, &self.info, &self.tombstones]
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = BinWriter::new();
        w.bytes(&TRAILER_MAGIC).u32(self.version);
        for s in self.sections() {
            w.u64(s.offset).u32(s.len).u32(s.crc);
        }
        let c = crc(&w.buf);
        w.u32(c);
        debug_assert_eq!(w.buf.len(), TRAILER_LEN);
        w.into_inner()
    }

    /// Decode and check a trailer; `file_len` bounds the section offsets.
    pub fn decode(b: &[u8], file_len: u64) -> Result<Self> {
        if b.len() != TRAILER_LEN {
            return Err(Error::decode("hfile trailer", format!("{} bytes", b.len())));
        }
        if b[0..4] != TRAILER_MAGIC {
            return Err(Error::decode("hfile trailer", "bad magic"));
        }
        let expected = le_u32(b, TRAILER_LEN - 4);
        let actual = crc(&b[..TRAILER_LEN - 4]);
        if expected != actual {
            return Err(Error::checksum(0, expected, actual));
        }
        let version = le_u32(b, 4);
        if !(HFILE_VERSION_ROWS..=HFILE_VERSION).contains(&version) {
            return Err(Error::UnsupportedVersion {
                what: "hfile",
                version,
            });
        }
        let mut r = BinReader::new(&b[8..TRAILER_LEN - 4], "hfile trailer");
        let mut s = [SectionRef::default(); 4];
        let data_end = file_len.saturating_sub(TRAILER_LEN as u64);
        for x in s.iter_mut() {
            *x = SectionRef {
                offset: r.u64()?,
                len: r.u32()?,
                crc: r.u32()?,
            };
            let end = x.offset.checked_add(u64::from(x.len));
            if x.len > SECTION_LEN_MAX || end.is_none_or(|e| e > data_end) {
                return Err(Error::decode("hfile trailer", "section outside the file"));
            }
        }
        Ok(Trailer {
            version,
            index: s[0],
            bloom: s[1],
            info: s[2],
            tombstones: s[3],
        })
    }
}

/// One block index entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    pub first_key: RowKey,
    pub last_key: RowKey,
    pub offset: u64,
    /// Total on-disk length (header + body).
    pub len: u32,
    pub crc: u32,
    pub cells: u32,
}

pub fn encode_index(entries: &[IndexEntry]) -> Vec<u8> {
    let mut w = BinWriter::new();
    w.u32(entries.len() as u32);
    for e in entries {
        w.bytes(&e.first_key)
            .bytes(&e.last_key)
            .u64(e.offset)
            .u32(e.len)
            .u32(e.crc)
            .u32(e.cells);
    }
    w.into_inner()
}

/// Decode the index; checks that blocks lie in `[0, data_end)`, do not
/// overlap and are in key order.
pub fn decode_index(b: &[u8], data_end: u64) -> Result<Vec<IndexEntry>> {
    let mut r = BinReader::new(b, "hfile index");
    let n = r.u32()? as usize;
    if n.checked_mul(INDEX_ENTRY_LEN) != Some(r.remaining()) {
        return Err(Error::decode(
            "hfile index",
            format!("{n} entries in {} bytes", b.len()),
        ));
    }
    let mut out: Vec<IndexEntry> = Vec::with_capacity(n);
    for _ in 0..n {
        let e = IndexEntry {
            first_key: r.array()?,
            last_key: r.array()?,
            offset: r.u64()?,
            len: r.u32()?,
            crc: r.u32()?,
            cells: r.u32()?,
        };
        let end = e.offset.checked_add(u64::from(e.len));
        let too_long = e.len as usize > BLOCK_STORED_MAX;
        if e.first_key > e.last_key || e.cells == 0 || too_long || end.is_none_or(|x| x > data_end)
        {
            return Err(Error::decode("hfile index", "invalid block entry"));
        }
        if let Some(p) = out.last() {
            if p.offset + u64::from(p.len) > e.offset || p.last_key > e.first_key {
                return Err(Error::decode(
                    "hfile index",
                    "blocks overlap or out of order",
                ));
            }
        }
        out.push(e);
    }
    r.finish()?;
    Ok(out)
}

/// Summary of a file's contents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileInfo {
    pub table_id: u32,
    pub layout_id: u32,
    pub fields_width: u32,
    pub codec: u8,
    pub cells: u64,
    pub tombstones: u64,
    pub range_tombstones: u32,
    pub min_key: RowKey,
    pub max_key: RowKey,
    pub min_ts: i64,
    pub max_ts: i64,
    pub min_seq: u64,
    pub max_seq: u64,
    pub created_ms: i64,
    /// Block encoding the writer was asked for (version 2; a version 1
    /// file is `Rows`). Each block's header says how that block is stored.
    pub encoding: BlockEncoding,
}

impl FileInfo {
    /// The info section of a file of `version`.
    pub fn encode(&self, version: u32) -> Vec<u8> {
        let mut w = BinWriter::new();
        w.u32(self.table_id)
            .u32(self.layout_id)
            .u32(self.fields_width)
            .u8(self.codec)
            .u64(self.cells)
            .u64(self.tombstones)
            .u32(self.range_tombstones)
            .bytes(&self.min_key)
            .bytes(&self.max_key)
            .i64(self.min_ts)
            .i64(self.max_ts)
            .u64(self.min_seq)
            .u64(self.max_seq)
            .i64(self.created_ms);
        if version >= HFILE_VERSION_COLUMNAR {
            w.u8(self.encoding.code());
        }
        w.into_inner()
    }

    /// Decode the info section of a file of `version`.
    pub fn decode(b: &[u8], version: u32) -> Result<Self> {
        let mut r = BinReader::new(b, "hfile info");
        let mut i = FileInfo {
            table_id: r.u32()?,
            layout_id: r.u32()?,
            fields_width: r.u32()?,
            codec: r.u8()?,
            cells: r.u64()?,
            tombstones: r.u64()?,
            range_tombstones: r.u32()?,
            min_key: r.array()?,
            max_key: r.array()?,
            min_ts: r.i64()?,
            max_ts: r.i64()?,
            min_seq: r.u64()?,
            max_seq: r.u64()?,
            created_ms: r.i64()?,
            encoding: BlockEncoding::Rows,
        };
        if version >= HFILE_VERSION_COLUMNAR {
            i.encoding = BlockEncoding::from_code(r.u8()?)?;
        }
        r.finish()?;
        if i.fields_width > 65_536 || i.min_seq > i.max_seq {
            return Err(Error::decode("hfile info", "impossible values"));
        }
        Ok(i)
    }
}

/// Range tombstones: `count u32`, then `device u64 | from i64 | to i64 | seq u64`.
pub fn encode_tombstones(t: &[RangeTombstone]) -> Vec<u8> {
    let mut w = BinWriter::new();
    w.u32(t.len() as u32);
    for x in t {
        w.u64(x.device.0).i64(x.from).i64(x.to).u64(x.seq);
    }
    w.into_inner()
}

pub fn decode_tombstones(b: &[u8]) -> Result<Vec<RangeTombstone>> {
    let mut r = BinReader::new(b, "hfile range tombstones");
    let n = r.u32()? as usize;
    if n.checked_mul(32) != Some(r.remaining()) {
        return Err(Error::decode("hfile range tombstones", "length mismatch"));
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(RangeTombstone {
            device: DeviceId(r.u64()?),
            from: r.i64()?,
            to: r.i64()?,
            seq: r.u64()?,
        });
    }
    Ok(out)
}
