//! Batch reads: a region whose only source in the read's range is one
//! columnar HFile (the state after a compaction, with nothing newer in
//! the memstores and no range tombstone) is read as columns. Each block's
//! keys choose the visible rows (the same rules as [`super::merge_visible`]:
//! window, TTL, point tombstones, versions), and the chosen rows leave as
//! slices of the decoded columns, one device run at a time, never as
//! row-major cells. Only the fields asked for are decoded.

use super::prefetch::{Columns, Prefetcher, ScanAlive, Wanted, PREFETCH_BLOCKS_AHEAD};
use super::{RowView, Visibility};
use crate::error::Result;
use crate::hfile::columnar::RUN_KEY_LEN;
use crate::hfile::columns::{BlockColumns, BlockKeys, FieldSlot, KeyRun};
use crate::hfile::HFileReader;
use crate::key::{ts_of, DeviceId, RowKey};
use std::sync::Arc;

/// Consecutive visible rows of one device: rows of a block's columns.
#[derive(Clone, Copy)]
pub struct RunSlice<'a> {
    /// The device of every row of the run.
    pub device: DeviceId,
    /// The block's columns: its keys and the asked fields, in the order
    /// asked.
    pub block: &'a BlockColumns,
    /// The rows, in the block.
    pub rows: (usize, usize),
}

impl<'a> RunSlice<'a> {
    /// Rows in the run.
    pub fn len(&self) -> usize {
        self.rows.1 - self.rows.0
    }

    /// Whether the run has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Timestamps (ms), newest first.
    pub fn ts(&self) -> &'a [i64] {
        &self.block.keys.ts[self.rows.0..self.rows.1]
    }

    /// The asked fields.
    pub fn field_count(&self) -> usize {
        self.block.fields.len()
    }

    /// Asked field `i`'s little-endian values for these rows.
    pub fn field(&self, i: usize) -> &'a [u8] {
        self.block.field(i, self.rows.0..self.rows.1)
    }
}

/// What a batch read hands over, in key order: a row (from the merging
/// read, with all its field bytes) or a run of rows as columns (with the
/// asked fields only).
pub enum Piece<'a> {
    /// One row.
    Row(RowView<'a>),
    /// A run of one device's rows, column by column.
    Run(RunSlice<'a>),
}

/// Where the merge rules stand between rows: the current key, and
/// whether its older versions are hidden.
#[derive(Default)]
struct KeyState {
    cur: Option<(DeviceId, i64)>,
    dead: bool,
    emitted: u32,
}

/// The bounds of one scan over a file.
struct Bounds {
    lo: RowKey,
    hi: RowKey,
    /// Newest and oldest visible timestamps (window and TTL).
    ts_max: i64,
    ts_min: i64,
    versions: u32,
}

impl Bounds {
    /// Does a block with these keys hold a row inside the read's keys and
    /// window (before the visibility rules)?
    fn any_row_in(&self, keys: &BlockKeys) -> bool {
        keys.runs
            .iter()
            .any(|run| self.rows_of(keys, run).is_some_and(|r| !r.is_empty()))
    }

    /// The rows of `run` inside the read's keys and window (one slice of
    /// it: timestamps fall within a run); `None` when the run's device is
    /// outside the keys.
    fn rows_of(&self, keys: &BlockKeys, run: &KeyRun) -> Option<std::ops::Range<usize>> {
        if run.prefix[..] < self.lo[..RUN_KEY_LEN] || run.prefix[..] > self.hi[..RUN_KEY_LEN] {
            return None;
        }
        let mut newest = self.ts_max;
        let mut oldest = self.ts_min;
        if run.prefix[..] == self.lo[..RUN_KEY_LEN] {
            newest = newest.min(ts_of(&self.lo));
        }
        if run.prefix[..] == self.hi[..RUN_KEY_LEN] {
            oldest = oldest.max(ts_of(&self.hi));
        }
        let start = run.start as usize;
        let ts = &keys.ts[start..start + run.len as usize];
        Some(
            start + ts.partition_point(|&t| t > newest)
                ..start + ts.partition_point(|&t| t >= oldest),
        )
    }
}

/// Read `[lo, hi]` of `file` as columns of `slots` and hand each run of
/// visible rows to `visit` until it returns false. The caller checked
/// that the file is the range's only source, that no range tombstone
/// applies and that every cell of the file is in the read's snapshot.
/// Returns the rows handed over.
pub fn scan_file(
    file: &Arc<HFileReader>,
    lo: &RowKey,
    hi: &RowKey,
    vis: &Visibility,
    slots: &Arc<[FieldSlot]>,
    prefetch: Option<&Prefetcher>,
    visit: &mut dyn FnMut(Piece<'_>) -> bool,
) -> Result<u64> {
    debug_assert!(vis.tombstones.is_empty() && file.info().max_seq <= vis.read_seq);
    let b = Arc::new(Bounds {
        lo: *lo,
        hi: *hi,
        ts_max: vis.to,
        ts_min: vis.ttl_cutoff.map_or(vis.from, |c| c.max(vis.from)),
        versions: vis.versions.max(1),
    });
    let wanted: Wanted = {
        let b = b.clone();
        Arc::new(move |k: &BlockKeys| b.any_row_in(k))
    };
    let idx = file.index();
    let mut i = file.seek_block(lo);
    let alive = ScanAlive::default();
    // Blocks before this one were handed to the read-ahead workers.
    let mut ahead = i + 1;
    let mut state = KeyState::default();
    let mut n = 0u64;
    while i < idx.len() && idx[i].first_key <= *hi {
        if let Some(p) = prefetch {
            let end = (i + 1 + PREFETCH_BLOCKS_AHEAD).min(idx.len());
            while ahead < end && idx[ahead].first_key <= *hi {
                // A warm read asks the workers for nothing.
                if !file.keys_cached(ahead) {
                    let columns = Columns {
                        slots: slots.clone(),
                        seq: false,
                        wanted: Some(wanted.clone()),
                    };
                    p.request(file, ahead, Some(columns), &alive);
                }
                ahead += 1;
            }
        }
        // A block without a row in the window costs its keys only.
        let Some(cols) = file.block_columns_if(i, slots, false, &*wanted)? else {
            i += 1;
            continue;
        };
        match visit_block(&cols, &b, &mut state, &mut n, visit) {
            Flow::Next => i += 1,
            Flow::Stop => break,
        }
    }
    Ok(n)
}

enum Flow {
    Next,
    Stop,
}

/// Hand over the visible rows of one block; `Stop` when the read is past
/// `hi` or the visitor stopped.
fn visit_block(
    cols: &BlockColumns,
    b: &Bounds,
    state: &mut KeyState,
    n: &mut u64,
    visit: &mut dyn FnMut(Piece<'_>) -> bool,
) -> Flow {
    let keys = &cols.keys;
    for run in &keys.runs {
        if run.prefix[..] > b.hi[..RUN_KEY_LEN] {
            return Flow::Stop;
        }
        let Some(rows) = b.rows_of(keys, run) else {
            continue;
        };
        let (from, to) = (rows.start, rows.end);
        for (a, z) in visible_ranges(keys, run.device, from, to, b.versions, state) {
            *n += (z - a) as u64;
            let piece = Piece::Run(RunSlice {
                device: run.device,
                block: cols,
                rows: (a, z),
            });
            if !visit(piece) {
                return Flow::Stop;
            }
        }
    }
    Flow::Next
}

/// The rows of `from..to` (one device, in the window) that are visible:
/// the newest `versions` of each timestamp, none at or below a point
/// tombstone of it; as ranges of consecutive rows.
fn visible_ranges(
    keys: &BlockKeys,
    device: DeviceId,
    from: usize,
    to: usize,
    versions: u32,
    st: &mut KeyState,
) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for j in from..to {
        let key = (device, keys.ts[j]);
        if st.cur != Some(key) {
            st.cur = Some(key);
            st.dead = false;
            st.emitted = 0;
        }
        if st.dead {
            continue;
        }
        if !keys.is_put(j) {
            st.dead = true;
            continue;
        }
        st.emitted += 1;
        st.dead = st.emitted >= versions;
        match out.last_mut() {
            Some(r) if r.1 == j => r.1 = j + 1,
            _ => out.push((j, j + 1)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(ts: &[i64], kinds: &[u8]) -> BlockKeys {
        BlockKeys {
            runs: vec![KeyRun {
                device: DeviceId(1),
                prefix: [0; RUN_KEY_LEN],
                start: 0,
                len: ts.len() as u32,
            }],
            ts: ts.to_vec(),
            kinds: Some(kinds.to_vec()),
        }
    }

    #[test]
    fn versions_and_point_tombstones_choose_rows_as_the_merge_does() {
        // ts 50 twice, a tombstone over ts 40's two older puts, ts 30.
        let k = keys(&[50, 50, 40, 40, 40, 30], &[1, 1, 2, 1, 1, 1]);
        let ranges =
            |versions, st: &mut KeyState| visible_ranges(&k, DeviceId(1), 0, 6, versions, st);
        assert_eq!(ranges(1, &mut KeyState::default()), vec![(0, 1), (5, 6)]);
        assert_eq!(ranges(2, &mut KeyState::default()), vec![(0, 2), (5, 6)]);
        // A key continued from the previous block: its newest version
        // was already handed over there.
        let mut st = KeyState {
            cur: Some((DeviceId(1), 50)),
            dead: true,
            emitted: 1,
        };
        assert_eq!(ranges(1, &mut st), vec![(5, 6)]);
    }
}
