//! Block cache: decoded data blocks keyed by (file id, block number),
//! weighed by bytes (quick_cache: CLOCK-Pro eviction, concurrent misses on
//! one key are loaded once), with hit/miss counters.

use crate::error::Result;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Clone, Copy, Default)]
struct BytesWeighter;

impl quick_cache::Weighter<(u64, u32), Arc<Vec<u8>>> for BytesWeighter {
    fn weight(&self, _k: &(u64, u32), v: &Arc<Vec<u8>>) -> u64 {
        v.len() as u64 + 64
    }
}

/// Shared cache of decoded blocks.
pub struct BlockCache {
    cache: quick_cache::sync::Cache<(u64, u32), Arc<Vec<u8>>, BytesWeighter>,
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
            cache: quick_cache::sync::Cache::with_weighter(
                items,
                capacity_bytes.max(1),
                BytesWeighter,
            ),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Get a block, loading it with `load` on a miss.
    pub fn get_or_load(
        &self,
        file_id: u64,
        block: u32,
        load: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<Arc<Vec<u8>>> {
        if let Some(v) = self.cache.get(&(file_id, block)) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(v);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        self.cache
            .get_or_insert_with(&(file_id, block), || load().map(Arc::new))
    }

    /// Is the block cached (counts nothing)?
    pub fn contains(&self, file_id: u64, block: u32) -> bool {
        self.cache.peek(&(file_id, block)).is_some()
    }

    /// Get a block if cached, else load it without caching it (bulk
    /// reads such as compaction must not evict the blocks readers use).
    pub fn get_or_load_uncached(
        &self,
        file_id: u64,
        block: u32,
        load: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<Arc<Vec<u8>>> {
        match self.cache.get(&(file_id, block)) {
            Some(v) => Ok(v),
            None => load().map(Arc::new),
        }
    }

    /// Put a block decoded elsewhere (a block being written, so a file is
    /// warm the moment it is published).
    pub fn insert(&self, file_id: u64, block: u32, cells: Vec<u8>) {
        self.cache.insert((file_id, block), Arc::new(cells));
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            bytes: self.cache.weight(),
        }
    }
}
