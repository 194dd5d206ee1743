//! A live region: the key range `[start, end)` of a table, and its
//! version — the memstores and HFiles a read sees — swapped as one
//! immutable [`RegionVersion`] (as mito2's `VersionControl` does).
//!
//! - Every change (a freeze, a flush, a compaction's swap) builds a new
//!   version from the current one and swaps it in under the region's lock,
//!   so a reader holding an `Arc<RegionVersion>` sees one consistent set of
//!   memstores, files and flushed sequence number, however long it reads.
//! - Read order: take the read sequence number first, then the versions
//!   (`Table::read_snapshot`). A version whose `compacted_seq` is above the
//!   read's sequence number was made by a compaction that may have dropped
//!   versions only newer cells hide; the read takes the sequence number
//!   again, which has by then caught up (a compaction only merges cells
//!   that were applied).
//! - The pure rules of regions (boundaries, routing, the split point, the
//!   hotspot detector) are in `crate::region`; splitting and merging a
//!   live region in `engine/split.rs`.

use crate::hfile::HFileReader;
use crate::ids::RegionId;
use crate::key::RowKey;
use crate::memstore::Memstore;
use crate::region::hotspot::HotState;
use crate::region::stats::RegionStats;
use crate::util::sync::RwLockExt;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// What a reader sees of a region at one moment. Never changed in place:
/// [`Region::edit`] swaps in a new one.
#[derive(Clone)]
#[doc(hidden)]
pub struct RegionVersion {
    /// Counts the swaps since the region was made (for tests and
    /// diagnostics: two reads of one number saw the same version).
    pub number: u64,
    /// The memstore taking writes (it changes in place as rows arrive;
    /// a freeze swaps in a new one).
    pub active: Arc<Memstore>,
    /// Frozen memstores waiting for their flush, oldest first.
    pub frozen: Vec<Arc<Memstore>>,
    /// May include files shared with a sibling after a split: reads clip
    /// them to the region's range.
    pub files: Vec<Arc<HFileReader>>,
    /// Every cell of this region up to this sequence number is in files
    /// (replay and the apply thread skip cells at or below it).
    pub flushed_seq: u64,
    /// The newest sequence number a compaction merged into `files`: a read
    /// below it must take its sequence number again (module doc).
    pub compacted_seq: u64,
}

impl RegionVersion {
    /// A version with an empty active memstore, no frozen one, and `files`.
    pub fn new(fields_width: usize, files: Vec<Arc<HFileReader>>, flushed_seq: u64) -> Self {
        RegionVersion {
            number: 0,
            active: Arc::new(Memstore::new(fields_width)),
            frozen: Vec::new(),
            files,
            flushed_seq,
            compacted_seq: 0,
        }
    }

    /// Every memstore, the active one first.
    pub fn memstores(&self) -> impl Iterator<Item = &Arc<Memstore>> {
        std::iter::once(&self.active).chain(self.frozen.iter())
    }

    /// Bytes in the frozen memstores.
    pub fn frozen_bytes(&self) -> usize {
        self.frozen.iter().map(|m| m.bytes()).sum()
    }
}

/// One region: the key range `[start, end)`.
#[doc(hidden)]
pub struct Region {
    pub id: RegionId,
    pub start: RowKey,
    /// Exclusive; `None` is the end of the key space.
    pub end: Option<RowKey>,
    version: RwLock<Arc<RegionVersion>>,
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
    pub fn new(id: RegionId, start: RowKey, end: Option<RowKey>, version: RegionVersion) -> Self {
        Region {
            id,
            start,
            end,
            version: RwLock::new(Arc::new(version)),
            stats: RegionStats::default(),
            hot: Mutex::new(HotState::default()),
            next_major_ms: AtomicI64::new(0),
            retired: AtomicBool::new(false),
            compact_lock: Mutex::new(()),
        }
    }

    /// The current version (a consistent view for as long as it is held).
    pub fn version(&self) -> Arc<RegionVersion> {
        self.version.read_or_recover().clone()
    }

    /// Build the next version from the current one with `change` and swap
    /// it in; edits are serialised by the region's lock.
    pub fn edit<R>(&self, change: impl FnOnce(&mut RegionVersion) -> R) -> R {
        swap(&mut self.version.write_or_recover(), change)
    }

    /// The memstore taking writes now.
    pub fn active(&self) -> Arc<Memstore> {
        self.version.read_or_recover().active.clone()
    }

    /// Freeze the active memstore if it holds anything. Only the apply
    /// thread (between writes) and splits/merges (with writes paused)
    /// call this, so a frozen memstore holds every edit of the region up
    /// to its max seq.
    pub fn freeze(&self) -> bool {
        let mut slot = self.version.write_or_recover();
        if slot.active.is_empty() || self.is_retired() {
            return false;
        }
        swap(&mut slot, |v| {
            let fresh = Arc::new(Memstore::new(v.active.fields_width()));
            let old = std::mem::replace(&mut v.active, fresh);
            v.frozen.push(old);
        });
        true
    }

    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    pub fn file_count(&self) -> usize {
        self.version().files.len()
    }

    /// What the compaction planner knows of the region's files.
    fn file_stats(&self) -> Vec<crate::compaction::plan::FileStat> {
        let v = self.version();
        v.files.iter().map(|f| super::compact::stat_of(f)).collect()
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
        self.version().frozen.len()
    }

    /// (active bytes, frozen bytes).
    pub fn memstore_bytes(&self) -> (usize, usize) {
        let (active, frozen, _) = self.memstore_load();
        (active, frozen)
    }

    /// Active bytes, frozen bytes and frozen memstores, of one version
    /// (read on every write by the apply thread and the writers).
    pub fn memstore_load(&self) -> (usize, usize, usize) {
        let v = self.version();
        (v.active.bytes(), v.frozen_bytes(), v.frozen.len())
    }

    /// Highest sequence number below which this region holds nothing
    /// unflushed, given that everything up to `applied` was applied before
    /// this call (read `applied` first).
    pub fn durable_seq(&self, applied: u64) -> u64 {
        let v = self.version();
        v.memstores()
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
        let v = self.version();
        v.files
            .iter()
            .flat_map(|f| f.index().iter().map(|e| (e.first_key, e.len as u64)))
            .filter(|(k, _)| *k >= self.start && self.end.is_none_or(|e| *k < e))
            .collect()
    }
}

/// Replace the version in `slot` by a changed copy, one number on.
fn swap<R>(slot: &mut Arc<RegionVersion>, change: impl FnOnce(&mut RegionVersion) -> R) -> R {
    let mut next = RegionVersion::clone(slot);
    let out = change(&mut next);
    next.number += 1;
    *slot = Arc::new(next);
    out
}

#[cfg(test)]
mod tests {
    use super::super::table::Table;
    use super::super::visibility::SeqGate;
    use super::*;
    use crate::ids::TableId;
    use crate::region::KEY_MIN;
    use crate::schema::{Field, FieldType, TableOptions, TableSchema};

    fn region() -> Arc<Region> {
        let v = RegionVersion::new(8, Vec::new(), 3);
        Arc::new(Region::new(RegionId(0), KEY_MIN, None, v))
    }

    fn table(r: &Arc<Region>) -> Table {
        let fields = vec![Field::new("x", FieldType::F64)];
        let schema = TableSchema::new("t", fields, TableOptions::default()).unwrap();
        Table::new(TableId(1), schema, vec![r.clone()], 0)
    }

    #[test]
    fn an_edit_swaps_a_new_version_and_leaves_the_held_one_alone() {
        let r = region();
        let held = r.version();
        r.edit(|v| v.flushed_seq = 9);
        let now = r.version();
        assert_eq!((held.number, held.flushed_seq), (0, 3));
        assert_eq!((now.number, now.flushed_seq), (1, 9));
        assert!(Arc::ptr_eq(&held.active, &now.active));
    }

    #[test]
    fn freezing_an_empty_memstore_changes_nothing() {
        let r = region();
        assert!(!r.freeze());
        assert_eq!(r.version().number, 0);
    }

    #[test]
    fn a_read_never_pairs_its_sequence_number_with_a_version_compacted_past_it() {
        let r = region();
        let t = table(&r);
        let gate = Arc::new(SeqGate::new(5));
        r.edit(|v| v.compacted_seq = 10);
        // The apply thread catches up to what the compaction merged (it
        // only merges applied cells); the read waits for that.
        let g = gate.clone();
        let applier = std::thread::spawn(move || {
            for s in 6..=10 {
                g.set_applied(s);
                std::thread::yield_now();
            }
        });
        let (read_seq, versions) = t.read_snapshot(&gate, std::slice::from_ref(&r));
        applier.join().unwrap();
        assert!(
            read_seq >= 10,
            "read at {read_seq} used a version compacted to 10"
        );
        assert_eq!(versions[0].compacted_seq, 10);
        // Below it, a version without compaction is read at once.
        let plain = region();
        let (read_seq, _) =
            table(&plain).read_snapshot(&SeqGate::new(5), std::slice::from_ref(&plain));
        assert_eq!(read_seq, 5);
    }
}
