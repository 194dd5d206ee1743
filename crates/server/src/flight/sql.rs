//! SQL through Flight: a command that is Flight SQL's
//! `CommandStatementQuery` (packed in a protobuf `Any`, as Flight SQL
//! clients send it), or telestore's own `{"sql": …}` document.

use super::service::status_of;
use arrow_array::RecordBatch;
use arrow_flight::error::FlightError;
use arrow_flight::sql::{Any, CommandStatementQuery};
use arrow_schema::SchemaRef;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use prost::Message;
use std::sync::Arc;
use telestore_engine::Store;
use telestore_query::sql::QueryPool;
use tonic::Status;

/// The query of a Flight SQL statement command; `None` when `cmd` is
/// not one (a JSON document starts with `{`).
pub fn statement_of(cmd: &[u8]) -> Result<Option<String>, Status> {
    if cmd.trim_ascii_start().first() == Some(&b'{') {
        return Ok(None);
    }
    let any = Any::decode(cmd).map_err(|e| {
        Status::invalid_argument(format!(
            "a command is a JSON request or a Flight SQL command: {e}"
        ))
    })?;
    if !any.is::<CommandStatementQuery>() {
        return Err(Status::unimplemented(format!(
            "Flight SQL command {} is not offered (only CommandStatementQuery)",
            any.type_url
        )));
    }
    let q: CommandStatementQuery = any
        .unpack()
        .map_err(|e| Status::invalid_argument(e.to_string()))?
        .ok_or_else(|| Status::invalid_argument("not a CommandStatementQuery"))?;
    if q.transaction_id.is_some() {
        return Err(Status::unimplemented("transactions are not offered"));
    }
    Ok(Some(q.query))
}

/// The result schema of `sql` (planned, not run).
pub async fn schema_of(
    store: &Arc<Store>,
    pool: &Arc<QueryPool>,
    sql: &str,
) -> Result<SchemaRef, Status> {
    // Planning folds constants (it runs functions): on the query pool's
    // threads too, not the network's.
    let (store, pool2, sql) = (store.clone(), pool.clone(), sql.to_string());
    let planned = pool.handle().spawn(async move {
        let df = telestore_query::sql::plan(&store, &pool2, &sql).await?;
        Ok::<_, telestore_engine::Error>(Arc::new(df.schema().as_arrow().clone()))
    });
    planned
        .await
        .map_err(|e| Status::internal(e.to_string()))?
        .map_err(|e| status_of(&e))
}

/// Run `sql` on the query pool: its schema and its batches. Dropping the
/// stream (the client cancelled or went away) stops the query.
pub async fn execute(
    store: &Arc<Store>,
    pool: &Arc<QueryPool>,
    sql: &str,
) -> Result<
    (
        SchemaRef,
        BoxStream<'static, Result<RecordBatch, FlightError>>,
    ),
    Status,
> {
    let (schema, stream) = telestore_query::sql::execute(store, pool, sql)
        .await
        .map_err(|e| status_of(&e))?;
    let batches = stream
        .map_err(|e| FlightError::Tonic(Box::new(status_of(&e))))
        .boxed();
    Ok((schema, batches))
}
