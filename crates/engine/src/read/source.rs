//! Sorted cell sources over one key range: a memstore (copied out in
//! bounded chunks) or an HFile (block by block through the cache).

use crate::cell::{self, CellRef, CELL_HEAD_LEN};
use crate::error::Result;
use crate::hfile::columnar::RUN_KEY_LEN;
use crate::hfile::columns::BlockColumns;
use crate::hfile::HFileReader;
use crate::key::{RowKey, KEY_LEN};
use crate::memstore::Memstore;
use crate::read::prefetch::{Columns, Prefetcher, ScanAlive, PREFETCH_BLOCKS_AHEAD};
use std::sync::Arc;

/// Cells copied from a memstore per refill: the first refill takes
/// [`MEM_CHUNK_CELLS_MIN`], each next one twice as many up to
/// [`MEM_CHUNK_CELLS`], so a read that stops early (a get, `latest`)
/// copies a few cells, not a thousand.
const MEM_CHUNK_CELLS: usize = 1024;
const MEM_CHUNK_CELLS_MIN: usize = 4;

/// A sorted stream of cells (key asc, seq desc).
pub trait CellSource {
    /// The current cell, `None` when exhausted.
    fn current(&self) -> Option<&[u8]>;
    /// Move to the next cell.
    fn advance(&mut self) -> Result<()>;
}

/// Cells of a memstore in `[lo, hi]`.
pub struct MemSource {
    mem: Arc<Memstore>,
    lo: RowKey,
    hi: RowKey,
    /// Timestamps outside it are skipped (the merge would drop them).
    window: (i64, i64),
    width: usize,
    buf: Vec<u8>,
    pos: usize,
    done: bool,
    /// Cells the next refill may copy.
    chunk: usize,
}

impl MemSource {
    /// Cells in `[lo, hi]` with timestamps in `window` (inclusive).
    pub fn new(mem: Arc<Memstore>, lo: RowKey, hi: RowKey, window: (i64, i64)) -> Self {
        let width = cell::cell_width(mem.fields_width());
        let mut s = MemSource {
            mem,
            lo,
            hi,
            window,
            width,
            buf: Vec::new(),
            pos: 0,
            done: false,
            chunk: MEM_CHUNK_CELLS_MIN,
        };
        s.refill(None);
        s
    }

    fn refill(&mut self, after: Option<(RowKey, u64)>) {
        self.buf.clear();
        self.pos = 0;
        let n = self.mem.copy_range(
            &self.lo,
            &self.hi,
            self.window,
            after,
            self.chunk,
            &mut self.buf,
        );
        self.chunk = (self.chunk * 2).min(MEM_CHUNK_CELLS);
        self.done = n == 0;
    }
}

impl CellSource for MemSource {
    fn current(&self) -> Option<&[u8]> {
        if self.done {
            return None;
        }
        Some(&self.buf[self.pos..self.pos + self.width])
    }
    fn advance(&mut self) -> Result<()> {
        if self.done {
            return Ok(());
        }
        self.pos += self.width;
        if self.pos >= self.buf.len() {
            let last = CellRef(&self.buf[self.buf.len() - self.width..]);
            let after = (*last.key(), last.seq());
            self.refill(Some(after));
        }
        Ok(())
    }
}

/// Cells of an HFile in `[lo, hi]`.
pub struct FileSource {
    file: Arc<HFileReader>,
    hi: RowKey,
    width: usize,
    block_idx: usize,
    block: Option<Arc<Vec<u8>>>,
    pos: usize,
    prefetch: Option<Arc<Prefetcher>>,
    /// Blocks before this one were already requested from the prefetcher.
    prefetched_to: usize,
    /// Requests still queued when this source is dropped are skipped.
    alive: ScanAlive,
    /// A read that usually stops at its first row asks for no read-ahead
    /// until it leaves this block (its first).
    quiet_block: Option<usize>,
    /// Put blocks read from disk into the block cache (not for bulk reads).
    cache: bool,
    /// Every cell of the current block is at or below `hi`: no per-cell
    /// end check is needed.
    block_inside: bool,
    /// `block` holds only the run heads of block `block_idx`
    /// ([`HFileReader::block_heads`]); moving past the current cell loads
    /// the whole block.
    heads: bool,
    /// Block `block_idx` of a columnar file, as the cache holds it:
    /// `block` is then a window of its rows turned into cells, up to
    /// row `window_end`.
    cols: Option<BlockColumns>,
    window_end: usize,
    /// Rows the next window may take: it starts at [`WINDOW_ROWS_MIN`]
    /// in each block and doubles up to [`WINDOW_ROWS_MAX`], so a read
    /// that stops early (a get, `latest`) turns a few rows into cells,
    /// not the block.
    window_rows: usize,
}

const WINDOW_ROWS_MIN: usize = 4;
const WINDOW_ROWS_MAX: usize = 256;

impl FileSource {
    /// A source over `[lo, hi]`; with `prefetch`, blocks ahead of the
    /// current one (inside the range) are loaded by read-ahead workers.
    pub fn new(
        file: Arc<HFileReader>,
        lo: RowKey,
        hi: RowKey,
        prefetch: Option<Arc<Prefetcher>>,
    ) -> Result<Self> {
        Self::with_cache(file, lo, hi, prefetch, true, false)
    }

    /// A source for a read that usually stops at its first row (`latest`,
    /// a point get): when the first cell at or after `lo` is the head of a
    /// run of a columnar block that is not cached, it comes from the
    /// block's run heads and no column is decoded unless the read goes on.
    pub fn first_rows(
        file: Arc<HFileReader>,
        lo: RowKey,
        hi: RowKey,
        prefetch: Option<Arc<Prefetcher>>,
    ) -> Result<Self> {
        Self::with_cache(file, lo, hi, prefetch, true, true)
    }

    /// A source for a bulk read (compaction): no read-ahead, and blocks
    /// read from disk do not enter the block cache.
    pub fn bulk(file: Arc<HFileReader>, lo: RowKey, hi: RowKey) -> Result<Self> {
        Self::with_cache(file, lo, hi, None, false, false)
    }

    fn with_cache(
        file: Arc<HFileReader>,
        lo: RowKey,
        hi: RowKey,
        prefetch: Option<Arc<Prefetcher>>,
        cache: bool,
        heads: bool,
    ) -> Result<Self> {
        let width = file.cell_width();
        let block_idx = file.seek_block(&lo);
        let mut s = FileSource {
            file,
            hi,
            width,
            block_idx,
            block: None,
            pos: 0,
            prefetch,
            prefetched_to: 0,
            alive: ScanAlive::default(),
            quiet_block: heads.then_some(block_idx),
            cache,
            block_inside: false,
            heads: false,
            cols: None,
            window_end: 0,
            window_rows: WINDOW_ROWS_MIN,
        };
        if heads && s.load_heads(&lo)? {
            return Ok(s);
        }
        s.load()?;
        s.seek_in_block(&lo)?;
        Ok(s)
    }

    /// Move to the first cell with key `>= key` in the loaded block.
    fn seek_in_block(&mut self, key: &RowKey) -> Result<()> {
        if let Some(c) = &self.cols {
            let row = c.seek(key);
            self.window_rows = WINDOW_ROWS_MIN;
            self.window(row);
        } else if let Some(b) = &self.block {
            // Binary search over fixed-width cells.
            let w = self.width;
            self.pos = partition(b.len() / w, |i| b[i * w..i * w + KEY_LEN] < key[..]) * w;
        } else {
            return Ok(());
        }
        self.check_end()
    }

    /// Turn rows `row..` (at most `window_rows`) of the columnar block
    /// into the cells `block` holds.
    fn window(&mut self, row: usize) {
        let Some(c) = &self.cols else { return };
        let end = (row + self.window_rows).min(c.rows());
        self.window_rows = (self.window_rows * 2).min(WINDOW_ROWS_MAX);
        // Reuse the last window's buffer when no one else holds it.
        let mut buf = self
            .block
            .take()
            .and_then(|b| Arc::try_unwrap(b).ok())
            .unwrap_or_default();
        buf.clear();
        c.write_cells(row..end, self.width, &mut buf);
        self.block = Some(Arc::new(buf));
        self.pos = 0;
        self.window_end = end;
    }

    fn load(&mut self) -> Result<()> {
        self.block = None;
        self.cols = None;
        self.pos = 0;
        let idx = self.file.index();
        if self.block_idx < idx.len() && idx[self.block_idx].first_key <= self.hi {
            self.read_ahead();
            if let Some(all) = self.file.columnar_fields().filter(|_| self.cache) {
                let c = self.file.block_columns(self.block_idx, all, true)?;
                self.block_inside = c.rows() > 0 && c.key(c.rows() - 1) <= self.hi;
                self.cols = Some(c);
                self.window_rows = WINDOW_ROWS_MIN;
                self.window(0);
                return Ok(());
            }
            let b = if self.cache {
                self.file.block(self.block_idx)?
            } else {
                self.file.block_uncached(self.block_idx)?
            };
            let last = b.len().checked_sub(self.width);
            self.block_inside = last.is_some_and(|l| b[l..l + crate::key::KEY_LEN] <= self.hi[..]);
            self.block = Some(b);
        }
        Ok(())
    }

    /// Position on the run head that is the first cell at or after `lo`,
    /// when block `block_idx` offers run heads and that cell is one (it
    /// is not when `lo` falls inside a run: the head before it is of the
    /// same device). Returns whether it did.
    fn load_heads(&mut self, lo: &RowKey) -> Result<bool> {
        let idx = self.file.index();
        if self.block_idx >= idx.len() || idx[self.block_idx].first_key > self.hi {
            return Ok(false);
        }
        let Some(h) = self.file.block_heads(self.block_idx)? else {
            return Ok(false);
        };
        let w = self.width;
        let n = h.len() / w;
        let j = partition(n, |i| h[i * w..i * w + KEY_LEN] < lo[..]);
        let inside_run = j > 0 && h[(j - 1) * w..(j - 1) * w + RUN_KEY_LEN] == lo[..RUN_KEY_LEN];
        if j == n || inside_run {
            return Ok(false);
        }
        self.heads = true;
        self.block_inside = false;
        self.pos = j * w;
        self.block = Some(h);
        self.check_end()?;
        Ok(true)
    }

    /// Leave the run heads for the whole block, on the cell after the
    /// current head.
    fn leave_heads(&mut self) -> Result<()> {
        self.heads = false;
        let Some(h) = &self.block else { return Ok(()) };
        let mut key = [0u8; KEY_LEN];
        key.copy_from_slice(&h[self.pos..self.pos + KEY_LEN]);
        self.load()?;
        // The head is the first cell of its key in the block.
        self.seek_in_block(&key)
    }

    fn read_ahead(&mut self) {
        let Some(p) = &self.prefetch else { return };
        if self.quiet_block == Some(self.block_idx) {
            return;
        }
        let idx = self.file.index();
        let from = self.prefetched_to.max(self.block_idx + 1);
        let to = (self.block_idx + 1 + PREFETCH_BLOCKS_AHEAD).min(idx.len());
        for (j, e) in idx.iter().enumerate().take(to).skip(from) {
            if e.first_key > self.hi {
                break;
            }
            let columns = self.file.columnar_fields().map(|all| Columns {
                slots: all.clone(),
                seq: true,
                wanted: None,
            });
            p.request(&self.file, j, columns, &self.alive);
            self.prefetched_to = j + 1;
        }
    }

    /// Move to the next block when the position ran off this one; stop
    /// past `hi`.
    fn check_end(&mut self) -> Result<()> {
        loop {
            let Some(b) = &self.block else { return Ok(()) };
            if self.pos < b.len() {
                if !self.block_inside && b[self.pos..self.pos + KEY_LEN] > self.hi[..] {
                    self.block = None;
                }
                return Ok(());
            }
            if self
                .cols
                .as_ref()
                .is_some_and(|c| self.window_end < c.rows())
            {
                self.window(self.window_end);
                continue;
            }
            self.block_idx += 1;
            self.load()?;
        }
    }
}

fn partition(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

impl CellSource for FileSource {
    fn current(&self) -> Option<&[u8]> {
        let b = self.block.as_ref()?;
        Some(&b[self.pos..self.pos + self.width])
    }
    fn advance(&mut self) -> Result<()> {
        if self.block.is_none() {
            return Ok(());
        }
        if self.heads {
            self.leave_heads()?;
        }
        self.pos += self.width;
        self.check_end()
    }
}

const _: () = assert!(CELL_HEAD_LEN == 27);
