//! The HTTP routes, one file per group, all behind the auth layer. Every
//! route is added here through `routes!`, which also puts it in the
//! OpenAPI document ([`super::openapi`]); `crates/server/tests/it/openapi.rs` refuses a route
//! added any other way.

use super::state::{HttpState, WRITE_BODY_MAX};
use super::{auth, console, devices, influx, metrics, openapi, query, sql, status, tables, write};
use axum::extract::DefaultBodyLimit;
use axum::Router;
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Every route with its OpenAPI description, without state or layers.
pub(super) fn routes() -> OpenApiRouter<HttpState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(console::page))
        .routes(routes!(console::asset))
        .routes(routes!(status::status))
        .routes(routes!(devices::devices))
        .routes(routes!(metrics::health))
        .routes(routes!(influx::ping))
        .routes(routes!(influx::query_v1, influx::query_v1_form))
        .routes(routes!(metrics::metrics))
        .routes(routes!(tables::list_tables, tables::create_table))
        .routes(routes!(query::query))
        .routes(routes!(query::export))
        .routes(routes!(sql::sql))
        .routes(routes!(write::write_v2))
        .routes(routes!(write::write_v1))
        .routes(routes!(tables::flush))
        .routes(routes!(openapi::openapi_json))
}

/// The HTTP routes, all behind the auth layer (added last, so it wraps
/// every route, the ones added later too).
pub fn router(state: HttpState) -> Router {
    let auth = axum::middleware::from_fn_with_state(state.auth.clone(), auth::require);
    let (routes, _) = routes().split_for_parts();
    routes
        .layer(DefaultBodyLimit::max(WRITE_BODY_MAX))
        .with_state(state)
        .layer(auth)
}
