//! Who may do what over the daemon's network protocols. A token is
//! read-only (queries, exports, table listings) or read-write (also
//! writes, table creation, flushes). Tokens come from `--token` (one
//! read-write token) and from a token file (`--token-file`), one per line:
//!
//! ```text
//! # comment
//! rw 3f1c…   a writer
//! ro 9b2e…   a dashboard
//! ```
//!
//! With no token configured every request is allowed (the loopback
//! default). Presented tokens are compared with every configured token in
//! constant time ([`subtle`]), so the time taken does not tell how much of
//! a guess was right. HTTP requests pass one router layer, [`require`],
//! which picks the access a request needs from its method (`GET`/`HEAD`
//! read, anything else writes), so a route added later is protected by
//! default. `/health` is always open; `/metrics` is open unless
//! [`HttpAuth::metrics_public`] is off.

use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use std::path::Path;
use std::sync::Arc;
use subtle::ConstantTimeEq;
use telestore_engine::error::{Error, Result};

/// What a token allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    Read,
    Write,
}

impl Access {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "ro" | "read" => Some(Access::Read),
            "rw" | "write" => Some(Access::Write),
            _ => None,
        }
    }
}

/// Longest token accepted, configured or presented.
pub const TOKEN_LEN_MAX: usize = 512;

/// The configured tokens.
#[derive(Clone, Debug, Default)]
pub struct Tokens {
    entries: Arc<Vec<(Vec<u8>, Access)>>,
}

impl Tokens {
    /// True when no token is configured: everything is allowed.
    pub fn is_open(&self) -> bool {
        self.entries.is_empty()
    }

    /// Add one token.
    pub fn with(mut self, token: &str, access: Access) -> Result<Self> {
        check_token_text(token)?;
        Arc::make_mut(&mut self.entries).push((token.as_bytes().to_vec(), access));
        Ok(self)
    }

    /// One read-write token (the `--token` flag).
    pub fn single(token: &str) -> Result<Self> {
        Tokens::default().with(token, Access::Write)
    }

    /// Add the tokens of a token file (see the module comment).
    pub fn with_file(mut self, path: &Path) -> Result<Self> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(file.clone(), e))?;
        warn_if_readable_by_others(path);
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut words = line.split_whitespace();
            let (kind, token) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
            let bad =
                |m: String| Error::invalid("token file", format!("{file} line {}: {m}", n + 1));
            let access = Access::parse(kind)
                .ok_or_else(|| bad(format!("{kind:?}: a line is `rw TOKEN` or `ro TOKEN`")))?;
            check_token_text(token).map_err(|e| bad(e.to_string()))?;
            self = self.with(token, access)?;
        }
        if self.is_open() {
            return Err(Error::invalid(
                "token file",
                format!("{file} holds no token"),
            ));
        }
        Ok(self)
    }

    /// The access `presented` grants, if any. Every configured token is
    /// compared, in constant time for tokens of its length.
    pub fn check(&self, presented: &[u8]) -> Option<Access> {
        let mut best = None;
        for (t, access) in self.entries.iter() {
            if bool::from(t.as_slice().ct_eq(presented)) {
                best = best.max(Some(*access));
            }
        }
        best
    }

    /// Whether `presented` may do what needs `need` (always, when open).
    pub fn allows(&self, presented: &[u8], need: Access) -> bool {
        self.is_open() || self.check(presented).is_some_and(|a| a >= need)
    }
}

fn check_token_text(t: &str) -> Result<()> {
    let ok = !t.is_empty() && t.len() <= TOKEN_LEN_MAX && t.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            "token",
            format!("a token is 1..={TOKEN_LEN_MAX} printable ASCII characters, no spaces"),
        ))
    }
}

#[cfg(unix)]
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(m) = std::fs::metadata(path) {
        if m.permissions().mode() & 0o077 != 0 {
            tracing::warn!(
                "token file {} is readable by other users (chmod 600 it)",
                path.display()
            );
        }
    }
}

#[cfg(not(unix))]
fn warn_if_readable_by_others(_: &Path) {}

/// The HTTP side's settings.
#[derive(Clone, Debug)]
pub struct HttpAuth {
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

/// The token in an `Authorization` header value: `Token T`, `Bearer T`,
/// or `Basic base64(user:T)` (the password; the user when it is empty).
/// Shared by HTTP and Flight.
pub fn authorization_token(value: &str) -> Option<Vec<u8>> {
    let (scheme, rest) = value.trim().split_once(' ')?;
    let rest = rest.trim();
    match scheme.to_ascii_lowercase().as_str() {
        "token" | "bearer" => Some(rest.as_bytes().to_vec()),
        "basic" => {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(rest)
                .ok()?;
            let (user, pass) = match raw.iter().position(|&b| b == b':') {
                Some(i) => (&raw[..i], &raw[i + 1..]),
                None => (&raw[..], &raw[..0]),
            };
            Some(if pass.is_empty() { user } else { pass }.to_vec())
        }
        _ => None,
    }
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

    #[test]
    fn token_file_grants_what_it_says() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tokens");
        std::fs::write(&p, "# who\nrw writer-1\n\nro reader-1  dashboards\n").unwrap();
        let t = Tokens::default().with_file(&p).unwrap();
        assert_eq!(t.check(b"writer-1"), Some(Access::Write));
        assert_eq!(t.check(b"reader-1"), Some(Access::Read));
        assert_eq!(t.check(b"reader-"), None);
        assert_eq!(t.check(b""), None);
        assert!(t.allows(b"writer-1", Access::Read));
        assert!(!t.allows(b"reader-1", Access::Write));
        std::fs::write(&p, "admin x\n").unwrap();
        let e = Tokens::default().with_file(&p).unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
        std::fs::write(&p, "# nothing\n").unwrap();
        assert!(Tokens::default().with_file(&p).is_err());
        assert!(Tokens::single("has space").is_err());
        assert!(Tokens::default().allows(b"", Access::Write), "open");
    }

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
