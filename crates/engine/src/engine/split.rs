//! Splitting and merging regions.
//!
//! A split appends one manifest record (`Split`): before it is durable the
//! parent is the region, after it the two daughters are — a crash at any
//! point reopens as one or the other. Daughters reference the parent's
//! HFiles (each reads only its key range of them; compaction will rewrite
//! them) and inherit its flushed sequence number; the parent's memstores
//! are copied into per-daughter memstores while the table's writes are
//! paused (the region map is held exclusively), so no edit is lost or
//! counted twice. Unflushed edits also stay in the WAL, and replay routes
//! them by key to whichever regions the manifest lists.
//!
//! A merge first rewrites any file a region shares with a sibling into one
//! clipped to its own range (so no cell is listed twice in the merged
//! region), then pauses the table's writes, flushes both regions (so
//! neither holds unflushed edits) and appends `Merge`: the merged region
//! lists the union of their files.

use super::flush::flush_region;
use super::region::{Region, RegionVersion};
use super::{Shared, Table};
use crate::error::{Error, Result};
use crate::failpoint::pause_at;
use crate::hfile::writer::KEY_MAX;
use crate::ids::RegionId;
use crate::key::RowKey;
use crate::manifest::Record;
use crate::region::{self, key_before, key_hex};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Split region `id` if its data outgrew `region_split_bytes`. The caller
/// holds the table's flush lock.
pub fn maybe_split(shared: &Shared, t: &Table, id: RegionId) -> Result<()> {
    let Some(r) = t.region_by_id(id) else {
        return Ok(());
    };
    let limit = shared.opts.region_split_bytes;
    let weights = r.weights();
    let size: u64 = weights.iter().map(|(_, b)| b).sum();
    if size <= limit {
        return Ok(());
    }
    match region::split::choose(&r.start, r.end.as_ref(), &weights, limit) {
        Some(p) => {
            let (a, b) = match split_at(shared, t, &r, p.key) {
                Ok(ids) => ids,
                // Refused (e.g. the table reached its region limit): the
                // region stays whole; nothing is lost.
                Err(Error::InvalidInput { what, message }) => {
                    tracing::warn!(
                        "table {}: region {} not split: {what}: {message}",
                        t.schema.name,
                        r.id
                    );
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            tracing::info!(
                "table {}: region {} ({size} bytes) split at {} ({:?} boundary) into {a} and {b}",
                t.schema.name,
                r.id,
                key_hex(&p.key),
                p.level
            );
            // A daughter may still be over the limit (each holds part of
            // the parent's data, so this ends).
            maybe_split(shared, t, a)?;
            maybe_split(shared, t, b)?;
        }
        None => tracing::debug!(
            "table {}: region {} ({size} bytes) has no split point",
            t.schema.name,
            r.id
        ),
    }
    Ok(())
}

/// A region's automatic split point, if it has data on both sides of one.
pub fn auto_point(shared: &Shared, r: &Region) -> Option<RowKey> {
    let limit = shared.opts.region_split_bytes;
    region::split::choose(&r.start, r.end.as_ref(), &r.weights(), limit).map(|p| p.key)
}

/// Split `r` at `at` (the right daughter's first key). The caller holds
/// the table's flush lock. Returns the daughters' ids.
pub fn split_at(
    shared: &Shared,
    t: &Table,
    r: &Arc<Region>,
    at: RowKey,
) -> Result<(RegionId, RegionId)> {
    let inside = at > r.start && r.end.is_none_or(|e| at < e);
    if !inside {
        return Err(Error::invalid(
            "split point",
            format!("{} is not inside region {}", key_hex(&at), r.id),
        ));
    }
    let mut map = t.regions_exclusive();
    let idx = map
        .iter()
        .position(|x| Arc::ptr_eq(x, r))
        .ok_or_else(|| Error::invalid("split", format!("region {} is gone", r.id)))?;
    let next = shared.catalog.next_region_id(t.id)?;
    let (left, right) = (next, RegionId(next.0 + 1));
    pause_at("split-before-record");
    shared.append(&[Record::Split {
        table_id: t.id.0,
        parent: r.id.0,
        at,
        left: left.0,
        right: right.0,
    }])?;
    pause_at("split-after-record");
    let st = r.version();
    // A daughter starts at version 0 of its own, with the parent's files,
    // flushed and compacted sequence numbers, and its part of each memstore.
    let part = |lo: &RowKey, hi: &RowKey| RegionVersion {
        number: 0,
        active: Arc::new(st.active.copy_range_into_new(lo, hi)),
        frozen: st
            .frozen
            .iter()
            .map(|m| Arc::new(m.copy_range_into_new(lo, hi)))
            .collect(),
        files: st.files.clone(),
        flushed_seq: st.flushed_seq,
        compacted_seq: st.compacted_seq,
    };
    let left_hi = key_before(&at).expect("at > start");
    let right_hi = r.end.map_or(KEY_MAX, |e| key_before(&e).expect("end > at"));
    let l = Arc::new(Region::new(
        left,
        r.start,
        Some(at),
        part(&r.start, &left_hi),
    ));
    let rr = Arc::new(Region::new(right, at, r.end, part(&at, &right_hi)));
    let mut v: Vec<Arc<Region>> = (**map).clone();
    v.splice(idx..=idx, [l.clone(), rr.clone()]);
    r.retired.store(true, Ordering::Release);
    *map = Arc::new(v);
    drop(map);
    pause_at("split-after-swap");
    if !st.frozen.is_empty() {
        shared.background.request_flush(t.id);
    }
    // The daughters inherit the parent's files, and a compaction queued
    // for the parent is dropped with it: each daughter gets its own check.
    for d in [&l, &rr] {
        shared.request_compaction(t.id, d, false);
    }
    Ok((left, right))
}

/// Merge region `left` with the region after it. The caller holds the
/// table's flush lock (so no flush, split or compaction commit runs).
/// Returns the merged region's id.
pub fn merge(shared: &Shared, t: &Table, left: RegionId) -> Result<RegionId> {
    let regions = t.regions();
    let idx = regions
        .iter()
        .position(|r| r.id == left)
        .ok_or_else(|| Error::invalid("region", format!("no region {left}")))?;
    let (l, r) = match (regions.get(idx), regions.get(idx + 1)) {
        (Some(l), Some(r)) => (l.clone(), r.clone()),
        _ => {
            return Err(Error::invalid(
                "region",
                format!("region {left} is the last one: nothing after it to merge with"),
            ))
        }
    };
    // Files shared with a sibling since a split hold cells outside their
    // region; the merged region would read those twice where the sibling
    // had compacted them, so each side first rewrites them clipped to its
    // range. Writes go on meanwhile (only the flush lock is held).
    for x in [&l, &r] {
        super::compact::own_files(shared, t, x)?;
    }
    // Pause the table's writes only to flush what arrived since.
    let mut map = t.regions_exclusive();
    let adjacent = map.get(idx).is_some_and(|x| Arc::ptr_eq(x, &l))
        && map.get(idx + 1).is_some_and(|x| Arc::ptr_eq(x, &r));
    if !adjacent {
        return Err(Error::invalid("merge", "the region map changed; retry"));
    }
    for x in [&l, &r] {
        x.freeze();
        flush_region(shared, t, x).map_err(|e| shared.poison.stop(&e))?;
    }
    let merged = shared.catalog.next_region_id(t.id)?;
    pause_at("merge-before-record");
    shared.append(&[Record::Merge {
        table_id: t.id.0,
        left: l.id.0,
        right: r.id.0,
        merged: merged.0,
    }])?;
    pause_at("merge-after-record");
    let (lv, rv) = (l.version(), r.version());
    let mut files = lv.files.clone();
    for f in &rv.files {
        if !files.iter().any(|g| g.file_id() == f.file_id()) {
            files.push(f.clone());
        }
    }
    let flushed = lv.flushed_seq.max(rv.flushed_seq);
    let mut version = RegionVersion::new(t.schema.fields_width(), files, flushed);
    version.compacted_seq = lv.compacted_seq.max(rv.compacted_seq);
    let m = Arc::new(Region::new(merged, l.start, r.end, version));
    let mut v: Vec<Arc<Region>> = (**map).clone();
    v.splice(idx..=idx + 1, [m.clone()]);
    l.retired.store(true, Ordering::Release);
    r.retired.store(true, Ordering::Release);
    *map = Arc::new(v);
    drop(map);
    // Both sides' files now belong to one region: it may have work.
    shared.request_compaction(t.id, &m, false);
    Ok(merged)
}
