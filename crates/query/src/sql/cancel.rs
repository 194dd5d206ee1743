//! Stopping a query that is running: its deadline, and its client going
//! away.
//!
//! A query's physical plan is wrapped node by node in [`Checked`], whose
//! stream looks at the query's [`QueryControl`] before it hands on each
//! batch. A CPU-bound operator (the probe of a cross join, an aggregate
//! over `generate_series`) never returns to the runtime between batches,
//! so neither an abort nor a timer could stop it; a check on every batch
//! of every node does, within one batch's work.

use super::pool::QueryStats;
use arrow_array::RecordBatch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::StreamExt;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use telestore_engine::error::Error;

/// A query's deadline and cancel flag.
#[derive(Debug)]
pub struct QueryControl {
    cancelled: AtomicBool,
    timed_out: AtomicBool,
    deadline: Option<Instant>,
    timeout: Option<Duration>,
    stats: Arc<QueryStats>,
}

impl QueryControl {
    pub(super) fn new(
        deadline: Option<Instant>,
        timeout: Option<Duration>,
        stats: Arc<QueryStats>,
    ) -> Arc<QueryControl> {
        Arc::new(QueryControl {
            cancelled: AtomicBool::new(false),
            timed_out: AtomicBool::new(false),
            deadline,
            timeout,
            stats,
        })
    }

    /// Stop the query at its next batch (its client went away).
    pub fn cancel(&self) {
        if !self.cancelled.swap(true, Relaxed) {
            self.stats.cancelled.fetch_add(1, Relaxed);
        }
    }

    /// When the query must have ended.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether the query was cancelled or ran past its deadline.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Relaxed)
    }

    /// `Err` once the query was cancelled or ran past its deadline.
    pub fn check(&self) -> telestore_engine::Result<()> {
        if self.cancelled.load(Relaxed) {
            return Err(Error::QueryLimit {
                what: telestore_engine::error::QUERY_CANCELLED,
                message: "the client went away".into(),
            });
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            if !self.timed_out.swap(true, Relaxed) {
                self.stats.timed_out.fetch_add(1, Relaxed);
            }
            let secs = self.timeout.map_or(0.0, |t| t.as_secs_f64());
            return Err(Error::QueryLimit {
                what: telestore_engine::error::QUERY_TIMEOUT,
                message: format!("the query ran past its {secs} s limit (serve --query-timeout-s)"),
            });
        }
        Ok(())
    }
}

/// Cancels its query when dropped before [`Guard::finish`]: held by
/// whatever serves the query's client, so that the client leaving (its
/// request or stream dropped) stops the query.
pub struct Guard {
    control: Option<Arc<QueryControl>>,
}

impl Guard {
    pub(super) fn new(control: Arc<QueryControl>) -> Guard {
        Guard {
            control: Some(control),
        }
    }

    /// The query ended on its own: dropping the guard no longer cancels.
    pub fn finish(mut self) {
        self.control = None;
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(c) = self.control.take() {
            c.cancel();
        }
    }
}

/// Wrap every node of `plan` in [`Checked`].
pub fn checked(
    plan: Arc<dyn ExecutionPlan>,
    control: &Arc<QueryControl>,
) -> DfResult<Arc<dyn ExecutionPlan>> {
    let children = plan
        .children()
        .into_iter()
        .map(|c| checked(c.clone(), control))
        .collect::<DfResult<Vec<_>>>()?;
    let plan = if children.is_empty() {
        plan
    } else {
        // Each child keeps its properties: only its stream is wrapped.
        let keep = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep);
        plan.replace_children(children, keep)?
    };
    Ok(Arc::new(Checked {
        inner: plan,
        control: control.clone(),
    }))
}

/// A plan node whose batches pass the query's [`QueryControl::check`].
#[derive(Debug)]
pub struct Checked {
    inner: Arc<dyn ExecutionPlan>,
    control: Arc<QueryControl>,
}

impl DisplayAs for Checked {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        self.inner.fmt_as(t, f)
    }
}

impl ExecutionPlan for Checked {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn downcast_delegate(&self) -> Option<&dyn ExecutionPlan> {
        Some(self.inner.as_ref())
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.inner.properties()
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.inner]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let (Some(inner), true) = (children.pop(), children.is_empty()) else {
            return Err(DataFusionError::Internal(
                "a checked plan node has exactly one child".into(),
            ));
        };
        Ok(Arc::new(Checked {
            inner,
            control: self.control.clone(),
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        self.control.check().map_err(external)?;
        let inner = self.inner.execute(partition, context)?;
        let schema = inner.schema();
        let control = self.control.clone();
        let stream = inner.map(move |b: DfResult<RecordBatch>| {
            control.check().map_err(external)?;
            b
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

fn external(e: Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}
