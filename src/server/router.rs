//! The HTTP routes, one file per group, all behind the auth layer.

use super::state::{HttpState, WRITE_BODY_MAX};
use super::{auth, console, devices, metrics, query, sql, status, tables, write};
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;

/// The HTTP routes, all behind the auth layer (added last, so it wraps
/// every route, the ones added later too).
pub fn router(state: HttpState) -> Router {
    let auth = axum::middleware::from_fn_with_state(state.auth.clone(), auth::require);
    Router::new()
        .route("/", get(console::page))
        .route("/console/{asset}", get(console::asset))
        .route("/api/v1/status", get(status::status))
        .route("/api/v1/devices", get(devices::devices))
        .route("/health", get(metrics::health))
        .route("/metrics", get(metrics::metrics))
        .route(
            "/api/v1/tables",
            get(tables::list_tables).post(tables::create_table),
        )
        .route("/api/v1/query", get(query::query))
        .route("/api/v1/export", get(query::export))
        .route("/api/v1/sql", post(sql::sql))
        .route("/api/v2/write", post(write::write_v2))
        .route("/write", post(write::write_v1))
        .route("/api/v1/flush", post(tables::flush))
        .layer(DefaultBodyLimit::max(WRITE_BODY_MAX))
        .with_state(state)
        .layer(auth)
}
