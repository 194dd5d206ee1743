//! SQL over the store, through DataFusion: every table is a
//! [`table::SqlTable`] (device, tag and time filters pushed into the
//! scan, one partition per region), and `devices` lists the device
//! registry (id, name, one column per tag key) for joins — unless a
//! telestore table has that name, which then wins.
//!
//! Only queries run: DDL, DML and `SET` statements are refused. The same
//! code serves `telestore sql`, `POST /api/v1/sql` and Flight. Every query
//! runs on a [`pool::QueryPool`] (its own threads, a slot, a deadline, a
//! memory pool shared by all queries) and stops when its client goes
//! away ([`cancel`]).

pub mod cancel;
pub mod capped;
pub mod filter;
pub mod pool;
pub mod table;
pub mod timebounds;

pub use pool::{Admission, QueryLimits, QueryPool};

use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::MemTable;
use datafusion::error::DataFusionError;
use datafusion::execution::SessionStateBuilder;
use datafusion::optimizer::{Optimizer, OptimizerRule};
use datafusion::prelude::{SQLOptions, SessionConfig, SessionContext};
use futures::{Stream, StreamExt};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use table::{Registry, SqlTable};
use telestore_engine::error::{Error, Result};
use telestore_engine::Store;
use timebounds::TimeBounds;
use tokio::sync::mpsc;

/// Longest SQL text accepted.
pub const SQL_TEXT_MAX: usize = 1 << 20;

/// A store error, or a DataFusion one, as a store error: planning
/// problems (bad SQL, unknown column, wrong types) are invalid input
/// naming `sql`; a scan's own error comes back as it was; a query past
/// the shared memory pool is [`Error::QueryLimit`].
pub fn error_of(e: DataFusionError) -> Error {
    match e {
        DataFusionError::External(inner) => match inner.downcast::<Error>() {
            Ok(e) => *e,
            Err(other) => Error::invalid("sql", other.to_string()),
        },
        DataFusionError::Context(_, inner) => error_of(*inner),
        DataFusionError::Shared(inner) => shared_error(&inner),
        DataFusionError::ResourcesExhausted(m) => Error::QueryLimit {
            what: "memory",
            message: format!("{m} (serve --query-memory-mib: the memory all queries share)"),
        },
        other => Error::invalid("sql", other.strip_backtrace()),
    }
}

/// An error one partition hit, shared by the others: a limit stays a
/// limit, the rest is invalid input.
fn shared_error(e: &DataFusionError) -> Error {
    match e.find_root() {
        DataFusionError::External(inner) => match inner.downcast_ref::<Error>() {
            Some(Error::QueryLimit { what, message }) => Error::QueryLimit {
                what,
                message: message.clone(),
            },
            _ => Error::invalid("sql", e.to_string()),
        },
        DataFusionError::ResourcesExhausted(m) => {
            error_of(DataFusionError::ResourcesExhausted(m.clone()))
        }
        _ => Error::invalid("sql", e.to_string()),
    }
}

/// A session over `store`: its tables and the `devices` table, as they
/// are now, its operators taking memory from `pool`'s shared pool.
pub fn context(store: &Arc<Store>, pool: &QueryPool) -> Result<SessionContext> {
    let config = SessionConfig::new()
        .with_target_partitions(pool.limits().threads.max(1))
        .with_information_schema(true);
    // Our time-bound rule first, while DataFusion's coercion casts are
    // still in the plan (timebounds.rs); then DataFusion's own rules.
    let mut rules: Vec<Arc<dyn OptimizerRule + Send + Sync>> = vec![Arc::new(TimeBounds)];
    rules.extend(Optimizer::new().rules);
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_runtime_env(pool.env().clone())
        .with_default_features()
        .with_optimizer_rules(rules)
        .build();
    let ctx = SessionContext::new_with_state(state);
    capped::register(&ctx);
    let registry = Arc::new(Registry::load(store));
    let names = store.table_names();
    for name in &names {
        let schema = store.schema(name)?;
        let t = SqlTable::new(store.clone(), pool.work().clone(), schema, registry.clone());
        ctx.register_table(name.as_str(), Arc::new(t))
            .map_err(error_of)?;
    }
    if !names.iter().any(|n| n == "devices") {
        ctx.register_table("devices", devices_table(store, &registry)?)
            .map_err(error_of)?;
    }
    Ok(ctx)
}

/// The device registry as a table: `device_id`, `device`, then one
/// nullable column per tag key.
fn devices_table(store: &Store, registry: &Registry) -> Result<Arc<MemTable>> {
    let all = store.devices(None);
    let mut fields = vec![
        Field::new("device_id", DataType::UInt64, false),
        Field::new("device", DataType::Utf8, false),
    ];
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(UInt64Array::from_iter_values(all.iter().map(|(id, _)| *id))),
        Arc::new(StringArray::from_iter_values(
            all.iter().map(|(_, e)| e.name.as_str()),
        )),
    ];
    for k in &registry.tag_keys {
        if k == "device" || k == "device_id" {
            continue;
        }
        fields.push(Field::new(k, DataType::Utf8, true));
        let values: StringArray = all
            .iter()
            .map(|(_, e)| {
                e.tags
                    .iter()
                    .find(|(tk, _)| tk == k)
                    .map(|(_, v)| v.as_str())
            })
            .collect();
        cols.push(Arc::new(values));
    }
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), cols)
        .map_err(|e| Error::invalid("devices table", e.to_string()))?;
    let t = MemTable::try_new(schema, vec![vec![batch]]).map_err(error_of)?;
    Ok(Arc::new(t))
}

/// What the query task sends: the schema first, then the batches.
enum Msg {
    Schema(SchemaRef),
    Batch(RecordBatch),
}

/// The batches of a query running on the pool. Dropping it before its end
/// stops the query (at its next batch) and frees its slot.
pub struct QueryStream {
    rx: mpsc::Receiver<Result<Msg>>,
    guard: Option<cancel::Guard>,
}

impl Stream for QueryStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            let item = match self.rx.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(item) => item,
            };
            return Poll::Ready(match item {
                Some(Ok(Msg::Batch(b))) => Some(Ok(b)),
                Some(Ok(Msg::Schema(_))) => continue,
                Some(Err(e)) => {
                    self.ended();
                    Some(Err(e))
                }
                None => {
                    self.ended();
                    None
                }
            });
        }
    }
}

impl QueryStream {
    /// The query ended on its own (done or failed): no cancel at drop.
    fn ended(&mut self) {
        if let Some(g) = self.guard.take() {
            g.finish();
        }
    }
}

/// Run `sql` on `pool` (waiting for a slot): its result schema and a
/// stream of its batches.
pub async fn execute(
    store: &Arc<Store>,
    pool: &Arc<QueryPool>,
    sql: &str,
) -> Result<(SchemaRef, QueryStream)> {
    let admission = pool.admit().await?;
    execute_admitted(store, pool, admission, sql).await
}

/// [`execute`] with a slot already taken.
pub async fn execute_admitted(
    store: &Arc<Store>,
    pool: &Arc<QueryPool>,
    admission: Admission,
    sql: &str,
) -> Result<(SchemaRef, QueryStream)> {
    let (tx, mut rx) = mpsc::channel(2);
    let guard = admission.guard();
    let (store, pool2, sql) = (store.clone(), pool.clone(), sql.to_string());
    pool.handle().spawn(async move {
        let control = admission.control.clone();
        let run = produce(&store, &pool2, &sql, &control, &tx);
        let res = match control.deadline() {
            Some(d) => match tokio::time::timeout_at(d.into(), run).await {
                Ok(r) => r,
                // A batch that never came: the deadline stops it anyway.
                Err(_) => control.check(),
            },
            None => run.await,
        };
        if let Err(e) = res {
            let _ = tx.send(Err(e)).await;
        }
        drop(admission);
    });
    match rx.recv().await {
        Some(Ok(Msg::Schema(schema))) => Ok((
            schema,
            QueryStream {
                rx,
                guard: Some(guard),
            },
        )),
        Some(Err(e)) => {
            guard.finish();
            Err(e)
        }
        _ => {
            guard.finish();
            Err(Error::invalid("sql", "the query task stopped"))
        }
    }
}

/// Plan, check and run `sql`, sending the schema, then each batch.
async fn produce(
    store: &Arc<Store>,
    pool: &QueryPool,
    sql: &str,
    control: &Arc<cancel::QueryControl>,
    tx: &mpsc::Sender<Result<Msg>>,
) -> Result<()> {
    let df = plan(store, pool, sql).await?;
    let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
    let task = Arc::new(df.task_ctx());
    let physical = df.create_physical_plan().await.map_err(error_of)?;
    let physical = cancel::checked(physical, control).map_err(error_of)?;
    let mut stream = datafusion::physical_plan::execute_stream(physical, task).map_err(error_of)?;
    if tx.send(Ok(Msg::Schema(schema))).await.is_err() {
        return Ok(());
    }
    while let Some(b) = stream.next().await {
        let b = b.map_err(error_of)?;
        if tx.send(Ok(Msg::Batch(b))).await.is_err() {
            control.cancel();
            return Ok(());
        }
    }
    Ok(())
}

/// Parse and plan `sql` (nothing is read).
pub async fn plan(
    store: &Arc<Store>,
    pool: &QueryPool,
    sql: &str,
) -> Result<datafusion::dataframe::DataFrame> {
    if sql.len() > SQL_TEXT_MAX {
        return Err(Error::invalid(
            "sql",
            format!("{} bytes exceeds the {SQL_TEXT_MAX} byte limit", sql.len()),
        ));
    }
    if sql.trim().is_empty() {
        return Err(Error::invalid("sql", "the query is empty"));
    }
    let ctx = context(store, pool)?;
    let options = SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    ctx.sql_with_options(sql, options).await.map_err(error_of)
}

/// Run `sql` to the end: `make` builds a sink from the result schema,
/// `put` hands it each batch; the sink is returned. For callers outside
/// a runtime (the CLI, the HTTP query thread), with a slot taken;
/// `gone` completing (the client went away) stops the query.
pub fn run_blocking<S>(
    store: &Arc<Store>,
    pool: &Arc<QueryPool>,
    admission: Admission,
    sql: &str,
    gone: impl std::future::Future<Output = ()>,
    make: impl FnOnce(SchemaRef) -> Result<S>,
    mut put: impl FnMut(&mut S, RecordBatch) -> Result<()>,
) -> Result<S> {
    let rt = pool.handle().clone();
    let mut gone = std::pin::pin!(gone);
    let client_left = || Error::QueryLimit {
        what: telestore_engine::error::QUERY_CANCELLED,
        message: "the client went away".into(),
    };
    let started = rt.block_on(async {
        tokio::select! {
            r = execute_admitted(store, pool, admission, sql) => Some(r),
            _ = &mut gone => None,
        }
    });
    let (schema, mut stream) = started.ok_or_else(client_left)??;
    let mut sink = make(schema)?;
    loop {
        let next = rt.block_on(async {
            tokio::select! {
                b = stream.next() => Some(b),
                _ = &mut gone => None,
            }
        });
        match next.ok_or_else(client_left)? {
            Some(b) => put(&mut sink, b?)?,
            None => return Ok(sink),
        }
    }
}
