//! The daemon's counters, one struct for every protocol (for `/metrics`,
//! `/api/v1/status` and tests), each declared once with the metric that
//! exports it ([`ServerStats::METRICS`]). The MQTT subscriber keeps its
//! own ([`crate::mqtt::Stats`]), held here so that the metrics see it.

use super::metric::{label, Metric};
use crate::ingest::proto::ErrorCode;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Declares the counters: each field with the metric it is exported as
/// (`""`: only inside another metric) and its help, which is also the
/// field's documentation; then the other fields with their initial value.
macro_rules! server_stats {
    (
        counters { $( $field:ident: $kind:ident $name:literal = $help:literal; )* }
        other { $( $(#[doc = $doc:literal])+ $ofield:ident: $oty:ty = $init:expr; )* }
    ) => {
        /// Counters for the metrics endpoint and tests.
        pub struct ServerStats {
            $( #[doc = $help] pub $field: AtomicU64, )*
            $( $(#[doc = $doc])+ pub $ofield: $oty, )*
        }

        impl Default for ServerStats {
            fn default() -> Self {
                ServerStats {
                    $( $field: AtomicU64::default(), )*
                    $( $ofield: $init, )*
                }
            }
        }

        impl ServerStats {
            /// The counters' own metrics (one without a name is not
            /// exported by itself: see [`ServerStats::DERIVED`]).
            pub const METRICS: &'static [Metric<ServerStats>] = &[
                $( Metric::$kind($name, $help, |s: &ServerStats| s.$field.load(Relaxed) as f64), )*
            ];
        }
    };
}

server_stats! {
    counters {
        connections_open: gauge "connections_open" = "Open ingest connections";
        connections_total: counter "connections" = "Ingest connections accepted";
        frames: counter "ingest_batches" = "Frames acknowledged";
        rows: counter "" = "Rows the binary frames held";
        bytes: counter "" = "Payload bytes accepted through the binary protocol";
        http_rows: counter "" = "Line-protocol rows written";
        http_requests: counter "http_write_requests" = "Line-protocol requests applied";
        http_rejected: counter "http_write_rejected" = "Line-protocol requests rejected";
        flight_calls: counter "flight_calls" = "Arrow Flight calls";
        flight_rejected: counter "flight_rejected" = "Arrow Flight calls answered with an error status";
        flight_rows_sent: counter "flight_rows_sent" = "Rows sent by Flight DoGet";
        flight_rows_written: counter "" = "Rows Flight DoPut wrote";
        sql_queries: counter "sql_queries" = "SQL queries answered (HTTP: to the end; Flight: the stream started)";
        sql_failed: counter "sql_failed" = "SQL queries refused or failed";
    }
    other {
        /// Rejected frames and handshakes by error code (index = code).
        rejected: [AtomicU64; 16] = Default::default();
        /// Binary frames, from the payload read to the ack written
        /// (seconds); registered as is (`ingest_frame_seconds`).
        frame_seconds: prometheus_client::metrics::histogram::Histogram = {
            use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
            Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
        };
        /// The MQTT subscriber's counters and state.
        mqtt: Arc<crate::mqtt::Stats> = Arc::default();
        /// The query pool (set when the server starts): its counters and
        /// what it holds.
        queries: std::sync::OnceLock<Arc<telestore_query::sql::QueryPool>> = std::sync::OnceLock::new();
        /// The connection cap of every listener (set when the server starts).
        gate: std::sync::OnceLock<Arc<crate::frontend::conn::Gate>> = std::sync::OnceLock::new();
    }
}

impl ServerStats {
    pub(crate) fn reject(&self, code: ErrorCode) {
        self.rejected[(code as usize).min(15)].fetch_add(1, Relaxed);
    }
    /// Rejections of one code.
    pub fn rejected_of(&self, code: ErrorCode) -> u64 {
        self.rejected[(code as usize).min(15)].load(Relaxed)
    }

    /// Rows written by protocol.
    fn rows_by_protocol(&self) -> [(&'static str, u64); 4] {
        [
            ("binary", self.rows.load(Relaxed)),
            ("line_protocol", self.http_rows.load(Relaxed)),
            ("flight", self.flight_rows_written.load(Relaxed)),
            ("mqtt", self.mqtt.rows.load(Relaxed)),
        ]
    }

    /// The metrics made of several counters.
    pub const DERIVED: &'static [Metric<ServerStats>] = &[
        Metric::counter(
            "ingest",
            "Payload bytes accepted through the binary protocol",
            |s: &ServerStats| s.bytes.load(Relaxed) as f64,
        )
        .in_unit("bytes"),
        Metric::counter(
            "ingest_rows",
            "Rows written, over every protocol",
            |s: &ServerStats| s.rows_by_protocol().iter().map(|p| p.1 as f64).sum(),
        ),
        Metric::counter_each(
            "ingest_protocol_rows",
            "Rows written, by protocol (binary, line_protocol, flight, mqtt)",
            |s: &ServerStats| {
                s.rows_by_protocol()
                    .iter()
                    .map(|&(p, n)| (label("protocol", p), n as f64))
                    .collect()
            },
        ),
        Metric::counter_each(
            "rejected_frames",
            "Rejected handshakes and frames by reason",
            |s: &ServerStats| {
                ErrorCode::ALL
                    .iter()
                    .map(|&c| (label("reason", c.name()), s.rejected_of(c) as f64))
                    .collect()
            },
        ),
    ];
}
