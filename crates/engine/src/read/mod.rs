//! The read path: merge sorted cell sources (memstores and HFiles) and
//! apply visibility — newest version first, point and range tombstones,
//! TTL, version limits and a timestamp window.

pub mod columns;
#[doc(hidden)]
pub mod prefetch;
#[doc(hidden)]
pub mod source;

use crate::cell::{self, CellKind, CellRef, RangeTombstone};
use crate::error::Result;
use crate::key::{DeviceId, RowKey};
use source::CellSource;
use std::collections::HashMap;

/// Order of a device scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Order {
    /// Newest first: the natural key order.
    #[default]
    NewestFirst,
    /// Oldest first: the device's window is gathered, then reversed.
    OldestFirst,
}

/// A visible row as handed to a visitor.
#[derive(Clone, Copy, Debug)]
pub struct RowView<'a> {
    /// The device.
    pub device: DeviceId,
    /// The timestamp, Unix milliseconds.
    pub ts: i64,
    /// The sequence number of the write that put it.
    pub seq: u64,
    /// The table's field bytes (little-endian, packed).
    pub fields: &'a [u8],
}

/// An owned row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The device id.
    pub device: u64,
    /// The timestamp, Unix milliseconds.
    pub ts: i64,
    /// The sequence number of the write that put it.
    pub seq: u64,
    /// The field bytes, laid out as the table's schema says.
    pub fields: Vec<u8>,
}

impl Row {
    /// The row as a view (what scan visitors take).
    pub fn view(&self) -> RowView<'_> {
        RowView {
            device: DeviceId(self.device),
            ts: self.ts,
            seq: self.seq,
            fields: &self.fields,
        }
    }
}

impl From<RowView<'_>> for Row {
    fn from(v: RowView<'_>) -> Self {
        Row {
            device: v.device.0,
            ts: v.ts,
            seq: v.seq,
            fields: v.fields.to_vec(),
        }
    }
}

/// Visibility rules for one read.
pub struct Visibility {
    /// Cells with `ts` outside `[from, to]` are skipped.
    pub from: i64,
    /// The end of the window, excluded.
    pub to: i64,
    /// Cells older than this (TTL) are invisible.
    pub ttl_cutoff: Option<i64>,
    /// Versions returned per (device, ts).
    pub versions: u32,
    /// Range tombstones by device.
    pub tombstones: HashMap<DeviceId, Vec<RangeTombstone>>,
    /// Snapshot: cells (and tombstones) with a higher sequence number were
    /// applied after the read started and are ignored.
    pub read_seq: u64,
}

impl Visibility {
    /// Range tombstones grouped by device.
    pub fn group(
        tombs: impl IntoIterator<Item = RangeTombstone>,
    ) -> HashMap<DeviceId, Vec<RangeTombstone>> {
        let mut m: HashMap<DeviceId, Vec<RangeTombstone>> = HashMap::new();
        for t in tombs {
            m.entry(t.device).or_default().push(t);
        }
        m
    }

    fn hidden_by_range(&self, d: DeviceId, ts: i64, seq: u64) -> bool {
        // Most reads see no range tombstone: skip hashing the device.
        !self.tombstones.is_empty()
            && self
                .tombstones
                .get(&d)
                .is_some_and(|v| v.iter().any(|t| t.hides(d, ts, seq)))
    }
}

/// Merge `sources` and call `visit` for each visible row in key order
/// until it returns `false`. Returns the number of rows visited.
pub fn merge_visible(
    mut sources: Vec<Box<dyn CellSource + '_>>,
    vis: &Visibility,
    mut visit: impl FnMut(RowView<'_>) -> bool,
) -> Result<u64> {
    let mut cur: Option<RowKey> = None;
    let mut dead = false;
    let mut emitted = 0u32;
    let mut n = 0u64;
    // Exhausted sources (often an empty memstore) are dropped so that the
    // common case, one file per region, skips the comparisons entirely.
    sources.retain(|s| s.current().is_some());
    loop {
        let i = match sources.len() {
            0 => break,
            1 => 0,
            _ => min_source(&sources).expect("every kept source has a cell"),
        };
        let c = CellRef(sources[i].current().expect("min source has a cell"));
        if cur.as_ref() != Some(c.key()) {
            cur = Some(*c.key());
            dead = false;
            emitted = 0;
        }
        if !dead && c.seq() <= vis.read_seq {
            let (d, ts, seq) = (c.device(), c.ts(), c.seq());
            let out_of_window =
                ts < vis.from || ts > vis.to || vis.ttl_cutoff.is_some_and(|cut| ts < cut);
            // A tombstone, a covering range tombstone or the window/TTL
            // hides this version and every older one of the same key.
            if out_of_window || c.kind() == CellKind::Delete || vis.hidden_by_range(d, ts, seq) {
                dead = true;
            } else {
                emitted += 1;
                dead = emitted >= vis.versions;
                n += 1;
                let row = RowView {
                    device: d,
                    ts,
                    seq,
                    fields: c.fields(),
                };
                if !visit(row) {
                    return Ok(n);
                }
            }
        }
        sources[i].advance()?;
        if sources[i].current().is_none() {
            sources.remove(i);
        }
    }
    Ok(n)
}

/// Index of the source whose current cell sorts first.
pub fn min_source(sources: &[Box<dyn CellSource + '_>]) -> Option<usize> {
    let mut best: Option<(usize, &[u8])> = None;
    for (i, s) in sources.iter().enumerate() {
        if let Some(c) = s.current() {
            match best {
                Some((_, b)) if cell::cmp(c, b).is_ge() => {}
                _ => best = Some((i, c)),
            }
        }
    }
    best.map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::{push, CellKind};
    use crate::key::encode;

    /// Cells from a vector (already in cell order).
    struct VecSource {
        cells: Vec<u8>,
        width: usize,
        pos: usize,
    }

    impl CellSource for VecSource {
        fn current(&self) -> Option<&[u8]> {
            self.cells.get(self.pos..self.pos + self.width)
        }
        fn advance(&mut self) -> Result<()> {
            self.pos += self.width;
            Ok(())
        }
    }

    fn vis(read_seq: u64, tombs: Vec<RangeTombstone>) -> Visibility {
        Visibility {
            from: i64::MIN,
            to: i64::MAX,
            ttl_cutoff: None,
            versions: 1,
            tombstones: Visibility::group(tombs.into_iter().filter(|t| t.seq <= read_seq)),
            read_seq,
        }
    }

    fn read(read_seq: u64, tombs: Vec<RangeTombstone>) -> Vec<(i64, u8)> {
        let k = encode(DeviceId(1), 10);
        let k2 = encode(DeviceId(1), 5);
        let mut cells = Vec::new();
        push(&mut cells, &k, 9, CellKind::Put, &[2]);
        push(&mut cells, &k, 5, CellKind::Put, &[1]);
        push(&mut cells, &k2, 3, CellKind::Put, &[7]);
        let src = VecSource {
            cells,
            width: crate::cell::cell_width(1),
            pos: 0,
        };
        let mut out = Vec::new();
        merge_visible(vec![Box::new(src)], &vis(read_seq, tombs), |r| {
            out.push((r.ts, r.fields[0]));
            true
        })
        .unwrap();
        out
    }

    #[test]
    fn a_read_ignores_what_was_applied_after_it_started() {
        assert_eq!(read(100, vec![]), vec![(10, 2), (5, 7)]);
        assert_eq!(
            read(7, vec![]),
            vec![(10, 1), (5, 7)],
            "seq 9 is after the snapshot"
        );
        assert_eq!(read(4, vec![]), vec![(5, 7)]);
        let t = RangeTombstone {
            device: DeviceId(1),
            from: 0,
            to: 20,
            seq: 8,
        };
        assert_eq!(
            read(100, vec![t]),
            vec![(10, 2)],
            "tombstone hides seq < 8 only"
        );
        assert_eq!(
            read(7, vec![t]),
            vec![(10, 1), (5, 7)],
            "tombstone after the snapshot"
        );
    }
}
