//! Each protocol's answer to an engine error, decided in one place from
//! [`Error::class`] (GreptimeDB's `StatusCode` → HTTP/gRPC mapping is the
//! model). The frontends call these and nothing else; docs/errors.md is
//! the table, and the test below runs every error variant through every
//! protocol.
//!
//! - HTTP: a status, and `Retry-After` (seconds, at least 1) for what a
//!   client may retry.
//! - gRPC (Arrow Flight): a `tonic::Code`.
//! - The binary ingest protocol: an error code and whether it closes the
//!   connection ([`wire`]; version-1 clients get `row_count_mismatch` in
//!   place of `invalid`, which they predate).
//! - MQTT: refuse the message (dead-letter it), retry it in place, or stop
//!   the session (the broker redelivers what was not acknowledged).

use axum::http::StatusCode;
use telestore_engine::error::{Error, ErrorClass};

use crate::ingest::proto::ErrorCode;

/// HTTP `499`: the client closed the request before the answer (nginx's
/// code; nobody reads it, but logs and metrics do).
const CLIENT_CLOSED: u16 = 499;

/// The HTTP status of `class`, and its `Retry-After` in seconds.
pub fn http(class: ErrorClass) -> (StatusCode, Option<u64>) {
    let status = match class {
        ErrorClass::BadRequest { .. } => StatusCode::BAD_REQUEST,
        ErrorClass::NotFound => StatusCode::NOT_FOUND,
        ErrorClass::Conflict => StatusCode::CONFLICT,
        ErrorClass::Busy { .. } | ErrorClass::Unavailable { .. } | ErrorClass::ReadOnly => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        ErrorClass::Deadline => StatusCode::GATEWAY_TIMEOUT,
        ErrorClass::Cancelled => {
            StatusCode::from_u16(CLIENT_CLOSED).unwrap_or(StatusCode::BAD_REQUEST)
        }
        ErrorClass::Exhausted => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorClass::Corrupt | ErrorClass::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let retry_s = class.retry_after_ms().map(|ms| ms.div_ceil(1000).max(1));
    (status, retry_s)
}

/// The `code` word of an InfluxDB-shaped error body (`/write`,
/// `/api/v2/write`) for `class`.
pub fn influx_code(class: ErrorClass) -> &'static str {
    match class {
        ErrorClass::BadRequest { .. } => "invalid",
        ErrorClass::NotFound => "not found",
        ErrorClass::Conflict => "conflict",
        ErrorClass::Busy { .. } | ErrorClass::Unavailable { .. } | ErrorClass::ReadOnly => {
            "unavailable"
        }
        ErrorClass::Deadline | ErrorClass::Cancelled | ErrorClass::Exhausted => "invalid",
        ErrorClass::Corrupt | ErrorClass::Internal => "internal error",
    }
}

/// The gRPC code of `class` (Arrow Flight and Flight SQL).
pub fn grpc(class: ErrorClass) -> tonic::Code {
    match class {
        ErrorClass::BadRequest { .. } => tonic::Code::InvalidArgument,
        ErrorClass::NotFound => tonic::Code::NotFound,
        ErrorClass::Conflict => tonic::Code::AlreadyExists,
        ErrorClass::Busy { .. } | ErrorClass::Unavailable { .. } => tonic::Code::Unavailable,
        ErrorClass::ReadOnly => tonic::Code::FailedPrecondition,
        ErrorClass::Deadline => tonic::Code::DeadlineExceeded,
        ErrorClass::Cancelled => tonic::Code::Cancelled,
        ErrorClass::Exhausted => tonic::Code::ResourceExhausted,
        ErrorClass::Corrupt => tonic::Code::DataLoss,
        ErrorClass::Internal => tonic::Code::Internal,
    }
}

/// A `tonic::Status` for an engine error.
pub fn grpc_status(e: &Error) -> tonic::Status {
    tonic::Status::new(grpc(e.class()), e.api_text())
}

/// The binary protocol's answer to `class` on a connection whose
/// handshake said `version`: the code, and whether it is fatal.
pub fn wire(class: ErrorClass, version: u16) -> (ErrorCode, bool) {
    match class {
        ErrorClass::BadRequest { .. } | ErrorClass::Conflict if version < 2 => {
            (ErrorCode::RowCountMismatch, false)
        }
        ErrorClass::BadRequest { .. } | ErrorClass::Conflict => (ErrorCode::Invalid, false),
        ErrorClass::NotFound => (ErrorCode::UnknownTable, true),
        ErrorClass::Busy { .. } => (ErrorCode::Busy, false),
        ErrorClass::Unavailable { .. } | ErrorClass::ReadOnly => (ErrorCode::Unavailable, true),
        ErrorClass::Deadline
        | ErrorClass::Cancelled
        | ErrorClass::Exhausted
        | ErrorClass::Corrupt
        | ErrorClass::Internal => (ErrorCode::Internal, false),
    }
}

/// What the MQTT subscriber does with a message the engine refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MqttAction {
    /// The message itself is wrong: dead-letter it and go on.
    Refuse,
    /// The store asks for a pause: wait this long and write it again.
    Retry {
        /// How long to wait.
        after_ms: u64,
    },
    /// The store cannot take writes: end the session unacknowledged (the
    /// broker redelivers) and reconnect later.
    Stop,
}

/// The MQTT subscriber's answer to `class`.
pub fn mqtt(class: ErrorClass) -> MqttAction {
    match class {
        ErrorClass::BadRequest { .. } | ErrorClass::NotFound | ErrorClass::Conflict => {
            MqttAction::Refuse
        }
        ErrorClass::Busy { retry_after_ms } => MqttAction::Retry {
            after_ms: retry_after_ms,
        },
        ErrorClass::Unavailable { .. }
        | ErrorClass::ReadOnly
        | ErrorClass::Deadline
        | ErrorClass::Cancelled
        | ErrorClass::Exhausted
        | ErrorClass::Corrupt
        | ErrorClass::Internal => MqttAction::Stop,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row of the table: (HTTP status, Retry-After s, gRPC code, wire
    /// code v2, fatal, wire code v1, MQTT).
    type Row = (
        u16,
        Option<u64>,
        tonic::Code,
        ErrorCode,
        bool,
        ErrorCode,
        MqttAction,
    );

    /// Every variant through every protocol.
    #[test]
    #[rustfmt::skip]
    fn every_error_maps_once_per_protocol() {
        use tonic::Code as G;
        use ErrorCode as W;
        use MqttAction as M;
        let s = |c: u16| StatusCode::from_u16(c).unwrap();
        let expected: Vec<Row> = vec![
            // ChecksumMismatch, Corrupt
            (500, None,     G::DataLoss,           W::Internal,     false, W::Internal,         M::Stop),
            (500, None,     G::DataLoss,           W::Internal,     false, W::Internal,         M::Stop),
            // UnsupportedVersion (of a client's document)
            (400, None,     G::InvalidArgument,    W::Invalid,      false, W::RowCountMismatch, M::Refuse),
            // Poisoned
            (503, Some(30), G::Unavailable,        W::Unavailable,  true,  W::Unavailable,      M::Stop),
            // Busy (1.5 s: Retry-After rounds up)
            (503, Some(2),  G::Unavailable,        W::Busy,         false, W::Busy,             M::Retry { after_ms: 1_500 }),
            // InvalidInput
            (400, None,     G::InvalidArgument,    W::Invalid,      false, W::RowCountMismatch, M::Refuse),
            // UnknownTable
            (404, None,     G::NotFound,           W::UnknownTable, true,  W::UnknownTable,     M::Refuse),
            // SchemaConflict
            (409, None,     G::AlreadyExists,      W::Invalid,      false, W::RowCountMismatch, M::Refuse),
            // Decode (of a client's document)
            (400, None,     G::InvalidArgument,    W::Invalid,      false, W::RowCountMismatch, M::Refuse),
            // BackendUnavailable, Locked
            (503, Some(30), G::Unavailable,        W::Unavailable,  true,  W::Unavailable,      M::Stop),
            (503, Some(30), G::Unavailable,        W::Unavailable,  true,  W::Unavailable,      M::Stop),
            // ReadOnly
            (503, Some(30), G::FailedPrecondition, W::Unavailable,  true,  W::Unavailable,      M::Stop),
            // Closed
            (503, Some(30), G::Unavailable,        W::Unavailable,  true,  W::Unavailable,      M::Stop),
            // QueryLimit: timeout, cancelled, memory
            (504, None,     G::DeadlineExceeded,   W::Internal,     false, W::Internal,         M::Stop),
            (499, None,     G::Cancelled,          W::Internal,     false, W::Internal,         M::Stop),
            (422, None,     G::ResourceExhausted,  W::Internal,     false, W::Internal,         M::Stop),
            // Io
            (500, None,     G::Internal,           W::Internal,     false, W::Internal,         M::Stop),
        ];
        let errors = Error::one_of_each();
        assert_eq!(errors.len(), expected.len(), "one row per error");
        for (e, (status, retry, g, w2, fatal, w1, m)) in errors.iter().zip(expected) {
            let c = e.class();
            assert_eq!(http(c), (s(status), retry), "HTTP of {e:?}");
            assert_eq!(grpc(c), g, "gRPC of {e:?}");
            assert_eq!(wire(c, 2), (w2, fatal), "wire v2 of {e:?}");
            assert_eq!(wire(c, 1).0, w1, "wire v1 of {e:?}");
            assert_eq!(mqtt(c), m, "MQTT of {e:?}");
            assert_eq!(c.is_retryable(), retry.is_some(), "retryable {e:?}");
        }
    }

    #[test]
    fn a_bad_argument_is_named() {
        let c = Error::invalid("--from", "x").class();
        assert_eq!(
            c,
            ErrorClass::BadRequest {
                arg: Some("--from")
            }
        );
    }
}
