//! Rows to Arrow: the schema of `formats/arrow.md` and a batch builder
//! that turns engine rows into record batches column by column.

use arrow_array::builder::BooleanBuilder;
use arrow_array::types::UInt32Type;
use arrow_array::{
    ArrayRef, DictionaryArray, Float32Array, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArray, TimestampMillisecondArray, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field as AField, Schema, SchemaRef, TimeUnit};
use std::collections::HashMap;
use std::sync::Arc;
use telestore_engine::read::columns::RunSlice;
use telestore_engine::read::RowView;
use telestore_engine::schema::{Field, FieldType, TableSchema};

/// Version of the Arrow mapping (`formats/arrow.md`), in schema metadata.
pub const ARROW_MAPPING_VERSION: &str = "1";
/// Default rows per record batch.
pub const BATCH_ROWS_DEFAULT: usize = 65_536;
/// Largest allowed `--batch-rows`.
pub const BATCH_ROWS_MAX: usize = 1 << 20;

/// The Arrow type of a field type.
pub fn arrow_type(t: FieldType) -> DataType {
    match t {
        FieldType::F64 => DataType::Float64,
        FieldType::F32 => DataType::Float32,
        FieldType::I64 => DataType::Int64,
        FieldType::I32 => DataType::Int32,
        FieldType::U64 => DataType::UInt64,
        FieldType::U32 => DataType::UInt32,
        FieldType::Bool => DataType::Boolean,
    }
}

/// The `ts` column type: milliseconds since the epoch, UTC.
pub fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

/// The dictionary-encoded `device` column type.
pub fn device_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::UInt32), Box::new(DataType::Utf8))
}

/// Device names for the `device` column: one dictionary shared by every
/// batch of a result (an IPC file allows only one per column).
pub struct DeviceDict {
    values: ArrayRef,
    index: HashMap<u64, u32>,
}

impl DeviceDict {
    /// A dictionary over `(id, name)` pairs.
    pub fn new(names: impl IntoIterator<Item = (u64, String)>) -> Self {
        let mut index = HashMap::new();
        let mut strings = Vec::new();
        for (id, name) in names {
            index.insert(id, strings.len() as u32);
            strings.push(name);
        }
        DeviceDict {
            values: Arc::new(StringArray::from(strings)),
            index,
        }
    }

    pub(crate) fn key_of(&self, id: u64) -> Option<u32> {
        self.index.get(&id).copied()
    }

    pub(crate) fn array_of(&self, keys: Vec<Option<u32>>) -> ArrayRef {
        let keys = UInt32Array::from(keys);
        Arc::new(
            DictionaryArray::<UInt32Type>::try_new(keys, self.values.clone())
                .expect("dictionary keys index the values they were built from"),
        )
    }
}

/// What a row result holds: the table's chosen fields, and device names
/// when the registry has any.
pub struct RowLayout {
    /// The Arrow schema of the result batches.
    pub schema: SchemaRef,
    /// (field, byte offset in the row's field bytes)
    fields: Vec<(Field, usize)>,
    devices: Option<DeviceDict>,
}

impl RowLayout {
    /// `fields` are indexes into the table's fields, in output order.
    /// `meta` goes into the schema metadata next to the table name.
    pub fn new(
        table: &TableSchema,
        fields: &[usize],
        devices: Option<DeviceDict>,
        meta: Vec<(String, String)>,
    ) -> Self {
        let mut cols = vec![AField::new("device_id", DataType::UInt64, false)];
        if devices.is_some() {
            cols.push(AField::new("device", device_type(), true));
        }
        cols.push(AField::new("ts", ts_type(), false));
        let chosen: Vec<(Field, usize)> = fields
            .iter()
            .map(|&i| (table.fields[i].clone(), table.field_offset(i)))
            .collect();
        for (f, _) in &chosen {
            cols.push(AField::new(&f.name, arrow_type(f.ty), false));
        }
        let schema = Schema::new_with_metadata(cols, metadata(&table.name, meta));
        RowLayout {
            schema: Arc::new(schema),
            fields: chosen,
            devices,
        }
    }
}

/// Schema metadata: mapping version, table name and `extra`.
pub fn metadata(table: &str, extra: Vec<(String, String)>) -> HashMap<String, String> {
    let mut m: HashMap<String, String> = extra.into_iter().collect();
    m.insert("telestore.version".into(), ARROW_MAPPING_VERSION.into());
    m.insert("telestore.table".into(), table.into());
    m
}

/// One column of field values being built.
enum Col {
    F64(Vec<f64>),
    F32(Vec<f32>),
    I64(Vec<i64>),
    I32(Vec<i32>),
    U64(Vec<u64>),
    U32(Vec<u32>),
    Bool(BooleanBuilder),
}

fn le<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    // Field bytes come from the engine, which checked the row width.
    b[off..off + N]
        .try_into()
        .expect("row width checked by the engine")
}

impl Col {
    fn new(t: FieldType, cap: usize) -> Self {
        match t {
            FieldType::F64 => Col::F64(Vec::with_capacity(cap)),
            FieldType::F32 => Col::F32(Vec::with_capacity(cap)),
            FieldType::I64 => Col::I64(Vec::with_capacity(cap)),
            FieldType::I32 => Col::I32(Vec::with_capacity(cap)),
            FieldType::U64 => Col::U64(Vec::with_capacity(cap)),
            FieldType::U32 => Col::U32(Vec::with_capacity(cap)),
            FieldType::Bool => Col::Bool(BooleanBuilder::with_capacity(cap)),
        }
    }

    fn push(&mut self, b: &[u8], off: usize) {
        match self {
            Col::F64(v) => v.push(f64::from_le_bytes(le(b, off))),
            Col::F32(v) => v.push(f32::from_le_bytes(le(b, off))),
            Col::I64(v) => v.push(i64::from_le_bytes(le(b, off))),
            Col::I32(v) => v.push(i32::from_le_bytes(le(b, off))),
            Col::U64(v) => v.push(u64::from_le_bytes(le(b, off))),
            Col::U32(v) => v.push(u32::from_le_bytes(le(b, off))),
            Col::Bool(v) => v.append_value(b[off] != 0),
        }
    }

    /// Append little-endian values (a column slice of a batch read).
    fn extend(&mut self, b: &[u8]) {
        fn lanes<const N: usize, T: bytemuck::Pod>(v: &mut Vec<T>, b: &[u8], f: fn([u8; N]) -> T) {
            // Little-endian values in an aligned slice (cached columns
            // are) are the values' own bytes: one copy.
            if cfg!(target_endian = "little") {
                if let Ok(xs) = bytemuck::try_cast_slice::<u8, T>(b) {
                    v.extend_from_slice(xs);
                    return;
                }
            }
            v.extend(b.chunks_exact(N).map(|c| f(c.try_into().expect("N bytes"))));
        }
        match self {
            Col::F64(v) => lanes(v, b, f64::from_le_bytes),
            Col::F32(v) => lanes(v, b, f32::from_le_bytes),
            Col::I64(v) => lanes(v, b, i64::from_le_bytes),
            Col::I32(v) => lanes(v, b, i32::from_le_bytes),
            Col::U64(v) => lanes(v, b, u64::from_le_bytes),
            Col::U32(v) => lanes(v, b, u32::from_le_bytes),
            Col::Bool(v) => b.iter().for_each(|&x| v.append_value(x != 0)),
        }
    }

    fn reserve(&mut self, n: usize) {
        match self {
            Col::F64(v) => v.reserve(n),
            Col::F32(v) => v.reserve(n),
            Col::I64(v) => v.reserve(n),
            Col::I32(v) => v.reserve(n),
            Col::U64(v) => v.reserve(n),
            Col::U32(v) => v.reserve(n),
            // Grows as it goes (bits: little to copy).
            Col::Bool(_) => {}
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Col::F64(v) => Arc::new(Float64Array::from(std::mem::take(v))),
            Col::F32(v) => Arc::new(Float32Array::from(std::mem::take(v))),
            Col::I64(v) => Arc::new(Int64Array::from(std::mem::take(v))),
            Col::I32(v) => Arc::new(Int32Array::from(std::mem::take(v))),
            Col::U64(v) => Arc::new(UInt64Array::from(std::mem::take(v))),
            Col::U32(v) => Arc::new(UInt32Array::from(std::mem::take(v))),
            Col::Bool(v) => Arc::new(v.finish()),
        }
    }
}

/// Builds record batches of at most `cap` rows from engine rows.
pub struct RowBatcher {
    layout: Arc<RowLayout>,
    cap: usize,
    device_ids: Vec<u64>,
    device_keys: Vec<Option<u32>>,
    ts: Vec<i64>,
    cols: Vec<Col>,
    last: Option<(u64, Option<u32>)>,
}

impl RowBatcher {
    /// Batches of at most `cap` rows; `expected` (when known: `latest`, a
    /// `limit`) bounds the first batch's allocation, which is otherwise
    /// `cap` rows (a `latest` of one row allocated 65,536).
    pub fn new(layout: Arc<RowLayout>, cap: usize, expected: Option<u64>) -> Self {
        let first = expected.map_or(cap, |e| (e.min(cap as u64) as usize).max(1));
        let cols = layout
            .fields
            .iter()
            .map(|(f, _)| Col::new(f.ty, first))
            .collect();
        RowBatcher {
            layout,
            cap,
            device_ids: Vec::with_capacity(first),
            device_keys: Vec::new(),
            ts: Vec::with_capacity(first),
            cols,
            last: None,
        }
    }

    /// Room for a whole batch, once a taken batch left the builders
    /// empty (more rows came: a batch's worth is likely).
    fn reserve(&mut self) {
        if self.ts.capacity() > 0 {
            return;
        }
        self.device_ids.reserve(self.cap);
        self.ts.reserve(self.cap);
        for c in &mut self.cols {
            c.reserve(self.cap);
        }
    }

    /// Rows gathered so far.
    pub fn len(&self) -> usize {
        self.ts.len()
    }

    /// Whether no row is gathered yet.
    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }

    /// Add a row; returns true when the batch is full.
    pub fn push(&mut self, r: &RowView<'_>) -> bool {
        self.reserve();
        let id = r.device.0;
        self.device_ids.push(id);
        if let Some(d) = &self.layout.devices {
            let key = match self.last {
                Some((last, k)) if last == id => k,
                _ => {
                    let k = d.key_of(id);
                    self.last = Some((id, k));
                    k
                }
            };
            self.device_keys.push(key);
        }
        self.ts.push(r.ts);
        for (c, (_, off)) in self.cols.iter_mut().zip(&self.layout.fields) {
            c.push(r.fields, *off);
        }
        self.ts.len() >= self.cap
    }

    /// Add rows `from..` of a run (its fields are the layout's, in
    /// order), as many as fit; returns how many were taken. The batch is
    /// full when that is fewer than offered.
    pub fn push_run(&mut self, r: &RunSlice<'_>, from: usize) -> usize {
        self.reserve();
        let n = (r.len() - from).min(self.cap - self.ts.len());
        let id = r.device.0;
        self.device_ids.extend(std::iter::repeat_n(id, n));
        if let Some(d) = &self.layout.devices {
            self.device_keys
                .extend(std::iter::repeat_n(d.key_of(id), n));
        }
        self.ts.extend_from_slice(&r.ts()[from..from + n]);
        for (i, (c, (f, _))) in self.cols.iter_mut().zip(&self.layout.fields).enumerate() {
            let w = f.ty.width();
            c.extend(&r.field(i)[from * w..(from + n) * w]);
        }
        n
    }

    /// Is the batch at its row cap?
    pub fn is_full(&self) -> bool {
        self.ts.len() >= self.cap
    }

    /// The rows so far as a batch (None when empty); the builder is reset.
    pub fn take(&mut self) -> Option<RecordBatch> {
        if self.ts.is_empty() {
            return None;
        }
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(self.cols.len() + 3);
        cols.push(Arc::new(UInt64Array::from(std::mem::take(
            &mut self.device_ids,
        ))));
        if let Some(d) = &self.layout.devices {
            cols.push(d.array_of(std::mem::take(&mut self.device_keys)));
        }
        let ts = std::mem::take(&mut self.ts);
        cols.push(Arc::new(
            TimestampMillisecondArray::from(ts).with_timezone("UTC"),
        ));
        for c in &mut self.cols {
            cols.push(c.finish());
        }
        Some(
            RecordBatch::try_new(self.layout.schema.clone(), cols)
                .expect("columns are built from the schema they are checked against"),
        )
    }
}
