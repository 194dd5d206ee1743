//! Run a [`Plan`] against a store, producing Arrow record batches.

use super::agg::{Aggregator, GroupBy};
use super::columns::{DeviceDict, RowBatcher, RowLayout};
use super::plan::{Devices, Kind, Plan};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use std::collections::HashSet;
use std::sync::Arc;
use telestore_engine::engine::KeySpan;
use telestore_engine::error::{Error, Result};
use telestore_engine::read::columns::Piece;
use telestore_engine::read::{Order, RowView};
use telestore_engine::Store;

/// Up to this many selected devices are read with one seek each; more
/// are read by the table-wide parallel scan, filtered.
pub const PER_DEVICE_SEEKS_MAX: usize = 256;

/// A plan with its output shape decided.
pub struct Prepared {
    plan: Plan,
    shape: Shape,
}

enum Shape {
    Rows(Arc<RowLayout>),
    Agg(Box<Aggregator>),
}

/// Summary of a run.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunStats {
    /// Rows read from the engine (before aggregation).
    pub rows_read: u64,
    /// Rows sent to the sink.
    pub rows_out: u64,
    /// Record batches sent.
    pub batches: u64,
}

/// The device dictionary for a result: the selected devices' names, or
/// the whole registry when all devices are read. Present whenever the
/// registry holds a name, so that a table's result schema does not depend
/// on which devices a query selected (a selected device without a name
/// gets a null); `None` only for a store with no registered device.
fn device_dict(store: &Store, devices: &Devices) -> Option<DeviceDict> {
    if store.device_count() == 0 {
        return None;
    }
    let names: Vec<(u64, String)> = match devices {
        Devices::All => store
            .devices(None)
            .into_iter()
            .map(|(id, e)| (id, e.name))
            .collect(),
        Devices::Some(ids) => ids
            .iter()
            .filter_map(|&id| store.device(id).map(|e| (id, e.name)))
            .collect(),
    };
    Some(DeviceDict::new(names))
}

impl Prepared {
    /// Ready `plan` to run against `store` (device names resolved once).
    pub fn new(store: &Store, plan: Plan) -> Prepared {
        let dict = device_dict(store, &plan.devices);
        let meta = plan.window_meta();
        let shape = match &plan.agg {
            None => Shape::Rows(Arc::new(RowLayout::new(
                &plan.schema,
                &plan.fields,
                dict,
                meta,
            ))),
            Some((func, every, group)) => {
                let tags = match group {
                    GroupBy::Tag(k) => store
                        .devices(None)
                        .into_iter()
                        .filter_map(|(id, e)| {
                            e.tags
                                .into_iter()
                                .find(|(tk, _)| tk == k)
                                .map(|(_, v)| (id, v))
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                Shape::Agg(Box::new(Aggregator::new(
                    &plan.schema,
                    &plan.fields,
                    *func,
                    *every,
                    group.clone(),
                    dict,
                    tags,
                    meta,
                    plan.batch_rows,
                )))
            }
        };
        Prepared { plan, shape }
    }

    /// The Arrow schema of the batches it produces.
    pub fn schema(&self) -> SchemaRef {
        match &self.shape {
            Shape::Rows(l) => l.schema.clone(),
            Shape::Agg(a) => a.schema(),
        }
    }

    /// Run to completion, handing each batch to `sink`. A sink error
    /// stops the scan and is returned.
    #[expect(
        clippy::too_many_lines,
        reason = "one match arm per plan kind (latest, range, scan, agg), each delegating"
    )]
    pub fn run(
        self,
        store: &Store,
        sink: &mut dyn FnMut(RecordBatch) -> Result<()>,
    ) -> Result<RunStats> {
        let Prepared { plan, shape } = self;
        let mut stats = RunStats::default();
        let mut left = plan.limit.unwrap_or(u64::MAX);
        let mut limited = |b: RecordBatch| -> Result<()> {
            if left == 0 {
                return Ok(());
            }
            let b = if b.num_rows() as u64 > left {
                b.slice(0, left as usize)
            } else {
                b
            };
            left -= b.num_rows() as u64;
            stats.rows_out += b.num_rows() as u64;
            stats.batches += 1;
            sink(b)
        };
        let mut failed: Option<Error> = None;
        let rows_read = match shape {
            Shape::Rows(layout) => {
                let mut batcher = RowBatcher::new(layout, plan.batch_rows, plan.max_rows());
                let limit = plan.limit.unwrap_or(u64::MAX);
                let mut n = 0u64;
                let mut emit = |batcher: &mut RowBatcher| -> bool {
                    match batcher.take().map(&mut limited) {
                        Some(Err(e)) => {
                            failed = Some(e);
                            false
                        }
                        _ => true,
                    }
                };
                read_pieces(store, &plan, &mut |p| match p {
                    Piece::Row(r) => {
                        n += 1;
                        (!batcher.push(&r) || emit(&mut batcher)) && n < limit
                    }
                    Piece::Run(r) => {
                        let mut at = 0;
                        while at < r.len() && n < limit {
                            let k = batcher.push_run(&r, at);
                            at += k;
                            n += k as u64;
                            if batcher.is_full() && !emit(&mut batcher) {
                                return false;
                            }
                        }
                        n < limit
                    }
                })?;
                if let Some(e) = failed.take() {
                    return Err(e);
                }
                if let Some(b) = batcher.take() {
                    limited(b)?;
                }
                n
            }
            Shape::Agg(mut agg) => {
                let mut n = 0u64;
                let limit = plan.limit.unwrap_or(u64::MAX);
                read_rows(store, &plan, &mut |r| {
                    n += 1;
                    if let Err(e) = agg.push(&r, &mut limited) {
                        failed = Some(e);
                        return false;
                    }
                    agg.emitted() < limit
                })?;
                if let Some(e) = failed.take() {
                    return Err(e);
                }
                agg.finish(&mut limited)?;
                n
            }
        };
        stats.rows_read = rows_read;
        Ok(stats)
    }
}

/// Visit the plan's rows as a batch read ([`Store::scan_pieces`]: runs
/// of the plan's fields as columns where a region allows) until `visit`
/// says stop. `latest` and oldest-first ranges are read row by row.
fn read_pieces(store: &Store, plan: &Plan, visit: &mut dyn FnMut(Piece<'_>) -> bool) -> Result<()> {
    let newest_first = plan.kind == Kind::Scan || plan.order == Order::NewestFirst;
    if plan.kind == Kind::Latest || !newest_first {
        return read_rows(store, plan, &mut |r| visit(Piece::Row(r)));
    }
    let Some((from, to)) = plan.inclusive_window() else {
        return Ok(());
    };
    let table = plan.schema.name.as_str();
    let fields = &plan.fields;
    let whole = plan.keys == KeySpan::ALL;
    let scan = |device: Option<u64>, visit: &mut dyn FnMut(Piece<'_>) -> bool| match whole {
        true => store.scan_pieces(table, device, from, to, fields, visit),
        false => store.scan_pieces_in(table, &plan.keys, device, from, to, fields, visit),
    };
    by_device(plan, &mut |reach| match reach {
        Reach::Device(id) => {
            let mut more = true;
            scan(Some(id), &mut |p| {
                more = visit(p);
                more
            })?;
            Ok(more)
        }
        Reach::Scan(keep) => {
            scan(None, &mut |p| {
                let device = match &p {
                    Piece::Row(r) => r.device,
                    Piece::Run(r) => r.device,
                };
                keep.is_some_and(|k| !k.contains(&device.0)) || visit(p)
            })?;
            Ok(true)
        }
    })
}

/// How a plan's devices are read.
enum Reach<'a> {
    /// One device, with one seek.
    Device(u64),
    /// The table-wide parallel scan, keeping only these devices if given.
    Scan(Option<&'a HashSet<u64>>),
}

/// Read the plan's devices one seek each when they are few
/// ([`PER_DEVICE_SEEKS_MAX`]), else with one table-wide scan; `read`
/// returns false to stop.
fn by_device(plan: &Plan, read: &mut dyn FnMut(Reach<'_>) -> Result<bool>) -> Result<()> {
    match &plan.devices {
        Devices::Some(ids) if ids.len() <= PER_DEVICE_SEEKS_MAX => {
            for &id in ids.iter().filter(|&&id| plan.keys.may_hold(id)) {
                if !read(Reach::Device(id))? {
                    break;
                }
            }
        }
        Devices::Some(ids) => {
            let keep: HashSet<u64> = ids.iter().copied().collect();
            read(Reach::Scan(Some(&keep)))?;
        }
        Devices::All => {
            read(Reach::Scan(None))?;
        }
    }
    Ok(())
}

/// Visit the plan's rows (before aggregation) until `visit` says stop.
fn read_rows(store: &Store, plan: &Plan, visit: &mut dyn FnMut(RowView<'_>) -> bool) -> Result<()> {
    if plan.keys != KeySpan::ALL {
        return Err(Error::invalid(
            "keys",
            "a key span applies to row scans only",
        ));
    }
    let table = plan.schema.name.as_str();
    if plan.kind == Kind::Latest {
        let Devices::Some(ids) = &plan.devices else {
            return Err(Error::invalid("--device", "exactly one device is needed"));
        };
        for r in store.latest(table, ids[0], plan.n)? {
            if !visit(r.view()) {
                break;
            }
        }
        return Ok(());
    }
    let Some((from, to)) = plan.inclusive_window() else {
        return Ok(());
    };
    let order = if plan.kind == Kind::Range {
        plan.order
    } else {
        Order::NewestFirst
    };
    by_device(plan, &mut |reach| match reach {
        Reach::Device(id) => {
            let mut more = true;
            store.scan_with(table, id, from, to, order, |r| {
                more = visit(r);
                more
            })?;
            Ok(more)
        }
        Reach::Scan(keep) => {
            store.scan_all(table, from, to, |r| {
                keep.is_some_and(|k| !k.contains(&r.device.0)) || visit(r)
            })?;
            Ok(true)
        }
    })
}
