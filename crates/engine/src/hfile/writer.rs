//! Streaming HFile writer: cells in, blocks + sections + trailer out, all
//! through the I/O backend. The caller writes to a temporary name and
//! publishes with [`publish`] (rename + directory fsync).
//!
//! Every write but the file's last is a whole number of aligned 4 KiB
//! blocks (1 MiB to just under 2 MiB), so that a file opened for direct
//! writes ([`crate::io::direct`], `WriterOptions::direct`) gets them all
//! direct; the last, partial block is written buffered.

use super::block;
use super::bloom::Bloom;
use super::columnar::{columnar_block_rows, ColumnarConfig};
use super::sections::{
    encode_index, encode_tombstones, FileInfo, IndexEntry, SectionRef, Trailer, HFILE_VERSION,
    HFILE_VERSION_ROWS,
};
use crate::cache::BlockCache;
use crate::cell::{self, CellKind, CellRef, RangeTombstone};
use crate::error::Result;
use crate::io::direct::{self, DIRECT_ALIGN};
use crate::io::rate::{Priority, RateLimiter};
use crate::io::{Backend, IoFile, OpenMode};
use crate::key::{DeviceId, RowKey};
use crate::schema::{BlockEncoding, Compression, FieldType, TableSchema};
use crate::util::bin::crc;
use std::path::Path;
use std::sync::Arc;

/// Bytes buffered before a write is issued (a multiple of `DIRECT_ALIGN`).
const WRITE_CHUNK_BYTES: usize = 1 << 20;

/// How to write a file.
#[derive(Clone, Debug)]
pub struct WriterOptions {
    pub table_id: u32,
    pub layout_id: u32,
    pub fields_width: usize,
    pub compression: Compression,
    pub block_size_bytes: usize,
    pub bloom: bool,
    /// Cells expected (sizes the bloom filter).
    pub expected_cells: usize,
    pub created_ms: i64,
    /// Bypass the page cache ([`crate::io::direct`]).
    pub direct: bool,
    /// Layout of the data blocks.
    pub encoding: BlockEncoding,
    /// The table's field types, in order (what a columnar block needs;
    /// their widths add up to `fields_width`).
    pub field_types: Vec<FieldType>,
    /// `pco` level of columnar blocks (0..=12).
    pub pco_level: usize,
    /// Pass every write through this rate limiter at this priority.
    pub limiter: Option<(Arc<RateLimiter>, Priority)>,
}

impl WriterOptions {
    /// Options for a file of table `id` with `schema`: the table's
    /// compression, block size, bloom and encoding; the caller sets the
    /// rest (a flush lowers the levels, tests shrink blocks).
    pub fn for_table(
        id: u32,
        schema: &TableSchema,
        expected_cells: usize,
        created_ms: i64,
    ) -> Self {
        let o = &schema.options;
        WriterOptions {
            table_id: id,
            layout_id: schema.layout_id(),
            fields_width: schema.fields_width(),
            compression: o.compression,
            block_size_bytes: o.block_size_bytes as usize,
            bloom: o.bloom,
            expected_cells,
            created_ms,
            direct: false,
            encoding: o.encoding,
            field_types: schema.fields.iter().map(|f| f.ty).collect(),
            pco_level: PCO_LEVEL_DEFAULT,
            limiter: None,
        }
    }
}

/// `pco` level of major compactions (pco's own default).
pub const PCO_LEVEL_DEFAULT: usize = 8;
/// `pco` level of minor compactions, which must keep up with ingest
/// (about 1.7× faster than level 8, files about 15 % bigger until the
/// next major compaction).
pub const PCO_LEVEL_MINOR: usize = 4;

/// A columnar block closes at this many raw bytes (cells × width) even
/// before [`columnar_block_rows`], so wide rows stay under `BLOCK_RAW_MAX`.
pub const COLUMNAR_BLOCK_RAW_MAX: usize = 4 << 20;

/// Writes one HFile.
pub struct HFileWriter {
    file: Box<dyn IoFile>,
    opts: WriterOptions,
    cell_width: usize,
    raw: Vec<u8>,
    raw_cells: u32,
    /// Encoded bytes not yet written, starting at `out_offset`.
    out: Vec<u8>,
    /// Bytes written so far (a multiple of `DIRECT_ALIGN` until `finish`).
    out_offset: u64,
    index: Vec<IndexEntry>,
    bloom: Option<Bloom>,
    info: FileInfo,
    last_device: Option<DeviceId>,
    last: Option<(RowKey, u64)>,
    /// Where each finished block's cells also go, under this file id
    /// ([`HFileWriter::warm_cache`]).
    warm: Option<(Arc<BlockCache>, u64)>,
    /// Encoding of the next block (`opts.encoding` unless a test mixes).
    block_encoding: BlockEncoding,
    /// A columnar block was written: the file is version 2.
    wrote_columnar: bool,
    /// Devices of a columnar file with a bloom filter, in order.
    devices: Vec<DeviceId>,
}

impl HFileWriter {
    /// Create `path` (must not exist).
    pub fn create(backend: &dyn Backend, path: &Path, opts: WriterOptions) -> Result<Self> {
        let mode = if opts.direct {
            OpenMode::CreateNewDirect
        } else {
            OpenMode::CreateNew
        };
        let file = backend.open(path, mode)?;
        assert!(
            opts.encoding == BlockEncoding::Rows
                || opts.field_types.iter().map(|t| t.width()).sum::<usize>() == opts.fields_width,
            "columnar files need the field types"
        );
        let info = FileInfo {
            encoding: opts.encoding,
            table_id: opts.table_id,
            layout_id: opts.layout_id,
            fields_width: opts.fields_width as u32,
            codec: opts.compression.code(),
            min_ts: i64::MAX,
            max_ts: i64::MIN,
            min_seq: u64::MAX,
            created_ms: opts.created_ms,
            ..Default::default()
        };
        Ok(HFileWriter {
            file,
            cell_width: cell::cell_width(opts.fields_width),
            // A columnar file's filter holds device ids only (keys would
            // cost more than the columns: 1.6 bytes per row).
            bloom: (opts.bloom && opts.encoding == BlockEncoding::Rows)
                .then(|| Bloom::with_capacity(bloom_entries(opts.expected_cells))),
            devices: Vec::new(),
            raw: Vec::with_capacity(opts.block_size_bytes + 4096),
            raw_cells: 0,
            out: Vec::with_capacity(WRITE_CHUNK_BYTES * 2),
            out_offset: 0,
            index: Vec::new(),
            info,
            last_device: None,
            last: None,
            warm: None,
            block_encoding: opts.encoding,
            wrote_columnar: false,
            opts,
        })
    }

    /// Also put every block into `cache` as file `file_id`'s, as it is
    /// written (what a reader of the published file would load), so the
    /// file's first reads need no disk read: for flushes, whose output is
    /// the newest data, which telemetry reads ask for (RocksDB's
    /// `prepopulate_block_cache`). Blocks of a file that never gets
    /// published are left to eviction (file ids are never reused).
    pub fn warm_cache(mut self, cache: Arc<BlockCache>, file_id: u64) -> Self {
        self.warm = Some((cache, file_id));
        self
    }

    /// Append one cell; cells must arrive in cell order.
    pub fn add(&mut self, c: &[u8]) -> Result<()> {
        debug_assert_eq!(c.len(), self.cell_width);
        let cr = CellRef(c);
        if let Some((k, s)) = self.last {
            assert!(
                (k, std::cmp::Reverse(s)) < (*cr.key(), std::cmp::Reverse(cr.seq())),
                "cells out of order"
            );
        } else {
            self.info.min_key = *cr.key();
        }
        self.last = Some((*cr.key(), cr.seq()));
        self.info.max_key = *cr.key();
        self.info.cells += 1;
        if cr.kind() == CellKind::Delete {
            self.info.tombstones += 1;
        }
        let ts = cr.ts();
        self.info.min_ts = self.info.min_ts.min(ts);
        self.info.max_ts = self.info.max_ts.max(ts);
        self.info.min_seq = self.info.min_seq.min(cr.seq());
        self.info.max_seq = self.info.max_seq.max(cr.seq());
        let d = cr.device();
        if let Some(b) = &mut self.bloom {
            b.insert_key(cr.key());
            if self.last_device != Some(d) {
                b.insert_device(d);
            }
        } else if self.opts.bloom && self.last_device != Some(d) {
            self.devices.push(d); // columnar: a filter of devices, built at the end
        }
        self.last_device = Some(d);
        self.raw.extend_from_slice(c);
        self.raw_cells += 1;
        let full = match self.block_encoding {
            BlockEncoding::Rows => self.raw.len() >= self.opts.block_size_bytes,
            BlockEncoding::Columnar => {
                self.raw_cells as usize >= columnar_block_rows(self.opts.block_size_bytes)
                    || self.raw.len() >= COLUMNAR_BLOCK_RAW_MAX
            }
        };
        if full {
            self.finish_block()?;
        }
        Ok(())
    }

    /// Close the current block and write the next ones as `encoding`
    /// (tests write files that mix both; the engine never does).
    #[cfg(any(test, feature = "testing"))]
    pub fn set_block_encoding(&mut self, encoding: BlockEncoding) -> Result<()> {
        self.finish_block()?;
        self.block_encoding = encoding;
        Ok(())
    }

    fn finish_block(&mut self) -> Result<()> {
        if self.raw_cells == 0 {
            return Ok(());
        }
        let start = self.out.len();
        match self.block_encoding {
            BlockEncoding::Rows => block::encode(
                &self.raw,
                self.raw_cells,
                self.opts.compression,
                &mut self.out,
            )?,
            BlockEncoding::Columnar => {
                let cfg = ColumnarConfig {
                    pco_level: self.opts.pco_level,
                    compression: self.opts.compression,
                };
                let (raw, cells, w) = (&self.raw, self.raw_cells, self.cell_width);
                block::encode_columnar(raw, cells, w, &self.opts.field_types, cfg, &mut self.out)?;
                self.wrote_columnar = true;
            }
        }
        let b = &self.out[start..];
        if cfg!(debug_assertions) {
            let back = block::decode(b, self.cell_width)
                .map_err(|_| ())
                .expect("block re-decode");
            debug_assert_eq!(back, self.raw);
        }
        let w = self.cell_width;
        self.index.push(IndexEntry {
            first_key: *CellRef(&self.raw[..w]).key(),
            last_key: *CellRef(&self.raw[self.raw.len() - w..]).key(),
            offset: self.out_offset + start as u64,
            len: b.len() as u32,
            crc: crate::util::bin::le_u32(b, 20),
            cells: self.raw_cells,
        });
        if let Some((cache, file_id)) = &self.warm {
            let block = u32::try_from(self.index.len() - 1).unwrap_or(u32::MAX);
            cache.insert(*file_id, block, self.raw.clone());
        }
        self.raw.clear();
        self.raw_cells = 0;
        if self.out.len() >= WRITE_CHUNK_BYTES {
            self.flush_out()?;
        }
        Ok(())
    }

    /// Write the whole aligned blocks of `out`; the rest waits for more.
    fn flush_out(&mut self) -> Result<()> {
        let n = self.out.len() / DIRECT_ALIGN * DIRECT_ALIGN;
        if n == 0 {
            return Ok(());
        }
        let mut tail = [0u8; DIRECT_ALIGN];
        let rest = self.out.len() - n;
        tail[..rest].copy_from_slice(&self.out[n..]);
        let mut buf = std::mem::take(&mut self.out);
        buf.truncate(n);
        self.pace(n);
        let lane = self.opts.direct.then(direct::lane);
        let written = self.file.write_at(buf, self.out_offset);
        drop(lane);
        let mut buf = written?;
        self.out_offset += n as u64;
        buf.clear();
        buf.extend_from_slice(&tail[..rest]);
        self.out = buf;
        Ok(())
    }

    /// Wait for the rate limiter, if any, before writing `n` bytes.
    fn pace(&self, n: usize) {
        if let Some((l, p)) = &self.opts.limiter {
            l.request(n as u64, *p);
        }
    }

    /// Write everything: the whole blocks direct, then the partial one.
    fn flush_all(&mut self) -> Result<()> {
        self.flush_out()?;
        if self.out.is_empty() {
            return Ok(());
        }
        let n = self.out.len() as u64;
        self.pace(n as usize);
        let buf = std::mem::take(&mut self.out);
        let mut buf = self.file.write_at(buf, self.out_offset)?;
        self.out_offset += n;
        buf.clear();
        self.out = buf;
        Ok(())
    }

    /// Append a large section a chunk at a time: a bloom filter of tens
    /// of MB is copied 1 MiB at a time, never held twice in full.
    fn append_large(&mut self, bytes: &[u8]) -> Result<SectionRef> {
        let s = SectionRef {
            offset: self.out_offset + self.out.len() as u64,
            len: bytes.len() as u32,
            crc: crc(bytes),
        };
        for piece in bytes.chunks(WRITE_CHUNK_BYTES) {
            self.out.extend_from_slice(piece);
            if self.out.len() >= WRITE_CHUNK_BYTES {
                self.flush_out()?;
            }
        }
        Ok(s)
    }

    fn section(&mut self, bytes: &[u8]) -> SectionRef {
        let s = SectionRef {
            offset: self.out_offset + self.out.len() as u64,
            len: bytes.len() as u32,
            crc: crc(bytes),
        };
        self.out.extend_from_slice(bytes);
        s
    }

    /// Write the remaining block, the sections and the trailer, then fsync.
    /// Returns the file's info and its length.
    pub fn finish(mut self, tombstones: &[RangeTombstone]) -> Result<(FileInfo, u64)> {
        self.finish_block()?;
        if self.info.cells == 0 {
            self.info.min_ts = 0;
            self.info.max_ts = 0;
        }
        for t in tombstones {
            self.info.min_seq = self.info.min_seq.min(t.seq);
            self.info.max_seq = self.info.max_seq.max(t.seq);
        }
        if self.info.min_seq == u64::MAX {
            self.info.min_seq = 0; // no cells and no tombstones
        }
        self.info.range_tombstones = tombstones.len() as u32;
        let index = self.section(&encode_index(&self.index));
        if self.opts.bloom && self.bloom.is_none() {
            let mut b = Bloom::with_capacity(self.devices.len().max(16));
            for d in std::mem::take(&mut self.devices) {
                b.insert_device(d);
            }
            self.bloom = Some(b);
        }
        let bloom = match self.bloom.take() {
            Some(b) => self.append_large(&b.into_bytes())?,
            None => self.section(&[]),
        };
        let version = match self.wrote_columnar || self.opts.encoding == BlockEncoding::Columnar {
            true => HFILE_VERSION,
            false => HFILE_VERSION_ROWS,
        };
        let info = self.section(&self.info.encode(version));
        let tombs = self.section(&encode_tombstones(tombstones));
        let trailer = Trailer {
            version,
            index,
            bloom,
            info,
            tombstones: tombs,
        };
        self.out.extend_from_slice(&trailer.encode());
        self.flush_all()?;
        self.file.sync_all()?;
        Ok((self.info, self.out_offset))
    }
}

/// Publish a finished temporary file: rename into place, fsync the directory.
pub fn publish(backend: &dyn Backend, tmp: &Path, dest: &Path) -> Result<()> {
    backend.rename(tmp, dest)?;
    let dir = dest.parent().unwrap_or(Path::new("."));
    backend.sync_dir(dir)
}

/// Largest key, used as an open upper bound.
pub const KEY_MAX: RowKey = [0xff; crate::key::KEY_LEN];

/// Bloom entries to size for `cells` keys plus their devices: telemetry has
/// many readings per device, so a quarter of the cell count covers the
/// device entries (10 bits per entry, ≈ 0.8 % false positives); were every
/// cell a new device the filter degrades to ≈ 6 bits per entry (≈ 5 %), it
/// never gives a false negative.
pub fn bloom_entries(cells: usize) -> usize {
    cells.saturating_add(cells / 4).max(16)
}
