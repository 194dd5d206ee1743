//! Manifest records. Spec: `formats/manifest.md`.
//!
//! File: header `magic "TSMF" | version u32 | crc u32` (12 bytes), then
//! records `len u32 | payload_crc u32 | header_crc u32 | payload`: the
//! payload CRC32C covers the payload, the header CRC32C covers bytes 0..8
//! (so a length is trusted only when its checksum holds). The payload
//! starts with a tag byte.

use crate::error::{Error, Result};
use crate::key::{RowKey, KEY_LEN};
use crate::schema::{BlockEncoding, TableSchema};
use crate::util::bin::{crc, le_u32, BinReader, BinWriter};

pub const MANIFEST_MAGIC: [u8; 4] = *b"TSMF";
pub const MANIFEST_VERSION: u32 = 5;
/// Oldest version a reader accepts (a read-write open rewrites it as the
/// current version before appending).
pub const MANIFEST_VERSION_MIN: u32 = 3;
pub const MANIFEST_HEADER_LEN: usize = 12;
pub const RECORD_HEADER_LEN: usize = 12;
/// Largest record payload.
pub const RECORD_LEN_MAX: usize = 16 << 20;

const TAG_CREATE_TABLE: u8 = 1;
const TAG_FILES: u8 = 2;
const TAG_FILE_ID_FLOOR: u8 = 3;
const TAG_SPLIT: u8 = 4;
const TAG_MERGE: u8 = 5;
const TAG_DEVICE: u8 = 6;
const TAG_TABLE_ENCODING: u8 = 7;
const TAG_WAL_DIR: u8 = 8;
/// Longest WAL directory path (bytes).
pub const WAL_DIR_MAX: usize = 4096;
/// Longest device name, tag key or tag value (bytes).
pub const DEVICE_TEXT_MAX: usize = 256;
/// Most tags per device.
pub const DEVICE_TAGS_MAX: usize = 64;
/// Most regions listed in one `CreateTable` record.
pub const REGIONS_PER_RECORD_MAX: usize = 1 << 16;

/// A region in a `CreateTable` record: its id and first key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionDef {
    pub id: u32,
    pub start: RowKey,
}

/// What the manifest remembers about one HFile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileMeta {
    pub file_id: u64,
    pub len_bytes: u64,
    pub cells: u64,
    pub min_seq: u64,
    pub max_seq: u64,
    pub min_ts: i64,
    pub max_ts: i64,
}

/// One manifest edit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// A new table and its region map (in a snapshot: the current map).
    /// `next_region_id` is the lowest id never used by the table.
    CreateTable {
        table_id: u32,
        schema: TableSchema,
        regions: Vec<RegionDef>,
        next_region_id: u32,
    },
    /// Files added to and removed from a region, atomically, and (for a
    /// flush) the region's new flushed sequence number.
    Files {
        table_id: u32,
        region_id: u32,
        added: Vec<FileMeta>,
        removed: Vec<u64>,
        flushed_seq: Option<u64>,
    },
    /// File ids up to this one were used: never hand them out again, even
    /// after the files are gone (written into every snapshot).
    FileIdFloor { max_file_id: u64 },
    /// Region `parent` is replaced by `left = [parent.start, at)` and
    /// `right = [at, parent.end)`; both inherit its files and flushed
    /// sequence number.
    Split {
        table_id: u32,
        parent: u32,
        at: RowKey,
        left: u32,
        right: u32,
    },
    /// Device `id` is called `name` and carries `tags` (registered, or its
    /// tags replaced). Names are unique; ids are never reused.
    Device {
        id: u64,
        name: String,
        tags: Vec<(String, String)>,
    },
    /// Adjacent regions `left` and `right` (the one starting where `left`
    /// ends) become `merged`, with the union of their files.
    Merge {
        table_id: u32,
        left: u32,
        right: u32,
        merged: u32,
    },
    /// The table's block encoding is now `encoding`: flushes and
    /// compactions from here on write it (files already written keep
    /// theirs until a compaction rewrites them).
    TableEncoding {
        table_id: u32,
        encoding: BlockEncoding,
    },
    /// The store keeps its WAL in `path` (absolute), not in `wal/` under
    /// its directory (version 5; a snapshot writes it right after the
    /// FileIdFloor when set).
    WalDir { path: String },
}

/// Header bytes of a manifest file.
pub fn encode_header() -> Vec<u8> {
    let mut h = MANIFEST_MAGIC.to_vec();
    h.extend_from_slice(&MANIFEST_VERSION.to_le_bytes());
    let c = crc(&h);
    h.extend_from_slice(&c.to_le_bytes());
    h
}

/// Check a manifest header; its version.
pub fn decode_header(b: &[u8]) -> Result<u32> {
    if b.len() < MANIFEST_HEADER_LEN || b[0..4] != MANIFEST_MAGIC {
        return Err(Error::decode("manifest header", "bad magic or short"));
    }
    let (expected, actual) = (le_u32(b, 8), crc(&b[..8]));
    if expected != actual {
        return Err(Error::checksum(0, expected, actual));
    }
    let v = le_u32(b, 4);
    if !(MANIFEST_VERSION_MIN..=MANIFEST_VERSION).contains(&v) {
        return Err(Error::UnsupportedVersion {
            what: "manifest",
            version: v,
        });
    }
    Ok(v)
}

impl Record {
    #[expect(
        clippy::too_many_lines,
        reason = "one match arm per record kind, the encoder mirror of decode_payload"
    )]
    fn payload(&self) -> Vec<u8> {
        let mut w = BinWriter::new();
        match self {
            Record::CreateTable {
                table_id,
                schema,
                regions,
                next_region_id,
            } => {
                w.u8(TAG_CREATE_TABLE).u32(*table_id);
                schema.encode(&mut w);
                w.u32(*next_region_id).u32(regions.len() as u32);
                for r in regions {
                    w.u32(r.id).bytes(&r.start);
                }
            }
            Record::Files {
                table_id,
                region_id,
                added,
                removed,
                flushed_seq,
            } => {
                w.u8(TAG_FILES).u32(*table_id).u32(*region_id);
                w.u8(flushed_seq.is_some() as u8)
                    .u64(flushed_seq.unwrap_or(0));
                w.u32(added.len() as u32);
                for f in added {
                    w.u64(f.file_id)
                        .u64(f.len_bytes)
                        .u64(f.cells)
                        .u64(f.min_seq)
                        .u64(f.max_seq)
                        .i64(f.min_ts)
                        .i64(f.max_ts);
                }
                w.u32(removed.len() as u32);
                for r in removed {
                    w.u64(*r);
                }
            }
            Record::FileIdFloor { max_file_id } => {
                w.u8(TAG_FILE_ID_FLOOR).u64(*max_file_id);
            }
            Record::Split {
                table_id,
                parent,
                at,
                left,
                right,
            } => {
                w.u8(TAG_SPLIT).u32(*table_id).u32(*parent).bytes(at);
                w.u32(*left).u32(*right);
            }
            Record::Device { id, name, tags } => {
                w.u8(TAG_DEVICE).u64(*id).str(name).u16(tags.len() as u16);
                for (k, v) in tags {
                    w.str(k).str(v);
                }
            }
            Record::Merge {
                table_id,
                left,
                right,
                merged,
            } => {
                w.u8(TAG_MERGE).u32(*table_id).u32(*left).u32(*right);
                w.u32(*merged);
            }
            Record::TableEncoding { table_id, encoding } => {
                w.u8(TAG_TABLE_ENCODING).u32(*table_id).u8(encoding.code());
            }
            Record::WalDir { path } => {
                w.u8(TAG_WAL_DIR).str(path);
            }
        }
        w.into_inner()
    }

    /// Append the framed record to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let p = self.payload();
        assert!(p.len() <= RECORD_LEN_MAX);
        let start = out.len();
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc(&p).to_le_bytes());
        let h = crc(&out[start..start + 8]);
        out.extend_from_slice(&h.to_le_bytes());
        out.extend_from_slice(&p);
    }

    /// Decode a payload (after its frame was checked) of a manifest of
    /// `version`.
    #[expect(
        clippy::too_many_lines,
        reason = "one match arm per record kind, laid out as formats/manifest.md's table"
    )]
    pub fn decode_payload(p: &[u8], version: u32) -> Result<Self> {
        let mut r = BinReader::new(p, "manifest record");
        let rec = match r.u8()? {
            TAG_CREATE_TABLE => {
                let table_id = r.u32()?;
                let schema = TableSchema::decode(&mut r, version)?;
                let next_region_id = r.u32()?;
                let n = r.u32()? as usize;
                if n > REGIONS_PER_RECORD_MAX {
                    return Err(Error::decode("manifest record", format!("{n} regions")));
                }
                let mut regions = Vec::with_capacity(n.min(4096));
                for _ in 0..n {
                    regions.push(RegionDef {
                        id: r.u32()?,
                        start: key_at(&mut r)?,
                    });
                }
                Record::CreateTable {
                    table_id,
                    schema,
                    regions,
                    next_region_id,
                }
            }
            TAG_FILES => {
                let table_id = r.u32()?;
                let region_id = r.u32()?;
                let has = r.u8()? != 0;
                let seq = r.u64()?;
                let n = r.u32()? as usize;
                let mut added = Vec::with_capacity(n.min(4096));
                for _ in 0..n {
                    added.push(FileMeta {
                        file_id: r.u64()?,
                        len_bytes: r.u64()?,
                        cells: r.u64()?,
                        min_seq: r.u64()?,
                        max_seq: r.u64()?,
                        min_ts: r.i64()?,
                        max_ts: r.i64()?,
                    });
                }
                let m = r.u32()? as usize;
                let mut removed = Vec::with_capacity(m.min(4096));
                for _ in 0..m {
                    removed.push(r.u64()?);
                }
                Record::Files {
                    table_id,
                    region_id,
                    added,
                    removed,
                    flushed_seq: has.then_some(seq),
                }
            }
            TAG_FILE_ID_FLOOR => Record::FileIdFloor {
                max_file_id: r.u64()?,
            },
            TAG_SPLIT => Record::Split {
                table_id: r.u32()?,
                parent: r.u32()?,
                at: key_at(&mut r)?,
                left: r.u32()?,
                right: r.u32()?,
            },
            TAG_DEVICE => {
                let id = r.u64()?;
                let name = r.str()?;
                let n = r.u16()? as usize;
                if n > DEVICE_TAGS_MAX {
                    return Err(Error::decode("manifest record", format!("{n} device tags")));
                }
                let mut tags = Vec::with_capacity(n);
                for _ in 0..n {
                    tags.push((r.str()?, r.str()?));
                }
                Record::Device { id, name, tags }
            }
            TAG_MERGE => Record::Merge {
                table_id: r.u32()?,
                left: r.u32()?,
                right: r.u32()?,
                merged: r.u32()?,
            },
            TAG_TABLE_ENCODING => Record::TableEncoding {
                table_id: r.u32()?,
                encoding: BlockEncoding::from_code(r.u8()?)?,
            },
            TAG_WAL_DIR if version >= 5 => Record::WalDir { path: r.str()? },
            t => return Err(Error::decode("manifest record", format!("unknown tag {t}"))),
        };
        r.finish()?;
        Ok(rec)
    }
}

fn key_at(r: &mut BinReader<'_>) -> Result<RowKey> {
    r.array::<KEY_LEN>()
}

/// Result of decoding one framed record at the start of a buffer.
#[derive(Debug)]
pub enum Framed {
    Record(Record, usize),
    /// Fewer bytes than a header, or a valid header whose payload runs past
    /// the end: a torn append.
    Incomplete,
    /// Header checksum fails: its length cannot be trusted.
    BadHeader {
        expected: u32,
        actual: u32,
    },
    /// Valid header, payload checksum fails; `len` is the whole record.
    BadPayload {
        expected: u32,
        actual: u32,
        len: usize,
    },
    /// Checksums hold but the payload is not a valid record.
    Invalid(String),
}

/// Decode one framed record of a current-version manifest. Never panics.
#[cfg(any(test, feature = "testing"))]
pub fn decode_framed(b: &[u8]) -> Framed {
    decode_framed_v(b, MANIFEST_VERSION)
}

/// Decode one framed record of a manifest of `version`. Never panics.
pub fn decode_framed_v(b: &[u8], version: u32) -> Framed {
    if b.len() < RECORD_HEADER_LEN {
        return Framed::Incomplete;
    }
    let (expected, actual) = (le_u32(b, 8), crc(&b[..8]));
    if expected != actual {
        return Framed::BadHeader { expected, actual };
    }
    let len = le_u32(b, 0) as usize;
    if len > RECORD_LEN_MAX {
        return Framed::Invalid(format!("manifest record length {len} over limit"));
    }
    if b.len() < RECORD_HEADER_LEN + len {
        return Framed::Incomplete;
    }
    let p = &b[RECORD_HEADER_LEN..RECORD_HEADER_LEN + len];
    let (expected, actual) = (le_u32(b, 4), crc(p));
    if expected != actual {
        return Framed::BadPayload {
            expected,
            actual,
            len: RECORD_HEADER_LEN + len,
        };
    }
    match Record::decode_payload(p, version) {
        Ok(r) => Framed::Record(r, RECORD_HEADER_LEN + len),
        Err(e) => Framed::Invalid(e.to_string()),
    }
}
