//! A table's live state: its schema, its regions (`engine/region.rs`)
//! in key order, the lock that serialises its flushes, splits and merges,
//! and the cache of devices' newest rows.

use super::latest::LatestCache;
use super::region::{Region, RegionVersion};
use super::visibility::SeqGate;
use crate::ids::{RegionId, TableId};
use crate::schema::{BlockEncoding, TableSchema};
use crate::util::sync::RwLockExt;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A table's regions, sorted by start key.
pub type RegionList = Arc<Vec<Arc<Region>>>;

/// One open table.
#[doc(hidden)]
pub struct Table {
    pub id: TableId,
    pub schema: TableSchema,
    /// Writers hold the read lock while they insert, so a split or merge
    /// (write lock) sees no write half-applied.
    regions: RwLock<RegionList>,
    /// Held while flushing, splitting or merging: one at a time per table.
    pub flush_lock: Mutex<()>,
    /// The block encoding new files get ([`BlockEncoding::code`]): the
    /// schema's when opened, changed by `Store::set_table_encoding`.
    encoding: AtomicU8,
    /// The newest row of recently read devices (`latest.rs`).
    pub latest: LatestCache,
}

impl Table {
    /// `latest_cache` bounds [`Table::latest`] (devices; 0: off).
    pub fn new(
        id: TableId,
        schema: TableSchema,
        regions: Vec<Arc<Region>>,
        latest_cache: usize,
    ) -> Self {
        Table {
            latest: LatestCache::new(latest_cache),
            id,
            regions: RwLock::new(Arc::new(regions)),
            flush_lock: Mutex::new(()),
            encoding: AtomicU8::new(schema.options.encoding.code()),
            schema,
        }
    }

    /// The schema with the table's current block encoding.
    pub fn current_schema(&self) -> TableSchema {
        let mut s = self.schema.clone();
        s.options.encoding = self.encoding();
        s
    }

    /// The block encoding compactions write now.
    pub fn encoding(&self) -> BlockEncoding {
        BlockEncoding::from_code(self.encoding.load(Relaxed)).unwrap_or_default()
    }

    pub(crate) fn set_encoding(&self, e: BlockEncoding) {
        self.encoding.store(e.code(), Relaxed);
    }

    /// The current regions (a read sees a consistent list).
    pub fn regions(&self) -> RegionList {
        self.regions.read_or_recover().clone()
    }

    /// Hold the region map for a write (blocks splits and merges).
    pub fn regions_for_write(&self) -> RwLockReadGuard<'_, RegionList> {
        self.regions.read_or_recover()
    }

    /// Exclusive access to the region map: pauses this table's writes.
    pub fn regions_exclusive(&self) -> RwLockWriteGuard<'_, RegionList> {
        self.regions.write_or_recover()
    }

    /// Freeze every region's active memstore; returns whether any was.
    pub fn freeze(&self) -> bool {
        let mut any = false;
        for r in self.regions().iter() {
            any |= r.freeze();
        }
        any
    }

    pub fn frozen_count(&self) -> usize {
        self.regions().iter().map(|r| r.frozen_count()).sum()
    }

    /// Lowest [`Region::durable_seq`] of the table.
    pub fn durable_seq(&self, applied: u64) -> u64 {
        self.regions()
            .iter()
            .map(|r| r.durable_seq(applied))
            .min()
            .unwrap_or(applied)
    }

    /// A point-in-time view for a read: the read sequence number and the
    /// version of each region in `regions`, taken in that order. The
    /// caller waits on the gate (`SeqGate::wait_caught_up`) before listing
    /// `regions`. A version a compaction made from cells newer than the
    /// read sequence number may lack versions only those cells hide: the
    /// read takes the sequence number again, which has caught up (the
    /// compaction merged only applied cells), so this loops at most twice.
    pub fn read_snapshot(
        &self,
        gate: &SeqGate,
        regions: &[Arc<Region>],
    ) -> (u64, Vec<Arc<RegionVersion>>) {
        loop {
            let read_seq = gate.applied();
            let versions: Vec<_> = regions.iter().map(|r| r.version()).collect();
            if versions.iter().all(|v| v.compacted_seq <= read_seq) {
                return (read_seq, versions);
            }
        }
    }

    pub fn region_by_id(&self, id: RegionId) -> Option<Arc<Region>> {
        self.regions().iter().find(|r| r.id == id).cloned()
    }
}
