//! The console: `GET /` and `GET /console/{asset}`, a status page built
//! from files compiled into the binary (`crates/server/src/server/console/`): nothing is
//! fetched from elsewhere, so it works offline. The page holds no data;
//! it reads `/api/v1/status` and `/api/v1/query` with the token the user
//! gives it, so those routes' auth rules are the page's.

use super::state::ApiError;
use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("console/index.html");
const SCRIPT: &str = include_str!("console/console.js");
const STYLE: &str = include_str!("console/console.css");

/// The page's assets: name, content type, bytes.
const ASSETS: [(&str, &str, &str); 2] = [
    ("console.js", "text/javascript; charset=utf-8", SCRIPT),
    ("console.css", "text/css; charset=utf-8", STYLE),
];

/// The console's page
///
/// A status page built into the binary (it fetches nothing from
/// elsewhere). It holds no data: it reads `/api/v1/status` and
/// `/api/v1/query` with the token the user gives it.
#[utoipa::path(
    get,
    path = "/",
    tag = "console",
    responses((status = 200, description = "The page", body = String, content_type = "text/html"))
)]
pub(super) async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        INDEX,
    )
        .into_response()
}

/// One of the console page's assets
#[utoipa::path(
    get,
    path = "/console/{asset}",
    tag = "console",
    params(("asset" = String, Path, description = "`console.js` or `console.css`")),
    responses(
        (status = 200, description = "The asset", content(
            (String = "text/javascript"),
            (String = "text/css"),
        )),
        (status = 404, description = "No such asset", body = ApiError),
    )
)]
pub(super) async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, ct, body)) => (
            [
                (header::CONTENT_TYPE, *ct),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            *body,
        )
            .into_response(),
        None => super::state::json_error(StatusCode::NOT_FOUND, format!("no asset {name}")),
    }
}
