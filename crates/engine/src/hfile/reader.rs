//! HFile reader: loads trailer and sections at open (every checksum
//! verified), serves data blocks through the block cache with `pread`.

use super::block::{self, BlockError};
use super::bloom::Bloom;
use super::columns::slots_of;
use super::columns::BlockParts;
use super::columns::{BlockColumns, BlockKeys, FieldSlot, Want};
use super::sections::{
    decode_index, decode_tombstones, FileInfo, IndexEntry, SectionRef, Trailer, TRAILER_LEN,
};
use crate::cache::{BlockCache, Entry, Part, PART_FIELD_0, PART_HEADS, PART_KEYS, PART_SEQ};
use crate::cell::{self, RangeTombstone};
use crate::error::{Error, Result};
use crate::key::{DeviceId, RowKey};
use crate::schema::{BlockEncoding, TableSchema};
use crate::util::bin::crc;
use crate::util::sync::LockExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An open HFile.
pub struct HFileReader {
    path: PathBuf,
    file: std::fs::File,
    file_id: u64,
    len: u64,
    index: Vec<IndexEntry>,
    bloom: Option<Bloom>,
    info: FileInfo,
    tombstones: Vec<RangeTombstone>,
    cell_width: usize,
    cache: Arc<BlockCache>,
    /// Every field of the table, when the file was opened for one
    /// ([`HFileReader::open_for_table`]): merging reads of a columnar
    /// file then use the blocks' cached columns instead of caching cells.
    table_fields: Option<Arc<[FieldSlot]>>,
    /// Column decodes of this file, one lock per block slot (block index
    /// modulo [`FIELD_LOADS`]): a block's columns are decoded by one
    /// thread at a time, so a scan that reaches a block a read-ahead
    /// worker is decoding waits for it and finds the columns cached,
    /// instead of decoding them a second time.
    field_loads: [std::sync::Mutex<()>; FIELD_LOADS],
}

/// Lock slots of [`HFileReader::block_columns_if`]: more than the blocks
/// a scan reads ahead, so neighbours never share one.
const FIELD_LOADS: usize = 32;

impl std::fmt::Debug for HFileReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HFileReader")
            .field("path", &self.path)
            .field("blocks", &self.index.len())
            .finish()
    }
}

/// Parsed metadata of a whole file (used by the reader and the fuzz target).
pub struct Parsed {
    pub index: Vec<IndexEntry>,
    pub bloom: Option<Bloom>,
    pub info: FileInfo,
    pub tombstones: Vec<RangeTombstone>,
}

/// Parse the four sections; `read` returns the bytes of one section.
/// Every section's checksum is verified; errors name the section's offset
/// (the file is filled in by `Error::at`).
pub fn parse_sections(
    t: &Trailer,
    mut read: impl FnMut(&SectionRef) -> Result<Vec<u8>>,
) -> Result<Parsed> {
    let mut section = |s: &SectionRef| -> Result<Vec<u8>> {
        let b = read(s)?;
        let actual = crc(&b);
        if actual != s.crc {
            return Err(Error::checksum(s.offset, s.crc, actual));
        }
        Ok(b)
    };
    let at = |s: &SectionRef| {
        let off = s.offset;
        move |e: Error| e.at("", off)
    };
    let index = decode_index(&section(&t.index)?, t.index.offset).map_err(at(&t.index))?;
    let b = section(&t.bloom)?;
    let bloom = match b.is_empty() {
        true => None,
        false => Some(Bloom::decode_owned(b).map_err(at(&t.bloom))?),
    };
    let info = FileInfo::decode(&section(&t.info)?, t.version).map_err(at(&t.info))?;
    let tombstones = decode_tombstones(&section(&t.tombstones)?).map_err(at(&t.tombstones))?;
    let cells: u64 = index.iter().map(|e| u64::from(e.cells)).sum();
    if cells != info.cells || tombstones.len() != info.range_tombstones as usize {
        return Err(Error::decode("hfile info", "counts disagree with index")).map_err(at(&t.info));
    }
    Ok(Parsed {
        index,
        bloom,
        info,
        tombstones,
    })
}

/// The block's CRC field must be the index entry's.
fn check_index_crc(e: &IndexEntry, b: &[u8]) -> Result<()> {
    if b.len() >= block::BLOCK_HEADER_LEN && crate::util::bin::le_u32(b, 20) != e.crc {
        return Err(Error::decode(
            "block",
            "checksum field differs from the index entry",
        ));
    }
    Ok(())
}

fn block_error(e: BlockError) -> Error {
    match e {
        BlockError::Checksum { expected, actual } => Error::checksum(0, expected, actual),
        BlockError::Other(err) => err,
    }
}

/// Verify and decode one stored block against its index entry. Errors are
/// relative to the block (placed in the file by `Error::at`).
pub fn check_block(e: &IndexEntry, b: &[u8], cell_width: usize) -> Result<Vec<u8>> {
    check_index_crc(e, b)?;
    match block::decode(b, cell_width) {
        Ok(raw) if raw.len() == e.cells as usize * cell_width => Ok(raw),
        Ok(_) => Err(Error::decode(
            "block",
            "cell count disagrees with the index",
        )),
        Err(e) => Err(block_error(e)),
    }
}

impl HFileReader {
    /// Open and verify the metadata of `path`, which must hold cells of
    /// `fields_width` field bytes.
    pub fn open(
        path: &Path,
        file_id: u64,
        fields_width: usize,
        cache: Arc<BlockCache>,
    ) -> Result<Self> {
        Self::open_checked(path, file_id, fields_width, None, cache)
    }

    /// [`HFileReader::open`], also requiring the file to carry the table's
    /// layout id (so a file is never read with another field layout of the
    /// same width).
    pub fn open_checked(
        path: &Path,
        file_id: u64,
        fields_width: usize,
        layout_id: Option<u32>,
        cache: Arc<BlockCache>,
    ) -> Result<Self> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        if len < TRAILER_LEN as u64 {
            return Err(Error::corrupt("hfile shorter than its trailer", path, 0));
        }
        let toff = len - TRAILER_LEN as u64;
        let tb = read_exact(&file, path, toff, TRAILER_LEN)?;
        let t = Trailer::decode(&tb, len).map_err(|e| e.at(path, toff))?;
        let p = parse_sections(&t, |sec| {
            read_exact(&file, path, sec.offset, sec.len as usize)
        })
        .map_err(|e| e.at(path, 0))?;
        if p.info.fields_width as usize != fields_width {
            return Err(Error::corrupt(
                format!(
                    "hfile fields width {} (table has {fields_width})",
                    p.info.fields_width
                ),
                path,
                t.info.offset,
            ));
        }
        if layout_id.is_some_and(|l| l != p.info.layout_id) {
            return Err(Error::corrupt(
                format!(
                    "hfile layout id {:#010x} does not match the table's {:#010x}",
                    p.info.layout_id,
                    layout_id.unwrap_or_default()
                ),
                path,
                t.info.offset,
            ));
        }
        Ok(HFileReader {
            path: path.to_path_buf(),
            file,
            file_id,
            len,
            index: p.index,
            bloom: p.bloom,
            info: p.info,
            tombstones: p.tombstones,
            cell_width: cell::cell_width(fields_width),
            cache,
            table_fields: None,
            field_loads: Default::default(),
        })
    }

    /// [`HFileReader::open_checked`] with the layout of `schema`, whose
    /// fields the reader then knows.
    pub fn open_for_table(
        path: &Path,
        file_id: u64,
        schema: &TableSchema,
        cache: Arc<BlockCache>,
    ) -> Result<Self> {
        let fw = schema.fields_width();
        let mut r = Self::open_checked(path, file_id, fw, Some(schema.layout_id()), cache)?;
        r.table_fields = Some(slots_of(
            schema,
            &(0..schema.fields.len()).collect::<Vec<_>>(),
        )?);
        Ok(r)
    }

    /// Every field of the table, when this is a columnar file opened for
    /// a table: its merging reads go through cached columns.
    pub fn columnar_fields(&self) -> Option<&Arc<[FieldSlot]>> {
        match self.info.encoding {
            BlockEncoding::Columnar => self.table_fields.as_ref(),
            BlockEncoding::Rows => None,
        }
    }

    pub fn info(&self) -> &FileInfo {
        &self.info
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// The file's id (its name, and its blocks' key in the block cache).
    pub fn file_id(&self) -> crate::ids::FileId {
        crate::ids::FileId(self.file_id)
    }
    pub fn len_bytes(&self) -> u64 {
        self.len
    }
    pub fn block_count(&self) -> usize {
        self.index.len()
    }

    /// Drop every part of this file's blocks from the block cache (a file
    /// being deleted: its entries would only take room until evicted).
    pub fn evict_cached(&self) {
        use crate::cache::PART_CELLS;
        // Field parts exist only for a columnar file opened for its table
        // (the engine's opens): the parts its reads cache.
        let fields = self
            .columnar_fields()
            .into_iter()
            .flat_map(|all| all.iter().map(field_part));
        let parts: Vec<Part> = [PART_CELLS, PART_HEADS, PART_KEYS, PART_SEQ]
            .into_iter()
            .chain(fields)
            .collect();
        for b in 0..self.index.len() as u32 {
            for &p in &parts {
                self.cache.remove_part(self.file_id, b, p);
            }
        }
    }

    /// Ask the kernel to read the whole file into the page cache in the
    /// background (`posix_fadvise(WILLNEED)`); false where that is not
    /// available. Reads do not depend on it.
    pub fn advise_willneed(&self) -> bool {
        crate::io::advise_willneed(&self.file, self.len)
    }
    pub fn index(&self) -> &[IndexEntry] {
        &self.index
    }
    pub fn cell_width(&self) -> usize {
        self.cell_width
    }
    pub fn range_tombstones(&self) -> &[RangeTombstone] {
        &self.tombstones
    }

    /// Could the file hold cells with keys in `[lo, hi]`?
    pub fn overlaps(&self, lo: &RowKey, hi: &RowKey) -> bool {
        self.info.cells > 0 && self.info.min_key <= *hi && *lo <= self.info.max_key
    }
    /// Could the file hold cells with `from <= ts <= to`?
    pub fn ts_overlaps(&self, from: i64, to: i64) -> bool {
        self.info.cells > 0 && self.info.min_ts <= to && from <= self.info.max_ts
    }
    pub fn may_contain_device(&self, d: DeviceId) -> bool {
        self.bloom.as_ref().is_none_or(|b| b.may_contain_device(d))
    }
    pub fn may_contain_key(&self, k: &RowKey) -> bool {
        match self.info.encoding {
            BlockEncoding::Rows => self.bloom.as_ref().is_none_or(|b| b.may_contain_key(k)),
            // A columnar file's filter holds device ids only.
            BlockEncoding::Columnar => self.may_contain_device(crate::key::device_of(k)),
        }
    }

    /// Index of the first block whose last key is `>= lo`.
    pub fn seek_block(&self, lo: &RowKey) -> usize {
        self.index.partition_point(|e| e.last_key < *lo)
    }

    /// Decoded cells of block `i` (verified, cached).
    pub fn block(&self, i: usize) -> Result<Arc<Vec<u8>>> {
        self.cache
            .get_or_load(self.file_id, i as u32, || self.load_block(i))
    }

    /// The first cell of every run of block `i` (whole cells, in cell
    /// order; cached under their own key), when the block is columnar,
    /// stores run heads and is not in the cache decoded; `None` means:
    /// read the block ([`HFileReader::block`]). A device's newest row is
    /// the head of its run, so `latest` needs no column decoded.
    pub fn block_heads(&self, i: usize) -> Result<Option<Arc<Vec<u8>>>> {
        // A rows file has no columnar blocks (version 1) or only those a
        // test mixed in: reading its block twice would cost a rows read.
        // Heads are skipped only where the whole block is a cache hit: with
        // just its keys cached (a windowed scan skipped its fields), the
        // read would decode every field of the block for one row.
        let cached = self.cache.contains(self.file_id, i as u32) || self.columns_cached(i);
        if self.info.encoding == BlockEncoding::Rows || cached {
            return Ok(None);
        }
        let h = self
            .cache
            .get_or_load_part(self.file_id, i as u32, PART_HEADS, || {
                self.load_heads(i).map(|h| Entry::Bytes(Arc::new(h)))
            })?
            .bytes()
            .expect("the heads part holds bytes");
        Ok((!h.is_empty()).then_some(h))
    }

    /// The run heads of block `i`, or (none stored) an empty vector after
    /// putting the decoded block in the cache, where the caller's next
    /// read finds it: the block is read from disk once either way.
    fn load_heads(&self, i: usize) -> Result<Vec<u8>> {
        let e = self.index[i];
        let b = self.read_block(i)?;
        let at = |err: Error| err.at(&self.path, e.offset);
        let heads = block::decode_heads(&b, self.cell_width).map_err(|err| at(block_error(err)))?;
        if let Some(h) = heads {
            return Ok(h);
        }
        if let Some(all) = self.columnar_fields() {
            let want = Want {
                keys: true,
                seq: true,
                fields: all,
            };
            let parts = self.decode_parts(i, &b, want)?;
            self.cache_parts(i as u32, all, parts);
            return Ok(Vec::new());
        }
        let cells = check_block(&e, &b, self.cell_width).map_err(at)?;
        self.cache.insert(self.file_id, i as u32, cells);
        Ok(Vec::new())
    }

    /// Block `i` as columns: its keys, its sequence numbers (when `seq`)
    /// and the fields in `slots`, in that order (each part cached apart;
    /// a miss decodes only the parts not cached, skipping the other
    /// fields, and reads the block once).
    pub fn block_columns(&self, i: usize, slots: &[FieldSlot], seq: bool) -> Result<BlockColumns> {
        let cols = self.block_columns_if(i, slots, seq, &|_| true)?;
        Ok(cols.expect("every block is wanted"))
    }

    /// [`HFileReader::block_columns`] when `wanted` says yes to the
    /// block's keys, else `None` without decoding any field (a time
    /// window that misses the block costs its keys only).
    pub fn block_columns_if(
        &self,
        i: usize,
        slots: &[FieldSlot],
        seq: bool,
        wanted: &dyn Fn(&BlockKeys) -> bool,
    ) -> Result<Option<BlockColumns>> {
        let block = i as u32;
        // The block's bytes, when read for its keys: the other parts are
        // decoded from them.
        let mut read: Option<Vec<u8>> = None;
        let keys = self
            .cache
            .get_or_load_part(self.file_id, block, PART_KEYS, || {
                let b = self.read_block(i)?;
                let want = Want {
                    keys: true,
                    seq: false,
                    fields: &[],
                };
                let keys = self.decode_parts(i, &b, want)?.keys;
                read = Some(b);
                Ok(Entry::Keys(Arc::new(keys.expect("keys asked for"))))
            })?
            .keys()
            .expect("the keys part holds keys");
        if !wanted(&keys) {
            return Ok(None);
        }
        let (mut seq_col, mut fields) = self.cached_columns(block, slots, seq);
        let complete = |seq_col: &Option<Column>, fields: &[Option<Column>]| {
            (!seq || seq_col.is_some()) && fields.iter().all(Option::is_some)
        };
        if !complete(&seq_col, &fields) {
            let _one = self.field_loads[i % FIELD_LOADS].lock_or_recover();
            // Decoded by another thread while this one waited?
            (seq_col, fields) = self.cached_columns(block, slots, seq);
            self.decode_missing(i, read, seq, &mut seq_col, slots, &mut fields)?;
        }
        Ok(Some(BlockColumns {
            keys,
            seq: seq_col,
            fields: fields
                .into_iter()
                .map(|f| f.expect("every field decoded"))
                .collect(),
        }))
    }

    /// What the cache holds of a block's sequence numbers (when `seq`) and
    /// `slots` (counts nothing).
    fn cached_columns(
        &self,
        block: u32,
        slots: &[FieldSlot],
        seq: bool,
    ) -> (Option<Column>, Vec<Option<Column>>) {
        let peek = |part| {
            self.cache
                .peek_part(self.file_id, block, part)
                .and_then(Entry::bytes)
        };
        let seq_col = if seq { peek(PART_SEQ) } else { None };
        (seq_col, slots.iter().map(|s| peek(field_part(s))).collect())
    }

    /// Decode, and cache, what of block `i`'s sequence numbers (when
    /// `seq`) and `slots` is still missing (`None`), from `read` (its
    /// bytes, when the keys were just read) or the file.
    fn decode_missing(
        &self,
        i: usize,
        read: Option<Vec<u8>>,
        seq: bool,
        seq_col: &mut Option<Column>,
        slots: &[FieldSlot],
        fields: &mut [Option<Column>],
    ) -> Result<()> {
        let block = i as u32;
        let missing: Vec<FieldSlot> = slots
            .iter()
            .zip(fields.iter())
            .filter(|(_, f)| f.is_none())
            .map(|(s, _)| *s)
            .collect();
        let seq_missing = seq && seq_col.is_none();
        if !missing.is_empty() || seq_missing {
            let b = match read {
                Some(b) => b,
                None => {
                    // Keys were a hit, but the block is read again.
                    self.cache.count_miss();
                    self.read_block(i)?
                }
            };
            let want = Want {
                keys: false,
                seq: seq_missing,
                fields: &missing,
            };
            let parts = self.decode_parts(i, &b, want)?;
            let (new_seq, mut got) = self.cache_parts(block, &missing, parts);
            if seq_col.is_none() {
                *seq_col = new_seq;
            }
            for f in fields.iter_mut().filter(|f| f.is_none()) {
                *f = got.next();
            }
        }
        Ok(())
    }

    /// Are block `i`'s keys in the cache as columns (counts nothing)?
    pub fn keys_cached(&self, i: usize) -> bool {
        self.cache.contains_part(self.file_id, i as u32, PART_KEYS)
    }

    /// Are block `i`'s keys, sequence numbers and every field of the table
    /// cached (what a merging read of it uses)?
    pub fn columns_cached(&self, i: usize) -> bool {
        let Some(all) = self.columnar_fields() else {
            return false;
        };
        let has = |p| self.cache.contains_part(self.file_id, i as u32, p);
        has(PART_KEYS) && has(PART_SEQ) && all.iter().all(|s| has(field_part(s)))
    }

    /// Put decoded parts into the cache (`slots`: the fields decoded);
    /// returns the sequence numbers and the fields, as cached.
    fn cache_parts(
        &self,
        block: u32,
        slots: &[FieldSlot],
        parts: BlockParts,
    ) -> (Option<Column>, std::vec::IntoIter<Column>) {
        let put = |part, e: Entry| self.cache.insert_part(self.file_id, block, part, e);
        if let Some(k) = parts.keys {
            put(PART_KEYS, Entry::Keys(Arc::new(k)));
        }
        let seq = parts.seq.map(Arc::new);
        if let Some(s) = &seq {
            put(PART_SEQ, Entry::Bytes(s.clone()));
        }
        let fields: Vec<Arc<Vec<u8>>> = parts.fields.into_iter().map(Arc::new).collect();
        for (s, f) in slots.iter().zip(&fields) {
            put(field_part(s), Entry::Bytes(f.clone()));
        }
        (seq, fields.into_iter())
    }

    /// Block `i`'s stored bytes, its index checksum checked.
    fn read_block(&self, i: usize) -> Result<Vec<u8>> {
        let e = self.index[i];
        let b = read_exact(&self.file, &self.path, e.offset, e.len as usize)?;
        check_index_crc(&e, &b).map_err(|err| err.at(&self.path, e.offset))?;
        Ok(b)
    }

    /// Decode the parts `want` names from block `i`'s bytes `b`.
    fn decode_parts(&self, i: usize, b: &[u8], want: Want<'_>) -> Result<BlockParts> {
        let e = self.index[i];
        let at = |err: Error| err.at(&self.path, e.offset);
        let parts =
            block::decode_parts(b, self.cell_width, want).map_err(|err| at(block_error(err)))?;
        if parts
            .keys
            .as_ref()
            .is_some_and(|k| k.ts.len() != e.cells as usize)
        {
            return Err(at(Error::decode(
                "block",
                "cell count disagrees with the index",
            )));
        }
        Ok(parts)
    }

    /// Block `i` for a bulk read: from the cache if there, but a block
    /// read from disk is not cached.
    pub fn block_uncached(&self, i: usize) -> Result<Arc<Vec<u8>>> {
        self.cache
            .get_or_load_uncached(self.file_id, i as u32, || self.load_block(i))
    }

    fn load_block(&self, i: usize) -> Result<Vec<u8>> {
        let e = self.index[i];
        let b = read_exact(&self.file, &self.path, e.offset, e.len as usize)?;
        check_block(&e, &b, self.cell_width).map_err(|err| err.at(&self.path, e.offset))
    }
}

/// A cached column's little-endian values.
type Column = Arc<Vec<u8>>;

/// The cache part of a field.
fn field_part(s: &FieldSlot) -> Part {
    Part::try_from(s.index)
        .ok()
        .and_then(|i| i.checked_add(PART_FIELD_0))
        .expect("a table has far fewer fields than cache parts")
}

fn read_exact(f: &std::fs::File, path: &Path, off: u64, len: usize) -> Result<Vec<u8>> {
    let mut b = vec![0u8; len];
    f.read_exact_at(&mut b, off).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::corrupt("hfile truncated", path, off)
        } else {
            Error::io(path, e)
        }
    })?;
    Ok(b)
}
