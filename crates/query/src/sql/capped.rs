//! SQL functions whose output size is chosen by an argument (`repeat`,
//! `lpad`, `rpad`), checked before they run. Their strings are made
//! outside the memory pool's accounting, so `repeat('x', 1500000000)`
//! would take 1.5 GB whatever the pool's limit; here a call whose
//! batch would exceed [`CALL_OUTPUT_BYTES_MAX`] fails instead.

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;
use datafusion::common::Result as DfResult;
use datafusion::error::DataFusionError;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature,
};
use datafusion::prelude::SessionContext;
use std::sync::Arc;
use telestore_engine::error::Error;

/// Largest output one call of a capped function may make for one batch.
pub const CALL_OUTPUT_BYTES_MAX: u64 = 256 << 20;

/// How a function's output size follows from its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Size {
    /// `repeat(s, n)`: `len(s) × n` bytes.
    Repeat,
    /// `lpad(s, n [, fill])`: `n` characters, at most 4 bytes each.
    Pad,
}

/// A built-in function with its output size checked first.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Capped {
    inner: Arc<ScalarUDF>,
    size: Size,
}

/// Put the capped `repeat`, `lpad` and `rpad` in place of the built-in
/// ones in `ctx`.
pub fn register(ctx: &SessionContext) {
    use datafusion::functions::{string, unicode};
    for (inner, size) in [
        (string::repeat(), Size::Repeat),
        (unicode::lpad(), Size::Pad),
        (unicode::rpad(), Size::Pad),
    ] {
        ctx.register_udf(ScalarUDF::new_from_impl(Capped { inner, size }));
    }
}

impl ScalarUDFImpl for Capped {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }
    fn signature(&self) -> &Signature {
        self.inner.signature()
    }
    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        self.inner.return_type(args)
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<arrow_schema::FieldRef> {
        self.inner.return_field_from_args(args)
    }
    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        self.inner.coerce_types(args)
    }
    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let bytes = output_bytes(self.size, &args)?;
        if bytes > CALL_OUTPUT_BYTES_MAX {
            let e = Error::QueryLimit {
                what: "value size",
                message: format!(
                    "{}(…) would make {bytes} bytes for one batch of {} rows; the limit is \
                     {CALL_OUTPUT_BYTES_MAX}",
                    self.name(),
                    args.number_rows
                ),
            };
            return Err(DataFusionError::External(Box::new(e)));
        }
        self.inner.invoke_with_args(args)
    }
}

/// The most bytes a call over `args` would make.
fn output_bytes(size: Size, args: &ScalarFunctionArgs) -> DfResult<u64> {
    let (Some(text), Some(count)) = (args.args.first(), args.args.get(1)) else {
        return Ok(0);
    };
    let rows = args.number_rows.max(1);
    let counts = int64s(&count.to_array(rows)?)?;
    Ok(match size {
        Size::Repeat => {
            let lens = byte_lengths(&text.to_array(rows)?);
            lens.iter()
                .zip(&counts)
                .map(|(l, n)| l.saturating_mul(*n))
                .fold(0u64, u64::saturating_add)
        }
        Size::Pad => counts
            .iter()
            .map(|n| n.saturating_mul(4))
            .fold(0u64, u64::saturating_add),
    })
}

/// Each row's count, negatives and nulls as 0.
fn int64s(a: &ArrayRef) -> DfResult<Vec<u64>> {
    let a = arrow_cast::cast(a, &DataType::Int64)?;
    let a = a.as_primitive::<arrow_array::types::Int64Type>();
    Ok((0..a.len())
        .map(|i| {
            if a.is_null(i) {
                0
            } else {
                a.value(i).max(0) as u64
            }
        })
        .collect())
}

/// Each row's string length in bytes (0 for null or a type not a string).
fn byte_lengths(a: &ArrayRef) -> Vec<u64> {
    let len = |i: usize, l: usize| if a.is_null(i) { 0 } else { l as u64 };
    match a.data_type() {
        DataType::Utf8 => {
            let s = a.as_string::<i32>();
            (0..s.len()).map(|i| len(i, s.value(i).len())).collect()
        }
        DataType::LargeUtf8 => {
            let s = a.as_string::<i64>();
            (0..s.len()).map(|i| len(i, s.value(i).len())).collect()
        }
        DataType::Utf8View => {
            let s = a.as_string_view();
            (0..s.len()).map(|i| len(i, s.value(i).len())).collect()
        }
        _ => vec![0; a.len()],
    }
}
