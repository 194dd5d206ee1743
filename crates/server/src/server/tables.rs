//! `GET|POST /api/v1/tables` and `POST /api/v1/flush`.

use super::state::{json_error, store_failure, ApiError, HttpState};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use telestore_engine::error::Error;
use telestore_engine::schema::{
    parse_duration_ms, BlockEncoding, Compression, Field, FieldType, TableOptions, TableSchema,
};
use utoipa::{IntoParams, ToSchema};

/// A table as the API shows it (and as `POST /api/v1/tables` takes it:
/// only `name` and `fields` are required).
#[derive(Serialize, Deserialize, Debug, ToSchema)]
pub struct TableSpec {
    pub name: String,
    /// The row's fields, in order (the device and the time are the key).
    pub fields: Vec<FieldSpec>,
    /// Retention, e.g. "30d" (absent: keep forever).
    #[serde(default)]
    pub ttl: Option<String>,
    /// Regions the hash space is pre-split into (default 16).
    #[serde(default)]
    pub regions: Option<u32>,
    /// none, snappy, zstd or zstd:LEVEL.
    #[serde(default)]
    pub compression: Option<String>,
    /// Versions kept per cell by a major compaction (default 1).
    #[serde(default)]
    pub max_versions: Option<u32>,
    /// Data block layout: rows or columnar.
    #[serde(default)]
    pub encoding: Option<String>,
}

/// One field of a table.
#[derive(Serialize, Deserialize, Debug, ToSchema)]
pub struct FieldSpec {
    pub name: String,
    /// f64, f32, i64, i32, u64, u32 or bool.
    #[serde(rename = "type")]
    pub ty: String,
}

/// A table created (or found identical).
#[derive(Serialize, ToSchema)]
pub(super) struct Created {
    /// The table's numeric id.
    id: u32,
    name: String,
}

/// What the memstores and the WAL hold once a flush is durable.
#[derive(Serialize, ToSchema)]
pub(super) struct Flushed {
    /// Bytes in memstores (writes that came in during the flush).
    memstore_bytes: usize,
    /// WAL segments not yet released.
    wal_segments: usize,
}

/// `POST /api/v1/flush`'s parameter.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct FlushParams {
    /// The table to flush (default: every table).
    table: Option<String>,
}

pub(super) fn spec_of(t: &TableSchema) -> TableSpec {
    let o = &t.options;
    TableSpec {
        name: t.name.clone(),
        fields: t
            .fields
            .iter()
            .map(|f| FieldSpec {
                name: f.name.clone(),
                ty: f.ty.name().into(),
            })
            .collect(),
        ttl: o.ttl_ms.map(|ms| format!("{}s", ms / 1000)),
        regions: Some(o.regions),
        compression: Some(o.compression.name()),
        max_versions: Some(o.max_versions),
        encoding: Some(o.encoding.name().into()),
    }
}

/// List the tables
#[utoipa::path(
    get,
    path = "/api/v1/tables",
    tag = "tables",
    responses((status = 200, description = "Every table", body = Vec<TableSpec>))
)]
pub(super) async fn list_tables(State(s): State<HttpState>) -> Response {
    let specs: Vec<TableSpec> = s
        .store
        .table_names()
        .iter()
        .filter_map(|n| s.store.schema(n).ok())
        .map(|t| spec_of(&t))
        .collect();
    Json(specs).into_response()
}

fn schema_of(spec: &TableSpec) -> telestore_engine::Result<TableSchema> {
    let fields = spec
        .fields
        .iter()
        .map(|f| Ok(Field::new(&f.name, FieldType::parse(&f.ty)?)))
        .collect::<telestore_engine::Result<Vec<_>>>()?;
    let d = TableOptions::default();
    let options = TableOptions {
        ttl_ms: spec.ttl.as_deref().map(parse_duration_ms).transpose()?,
        regions: spec.regions.unwrap_or(d.regions),
        compression: match &spec.compression {
            Some(c) => Compression::parse(c)?,
            None => d.compression,
        },
        max_versions: spec.max_versions.unwrap_or(d.max_versions),
        encoding: match &spec.encoding {
            Some(e) => BlockEncoding::parse(e)?,
            None => d.encoding,
        },
        ..d
    };
    TableSchema::new(&spec.name, fields, options)
}

/// Create a table
///
/// Idempotent: creating a table that exists with the same fields answers
/// `200`; with other fields, `409`. Options left out take their defaults
/// (no TTL, 16 regions, zstd, 1 version, columnar blocks).
#[utoipa::path(
    post,
    path = "/api/v1/tables",
    tag = "tables",
    request_body = TableSpec,
    responses(
        (status = 201, description = "Created", body = Created),
        (status = 200, description = "It existed already, the same", body = Created),
        (status = 400, description = "A bad name, field type or option", body = ApiError),
        (status = 409, description = "A table of that name exists with other fields", body = ApiError),
        (status = 500, description = "The store failed", body = ApiError),
        (status = 503, description = "The store is read-only or its write path stopped; retry after `Retry-After` seconds", body = ApiError),
    )
)]
pub(super) async fn create_table(State(s): State<HttpState>, body: axum::body::Bytes) -> Response {
    let spec: TableSpec = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, format!("table spec: {e}")),
    };
    let schema = match schema_of(&spec) {
        Ok(v) => v,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let existed = s.store.schema(&schema.name).is_ok();
    let store = s.store.clone();
    let done = tokio::task::spawn_blocking(move || store.create_table(schema)).await;
    match done {
        Ok(Ok(id)) => {
            let status = if existed {
                StatusCode::OK
            } else {
                StatusCode::CREATED
            };
            let created = Created {
                id,
                name: spec.name,
            };
            (status, Json(created)).into_response()
        }
        Ok(Err(e)) => store_failure(&e),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// Flush memstores to HFiles
///
/// Flushes the table's (every table's) memstores and answers once the
/// files are durable, with what the memstores and the WAL hold then
/// (writes that came in meanwhile are in them).
#[utoipa::path(
    post,
    path = "/api/v1/flush",
    tag = "tables",
    params(FlushParams),
    responses(
        (status = 200, description = "Flushed", body = Flushed),
        (status = 404, description = "No such table", body = ApiError),
        (status = 503, description = "The store is busy or its write path stopped", body = ApiError),
    )
)]
pub(super) async fn flush(
    State(s): State<HttpState>,
    q: Result<Query<FlushParams>, QueryRejection>,
) -> Response {
    let table = match q {
        Ok(Query(q)) => q.table,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, e.body_text()),
    };
    let done = tokio::task::spawn_blocking(move || {
        s.store.flush_tables(table.as_deref())?;
        Ok::<_, Error>(s.store.stats())
    })
    .await;
    match done {
        Ok(Ok(st)) => Json(Flushed {
            memstore_bytes: st.memstore_bytes,
            wal_segments: st.wal_segments,
        })
        .into_response(),
        Ok(Err(e)) => store_failure(&e),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
