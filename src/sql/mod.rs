//! SQL over the store, through DataFusion: every table is a
//! [`table::SqlTable`] (device, tag and time filters pushed into the
//! scan, one partition per region), and `devices` lists the device
//! registry (id, name, one column per tag key) for joins — unless a
//! telestore table has that name, which then wins.
//!
//! Only queries run: DDL, DML and `SET` statements are refused. The same
//! code serves `telestore sql`, `POST /api/v1/sql` and Flight.

pub mod filter;
pub mod table;

use crate::error::{Error, Result};
use crate::Store;
use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::MemTable;
use datafusion::error::DataFusionError;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::prelude::{SQLOptions, SessionConfig, SessionContext};
use std::sync::Arc;
use table::{Registry, SqlTable};

/// Longest SQL text accepted.
pub const SQL_TEXT_MAX: usize = 1 << 20;
/// Memory one query's operators may hold (hash tables, sorts) before
/// they spill to the temporary directory or, when they cannot, fail with
/// "resources exhausted": a query does not take the daemon's memory.
pub const SQL_MEMORY_MAX: usize = 1 << 30;

/// A store error, or a DataFusion one, as a store error: planning
/// problems (bad SQL, unknown column, wrong types) are invalid input
/// naming `sql`; a scan's own error comes back as it was.
pub fn error_of(e: DataFusionError) -> Error {
    match e {
        DataFusionError::External(inner) => match inner.downcast::<Error>() {
            Ok(e) => *e,
            Err(other) => Error::invalid("sql", other.to_string()),
        },
        DataFusionError::Context(_, inner) => error_of(*inner),
        DataFusionError::Shared(inner) => Error::invalid("sql", inner.to_string()),
        other => Error::invalid("sql", other.strip_backtrace()),
    }
}

/// A session over `store`: its tables and the `devices` table, as they
/// are now.
pub fn context(store: &Arc<Store>) -> Result<SessionContext> {
    let config = SessionConfig::new()
        .with_target_partitions(std::thread::available_parallelism().map_or(2, |n| n.get()))
        .with_information_schema(true);
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(SQL_MEMORY_MAX, 1.0)
        .build_arc()
        .map_err(error_of)?;
    let ctx = SessionContext::new_with_config_rt(config, runtime);
    let registry = Arc::new(Registry::load(store));
    let names = store.table_names();
    for name in &names {
        let schema = store.schema(name)?;
        let t = SqlTable::new(store.clone(), schema, registry.clone());
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

/// A planned query: its result schema and a stream of its batches.
pub async fn execute(
    store: &Arc<Store>,
    sql: &str,
) -> Result<(SchemaRef, SendableRecordBatchStream)> {
    let df = plan(store, sql).await?;
    let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
    let stream = df.execute_stream().await.map_err(error_of)?;
    Ok((schema, stream))
}

/// Parse and plan `sql` (nothing is read).
pub async fn plan(store: &Arc<Store>, sql: &str) -> Result<datafusion::dataframe::DataFrame> {
    if sql.len() > SQL_TEXT_MAX {
        return Err(Error::invalid(
            "sql",
            format!("{} bytes exceeds the {SQL_TEXT_MAX} byte limit", sql.len()),
        ));
    }
    if sql.trim().is_empty() {
        return Err(Error::invalid("sql", "the query is empty"));
    }
    let ctx = context(store)?;
    let options = SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    ctx.sql_with_options(sql, options).await.map_err(error_of)
}

/// Run `sql` to the end: `make` builds a sink from the result schema,
/// `put` hands it each batch; the sink is returned. For callers outside
/// a runtime (the CLI, the HTTP query thread); `rt` runs DataFusion.
pub fn run_blocking<S>(
    rt: &tokio::runtime::Handle,
    store: &Arc<Store>,
    sql: &str,
    make: impl FnOnce(SchemaRef) -> Result<S>,
    mut put: impl FnMut(&mut S, RecordBatch) -> Result<()>,
) -> Result<S> {
    use futures::StreamExt;
    let (schema, mut stream) = rt.block_on(execute(store, sql))?;
    let mut sink = make(schema)?;
    while let Some(b) = rt.block_on(stream.next()) {
        put(&mut sink, b.map_err(error_of)?)?;
    }
    Ok(sink)
}
