//! Reads: point gets, latest-N, device time ranges and full-table time
//! scans, merged over memstores and HFiles with newest-version-wins,
//! tombstones, TTL and version limits.

use super::table::{Table, TableState};
use super::Store;
use crate::error::{Error, Result};
use crate::hfile::writer::KEY_MAX;
use crate::key::{self, DeviceId, RowKey, KEY_LEN};
use crate::read::source::{CellSource, FileSource, MemSource};
use crate::read::{merge_visible, Order, Row, RowView, Visibility};
use std::sync::Arc;

/// What a read touched (for tests and benchmarks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    pub memstores: usize,
    pub files_considered: usize,
    pub files_read: usize,
    pub rows: u64,
}

/// Which cells a read wants.
struct Query {
    lo: RowKey,
    hi: RowKey,
    from: i64,
    to: i64,
    device: Option<DeviceId>,
    exact_key: Option<RowKey>,
    versions: u32,
}

impl Store {
    fn read_table(&self, table: &str) -> Result<Arc<Table>> {
        self.shared.table(table)
    }

    fn run(
        &self,
        t: &Table,
        q: &Query,
        visit: impl FnMut(RowView<'_>) -> bool,
    ) -> Result<ReadStats> {
        // Everything applied (and so acknowledged) before this point is
        // visible; anything applied later is ignored, even if a memstore
        // chunk copied below already holds it.
        let read_seq = self
            .shared
            .applied_seq
            .load(std::sync::atomic::Ordering::Acquire);
        let st: TableState = t.snapshot();
        let mut stats = ReadStats {
            memstores: 1 + st.frozen.len(),
            files_considered: st.files.len(),
            ..Default::default()
        };
        let mut tombs = Vec::new();
        let mut sources: Vec<Box<dyn CellSource>> = Vec::new();
        for m in std::iter::once(&st.active).chain(st.frozen.iter()) {
            tombs.extend(m.range_tombstones());
            sources.push(Box::new(MemSource::new(m.clone(), q.lo, q.hi)));
        }
        for f in &st.files {
            tombs.extend_from_slice(f.range_tombstones());
            let skip = !f.overlaps(&q.lo, &q.hi)
                || !f.ts_overlaps(q.from, q.to)
                || q.exact_key.is_some_and(|k| !f.may_contain_key(&k))
                || q.device.is_some_and(|d| !f.may_contain_device(d));
            if !skip {
                stats.files_read += 1;
                let pf = Some(self.shared.prefetch.clone());
                sources.push(Box::new(FileSource::new(f.clone(), q.lo, q.hi, pf)?));
            }
        }
        if let Some(d) = q.device {
            tombs.retain(|t| t.device == d);
        }
        let o = &t.schema.options;
        let vis = Visibility {
            from: q.from,
            to: q.to,
            ttl_cutoff: o
                .ttl_ms
                .map(|ttl| self.shared.opts.clock.now_ms().saturating_sub(ttl)),
            versions: q.versions.clamp(1, o.max_versions),
            tombstones: Visibility::group(tombs.into_iter().filter(|t| t.seq <= read_seq)),
            read_seq,
        };
        stats.rows = merge_visible(sources, &vis, visit)?;
        Ok(stats)
    }

    /// The newest visible version of `(device, ts)`.
    pub fn get(&self, table: &str, device: u64, ts: i64) -> Result<Option<Row>> {
        Ok(self.get_versions(table, device, ts, 1)?.into_iter().next())
    }

    /// Up to `versions` (capped by the table's `max_versions`) visible
    /// versions of `(device, ts)`, newest first.
    pub fn get_versions(
        &self,
        table: &str,
        device: u64,
        ts: i64,
        versions: u32,
    ) -> Result<Vec<Row>> {
        let t = self.read_table(table)?;
        let k = key::encode(DeviceId(device), ts);
        let q = Query {
            lo: k,
            hi: k,
            from: ts,
            to: ts,
            device: Some(DeviceId(device)),
            exact_key: Some(k),
            versions,
        };
        let mut out = Vec::new();
        self.run(&t, &q, |r| {
            out.push(r.into());
            true
        })?;
        Ok(out)
    }

    /// The newest `n` readings of a device (one seek: keys are newest first).
    pub fn latest(&self, table: &str, device: u64, n: usize) -> Result<Vec<Row>> {
        let mut out = Vec::new();
        if n == 0 {
            return Ok(out);
        }
        self.scan_with(table, device, i64::MIN, i64::MAX, Order::NewestFirst, |r| {
            out.push(r.into());
            out.len() < n
        })?;
        Ok(out)
    }

    /// A device's readings with `from <= ts <= to` (both inclusive).
    pub fn scan(
        &self,
        table: &str,
        device: u64,
        from: i64,
        to: i64,
        order: Order,
    ) -> Result<Vec<Row>> {
        let mut out = Vec::new();
        self.scan_with(table, device, from, to, order, |r| {
            out.push(r.into());
            true
        })?;
        Ok(out)
    }

    /// Visit a device's readings in `[from, to]` until `visit` returns
    /// false. `OldestFirst` gathers the window in memory, then reverses.
    pub fn scan_with(
        &self,
        table: &str,
        device: u64,
        from: i64,
        to: i64,
        order: Order,
        mut visit: impl FnMut(RowView<'_>) -> bool,
    ) -> Result<ReadStats> {
        let t = self.read_table(table)?;
        if from > to {
            return Err(Error::invalid(
                "time range",
                format!("from {from} > to {to}"),
            ));
        }
        let (lo, hi) = key::device_range(DeviceId(device), from, to).expect("from <= to checked");
        let q = Query {
            lo,
            hi,
            from,
            to,
            device: Some(DeviceId(device)),
            exact_key: None,
            versions: 1,
        };
        match order {
            Order::NewestFirst => self.run(&t, &q, visit),
            Order::OldestFirst => {
                let mut rows: Vec<Row> = Vec::new();
                let stats = self.run(&t, &q, |r| {
                    rows.push(r.into());
                    true
                })?;
                for r in rows.iter().rev() {
                    let v = RowView {
                        device: DeviceId(r.device),
                        ts: r.ts,
                        seq: r.seq,
                        fields: &r.fields,
                    };
                    if !visit(v) {
                        break;
                    }
                }
                Ok(stats)
            }
        }
    }

    /// Visit every device's readings with `from <= ts <= to`, in key order
    /// (by hash prefix, then device, each device newest first).
    pub fn scan_all(
        &self,
        table: &str,
        from: i64,
        to: i64,
        visit: impl FnMut(RowView<'_>) -> bool,
    ) -> Result<ReadStats> {
        let t = self.read_table(table)?;
        if from > to {
            return Err(Error::invalid(
                "time range",
                format!("from {from} > to {to}"),
            ));
        }
        let q = Query {
            lo: [0; KEY_LEN],
            hi: KEY_MAX,
            from,
            to,
            device: None,
            exact_key: None,
            versions: 1,
        };
        self.run(&t, &q, visit)
    }
}
