//! Record batches to rows (`formats/row.md`) for Flight `DoPut`: the
//! columns of a query result of the table (`formats/arrow.md`), checked
//! whole before anything is written.
//!
//! * the device: `device` (names as `Utf8`, `LargeUtf8`, `Utf8View` or a
//!   dictionary of them; new names are registered, as the line protocol
//!   does), or else `device_id` (`UInt64`, or a non-negative `Int64`). An
//!   id from the registry's range (2^40 and up) must have been assigned:
//!   an unassigned one would hand its rows to the next new name. When
//!   both columns come (an export read back), the names decide and the
//!   ids are not used, so rows land on their device in any store;
//! * `ts`: a `Timestamp` of any unit (whole milliseconds) or `Int64` ms;
//! * every field of the table, by name, of its exact Arrow type, no nulls.
//!
//! A missing table is created from the first batch ([`schema_of_batch`]).
//!
//! Any other column is refused, so a misspelt field is not dropped
//! silently.

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, TimeUnit};
use telestore_engine::error::{Error, Result};
use telestore_engine::schema::{Field, FieldType, TableOptions, TableSchema};
use telestore_engine::Store;
use telestore_query::columns::arrow_type;

fn bad(message: String) -> Error {
    Error::invalid("record batch", message)
}

/// The rows of `batch` for `schema`'s table, in batch order.
pub fn rows_of(store: &Store, schema: &TableSchema, batch: &RecordBatch) -> Result<Vec<u8>> {
    let n = batch.num_rows();
    let known = ["device_id", "device", "ts"];
    for f in batch.schema().fields() {
        let name = f.name().as_str();
        if !known.contains(&name) && schema.field_index(name).is_none() {
            return Err(bad(format!(
                "column {name:?} is not a field of table {} (nor device_id, device or ts)",
                schema.name
            )));
        }
    }
    let devices = device_ids(store, batch)?;
    let ts = timestamps(batch)?;
    let width = schema.row_width();
    let mut out = vec![0u8; n * width];
    for (i, row) in out.chunks_exact_mut(width).enumerate() {
        row[..8].copy_from_slice(&devices[i].to_le_bytes());
        row[8..16].copy_from_slice(&ts[i].to_le_bytes());
    }
    for (fi, field) in schema.fields.iter().enumerate() {
        let col = batch
            .column_by_name(&field.name)
            .ok_or_else(|| bad(format!("field {:?} is missing", field.name)))?;
        let want = arrow_type(field.ty);
        if col.data_type() != &want {
            return Err(bad(format!(
                "field {:?} is {}, the table's type needs {want}",
                field.name,
                col.data_type()
            )));
        }
        no_nulls(&field.name, col)?;
        let at = 16 + schema.field_offset(fi);
        fill(&mut out, width, at, field.ty, col);
    }
    Ok(out)
}

/// The schema of a table created by a DoPut's first batch: its columns
/// but `device`, `device_id` and `ts`, in batch order, each of the field
/// type whose Arrow type it has (`formats/arrow.md`).
pub fn schema_of_batch(
    table: &str,
    batch: &RecordBatch,
    options: TableOptions,
) -> Result<TableSchema> {
    let mut fields = Vec::new();
    for f in batch.schema().fields() {
        let name = f.name().as_str();
        if ["device_id", "device", "ts"].contains(&name) {
            continue;
        }
        let ty = FieldType::ALL
            .into_iter()
            .find(|t| &arrow_type(*t) == f.data_type())
            .ok_or_else(|| {
                bad(format!(
                    "column {name:?} is {}, which no field type holds (Float64, Float32, \
                     Int64, Int32, UInt64, UInt32, Boolean): table {table:?} cannot be \
                     created from this batch",
                    f.data_type()
                ))
            })?;
        fields.push(Field::new(name, ty));
    }
    if fields.is_empty() {
        return Err(bad(format!(
            "no field columns: table {table:?} cannot be created from this batch"
        )));
    }
    TableSchema::new(table, fields, options)
}

fn no_nulls(name: &str, col: &ArrayRef) -> Result<()> {
    match col.null_count() {
        0 => Ok(()),
        k => Err(bad(format!("column {name:?} holds {k} nulls"))),
    }
}

/// Write one field column into the rows at byte `at` of each.
#[expect(
    clippy::too_many_lines,
    reason = "one match arm per Arrow column type, each two lines"
)]
fn fill(out: &mut [u8], width: usize, at: usize, ty: FieldType, col: &ArrayRef) {
    fn put<const W: usize>(
        out: &mut [u8],
        width: usize,
        at: usize,
        v: impl Iterator<Item = [u8; W]>,
    ) {
        for (row, b) in out.chunks_exact_mut(width).zip(v) {
            row[at..at + W].copy_from_slice(&b);
        }
    }
    match ty {
        FieldType::F64 => put(
            out,
            width,
            at,
            col.as_primitive::<Float64Type>()
                .values()
                .iter()
                .map(|v| v.to_le_bytes()),
        ),
        FieldType::F32 => put(
            out,
            width,
            at,
            col.as_primitive::<Float32Type>()
                .values()
                .iter()
                .map(|v| v.to_le_bytes()),
        ),
        FieldType::I64 => put(
            out,
            width,
            at,
            col.as_primitive::<Int64Type>()
                .values()
                .iter()
                .map(|v| v.to_le_bytes()),
        ),
        FieldType::I32 => put(
            out,
            width,
            at,
            col.as_primitive::<Int32Type>()
                .values()
                .iter()
                .map(|v| v.to_le_bytes()),
        ),
        FieldType::U64 => put(
            out,
            width,
            at,
            col.as_primitive::<UInt64Type>()
                .values()
                .iter()
                .map(|v| v.to_le_bytes()),
        ),
        FieldType::U32 => put(
            out,
            width,
            at,
            col.as_primitive::<UInt32Type>()
                .values()
                .iter()
                .map(|v| v.to_le_bytes()),
        ),
        FieldType::Bool => put(
            out,
            width,
            at,
            col.as_boolean().values().iter().map(|v| [v as u8]),
        ),
    }
}

/// The device id of every row: from the names when a `device` column
/// comes, else from `device_id`.
fn device_ids(store: &Store, batch: &RecordBatch) -> Result<Vec<u64>> {
    match (
        batch.column_by_name("device"),
        batch.column_by_name("device_id"),
    ) {
        (Some(names), _) => ids_of_names(store, names),
        (None, Some(ids)) => given_ids(store, ids),
        (None, None) => Err(bad("neither device_id nor device is given".into())),
    }
}

/// A `device_id` column's ids; one in the registry's range must name a
/// registered device.
fn given_ids(store: &Store, col: &ArrayRef) -> Result<Vec<u64>> {
    no_nulls("device_id", col)?;
    let ids: Vec<u64> = match col.data_type() {
        DataType::UInt64 => col.as_primitive::<UInt64Type>().values().to_vec(),
        DataType::Int64 => col
            .as_primitive::<Int64Type>()
            .values()
            .iter()
            .map(|&v| u64::try_from(v).map_err(|_| bad(format!("device_id {v} is negative"))))
            .collect::<Result<_>>()?,
        t => return Err(bad(format!("device_id is {t}, use UInt64"))),
    };
    let mut checked = std::collections::HashSet::new();
    for (row, &id) in ids.iter().enumerate() {
        let registry = id >= telestore_engine::engine::REGISTRY_ID_BASE;
        if registry && checked.insert(id) && store.device(id).is_none() {
            return Err(bad(format!(
                "row {row}: device_id {id} is in the registry's range (from 2^40) but no device has it; send the device's name in a device column instead"
            )));
        }
    }
    Ok(ids)
}

/// The ids of a `device` column's names, registering new ones.
fn ids_of_names(store: &Store, col: &ArrayRef) -> Result<Vec<u64>> {
    no_nulls("device", col)?;
    let names = names_of(col)?;
    let mut distinct: Vec<&str> = names.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let to_register: Vec<(String, Vec<(String, String)>)> = distinct
        .iter()
        .map(|n| (n.to_string(), Vec::new()))
        .collect();
    let ids = store.register_devices(&to_register)?;
    Ok(names
        .iter()
        .map(|n| ids[distinct.binary_search(n).unwrap_or(0)])
        .collect())
}

/// Device names, whatever string layout the column has.
fn names_of(col: &ArrayRef) -> Result<Vec<&str>> {
    let n = col.len();
    Ok(match col.data_type() {
        DataType::Utf8 => (0..n).map(|i| col.as_string::<i32>().value(i)).collect(),
        DataType::LargeUtf8 => (0..n).map(|i| col.as_string::<i64>().value(i)).collect(),
        DataType::Utf8View => (0..n).map(|i| col.as_string_view().value(i)).collect(),
        DataType::Dictionary(_, v) if matches!(**v, DataType::Utf8) => {
            let d = col.as_any_dictionary();
            if d.values().is_empty() {
                // No names: only an empty column is valid (keys index values).
                return match n {
                    0 => Ok(Vec::new()),
                    _ => Err(bad("device: a dictionary without values".into())),
                };
            }
            let values = d.values().as_string::<i32>();
            d.normalized_keys()
                .iter()
                .map(|&k| values.value(k))
                .collect()
        }
        t => return Err(bad(format!("device is {t}, use strings (Utf8)"))),
    })
}

/// The `ts` of every row in epoch ms.
fn timestamps(batch: &RecordBatch) -> Result<Vec<i64>> {
    let col = batch
        .column_by_name("ts")
        .ok_or_else(|| bad("column \"ts\" is missing".into()))?;
    no_nulls("ts", col)?;
    let per_ms: i64 = match col.data_type() {
        DataType::Timestamp(TimeUnit::Second, _) => {
            return col
                .as_primitive::<TimestampSecondType>()
                .values()
                .iter()
                .map(|&s| {
                    s.checked_mul(1000)
                        .ok_or_else(|| bad(format!("ts {s} s overflows ms")))
                })
                .collect()
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            return Ok(col
                .as_primitive::<TimestampMillisecondType>()
                .values()
                .to_vec())
        }
        DataType::Int64 => return Ok(col.as_primitive::<Int64Type>().values().to_vec()),
        DataType::Timestamp(TimeUnit::Microsecond, _) => 1_000,
        DataType::Timestamp(TimeUnit::Nanosecond, _) => 1_000_000,
        t => {
            return Err(bad(format!(
                "ts is {t}, use a Timestamp or Int64 milliseconds"
            )))
        }
    };
    let raw: &[i64] = match per_ms {
        1_000 => col.as_primitive::<TimestampMicrosecondType>().values(),
        _ => col.as_primitive::<TimestampNanosecondType>().values(),
    };
    raw.iter()
        .map(|&v| match v % per_ms {
            0 => Ok(v / per_ms),
            _ => Err(bad(format!(
                "ts {v} is not a whole millisecond (the table keeps milliseconds)"
            ))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::types::Int8Type;
    use arrow_array::{DictionaryArray, Int8Array, StringArray};
    use std::sync::Arc;

    #[test]
    fn device_names_from_every_string_layout() {
        let dict: ArrayRef = Arc::new(
            DictionaryArray::<Int8Type>::try_new(
                Int8Array::from(vec![1, 0, 1]),
                Arc::new(StringArray::from(vec!["a", "b"])),
            )
            .unwrap(),
        );
        assert_eq!(names_of(&dict).unwrap(), ["b", "a", "b"]);
        let empty: ArrayRef = Arc::new(
            DictionaryArray::<Int8Type>::try_new(
                Int8Array::from(Vec::<i8>::new()),
                Arc::new(StringArray::from(Vec::<&str>::new())),
            )
            .unwrap(),
        );
        assert!(names_of(&empty).unwrap().is_empty());
        let plain: ArrayRef = Arc::new(StringArray::from(vec!["x"]));
        assert_eq!(names_of(&plain).unwrap(), ["x"]);
        let ints: ArrayRef = Arc::new(Int8Array::from(vec![1]));
        assert!(names_of(&ints)
            .unwrap_err()
            .to_string()
            .contains("use strings"));
    }
}
