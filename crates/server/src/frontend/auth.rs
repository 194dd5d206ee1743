//! Who may do what over the daemon's network protocols, shared by every
//! frontend (HTTP, Flight, the binary protocol). A token is read-only
//! (queries, exports, table listings) or read-write (also writes, table
//! creation, flushes). Tokens come from `--token` (one read-write token)
//! and from a token file (`--token-file`), one per line:
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
//! a guess was right. The HTTP layer that applies them is
//! `crate::server::auth`.

use base64::Engine as _;
use std::path::Path;
use std::sync::Arc;
use subtle::ConstantTimeEq;
use telestore_engine::error::{Error, Result};

/// What a token allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// Queries, exports, listings.
    Read,
    /// Also writes, table creation and flushes.
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
}
