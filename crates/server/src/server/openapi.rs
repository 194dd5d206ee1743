//! The HTTP API's OpenAPI 3.1 document, generated from the routes
//! themselves: every route is registered through `utoipa_axum`'s
//! `routes!` (see [`super::router`]), which takes each handler's
//! `#[utoipa::path]` description with it, so a route cannot exist without
//! its entry. Who may call what comes from [`route_access`], the rule the
//! auth layer applies. Served at `GET /api/v1/openapi.json` and checked in
//! as `docs/openapi.json` (a test compares the two).

use super::auth::{route_access, Access, AuthError};
use super::state::ApiError;
use axum::http::{header, Method};
use axum::response::IntoResponse;
use std::sync::OnceLock;
use utoipa::openapi::path::Operation;
use utoipa::openapi::response::Response;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{Content, OpenApi, Ref};

const DESCRIPTION: &str = "\
The HTTP API of telestore, a time-series store for device telemetry: \
line-protocol writes (InfluxDB 1.x and 2.x compatible), queries and \
exports as Arrow IPC streams, JSON, CSV or text, SQL, table management, \
health, status and Prometheus metrics.

With no token configured (`serve` without `--token`/`--token-file`, the \
loopback default) every route is open. With tokens, a route needs a \
read-only or a read-write token as its `security` says, sent as \
`Authorization: Token <token>`, `Bearer <token>` or Basic (the token as \
the password); `/health`, the console page and its assets are always \
open, `/metrics` unless `--metrics-public false` is given.";

/// The document's fixed parts; the paths come from the router.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(title = "telestore", description = DESCRIPTION, license(name = "Apache-2.0")),
    tags(
        (name = "write", description = "Line-protocol writes"),
        (name = "query", description = "Queries, exports and SQL"),
        (name = "tables", description = "Tables, devices and flushes"),
        (name = "status", description = "Health, status, metrics and this document"),
        (name = "console", description = "The built-in web console"),
    ),
    components(schemas(AuthError, ApiError))
)]
pub(super) struct ApiDoc;

/// The security scheme names.
const SCHEMES: [&str; 3] = ["token", "bearer", "basic"];

/// This document.
#[utoipa::path(
    get,
    path = "/api/v1/openapi.json",
    tag = "status",
    responses((status = 200, description = "The OpenAPI document", content(("application/json"))))
)]
pub(super) async fn openapi_json() -> axum::response::Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        document_json(),
    )
        .into_response()
}

/// The document, as served and checked in (pretty JSON, a newline at
/// the end).
pub fn document_json() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut text = document()
            .to_pretty_json()
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
        text.push('\n');
        text
    })
}

/// The document: the routes' descriptions and the auth rules.
pub fn document() -> OpenApi {
    let (_, mut doc) = super::router::routes().split_for_parts();
    add_security(&mut doc);
    doc
}

fn add_security(doc: &mut OpenApi) {
    let components = doc.components.get_or_insert_with(Default::default);
    let token = ApiKeyValue::with_description(
        "Authorization",
        "`Token <token>` (InfluxDB's scheme; Bearer and Basic are taken too)",
    );
    components.add_security_scheme("token", SecurityScheme::ApiKey(ApiKey::Header(token)));
    let bearer = HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build();
    components.add_security_scheme("bearer", SecurityScheme::Http(bearer));
    let basic = HttpBuilder::new()
        .scheme(HttpAuthScheme::Basic)
        .description(Some("The token as the password (or as the user name)"))
        .build();
    components.add_security_scheme("basic", SecurityScheme::Http(basic));
    for (path, item) in doc.paths.paths.iter_mut() {
        let ops = [
            (Method::GET, &mut item.get),
            (Method::POST, &mut item.post),
            (Method::PUT, &mut item.put),
            (Method::DELETE, &mut item.delete),
            (Method::PATCH, &mut item.patch),
        ];
        for (method, op) in ops {
            if let Some(op) = op {
                secure(path, &method, op);
            }
        }
    }
}

/// An operation's security and its 401/403 answers.
fn secure(path: &str, method: &Method, op: &mut Operation) {
    let any_token = || SCHEMES.map(|s| SecurityRequirement::new(s, Vec::<String>::new()));
    let need = route_access(path, method, false);
    let open_by_default = route_access(path, method, true).is_none();
    let (security, note) = match need {
        None => (Vec::new(), "Always open."),
        Some(_) if open_by_default => {
            let mut v = any_token().to_vec();
            v.push(SecurityRequirement::default());
            (
                v,
                "Open unless the daemon runs with `--metrics-public false`; then any token.",
            )
        }
        Some(Access::Read) => (any_token().to_vec(), "Any token (read-only or read-write)."),
        Some(Access::Write) => (any_token().to_vec(), "A read-write token."),
    };
    op.security = Some(security);
    let text = op.description.get_or_insert_with(String::new);
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str("**Access:** ");
    text.push_str(note);
    let Some(need) = need else { return };
    let body = if path == "/write" {
        "InfluxV1Error"
    } else {
        "AuthError"
    };
    let responses = &mut op.responses.responses;
    let missing = json_answer("No token or a wrong one (tokens are configured)", body);
    responses.insert("401".into(), missing.into());
    if need == Access::Write {
        responses.insert("403".into(), json_answer("A read-only token", body).into());
    }
}

/// A response described by `description` whose body is JSON of the
/// component schema `schema`.
pub(super) fn json_answer(description: &str, schema: &str) -> Response {
    let content = Content::new(Some(Ref::from_schema_name(schema)));
    ResponseBuilder::new()
        .description(description)
        .content("application/json", content)
        .build()
}
