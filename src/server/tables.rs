//! `GET|POST /api/v1/tables` and `POST /api/v1/flush`.

use super::state::{json_error, store_failure, HttpState};
use crate::error::Error;
use crate::schema::{
    parse_duration_ms, BlockEncoding, Compression, Field, FieldType, TableOptions, TableSchema,
};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// A table as the API shows it.
#[derive(Serialize, Deserialize, Debug)]
pub struct TableSpec {
    pub name: String,
    pub fields: Vec<FieldSpec>,
    /// Retention, e.g. "30d" (absent: keep forever).
    #[serde(default)]
    pub ttl: Option<String>,
    #[serde(default)]
    pub regions: Option<u32>,
    /// none, snappy, zstd or zstd:LEVEL.
    #[serde(default)]
    pub compression: Option<String>,
    #[serde(default)]
    pub max_versions: Option<u32>,
    /// Data block layout: rows or columnar.
    #[serde(default)]
    pub encoding: Option<String>,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct FieldSpec {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
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

fn schema_of(spec: &TableSpec) -> crate::Result<TableSchema> {
    let fields = spec
        .fields
        .iter()
        .map(|f| Ok(Field::new(&f.name, FieldType::parse(&f.ty)?)))
        .collect::<crate::Result<Vec<_>>>()?;
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
            (
                status,
                Json(serde_json::json!({ "id": id, "name": spec.name })),
            )
                .into_response()
        }
        Ok(Err(e @ Error::SchemaConflict { .. })) => {
            json_error(StatusCode::CONFLICT, e.to_string())
        }
        Ok(Err(e @ Error::InvalidInput { .. })) => {
            json_error(StatusCode::BAD_REQUEST, e.to_string())
        }
        Ok(Err(e)) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// `POST /api/v1/flush[?table=T]`: flush the table's (every table's)
/// memstores to HFiles; answers once they are durable, with what the
/// memstores and the WAL hold then (`{"memstore_bytes", "wal_segments"}`:
/// writes that came in meanwhile are in them).
pub(super) async fn flush(
    State(s): State<HttpState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let table = q.get("table").cloned();
    let done = tokio::task::spawn_blocking(move || {
        s.store.flush_tables(table.as_deref())?;
        Ok::<_, Error>(s.store.stats())
    })
    .await;
    match done {
        Ok(Ok(st)) => Json(serde_json::json!({
            "memstore_bytes": st.memstore_bytes,
            "wal_segments": st.wal_segments,
        }))
        .into_response(),
        Ok(Err(e @ Error::UnknownTable(_))) => json_error(StatusCode::NOT_FOUND, e.to_string()),
        Ok(Err(e)) => store_failure(&e),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
