//! Block cache: decoded data blocks keyed by (file id, block number, part),
//! weighed by bytes (quick_cache: CLOCK-Pro eviction, concurrent misses on
//! one key are loaded once), with hit/miss counters. A block is cached as
//! row-major cells (what merging reads use), as its run heads, or as
//! columns (its keys and each field apart, what batch scans use).

use crate::error::Result;
use crate::hfile::columns::BlockKeys;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Which part of a block an entry holds.
pub type Part = u16;
/// The block's row-major cells.
pub const PART_CELLS: Part = 0;
/// The first cell of every run (columnar blocks with run heads).
pub const PART_HEADS: Part = 1;
/// The block's keys as columns ([`BlockKeys`]).
pub const PART_KEYS: Part = 2;
/// The block's sequence numbers as a column.
pub const PART_SEQ: Part = 3;
/// Field `i`'s values are part `PART_FIELD_0 + i`.
pub const PART_FIELD_0: Part = 4;

type Key = (u64, u32, Part);

/// A cached part.
#[derive(Clone)]
pub enum Entry {
    Bytes(Arc<Vec<u8>>),
    Keys(Arc<BlockKeys>),
}

impl Entry {
    fn weight(&self) -> u64 {
        64 + match self {
            Entry::Bytes(b) => b.len(),
            Entry::Keys(k) => k.heap_bytes(),
        } as u64
    }

    /// The bytes of a bytes part (cells, heads, a field).
    pub fn bytes(self) -> Option<Arc<Vec<u8>>> {
        match self {
            Entry::Bytes(b) => Some(b),
            Entry::Keys(_) => None,
        }
    }

    pub fn keys(self) -> Option<Arc<BlockKeys>> {
        match self {
            Entry::Keys(k) => Some(k),
            Entry::Bytes(_) => None,
        }
    }
}

#[derive(Clone, Copy, Default)]
struct Weighter;

impl quick_cache::Weighter<Key, Entry> for Weighter {
    fn weight(&self, _k: &Key, v: &Entry) -> u64 {
        v.weight()
    }
}

/// Shared cache of decoded blocks.
pub struct BlockCache {
    cache: quick_cache::sync::Cache<Key, Entry, Weighter>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub bytes: u64,
}

impl BlockCache {
    /// A cache holding about `capacity_bytes` of decoded blocks.
    pub fn new(capacity_bytes: u64) -> Self {
        let items = (capacity_bytes / (64 * 1024)).max(16) as usize;
        BlockCache {
            cache: quick_cache::sync::Cache::with_weighter(items, capacity_bytes.max(1), Weighter),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Get a block's cells, loading them with `load` on a miss.
    pub fn get_or_load(
        &self,
        file_id: u64,
        block: u32,
        load: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<Arc<Vec<u8>>> {
        let e = self.get_or_load_part(file_id, block, PART_CELLS, || {
            load().map(|b| Entry::Bytes(Arc::new(b)))
        })?;
        Ok(e.bytes().expect("the cells part holds bytes"))
    }

    /// Get one part of a block, loading it with `load` on a miss (counted
    /// as a hit or a miss).
    pub fn get_or_load_part(
        &self,
        file_id: u64,
        block: u32,
        part: Part,
        load: impl FnOnce() -> Result<Entry>,
    ) -> Result<Entry> {
        let key = (file_id, block, part);
        if let Some(v) = self.cache.get(&key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(v);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        self.cache.get_or_insert_with(&key, load)
    }

    /// Is the block's cells part cached (counts nothing)?
    pub fn contains(&self, file_id: u64, block: u32) -> bool {
        self.contains_part(file_id, block, PART_CELLS)
    }

    /// Is this part of the block cached (counts nothing)?
    pub fn contains_part(&self, file_id: u64, block: u32, part: Part) -> bool {
        self.cache.peek(&(file_id, block, part)).is_some()
    }

    /// A part if cached (counts nothing).
    pub fn peek_part(&self, file_id: u64, block: u32, part: Part) -> Option<Entry> {
        self.cache.get(&(file_id, block, part))
    }

    /// Get a block's cells if cached, else load them without caching them
    /// (bulk reads such as compaction must not evict the blocks readers
    /// use).
    pub fn get_or_load_uncached(
        &self,
        file_id: u64,
        block: u32,
        load: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<Arc<Vec<u8>>> {
        match self.cache.get(&(file_id, block, PART_CELLS)) {
            Some(Entry::Bytes(v)) => Ok(v),
            _ => load().map(Arc::new),
        }
    }

    /// Put a block's cells decoded elsewhere (a block being written, so a
    /// file is warm the moment it is published).
    pub fn insert(&self, file_id: u64, block: u32, cells: Vec<u8>) {
        self.insert_part(file_id, block, PART_CELLS, Entry::Bytes(Arc::new(cells)));
    }

    /// Put one part of a block.
    pub fn insert_part(&self, file_id: u64, block: u32, part: Part, e: Entry) {
        self.cache.insert((file_id, block, part), e);
    }

    /// Count a miss that did not go through [`BlockCache::get_or_load_part`]
    /// (parts of a block decoded beside a cached one).
    pub fn count_miss(&self) {
        self.misses.fetch_add(1, Ordering::Relaxed);
    }

    /// Drop one part of a block (nothing if it is not cached).
    pub fn remove_part(&self, file_id: u64, block: u32, part: Part) {
        self.cache.remove(&(file_id, block, part));
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            bytes: self.cache.weight(),
        }
    }
}
