//! `GET /api/v1/devices?match=TEXT&limit=N`: registered devices whose
//! name contains `TEXT` (case-insensitive; all without it), by name, at
//! most `N` (default 20, at most 1,000). The console's device search
//! uses it.

use super::state::{json_error, ApiError, HttpState};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::{IntoParams, ToSchema};

const LIMIT_DEFAULT: usize = 20;
const LIMIT_MAX: usize = 1_000;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct Search {
    /// Text the device's name contains, case-insensitive (default: any).
    #[serde(rename = "match")]
    text: Option<String>,
    /// The most devices answered, 1 to 1,000 (default 20).
    limit: Option<usize>,
}

/// A registered device.
#[derive(Serialize, ToSchema)]
pub(super) struct Found {
    /// Its numeric id (the row key's device part).
    id: u64,
    name: String,
    tags: BTreeMap<String, String>,
}

/// Find registered devices by name
///
/// The devices whose name contains `match` (all without it), ordered by
/// name, at most `limit`. The console's device search uses it.
#[utoipa::path(
    get,
    path = "/api/v1/devices",
    tag = "tables",
    params(Search),
    responses(
        (status = 200, description = "The devices found", body = Vec<Found>),
        (status = 400, description = "`limit` out of range or not a number", body = ApiError),
    )
)]
pub(super) async fn devices(
    State(s): State<HttpState>,
    q: Result<Query<Search>, QueryRejection>,
) -> Response {
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, e.body_text()),
    };
    let limit = q.limit.unwrap_or(LIMIT_DEFAULT);
    if limit == 0 || limit > LIMIT_MAX {
        let m = format!("limit must be 1..={LIMIT_MAX} (got {limit})");
        return json_error(StatusCode::BAD_REQUEST, m);
    }
    let needle = q.text.unwrap_or_default().to_lowercase();
    let found = tokio::task::spawn_blocking(move || {
        let mut hits: Vec<Found> = s
            .store
            .devices(None)
            .into_iter()
            .filter(|(_, e)| e.name.to_lowercase().contains(&needle))
            .map(|(id, e)| Found {
                id,
                name: e.name,
                tags: e.tags.into_iter().collect(),
            })
            .collect();
        hits.sort_by(|a, b| a.name.cmp(&b.name));
        hits.truncate(limit);
        hits
    })
    .await;
    match found {
        Ok(hits) => Json(hits).into_response(),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
