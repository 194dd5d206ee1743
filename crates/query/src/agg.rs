//! Downsampling next to the data: rows are folded into per-bucket
//! accumulators as the scan produces them, so only one row per
//! (group, bucket) leaves the engine.
//!
//! Buckets are aligned to the epoch: a row at `t` ms falls in the bucket
//! starting at `floor(t / every) * every`. `first`/`last` are the values
//! at the smallest/largest timestamp in the bucket; when several devices
//! share that timestamp, the one with the smallest device id wins.

use super::columns::{device_type, metadata, ts_type, DeviceDict};
use arrow_array::builder::{
    BooleanBuilder, Float32Builder, Float64Builder, Int32Builder, Int64Builder, StringBuilder,
    UInt32Builder, UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch, TimestampMillisecondArray, UInt64Array};
use arrow_schema::{DataType, Field as AField, Schema, SchemaRef};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use telestore_engine::error::{Error, Result};
use telestore_engine::read::RowView;
use telestore_engine::schema::{FieldType, TableSchema};

/// An aggregate function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggFn {
    /// The mean.
    Avg,
    /// The smallest value.
    Min,
    /// The largest value.
    Max,
    /// The sum.
    Sum,
    /// The number of rows.
    Count,
    /// The oldest value in the bucket.
    First,
    /// The newest value in the bucket.
    Last,
}

impl AggFn {
    /// A function by name (`avg`, `min`, `max`, `sum`, `count`, `first`, `last`).
    pub fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "avg" | "mean" => AggFn::Avg,
            "min" => AggFn::Min,
            "max" => AggFn::Max,
            "sum" => AggFn::Sum,
            "count" => AggFn::Count,
            "first" => AggFn::First,
            "last" => AggFn::Last,
            _ => {
                return Err(Error::invalid(
                    "--fn",
                    format!("{s:?}: use avg, min, max, sum, count, first or last"),
                ))
            }
        })
    }

    /// The name `parse` takes.
    pub fn name(self) -> &'static str {
        match self {
            AggFn::Avg => "avg",
            AggFn::Min => "min",
            AggFn::Max => "max",
            AggFn::Sum => "sum",
            AggFn::Count => "count",
            AggFn::First => "first",
            AggFn::Last => "last",
        }
    }

    /// The Arrow type of the result for a field of type `t`.
    fn out_type(self, t: FieldType) -> DataType {
        let float = matches!(t, FieldType::F64 | FieldType::F32);
        let signed = matches!(t, FieldType::I64 | FieldType::I32);
        match self {
            AggFn::Avg => DataType::Float64,
            AggFn::Count => DataType::UInt64,
            AggFn::Sum if float => DataType::Float64,
            AggFn::Sum if signed => DataType::Int64,
            AggFn::Sum => DataType::UInt64,
            _ => super::columns::arrow_type(t),
        }
    }
}

/// How rows are grouped besides their time bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupBy {
    /// One series over all selected devices.
    None,
    /// One series per device (streamed: devices arrive one after another).
    Device,
    /// One series per value of a registry tag (devices without it: null).
    Tag(String),
}

/// A field value widened for folding.
#[derive(Clone, Copy, Debug)]
enum Num {
    F(f64),
    I(i128),
}

impl Num {
    fn read(t: FieldType, b: &[u8], off: usize) -> Num {
        fn le<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
            b[off..off + N]
                .try_into()
                .expect("row width checked by the engine")
        }
        match t {
            FieldType::F64 => Num::F(f64::from_le_bytes(le(b, off))),
            FieldType::F32 => Num::F(f32::from_le_bytes(le(b, off)).into()),
            FieldType::I64 => Num::I(i64::from_le_bytes(le(b, off)).into()),
            FieldType::I32 => Num::I(i32::from_le_bytes(le(b, off)).into()),
            FieldType::U64 => Num::I(u64::from_le_bytes(le(b, off)).into()),
            FieldType::U32 => Num::I(u32::from_le_bytes(le(b, off)).into()),
            FieldType::Bool => Num::I((b[off] != 0).into()),
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Num::F(v) => v,
            Num::I(v) => v as f64,
        }
    }

    /// `self < o`; NaN never wins.
    fn less(self, o: Num) -> bool {
        match (self, o) {
            (Num::F(a), Num::F(b)) => a < b || b.is_nan() && !a.is_nan(),
            (Num::I(a), Num::I(b)) => a < b,
            _ => false,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct FieldAcc {
    sum_f: f64,
    sum_i: i128,
    min: Num,
    max: Num,
    /// (ts, device, value): ties on `ts` go to the smaller device id.
    first: (i64, u64, Num),
    last: (i64, u64, Num),
}

impl FieldAcc {
    fn new(ts: i64, dev: u64, v: Num) -> Self {
        FieldAcc {
            sum_f: v.as_f64(),
            sum_i: if let Num::I(i) = v { i } else { 0 },
            min: v,
            max: v,
            first: (ts, dev, v),
            last: (ts, dev, v),
        }
    }

    fn add(&mut self, ts: i64, dev: u64, v: Num) {
        self.sum_f += v.as_f64();
        if let Num::I(i) = v {
            self.sum_i += i;
        }
        if v.less(self.min) {
            self.min = v;
        }
        if self.max.less(v) {
            self.max = v;
        }
        if (ts, dev) < (self.first.0, self.first.1) {
            self.first = (ts, dev, v);
        }
        if ts > self.last.0 || ts == self.last.0 && dev < self.last.1 {
            self.last = (ts, dev, v);
        }
    }
}

/// One bucket of one group.
#[derive(Clone, Debug)]
struct Acc {
    count: u64,
    fields: Vec<FieldAcc>,
}

/// The aggregation of one query.
pub struct Aggregator {
    func: AggFn,
    every: i64,
    group: GroupBy,
    /// (type, byte offset) of each chosen field.
    fields: Vec<(FieldType, usize)>,
    schema: SchemaRef,
    devices: Option<DeviceDict>,
    batch_rows: usize,
    /// Tag value per device (GroupBy::Tag).
    tag_of: HashMap<u64, String>,
    labels: Vec<Option<String>>,
    label_ix: HashMap<Option<String>, u32>,
    last_device: Option<(u64, u32)>,
    /// Buckets by (group, bucket start). For GroupBy::Device the group is
    /// the current device and the map holds only that device.
    buckets: BTreeMap<(u32, i64), Acc>,
    current: Option<u64>,
    out: Out,
}

/// Output rows being gathered into batches.
#[derive(Default)]
struct Out {
    rows: Vec<(Option<u64>, Option<String>, i64, Acc)>,
    emitted: u64,
}

impl Aggregator {
    /// `devices`: registry names for the `device` column (GroupBy::Device);
    /// `tags`: `(id, value)` of every device carrying the group-by tag.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        table: &TableSchema,
        fields: &[usize],
        func: AggFn,
        every: i64,
        group: GroupBy,
        devices: Option<DeviceDict>,
        tags: Vec<(u64, String)>,
        meta: Vec<(String, String)>,
        batch_rows: usize,
    ) -> Self {
        let mut cols = Vec::new();
        let devices = if group == GroupBy::Device {
            devices
        } else {
            None
        };
        match &group {
            GroupBy::None => {}
            GroupBy::Device => {
                cols.push(AField::new("device_id", DataType::UInt64, false));
                if devices.is_some() {
                    cols.push(AField::new("device", device_type(), true));
                }
            }
            GroupBy::Tag(k) => cols.push(AField::new(k, DataType::Utf8, true)),
        }
        cols.push(AField::new("ts", ts_type(), false));
        let chosen: Vec<(FieldType, usize)> = fields
            .iter()
            .map(|&i| (table.fields[i].ty, table.field_offset(i)))
            .collect();
        for &i in fields {
            let f = &table.fields[i];
            cols.push(AField::new(&f.name, func.out_type(f.ty), false));
        }
        let mut meta = meta;
        meta.push(("telestore.agg".into(), func.name().into()));
        meta.push(("telestore.every_ms".into(), every.to_string()));
        let schema = Arc::new(Schema::new_with_metadata(cols, metadata(&table.name, meta)));
        Aggregator {
            func,
            every,
            group,
            fields: chosen,
            schema,
            devices,
            batch_rows,
            tag_of: tags.into_iter().collect(),
            labels: Vec::new(),
            label_ix: HashMap::new(),
            last_device: None,
            buckets: BTreeMap::new(),
            current: None,
            out: Out::default(),
        }
    }

    /// The Arrow schema of the aggregated batches.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Rows emitted so far.
    pub fn emitted(&self) -> u64 {
        self.out.emitted
    }

    fn group_of(&mut self, device: u64) -> u32 {
        match &self.group {
            GroupBy::None => 0,
            GroupBy::Device => 0,
            GroupBy::Tag(_) => {
                if let Some((d, g)) = self.last_device {
                    if d == device {
                        return g;
                    }
                }
                let label = self.tag_of.get(&device).cloned();
                let next = self.labels.len() as u32;
                let g = *self.label_ix.entry(label.clone()).or_insert_with(|| {
                    self.labels.push(label);
                    next
                });
                self.last_device = Some((device, g));
                g
            }
        }
    }

    /// Fold one row; full output batches go to `sink`.
    pub fn push(
        &mut self,
        r: &RowView<'_>,
        sink: &mut dyn FnMut(RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let id = r.device.0;
        if self.group == GroupBy::Device && self.current != Some(id) {
            self.drain(sink)?;
            self.current = Some(id);
        }
        let g = self.group_of(id);
        // No overflow for any i64 (a store written before the range
        // check may hold one outside 1970..9999).
        let bucket = r.ts.saturating_sub(r.ts.rem_euclid(self.every));
        let vals = self
            .fields
            .iter()
            .map(|&(t, off)| Num::read(t, r.fields, off));
        match self.buckets.get_mut(&(g, bucket)) {
            Some(acc) => {
                acc.count += 1;
                for (fa, v) in acc.fields.iter_mut().zip(vals) {
                    fa.add(r.ts, id, v);
                }
            }
            None => {
                let acc = Acc {
                    count: 1,
                    fields: vals.map(|v| FieldAcc::new(r.ts, id, v)).collect(),
                };
                self.buckets.insert((g, bucket), acc);
            }
        }
        Ok(())
    }

    /// Move finished buckets to the output, in (group, time) order.
    fn drain(&mut self, sink: &mut dyn FnMut(RecordBatch) -> Result<()>) -> Result<()> {
        let buckets = std::mem::take(&mut self.buckets);
        let mut order: Vec<((u32, i64), Acc)> = buckets.into_iter().collect();
        if let GroupBy::Tag(_) = self.group {
            let labels = &self.labels;
            order.sort_by(|a, b| {
                (&labels[a.0 .0 as usize], a.0 .1).cmp(&(&labels[b.0 .0 as usize], b.0 .1))
            });
        }
        for ((g, bucket), acc) in order {
            let label = match self.group {
                GroupBy::Tag(_) => self.labels[g as usize].clone(),
                _ => None,
            };
            self.out.rows.push((self.current, label, bucket, acc));
            if self.out.rows.len() >= self.batch_rows {
                let b = self.build()?;
                sink(b)?;
            }
        }
        Ok(())
    }

    /// Emit everything left.
    pub fn finish(&mut self, sink: &mut dyn FnMut(RecordBatch) -> Result<()>) -> Result<()> {
        self.drain(sink)?;
        if !self.out.rows.is_empty() {
            let b = self.build()?;
            sink(b)?;
        }
        Ok(())
    }

    fn build(&mut self) -> Result<RecordBatch> {
        let rows = std::mem::take(&mut self.out.rows);
        self.out.emitted += rows.len() as u64;
        let mut cols: Vec<ArrayRef> = Vec::new();
        match &self.group {
            GroupBy::None => {}
            GroupBy::Device => {
                let ids: Vec<u64> = rows.iter().map(|r| r.0.unwrap_or_default()).collect();
                if let Some(d) = &self.devices {
                    let keys = ids.iter().map(|id| d.key_of(*id)).collect();
                    cols.push(Arc::new(UInt64Array::from(ids)));
                    cols.push(d.array_of(keys));
                } else {
                    cols.push(Arc::new(UInt64Array::from(ids)));
                }
            }
            GroupBy::Tag(_) => {
                let mut b = StringBuilder::new();
                for r in &rows {
                    b.append_option(r.1.as_deref());
                }
                cols.push(Arc::new(b.finish()));
            }
        }
        let ts: Vec<i64> = rows.iter().map(|r| r.2).collect();
        cols.push(Arc::new(
            TimestampMillisecondArray::from(ts).with_timezone("UTC"),
        ));
        for (i, &(t, _)) in self.fields.iter().enumerate() {
            cols.push(self.column(t, i, &rows)?);
        }
        RecordBatch::try_new(self.schema.clone(), cols)
            .map_err(|e| Error::invalid("aggregate", e.to_string()))
    }

    fn column(
        &self,
        t: FieldType,
        i: usize,
        rows: &[(Option<u64>, Option<String>, i64, Acc)],
    ) -> Result<ArrayRef> {
        let f = self.func;
        let pick = |a: &FieldAcc| match f {
            AggFn::Min => a.min,
            AggFn::Max => a.max,
            AggFn::First => a.first.2,
            _ => a.last.2,
        };
        let overflow = || Error::invalid("--fn", "sum overflows the result type");
        Ok(match f.out_type(t) {
            DataType::UInt64 if f == AggFn::Count => Arc::new(UInt64Array::from_iter_values(
                rows.iter().map(|r| r.3.count),
            )),
            DataType::Float64 => {
                let mut b = Float64Builder::with_capacity(rows.len());
                for r in rows {
                    let a = &r.3.fields[i];
                    b.append_value(match f {
                        AggFn::Avg => a.sum_f / r.3.count as f64,
                        AggFn::Sum => a.sum_f,
                        _ => pick(a).as_f64(),
                    });
                }
                Arc::new(b.finish())
            }
            DataType::Float32 => {
                let mut b = Float32Builder::with_capacity(rows.len());
                rows.iter()
                    .for_each(|r| b.append_value(pick(&r.3.fields[i]).as_f64() as f32));
                Arc::new(b.finish())
            }
            DataType::Boolean => {
                let mut b = BooleanBuilder::with_capacity(rows.len());
                rows.iter()
                    .for_each(|r| b.append_value(pick(&r.3.fields[i]).as_f64() != 0.0));
                Arc::new(b.finish())
            }
            ty => {
                let ints: Vec<i128> = rows
                    .iter()
                    .map(|r| {
                        let a = &r.3.fields[i];
                        match (f, pick(a)) {
                            (AggFn::Sum, _) => a.sum_i,
                            (_, Num::I(v)) => v,
                            (_, Num::F(v)) => v as i128,
                        }
                    })
                    .collect();
                int_column(&ty, &ints).ok_or_else(overflow)?
            }
        })
    }
}

fn int_column(ty: &DataType, v: &[i128]) -> Option<ArrayRef> {
    Some(match ty {
        DataType::Int64 => {
            let mut b = Int64Builder::with_capacity(v.len());
            for x in v {
                b.append_value(i64::try_from(*x).ok()?);
            }
            Arc::new(b.finish())
        }
        DataType::Int32 => {
            let mut b = Int32Builder::with_capacity(v.len());
            for x in v {
                b.append_value(i32::try_from(*x).ok()?);
            }
            Arc::new(b.finish())
        }
        DataType::UInt64 => {
            let mut b = UInt64Builder::with_capacity(v.len());
            for x in v {
                b.append_value(u64::try_from(*x).ok()?);
            }
            Arc::new(b.finish())
        }
        DataType::UInt32 => {
            let mut b = UInt32Builder::with_capacity(v.len());
            for x in v {
                b.append_value(u32::try_from(*x).ok()?);
            }
            Arc::new(b.finish())
        }
        _ => return None,
    })
}
