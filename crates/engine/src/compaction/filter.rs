//! What a compaction keeps of the merged cells (in key order, newest
//! version first within a key).
//!
//! - **Minor** keeps every cell: delete markers, range tombstones and all
//!   versions stay (other files of the region may hold older cells they
//!   must still hide).
//! - **Major** sees every file of the region, and the region's memstores
//!   only hold newer edits, so it applies everything and keeps only what a
//!   read could return: per key, the newest `max_versions` puts that no
//!   delete marker, covering range tombstone or the TTL hides. Markers and
//!   range tombstones are dropped (nothing older is left for them to
//!   hide).

use crate::cell::{CellKind, CellRef, RangeTombstone};
use crate::error::Result;
use crate::key::{DeviceId, RowKey};
use crate::read::source::CellSource;
use crate::read::{min_source, Visibility};
use std::collections::HashMap;

/// The kind of compaction.
pub enum Mode {
    Minor,
    Major {
        ttl_cutoff: Option<i64>,
        max_versions: u32,
        tombstones: HashMap<DeviceId, Vec<RangeTombstone>>,
    },
}

impl Mode {
    pub fn major(ttl_cutoff: Option<i64>, max_versions: u32, tombs: Vec<RangeTombstone>) -> Mode {
        Mode::Major {
            ttl_cutoff,
            max_versions: max_versions.max(1),
            tombstones: Visibility::group(tombs),
        }
    }
}

/// Counts of one merge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MergeCounts {
    pub cells_in: u64,
    pub cells_out: u64,
}

/// Per-key state of the filter.
pub struct Filter {
    mode: Mode,
    cur: Option<RowKey>,
    dead: bool,
    kept: u32,
}

impl Filter {
    pub fn new(mode: Mode) -> Self {
        Filter {
            mode,
            cur: None,
            dead: false,
            kept: 0,
        }
    }

    /// Should cell `c` (the next in merge order) be written?
    pub fn keep(&mut self, c: CellRef<'_>) -> bool {
        let Mode::Major {
            ttl_cutoff,
            max_versions,
            tombstones,
        } = &self.mode
        else {
            return true;
        };
        if self.cur.as_ref() != Some(c.key()) {
            self.cur = Some(*c.key());
            self.dead = false;
            self.kept = 0;
        }
        if self.dead {
            return false;
        }
        let (d, ts, seq) = (c.device(), c.ts(), c.seq());
        let expired = ttl_cutoff.is_some_and(|cut| ts < cut);
        let covered = tombstones
            .get(&d)
            .is_some_and(|v| v.iter().any(|t| t.hides(d, ts, seq)));
        if expired || covered || c.kind() == CellKind::Delete {
            // Hides this version and every older one of the key.
            self.dead = true;
            return false;
        }
        self.kept += 1;
        self.dead = self.kept >= *max_versions;
        true
    }
}

/// Merge `sources` (each in cell order) and hand every kept cell to
/// `out`, streaming: memory is the sources' current blocks.
pub fn merge(
    mut sources: Vec<Box<dyn CellSource + '_>>,
    filter: &mut Filter,
    mut out: impl FnMut(&[u8]) -> Result<()>,
) -> Result<MergeCounts> {
    let mut n = MergeCounts::default();
    while let Some(i) = min_source(&sources) {
        let c = sources[i].current().expect("min source has a cell");
        n.cells_in += 1;
        if filter.keep(CellRef(c)) {
            out(c)?;
            n.cells_out += 1;
        }
        sources[i].advance()?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::{cell_width, push};
    use crate::key::encode;

    fn run(mode: Mode, cells: &[(i64, u64, CellKind)]) -> Vec<(i64, u64)> {
        let mut f = Filter::new(mode);
        let mut out = Vec::new();
        for (ts, seq, kind) in cells {
            let mut c = Vec::new();
            push(&mut c, &encode(DeviceId(1), *ts), *seq, *kind, &[0]);
            assert_eq!(c.len(), cell_width(1));
            if f.keep(CellRef(&c)) {
                out.push((*ts, *seq));
            }
        }
        out
    }

    #[test]
    fn major_applies_versions_deletes_ttl_and_range_tombstones_minor_keeps_all() {
        use CellKind::{Delete, Put};
        // Cell order: key asc = ts desc; seq desc within a key.
        let cells = [
            (30, 9, Put),
            (30, 8, Put),
            (30, 7, Put),
            (30, 6, Put),
            (20, 5, Delete),
            (20, 4, Put),
            (10, 3, Put),
            (5, 2, Put),
        ];
        assert_eq!(run(Mode::Minor, &cells).len(), cells.len());
        assert_eq!(
            run(Mode::major(None, 1, vec![]), &cells),
            vec![(30, 9), (10, 3), (5, 2)]
        );
        assert_eq!(
            run(Mode::major(None, 3, vec![]), &cells),
            vec![(30, 9), (30, 8), (30, 7), (10, 3), (5, 2)]
        );
        assert_eq!(
            run(Mode::major(Some(8), 1, vec![]), &cells),
            vec![(30, 9), (10, 3)]
        );
        let rt = RangeTombstone {
            device: DeviceId(1),
            from: 0,
            to: 10,
            seq: 3,
        };
        // The range tombstone (seq 3) hides ts 5 (seq 2), not ts 10 (seq 3).
        assert_eq!(
            run(Mode::major(None, 1, vec![rt]), &cells),
            vec![(30, 9), (10, 3)]
        );
    }
}
