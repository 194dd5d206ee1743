//! Fuzz entry points of the frontends' wire decoders (the engine's own
//! are in `telestore_engine::fuzzing`). Each takes arbitrary bytes and
//! must never panic; the cargo-fuzz targets in `fuzz/` and the seeded
//! smoke tests call exactly these functions.

pub use telestore_engine::fuzzing::Target;

/// A client's byte stream to the ingest server (a handshake, then data
/// frames for a 24-byte row) and a server response.
pub fn ingest_stream(data: &[u8]) {
    let _ = crate::ingest::proto::fuzz_ingest_stream(data);
    let _ = crate::ingest::proto::Response::decode(data);
}

/// InfluxDB line protocol text (the daemon's HTTP writes): the plain-line
/// fast path must agree with InfluxData's parser.
pub fn line_protocol(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        crate::ingest::lineparse::fuzz_lines(text);
    }
}

/// What a Flight client sends: a ticket, a descriptor's request
/// document, or a Flight SQL command (protobuf `Any`).
pub fn flight_docs(data: &[u8]) {
    let _ = crate::flight::ticket::Ticket::parse(data);
    let _ = crate::flight::ticket::Request::parse_cmd(data);
    let _ = crate::flight::sql::statement_of(data);
}

/// An MQTT message: a JSON payload, and its topic through the mappings.
pub fn mqtt_payload(data: &[u8]) {
    crate::mqtt::payload::fuzz_payload(data);
}

/// Every entry point of the frontends' decoders, by name.
pub const TARGETS: &[Target] = &[
    ("ingest_stream", ingest_stream),
    ("line_protocol", line_protocol),
    ("flight_docs", flight_docs),
    ("mqtt_payload", mqtt_payload),
];
