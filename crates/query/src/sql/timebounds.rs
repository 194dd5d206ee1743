//! Time bounds finer than the column: `ts >= to_timestamp_micros(X·1000 +
//! 500)` must keep the rows from `X + 1` ms, as the CLI's `--from …500us`
//! does and as DuckDB answers.
//!
//! DataFusion coerces the millisecond column up to the literal's unit
//! (`CAST(ts AS Timestamp(µs)) >= lit_µs`), then its simplifier unwraps the
//! cast by casting the literal down to milliseconds, truncating: `ts >=
//! X`, one millisecond of rows too many (and `ts = X.5 ms` matched `X`).
//! This rule runs first, while the cast is still there: it folds the
//! constant side to a literal (`now()` at the query's start time, as
//! DataFusion does) and writes the comparison in the column's own unit,
//! rounded to the rows it keeps.

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::{Between, BinaryExpr};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, Operator};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};
use std::sync::Arc;

/// The optimizer rule; put it before DataFusion's own.
#[derive(Debug, Default)]
pub struct TimeBounds;

impl OptimizerRule for TimeBounds {
    fn name(&self) -> &str {
        "telestore_time_bounds"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        if plan.inputs().is_empty() {
            return Ok(Transformed::no(plan));
        }
        let schema = Arc::new(merge_schema(&plan.inputs()));
        let info = SimplifyContext::builder()
            .with_schema(schema.clone())
            .with_config_options(config.options())
            .with_query_execution_start_time(config.query_execution_start_time())
            .build();
        let folder = ExprSimplifier::new(info);
        let names = NamePreserver::new(&plan);
        plan.map_expressions(|e| {
            let name = names.save(&e);
            let out = e.transform_up(|e| rewrite(e, &schema, &folder))?;
            Ok(out.update_data(|e| name.restore(e)))
        })
    }
}

/// One expression: a comparison of a widened time column with a constant.
fn rewrite(e: Expr, schema: &DFSchema, folder: &ExprSimplifier) -> Result<Transformed<Expr>> {
    match e {
        Expr::BinaryExpr(b) => match bound(&b, schema, folder)? {
            Some(new) => Ok(Transformed::yes(new)),
            None => Ok(Transformed::no(Expr::BinaryExpr(b))),
        },
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) if widened(&expr, schema).is_some() => {
            // As `>= low AND <= high`, each side rounded on its own.
            let lo = BinaryExpr::new(expr.clone(), Operator::GtEq, low);
            let hi = BinaryExpr::new(expr, Operator::LtEq, high);
            let part = |b: BinaryExpr| -> Result<Expr> {
                Ok(bound(&b, schema, folder)?.unwrap_or(Expr::BinaryExpr(b)))
            };
            Ok(Transformed::yes(part(lo)?.and(part(hi)?)))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// A time column cast to a finer time unit: the column, its type, the
/// finer unit, and how many of it make one of the column's.
fn widened<'a>(e: &'a Expr, schema: &DFSchema) -> Option<(&'a Expr, DataType, TimeUnit, i64)> {
    let Expr::Cast(c) = e else { return None };
    let DataType::Timestamp(to, _) = c.field.data_type() else {
        return None;
    };
    if !matches!(&*c.expr, Expr::Column(_)) {
        return None;
    }
    let from_type = c.expr.get_type(schema).ok()?;
    let DataType::Timestamp(from, _) = &from_type else {
        return None;
    };
    let per = scale(to) / scale(from);
    (per > 1).then_some((&*c.expr, from_type, *to, per))
}

fn scale(u: &TimeUnit) -> i64 {
    match u {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    }
}

/// `CAST(col AS finer) op constant` (either side) in the column's unit.
fn bound(b: &BinaryExpr, schema: &DFSchema, folder: &ExprSimplifier) -> Result<Option<Expr>> {
    let (cast, op, other) = if widened(&b.left, schema).is_some() {
        (&*b.left, b.op, &*b.right)
    } else if widened(&b.right, schema).is_some() {
        match b.op.swap() {
            Some(op) => (&*b.right, op, &*b.left),
            None => return Ok(None),
        }
    } else {
        return Ok(None);
    };
    let Some((col, col_type, unit, per)) = widened(cast, schema) else {
        return Ok(None);
    };
    if !matches!(
        op,
        Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
    ) || other.any_column_refs()
        || other.is_volatile()
    {
        return Ok(None);
    }
    let Some(v) = time_value(folder.simplify(other.clone())?, unit) else {
        return Ok(None);
    };
    let at = |n: i64| -> Result<Expr> {
        let s = ScalarValue::Int64(Some(n)).cast_to(&col_type)?;
        Ok(Expr::Literal(s, None))
    };
    let cmp = |op: Operator, n: i64| -> Result<Expr> {
        Ok(Expr::BinaryExpr(BinaryExpr::new(
            Box::new(col.clone()),
            op,
            Box::new(at(n)?),
        )))
    };
    let floor = v.div_euclid(per);
    if v.rem_euclid(per) == 0 {
        return Ok(Some(cmp(op, floor)?));
    }
    // Between two of the column's values: no row equals it, `>` and `>=`
    // keep from the next one, `<` and `<=` up to the previous one. Written
    // as comparisons (not `false`/`true`) so a NULL stays NULL.
    let next = floor + 1;
    Ok(Some(match op {
        Operator::Gt | Operator::GtEq => cmp(Operator::GtEq, next)?,
        Operator::Lt | Operator::LtEq => cmp(Operator::Lt, next)?,
        Operator::Eq => cmp(Operator::Gt, floor)?.and(cmp(Operator::Lt, next)?),
        _ => cmp(Operator::LtEq, floor)?.or(cmp(Operator::GtEq, next)?),
    }))
}

/// A folded constant's value, if it is a time in `unit`.
fn time_value(e: Expr, unit: TimeUnit) -> Option<i64> {
    let Expr::Literal(s, _) = e else { return None };
    match (s, unit) {
        (ScalarValue::TimestampSecond(Some(v), _), TimeUnit::Second)
        | (ScalarValue::TimestampMillisecond(Some(v), _), TimeUnit::Millisecond)
        | (ScalarValue::TimestampMicrosecond(Some(v), _), TimeUnit::Microsecond)
        | (ScalarValue::TimestampNanosecond(Some(v), _), TimeUnit::Nanosecond) => Some(v),
        _ => None,
    }
}
