//! The one library error type. Every variant says *where* something went
//! wrong: which file, which offset, which argument.

use std::path::PathBuf;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors returned by the telestore library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A checksum did not match: the bytes at `offset` in `file` are corrupt.
    #[error("checksum mismatch in {file} at offset {offset}: expected {expected:#010x}, found {actual:#010x}")]
    ChecksumMismatch {
        /// The file.
        file: PathBuf,
        /// Where the checksummed bytes start in it.
        offset: u64,
        /// The checksum the file records.
        expected: u32,
        /// The checksum of the bytes there.
        actual: u32,
    },
    /// Structurally invalid bytes (bad magic, impossible length, ...).
    #[error("corrupt {what} in {file} at offset {offset}")]
    Corrupt {
        /// What was expected there.
        what: String,
        /// The file.
        file: PathBuf,
        /// Where in it.
        offset: u64,
    },
    /// A file or record carries a version this build cannot read.
    #[error("unsupported {what} version {version}")]
    UnsupportedVersion {
        /// The format.
        what: &'static str,
        /// The version found.
        version: u32,
    },
    /// A previous fsync or write failed; the write path is stopped until the
    /// store is reopened (acknowledging more writes could lose data silently).
    #[error("write path poisoned after an I/O failure ({cause}); reopen the store")]
    Poisoned {
        /// The failure that stopped it.
        cause: String,
    },
    /// The store is overloaded; retry after the hinted delay.
    #[error("busy, retry after {retry_after_ms} ms")]
    Busy {
        /// How long to wait before trying again.
        retry_after_ms: u64,
    },
    /// Caller supplied invalid input (argument, schema, batch ...).
    #[error("invalid {what}: {message}")]
    InvalidInput {
        /// The argument or value to blame (a flag name starts with `--`).
        what: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// No such table: its name quoted, and the tables there are.
    #[error("unknown table {0}")]
    UnknownTable(String),
    /// Table exists with a different schema.
    #[error("table {name:?} already exists with a different schema: {detail}")]
    SchemaConflict {
        /// The table.
        name: String,
        /// How the schemas differ.
        detail: String,
    },
    /// A decoder was given bytes that do not form a valid value.
    #[error("cannot decode {what}: {message}")]
    Decode {
        /// What was being decoded.
        what: &'static str,
        /// Why it does not decode.
        message: String,
    },
    /// The requested I/O backend is not available on this machine.
    #[error("io backend {backend} unavailable: {reason}")]
    BackendUnavailable {
        /// The backend asked for (`uring`).
        backend: &'static str,
        /// Why it cannot run here.
        reason: String,
    },
    /// The data directory is locked by another process.
    #[error("data directory {dir} is locked by another process")]
    Locked {
        /// The directory.
        dir: PathBuf,
    },
    /// The store is open read-only (`Options::read_only`): `what` would
    /// have changed it.
    #[error("{what}: the store at {dir} is open read-only")]
    ReadOnly {
        /// The operation refused.
        what: &'static str,
        /// The store's directory.
        dir: PathBuf,
    },
    /// The store has been closed.
    #[error("store is closed")]
    Closed,
    /// A query went past one of the limits every query runs under (its
    /// time, the memory all queries share, the size of one value).
    #[error("query stopped: {what} — {message}")]
    QueryLimit {
        /// The limit: [`QUERY_TIMEOUT`], [`QUERY_CANCELLED`], `memory`,
        /// `value size`.
        what: &'static str,
        /// Its value and what to change.
        message: String,
    },
    /// An operating-system I/O error, with the path it concerned.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory (or, in angle brackets, what it was for).
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

/// How many variants [`Error`] has (see [`Error::variant_index`]).
const VARIANTS: usize = 15;

/// [`Error::QueryLimit`]'s `what` when a query ran past its time limit.
pub const QUERY_TIMEOUT: &str = "timeout";
/// [`Error::QueryLimit`]'s `what` when a query was cancelled.
pub const QUERY_CANCELLED: &str = "cancelled";

/// What kind of failure an [`Error`] is, for a client: the one
/// classification every frontend maps to its protocol, each in exactly one
/// place (HTTP status and `Retry-After`, gRPC code, the binary protocol's
/// error code, MQTT's refuse/retry/stop). docs/errors.md has the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// The request is wrong; `arg` names the argument when one is to blame.
    BadRequest {
        /// The argument to blame, when one is.
        arg: Option<&'static str>,
    },
    /// What the request names does not exist (a table).
    NotFound,
    /// The request contradicts what exists (a table with another schema).
    Conflict,
    /// The store is stalling writes; the same request may succeed later.
    Busy {
        /// How long to wait.
        retry_after_ms: u64,
    },
    /// The store cannot serve writes now (its write path stopped, it is
    /// closing, its directory is locked, its I/O backend is missing).
    Unavailable {
        /// How long to wait.
        retry_after_ms: u64,
    },
    /// The store is open read-only and this request writes.
    ReadOnly,
    /// A query ran past its time limit.
    Deadline,
    /// A query was cancelled (its client went away).
    Cancelled,
    /// A query needed more memory, spill or result size than it may have.
    Exhausted,
    /// Data on disk failed its checksum or does not decode.
    Corrupt,
    /// Anything else: an I/O error or a bug.
    Internal,
}

/// How long a client should wait before retrying a request refused because
/// the write path stopped or the store is closing: a supervisor restarts
/// the daemon in about that time.
pub const UNAVAILABLE_RETRY_AFTER_MS: u64 = 30_000;

impl ErrorClass {
    /// Whether the same request can succeed if sent again later.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorClass::Busy { .. } | ErrorClass::Unavailable { .. } | ErrorClass::ReadOnly
        )
    }

    /// Whether the server should log it (the operator's business, not
    /// only the client's).
    pub fn should_log(self) -> bool {
        matches!(
            self,
            ErrorClass::Unavailable { .. } | ErrorClass::Corrupt | ErrorClass::Internal
        )
    }

    /// The wait a retryable class asks for, in milliseconds.
    pub fn retry_after_ms(self) -> Option<u64> {
        match self {
            ErrorClass::Busy { retry_after_ms } | ErrorClass::Unavailable { retry_after_ms } => {
                Some(retry_after_ms)
            }
            ErrorClass::ReadOnly => Some(UNAVAILABLE_RETRY_AFTER_MS),
            _ => None,
        }
    }
}

impl Error {
    /// This error's [`ErrorClass`]: what a frontend tells its client.
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::InvalidInput { what, .. } => ErrorClass::BadRequest { arg: Some(what) },
            Error::Decode { .. } | Error::UnsupportedVersion { .. } => {
                ErrorClass::BadRequest { arg: None }
            }
            Error::UnknownTable(_) => ErrorClass::NotFound,
            Error::SchemaConflict { .. } => ErrorClass::Conflict,
            Error::Busy { retry_after_ms } => ErrorClass::Busy {
                retry_after_ms: *retry_after_ms,
            },
            Error::Poisoned { .. }
            | Error::Closed
            | Error::Locked { .. }
            | Error::BackendUnavailable { .. } => ErrorClass::Unavailable {
                retry_after_ms: UNAVAILABLE_RETRY_AFTER_MS,
            },
            Error::ReadOnly { .. } => ErrorClass::ReadOnly,
            Error::QueryLimit { what, .. } => match *what {
                QUERY_TIMEOUT => ErrorClass::Deadline,
                QUERY_CANCELLED => ErrorClass::Cancelled,
                _ => ErrorClass::Exhausted,
            },
            Error::ChecksumMismatch { .. } | Error::Corrupt { .. } => ErrorClass::Corrupt,
            Error::Io { .. } => ErrorClass::Internal,
        }
    }

    /// One error of every variant (for the table-driven tests of each
    /// protocol's mapping); [`Error::variant_index`] proves it complete.
    #[doc(hidden)]
    pub fn one_of_each() -> Vec<Error> {
        let v = vec![
            Error::ChecksumMismatch {
                file: "f".into(),
                offset: 1,
                expected: 2,
                actual: 3,
            },
            Error::corrupt("block", "f", 4),
            Error::UnsupportedVersion {
                what: "ticket",
                version: 9,
            },
            Error::Poisoned {
                cause: "EIO".into(),
            },
            Error::Busy {
                retry_after_ms: 1_500,
            },
            Error::invalid("--from", "not a time"),
            Error::UnknownTable("t".into()),
            Error::SchemaConflict {
                name: "t".into(),
                detail: "fields differ".into(),
            },
            Error::decode("ticket", "not JSON"),
            Error::BackendUnavailable {
                backend: "uring",
                reason: "blocked".into(),
            },
            Error::Locked { dir: "d".into() },
            Error::ReadOnly {
                what: "write",
                dir: "d".into(),
            },
            Error::Closed,
            Error::QueryLimit {
                what: QUERY_TIMEOUT,
                message: "300 s".into(),
            },
            Error::QueryLimit {
                what: QUERY_CANCELLED,
                message: "the client left".into(),
            },
            Error::QueryLimit {
                what: "memory",
                message: "1 GiB".into(),
            },
            Error::io("f", std::io::Error::other("boom")),
        ];
        let mut seen: Vec<usize> = v.iter().map(Error::variant_index).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), VARIANTS, "one_of_each misses a variant");
        v
    }

    /// The variant's position; the match has no wildcard, so a new variant
    /// does not compile until it is counted here and in [`Error::one_of_each`].
    fn variant_index(&self) -> usize {
        match self {
            Error::ChecksumMismatch { .. } => 0,
            Error::Corrupt { .. } => 1,
            Error::UnsupportedVersion { .. } => 2,
            Error::Poisoned { .. } => 3,
            Error::Busy { .. } => 4,
            Error::InvalidInput { .. } => 5,
            Error::UnknownTable(_) => 6,
            Error::SchemaConflict { .. } => 7,
            Error::Decode { .. } => 8,
            Error::BackendUnavailable { .. } => 9,
            Error::Locked { .. } => 10,
            Error::ReadOnly { .. } => 11,
            Error::Closed => 12,
            Error::QueryLimit { .. } => 13,
            Error::Io { .. } => 14,
        }
    }

    /// Is this the disk (or its quota) being full, here or as the cause of
    /// a stopped write path?
    pub fn is_disk_full(&self) -> bool {
        match self {
            Error::Io { source, .. } => {
                source.kind() == std::io::ErrorKind::StorageFull
                    || source.kind() == std::io::ErrorKind::QuotaExceeded
                    || source.raw_os_error() == Some(28)
            }
            Error::Poisoned { cause } => cause.contains("No space left on device"),
            _ => false,
        }
    }

    /// The error as a network API (HTTP, Flight) tells it: an invalid
    /// argument named by its CLI flag (`--group-by`, the query plan's
    /// errors) names the request parameter (`group_by`), in its message
    /// too. Any other error (SQL text, a daemon setting) is as displayed.
    pub fn api_text(&self) -> String {
        match self {
            Error::InvalidInput { what, .. } if what.starts_with("--") => {
                api_names(&self.to_string())
            }
            _ => self.to_string(),
        }
    }

    /// Wrap an `std::io::Error` with the path it concerned.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Shorthand for [`Error::InvalidInput`].
    pub fn invalid(what: &'static str, message: impl Into<String>) -> Self {
        Error::InvalidInput {
            what,
            message: message.into(),
        }
    }

    /// Shorthand for [`Error::Corrupt`].
    pub fn corrupt(what: impl Into<String>, file: impl Into<PathBuf>, offset: u64) -> Self {
        Error::Corrupt {
            what: what.into(),
            file: file.into(),
            offset,
        }
    }

    /// Shorthand for [`Error::Decode`].
    pub fn decode(what: &'static str, message: impl Into<String>) -> Self {
        Error::Decode {
            what,
            message: message.into(),
        }
    }

    /// A checksum failure found by a pure decoder, which knows neither the
    /// file nor where its slice sits in it: [`Error::at`] fills both in.
    pub fn checksum(relative_offset: u64, expected: u32, actual: u32) -> Self {
        Error::ChecksumMismatch {
            file: PathBuf::new(),
            offset: relative_offset,
            expected,
            actual,
        }
    }

    /// Place a decoder's error in a file: [`Error::Decode`] becomes
    /// [`Error::Corrupt`] at `base`; a [`Error::ChecksumMismatch`] or
    /// [`Error::Corrupt`] without a file gets `file` and its offset moved by
    /// `base`. Other variants pass through.
    pub fn at(self, file: impl Into<PathBuf>, base: u64) -> Self {
        match self {
            Error::Decode { what, message } => Error::Corrupt {
                what: format!("{what} ({message})"),
                file: file.into(),
                offset: base,
            },
            Error::ChecksumMismatch {
                file: f,
                offset,
                expected,
                actual,
            } if f.as_os_str().is_empty() => Error::ChecksumMismatch {
                file: file.into(),
                offset: base + offset,
                expected,
                actual,
            },
            Error::Corrupt {
                what,
                file: f,
                offset,
            } if f.as_os_str().is_empty() => Error::Corrupt {
                what,
                file: file.into(),
                offset: base + offset,
            },
            other => other,
        }
    }
}

/// `--name-with-dashes` written as `name_with_dashes` wherever it occurs.
fn api_names(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("--") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let n = after
            .find(|c: char| !(c.is_ascii_lowercase() || c == '-'))
            .unwrap_or(after.len());
        let flag = n > 0 && after.starts_with(|c: char| c.is_ascii_lowercase());
        if flag {
            out.push_str(&after[..n].replace('-', "_"));
        } else {
            out.push_str("--");
            out.push_str(&after[..n]);
        }
        rest = &after[n..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod api_text_tests {
    use super::*;

    #[test]
    fn flags_become_parameter_names() {
        let e = Error::invalid(
            "--group-by",
            "give only one of --device, --devices and --where",
        );
        assert_eq!(
            e.api_text(),
            "invalid group_by: give only one of device, devices and where"
        );
        assert_eq!(api_names("a -- b --x"), "a -- b x");
        // A daemon setting named for its operator stays a flag.
        let e = Error::QueryLimit {
            what: "timeout",
            message: "past its limit (serve --query-timeout-s)".into(),
        };
        assert!(e.api_text().contains("(serve --query-timeout-s)"));
    }
}
