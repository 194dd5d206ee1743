//! The HTTP side of [`crate::frontend::auth`]: requests pass one router
//! layer, [`require`], which picks the access a request needs from its
//! method (`GET`/`HEAD` read, anything else writes), so a route added
//! later is protected by default. `/health` is always open; `/metrics` is
//! open unless [`HttpAuth::metrics_public`] is off.

use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

pub use crate::frontend::auth::{authorization_token, Access, Tokens, TOKEN_LEN_MAX};

/// The HTTP side's settings.
#[derive(Clone, Debug)]
pub struct HttpAuth {
    /// The tokens a request must present (none: open).
    pub tokens: Tokens,
    /// Serve `/metrics` without a token.
    pub metrics_public: bool,
}

impl HttpAuth {
    /// What the request's credential grants (`None`: none, or a wrong one).
    pub fn granted(&self, req: &Request) -> Option<Access> {
        credential(req).and_then(|c| self.tokens.check(&c))
    }
}

/// The credential of a request, the ways InfluxDB clients send it:
/// `Authorization: Token T`, `Bearer T`, `Basic base64(user:T)`, or v1's
/// `?u=user&p=T`.
pub fn credential(req: &Request) -> Option<Vec<u8>> {
    if let Some(v) = req.headers().get(header::AUTHORIZATION) {
        return authorization_token(v.to_str().ok()?);
    }
    let q = req.uri().query()?;
    url_param(q, "p").map(String::into_bytes)
}

/// One percent-decoded query parameter.
fn url_param(query: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// What a request needs: `None` for the open routes.
fn needed(auth: &HttpAuth, req: &Request) -> Option<Access> {
    route_access(req.uri().path(), req.method(), auth.metrics_public)
}

/// What a request to `path` with `method` needs when tokens are
/// configured: `None` for the open routes. The OpenAPI document's
/// security requirements come from here too.
pub fn route_access(path: &str, method: &Method, metrics_public: bool) -> Option<Access> {
    match path {
        // The console's page and assets hold no data (the page reads the
        // API with the user's token).
        "/health" | "/" | "/ping" => None,
        // 1.x's probes (SHOW/CREATE DATABASE: nothing is changed).
        "/query" => Some(Access::Read),
        p if p.starts_with("/console/") => None,
        "/metrics" if metrics_public => None,
        // Queries only (statements that change anything are refused).
        "/api/v1/sql" => Some(Access::Read),
        _ if matches!(*method, Method::GET | Method::HEAD) => Some(Access::Read),
        _ => Some(Access::Write),
    }
}

/// The router layer every HTTP request passes: `401` for a missing or
/// wrong token, `403` for a read-only token on a write; the handler does
/// not run, so nothing is applied.
pub async fn require(State(auth): State<Arc<HttpAuth>>, req: Request, next: Next) -> Response {
    let Some(need) = needed(&auth, &req) else {
        return next.run(req).await;
    };
    if auth.tokens.is_open() {
        return next.run(req).await;
    }
    let v1 = req.uri().path() == "/write";
    match auth.granted(&req) {
        Some(a) if a >= need => next.run(req).await,
        Some(_) => refuse(StatusCode::FORBIDDEN, "this token is read-only", v1),
        None => {
            let mut r = refuse(
                StatusCode::UNAUTHORIZED,
                "missing or wrong token (send Authorization: Token <token>)",
                v1,
            );
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Token, Basic realm=\"telestore\""),
            );
            r
        }
    }
}

/// A request refused by [`require`] (`/write` answers InfluxDB 1.x's
/// `{"error"}` instead).
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct AuthError {
    /// `unauthorized` (no or a wrong token) or `forbidden` (a read-only
    /// token on a write).
    pub code: &'static str,
    /// What to do about it.
    pub message: &'static str,
}

fn refuse(status: StatusCode, message: &'static str, v1: bool) -> Response {
    if v1 {
        let body = super::write::InfluxV1Error {
            error: message.into(),
        };
        return (status, axum::Json(body)).into_response();
    }
    let code = if status == StatusCode::FORBIDDEN {
        "forbidden"
    } else {
        "unauthorized"
    };
    (status, axum::Json(AuthError { code, message })).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(auth: Option<&str>, uri: &str) -> Request {
        let mut b = axum::http::Request::builder().uri(uri);
        if let Some(a) = auth {
            b = b.header(header::AUTHORIZATION, a);
        }
        b.body(axum::body::Body::empty()).unwrap()
    }

    #[test]
    fn credentials_as_influxdb_clients_send_them() {
        let c = |a, u| credential(&req(a, u));
        assert_eq!(c(Some("Token abc"), "/x"), Some(b"abc".to_vec()));
        assert_eq!(c(Some("bearer abc"), "/x"), Some(b"abc".to_vec()));
        // "user:abc" and "abc" (no password: the user name is the token).
        assert_eq!(c(Some("Basic dXNlcjphYmM="), "/x"), Some(b"abc".to_vec()));
        assert_eq!(c(Some("Basic YWJj"), "/x"), Some(b"abc".to_vec()));
        assert_eq!(c(Some("Basic !!"), "/x"), None);
        assert_eq!(c(None, "/write?db=a&u=me&p=a%2Bc"), Some(b"a+c".to_vec()));
        assert_eq!(c(None, "/write?db=a"), None);
    }
}
