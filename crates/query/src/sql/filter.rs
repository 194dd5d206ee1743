//! Which `WHERE` conjuncts a telestore scan applies itself (DataFusion
//! then does not apply them again): `device = …` / `device IN (…)`,
//! the same on `device_id`, on a tag column (through the device
//! registry), and comparisons of `ts` with a timestamp. Anything else is
//! left to DataFusion.

use datafusion::common::ScalarValue;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};

/// A column a pushed-down filter names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The `device` column (names).
    DeviceName,
    /// The `device_id` column.
    DeviceId,
    /// A tag column, by tag key.
    Tag(String),
}

/// One conjunct the scan applies.
#[derive(Clone, Debug, PartialEq)]
pub enum Pushed {
    /// The column's value is one of these (names, ids as text, tag values).
    OneOf(Target, Vec<Value>),
    /// `ts` lies in `[from, to)` (epoch ms).
    Window(i64, i64),
}

/// A literal a filter compares a column with.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A text literal.
    Text(String),
    /// A numeric id.
    Id(u64),
    /// A value no row holds (a negative id, a literal NULL).
    Nothing,
}

/// How the scan sees the table's columns.
pub trait Columns {
    /// The filter target `column` is, if the scan can push filters on it down.
    fn target(&self, column: &str) -> Option<Target>;
}

/// The pushed form of `e`, or `None` when the scan cannot apply it exactly.
pub fn analyze(e: &Expr, cols: &dyn Columns) -> Option<Pushed> {
    match e {
        Expr::BinaryExpr(b) => binary(b, cols),
        Expr::InList(l) if !l.negated => {
            let t = target_of(&l.expr, cols)?;
            let values = l
                .list
                .iter()
                .map(|v| value_of(v, &t))
                .collect::<Option<Vec<_>>>()?;
            Some(Pushed::OneOf(t, values))
        }
        Expr::Between(b) if !b.negated && is_ts(&b.expr) => {
            let lo = ms_of(&b.low)?;
            let hi = ms_of(&b.high)?;
            Some(Pushed::Window(lo.ceil(), hi.floor().saturating_add(1)))
        }
        _ => None,
    }
}

fn binary(b: &BinaryExpr, cols: &dyn Columns) -> Option<Pushed> {
    if b.op == Operator::Or {
        // `device = a OR device = b` (DataFusion turns short IN lists
        // into such chains): one column, the union of the values.
        return match (analyze(&b.left, cols)?, analyze(&b.right, cols)?) {
            (Pushed::OneOf(t, mut a), Pushed::OneOf(u, z)) if t == u => {
                a.extend(z);
                Some(Pushed::OneOf(t, a))
            }
            _ => None,
        };
    }
    let (col, op, lit) = if is_literal(&b.right) {
        (&*b.left, b.op, &*b.right)
    } else if is_literal(&b.left) {
        (&*b.right, b.op.swap()?, &*b.left)
    } else {
        return None;
    };
    if is_ts(col) {
        let t = ms_of(lit)?;
        let (from, to) = match op {
            Operator::Eq => match t.exact() {
                Some(v) => (v, v.saturating_add(1)),
                None => (0, 0),
            },
            Operator::GtEq => (t.ceil(), i64::MAX),
            Operator::Gt => (t.floor().saturating_add(1), i64::MAX),
            Operator::Lt => (i64::MIN, t.ceil()),
            Operator::LtEq => (i64::MIN, t.floor().saturating_add(1)),
            _ => return None,
        };
        return Some(Pushed::Window(from, to));
    }
    if op != Operator::Eq {
        return None;
    }
    let t = target_of(col, cols)?;
    let v = value_of(lit, &t)?;
    Some(Pushed::OneOf(t, vec![v]))
}

fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Cast(c) => strip(&c.expr),
        Expr::TryCast(c) => strip(&c.expr),
        other => other,
    }
}

fn is_literal(e: &Expr) -> bool {
    matches!(strip(e), Expr::Literal(..))
}

fn column_name(e: &Expr) -> Option<&str> {
    match strip(e) {
        Expr::Column(c) => Some(c.name.as_str()),
        _ => None,
    }
}

fn is_ts(e: &Expr) -> bool {
    // A cast of ts to another timestamp unit keeps its value; a cast to
    // text or a number would compare differently.
    let direct = matches!(e, Expr::Column(c) if c.name == "ts");
    let as_timestamp = matches!(e, Expr::Cast(c) if c.field.data_type().is_temporal()
        && matches!(&*c.expr, Expr::Column(c) if c.name == "ts"));
    direct || as_timestamp
}

fn target_of(e: &Expr, cols: &dyn Columns) -> Option<Target> {
    cols.target(column_name(e)?)
}

fn scalar_of(e: &Expr) -> Option<&ScalarValue> {
    match strip(e) {
        Expr::Literal(v, _) => Some(v),
        _ => None,
    }
}

/// A literal as a value of `t`'s column.
fn value_of(e: &Expr, t: &Target) -> Option<Value> {
    let v = unwrap_dict(scalar_of(e)?);
    if v.is_null() {
        return Some(Value::Nothing);
    }
    match t {
        Target::DeviceId => {
            let n: i128 = match v {
                ScalarValue::UInt64(Some(x)) => *x as i128,
                ScalarValue::UInt32(Some(x)) => *x as i128,
                ScalarValue::UInt16(Some(x)) => *x as i128,
                ScalarValue::UInt8(Some(x)) => *x as i128,
                ScalarValue::Int64(Some(x)) => *x as i128,
                ScalarValue::Int32(Some(x)) => *x as i128,
                ScalarValue::Int16(Some(x)) => *x as i128,
                ScalarValue::Int8(Some(x)) => *x as i128,
                _ => return None,
            };
            Some(u64::try_from(n).map_or(Value::Nothing, Value::Id))
        }
        Target::DeviceName | Target::Tag(_) => match v {
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)) => Some(Value::Text(s.clone())),
            _ => None,
        },
    }
}

fn unwrap_dict(v: &ScalarValue) -> &ScalarValue {
    match v {
        ScalarValue::Dictionary(_, inner) => unwrap_dict(inner),
        other => other,
    }
}

/// A timestamp literal in milliseconds, possibly between two of them.
#[derive(Clone, Copy, Debug)]
struct Ms {
    /// The value in units of 1/`per` ms.
    raw: i128,
    per: i128,
}

impl Ms {
    fn floor(self) -> i64 {
        clamp(self.raw.div_euclid(self.per))
    }
    fn ceil(self) -> i64 {
        clamp(-((-self.raw).div_euclid(self.per)))
    }
    fn exact(self) -> Option<i64> {
        (self.raw.rem_euclid(self.per) == 0).then(|| self.floor())
    }
}

fn clamp(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

fn ms_of(e: &Expr) -> Option<Ms> {
    let (raw, per) = match scalar_of(e)? {
        ScalarValue::TimestampSecond(Some(v), _) => (*v as i128 * 1000, 1),
        ScalarValue::TimestampMillisecond(Some(v), _) => (*v as i128, 1),
        ScalarValue::TimestampMicrosecond(Some(v), _) => (*v as i128, 1000),
        ScalarValue::TimestampNanosecond(Some(v), _) => (*v as i128, 1_000_000),
        _ => return None,
    };
    Some(Ms { raw, per })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::{col, lit};

    struct Cols;
    impl Columns for Cols {
        fn target(&self, c: &str) -> Option<Target> {
            match c {
                "device" => Some(Target::DeviceName),
                "device_id" => Some(Target::DeviceId),
                "fleet" => Some(Target::Tag("fleet".into())),
                _ => None,
            }
        }
    }

    fn ns(v: i64) -> Expr {
        lit(ScalarValue::TimestampNanosecond(
            Some(v),
            Some("UTC".into()),
        ))
    }

    #[test]
    fn time_bounds_round_to_the_rows_they_keep() {
        let a = |e: Expr| analyze(&e, &Cols);
        // 1.5 ms: ts >= keeps 2.., ts > keeps 2.., ts < keeps ..=1, ts <= keeps ..=1.
        assert_eq!(
            a(col("ts").gt_eq(ns(1_500_000))),
            Some(Pushed::Window(2, i64::MAX))
        );
        assert_eq!(
            a(col("ts").gt(ns(1_500_000))),
            Some(Pushed::Window(2, i64::MAX))
        );
        assert_eq!(
            a(col("ts").lt(ns(1_500_000))),
            Some(Pushed::Window(i64::MIN, 2))
        );
        assert_eq!(
            a(col("ts").lt_eq(ns(1_500_000))),
            Some(Pushed::Window(i64::MIN, 2))
        );
        assert_eq!(a(col("ts").eq(ns(1_500_000))), Some(Pushed::Window(0, 0)));
        assert_eq!(
            a(col("ts").eq(ns(-2_000_000))),
            Some(Pushed::Window(-2, -1))
        );
        assert_eq!(
            a(col("ts").lt(ns(-1_500_000))),
            Some(Pushed::Window(i64::MIN, -1))
        );
        assert_eq!(
            a(ns(5_000_000).gt(col("ts"))),
            Some(Pushed::Window(i64::MIN, 5))
        );
        assert_eq!(
            a(col("ts").between(ns(1_000_000), ns(3_000_000))),
            Some(Pushed::Window(1, 4))
        );
        assert_eq!(a(col("ts").not_eq(ns(1))), None);
    }

    #[test]
    fn devices_ids_and_tags() {
        let a = |e: Expr| analyze(&e, &Cols);
        assert_eq!(
            a(col("device").eq(lit("truck-1"))),
            Some(Pushed::OneOf(
                Target::DeviceName,
                vec![Value::Text("truck-1".into())]
            ))
        );
        assert_eq!(
            a(col("device_id").in_list(vec![lit(3u64), lit(-1i64)], false)),
            Some(Pushed::OneOf(
                Target::DeviceId,
                vec![Value::Id(3), Value::Nothing]
            ))
        );
        assert_eq!(
            a(lit("north").eq(col("fleet"))),
            Some(Pushed::OneOf(
                Target::Tag("fleet".into()),
                vec![Value::Text("north".into())]
            ))
        );
        assert_eq!(a(col("device").in_list(vec![lit("a")], true)), None);
        assert_eq!(
            a(col("device_id")
                .eq(lit(1u64))
                .or(col("device_id").eq(lit(2u64)))),
            Some(Pushed::OneOf(
                Target::DeviceId,
                vec![Value::Id(1), Value::Id(2)]
            ))
        );
        assert_eq!(
            a(col("device_id")
                .eq(lit(1u64))
                .or(col("device").eq(lit("x")))),
            None
        );
        assert_eq!(a(col("ts").gt(ns(1)).or(col("ts").lt(ns(0)))), None);
        assert_eq!(a(col("velocity").eq(lit(1.0))), None);
        assert_eq!(a(col("device").gt(lit("a"))), None);
        assert_eq!(a(col("device").eq(col("fleet"))), None);
    }
}
