//! A table's live state: its regions, each with an active memstore,
//! frozen memstores waiting for their flush, and its HFiles.

use super::latest::LatestCache;
use super::visibility::SeqGate;
use crate::hfile::HFileReader;
use crate::key::RowKey;
use crate::memstore::Memstore;
use crate::region::hotspot::HotState;
use crate::region::stats::RegionStats;
use crate::schema::{BlockEncoding, TableSchema};
use crate::util::sync::RwLockExt;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// What a reader sees of a region at one moment.
#[derive(Clone)]
#[doc(hidden)]
pub struct TableState {
    pub active: Arc<Memstore>,
    /// Oldest first.
    pub frozen: Vec<Arc<Memstore>>,
    /// May include files shared with a sibling after a split: reads clip
    /// them to the region's range.
    pub files: Vec<Arc<HFileReader>>,
}

/// One region: the key range `[start, end)`.
#[doc(hidden)]
pub struct Region {
    pub id: u32,
    pub start: RowKey,
    /// Exclusive; `None` is the end of the key space.
    pub end: Option<RowKey>,
    pub state: RwLock<TableState>,
    /// Every cell of this region up to this sequence number is in files.
    pub flushed_seq: AtomicU64,
    pub stats: RegionStats,
    pub hot: Mutex<HotState>,
    /// When the next scheduled major compaction is due (0: not set yet).
    pub next_major_ms: AtomicI64,
    /// Set (with the region map held exclusively) when a split or merge
    /// replaced this region: it takes no more freezes, and whoever still
    /// holds it must not wait for its flushes.
    pub retired: AtomicBool,
    /// Held for a whole compaction (plan to commit): one at a time.
    pub compact_lock: Mutex<()>,
}

impl Region {
    pub fn new(
        id: u32,
        start: RowKey,
        end: Option<RowKey>,
        state: TableState,
        flushed_seq: u64,
    ) -> Self {
        Region {
            id,
            start,
            end,
            state: RwLock::new(state),
            flushed_seq: AtomicU64::new(flushed_seq),
            stats: RegionStats::default(),
            hot: Mutex::new(HotState::default()),
            next_major_ms: AtomicI64::new(0),
            retired: AtomicBool::new(false),
            compact_lock: Mutex::new(()),
        }
    }

    pub fn empty_state(fields_width: usize, files: Vec<Arc<HFileReader>>) -> TableState {
        TableState {
            active: Arc::new(Memstore::new(fields_width)),
            frozen: Vec::new(),
            files,
        }
    }

    /// A consistent copy of the state for a read.
    pub fn snapshot(&self) -> TableState {
        self.state.read_or_recover().clone()
    }

    pub fn write_state(&self) -> RwLockWriteGuard<'_, TableState> {
        self.state.write_or_recover()
    }

    /// The memstore taking writes now.
    pub fn active(&self) -> Arc<Memstore> {
        self.state.read_or_recover().active.clone()
    }

    /// Freeze the active memstore if it holds anything. Only the apply
    /// thread (between writes) and splits/merges (with writes paused)
    /// call this, so a frozen memstore holds every edit of the region up
    /// to its max seq.
    pub fn freeze(&self) -> bool {
        let mut st = self.write_state();
        if st.active.is_empty() || self.is_retired() {
            return false;
        }
        let fresh = Arc::new(Memstore::new(st.active.fields_width()));
        let old = std::mem::replace(&mut st.active, fresh);
        st.frozen.push(old);
        true
    }

    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    pub fn file_count(&self) -> usize {
        self.state.read_or_recover().files.len()
    }

    /// What the compaction planner knows of the region's files.
    fn file_stats(&self) -> Vec<crate::compaction::plan::FileStat> {
        let files = self.snapshot().files;
        files.iter().map(|f| super::compact::stat_of(f)).collect()
    }

    /// Sorted runs among the region's files (`compaction::plan::runs`).
    pub fn run_count(&self) -> usize {
        crate::compaction::plan::run_count(&self.file_stats())
    }

    /// The region's compaction debt under `policy` (`compaction::plan::debt`).
    pub fn compaction_debt(&self, policy: &crate::compaction::plan::Policy) -> u64 {
        crate::compaction::plan::debt(&self.file_stats(), policy)
    }

    pub fn frozen_count(&self) -> usize {
        self.state.read_or_recover().frozen.len()
    }

    /// (active bytes, frozen bytes).
    pub fn memstore_bytes(&self) -> (usize, usize) {
        let (active, frozen, _) = self.memstore_load();
        (active, frozen)
    }

    /// Active bytes, frozen bytes and frozen memstores, under one lock
    /// (read on every write by the apply thread and the writers).
    pub fn memstore_load(&self) -> (usize, usize, usize) {
        let st = self.state.read_or_recover();
        let frozen = st.frozen.iter().map(|m| m.bytes()).sum();
        (st.active.bytes(), frozen, st.frozen.len())
    }

    /// Highest sequence number below which this region holds nothing
    /// unflushed, given that everything up to `applied` was applied before
    /// this call (read `applied` first).
    pub fn durable_seq(&self, applied: u64) -> u64 {
        let st = self.state.read_or_recover();
        std::iter::once(&st.active)
            .chain(st.frozen.iter())
            .filter(|m| !m.is_empty())
            .map(|m| m.min_seq().saturating_sub(1))
            .min()
            .unwrap_or(applied)
            // A cell being inserted may be visible before its seq is
            // counted: never claim more than what was applied.
            .min(applied)
    }

    /// Stored bytes of the region's data: HFile blocks whose first key is
    /// in its range (files shared after a split count only their part).
    pub fn weights(&self) -> Vec<(RowKey, u64)> {
        let st = self.snapshot();
        st.files
            .iter()
            .flat_map(|f| f.index().iter().map(|e| (e.first_key, e.len as u64)))
            .filter(|(k, _)| *k >= self.start && self.end.is_none_or(|e| *k < e))
            .collect()
    }
}

/// A table's regions, sorted by start key.
pub type RegionList = Arc<Vec<Arc<Region>>>;

/// One open table.
#[doc(hidden)]
pub struct Table {
    pub id: u32,
    pub schema: TableSchema,
    /// Writers hold the read lock while they insert, so a split or merge
    /// (write lock) sees no write half-applied.
    regions: RwLock<RegionList>,
    /// Held while flushing, splitting or merging: one at a time per table.
    pub flush_lock: Mutex<()>,
    /// Bumped before a compaction swaps files: a read retries its
    /// snapshot when it changed meanwhile (see `Table::read_snapshot`).
    pub compaction_epoch: AtomicU64,
    /// The block encoding new files get ([`BlockEncoding::code`]): the
    /// schema's when opened, changed by `Store::set_table_encoding`.
    encoding: AtomicU8,
    /// The newest row of recently read devices (`latest.rs`).
    pub latest: LatestCache,
}

impl Table {
    /// `latest_cache` bounds [`Table::latest`] (devices; 0: off).
    pub fn new(
        id: u32,
        schema: TableSchema,
        regions: Vec<Arc<Region>>,
        latest_cache: usize,
    ) -> Self {
        Table {
            latest: LatestCache::new(latest_cache),
            id,
            regions: RwLock::new(Arc::new(regions)),
            flush_lock: Mutex::new(()),
            compaction_epoch: AtomicU64::new(0),
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
    /// state of each region in `regions`, taken together. The caller waits
    /// on the gate (`SeqGate::wait_caught_up`) before listing `regions`. A compaction
    /// may drop versions that only cells newer than a read hide; it bumps
    /// the epoch before swapping, so a snapshot that straddles a swap is
    /// taken again, and any compaction swapped in before it only used
    /// cells the read can see.
    pub fn read_snapshot(&self, gate: &SeqGate, regions: &[Arc<Region>]) -> (u64, Vec<TableState>) {
        loop {
            let e1 = self.compaction_epoch.load(Ordering::SeqCst);
            let read_seq = gate.applied();
            let states = regions.iter().map(|r| r.snapshot()).collect();
            if self.compaction_epoch.load(Ordering::SeqCst) == e1 {
                return (read_seq, states);
            }
        }
    }

    pub fn region_by_id(&self, id: u32) -> Option<Arc<Region>> {
        self.regions().iter().find(|r| r.id == id).cloned()
    }
}
