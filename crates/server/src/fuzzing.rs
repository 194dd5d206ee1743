//! Fuzz entry points of the frontends' wire decoders (the engine's own
//! are in `telestore_engine::fuzzing`). Each takes arbitrary bytes and
//! must never panic; the cargo-fuzz targets in `fuzz/` and the seeded
//! smoke tests call exactly these functions.

pub use telestore_engine::fuzzing::Target;

/// A client's byte stream to the ingest server (a handshake, then data
/// frames for a 24-byte row) and a server response.
pub fn ingest_stream(data: &[u8]) {
    let _ = fuzz_ingest_stream(data);
    let _ = crate::ingest::proto::Response::decode(data);
}

/// InfluxDB line protocol text (the daemon's HTTP writes): the plain-line
/// fast path must agree with InfluxData's parser.
pub fn line_protocol(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        fuzz_lines(text);
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
    fuzz_payload(data);
}

/// Every entry point of the frontends' decoders, by name.
pub const TARGETS: &[Target] = &[
    ("ingest_stream", ingest_stream),
    ("line_protocol", line_protocol),
    ("flight_docs", flight_docs),
    ("mqtt_payload", mqtt_payload),
];

// The whole-image decoders the entry points above and the format tests
// share (they were in their modules; kept here so that no fuzz code sits
// in a production module).

/// Fuzz entry point: a handshake, then data frames for a row width of 24.
pub fn fuzz_ingest_stream(data: &[u8]) -> usize {
    use crate::ingest::proto::*;
    let mut n = 0;
    let Ok(h) = Handshake::decode(data) else {
        return 0;
    };
    let mut pos = h.encode().len();
    while let Some(head) = data.get(pos..pos + FRAME_HEADER_LEN) {
        let head: &[u8; FRAME_HEADER_LEN] = head.try_into().expect("length checked");
        let Ok(f) = FrameHeader::decode(head) else {
            break;
        };
        pos += FRAME_HEADER_LEN;
        let Some(p) = data.get(pos..pos + f.payload_len as usize) else {
            break;
        };
        let _ = f.check_payload(p, 24);
        pos += f.payload_len as usize;
        n += 1;
    }
    n
}

/// Fuzz entry point: every line of `text` through the fast path and the
/// parser; where the fast path takes a line, the parser must read the
/// same. Panics on a disagreement (that is the finding).
pub fn fuzz_lines(text: &str) {
    use crate::ingest::lineparse::*;
    for raw in text.split('\n') {
        let t = raw.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let mut fast_line = Line::default();
        if fast(t, &mut fast_line).is_some() {
            let mut slow = Line::default();
            let parsed = slow.parse_with_crate(t);
            assert!(parsed.is_ok(), "fast path took {t:?}: {parsed:?}");
            assert_eq!(fast_line, slow, "{t:?}");
        } else {
            let _ = Line::default().parse(t);
        }
    }
}

/// Fuzz entry (`fuzzing::mqtt_payload`): a JSON payload against a table
/// of every field type, and the bytes as a topic under the default and a
/// configured mapping; must never panic, and a row that is read has the
/// table's width.
pub fn fuzz_payload(data: &[u8]) {
    use crate::mqtt::config::Subscription;
    use crate::mqtt::payload::*;
    use telestore_engine::schema::{Field, TableOptions};
    use telestore_engine::schema::{FieldType, TableSchema};
    let fields = [
        ("a", FieldType::F64),
        ("b", FieldType::F32),
        ("c", FieldType::I64),
        ("d", FieldType::I32),
        ("e", FieldType::U64),
        ("f", FieldType::U32),
        ("g", FieldType::Bool),
    ];
    let fields = fields.iter().map(|(n, t)| Field::new(n, *t)).collect();
    let Ok(schema) = TableSchema::new("t", fields, TableOptions::default()) else {
        return;
    };
    if let Ok((_, row)) = json_fields(&schema, data, 0) {
        assert_eq!(row.len(), schema.fields_width());
    }
    if let Ok(topic) = std::str::from_utf8(data) {
        let mut sub = Subscription::new("#", Format::Json);
        let _ = sub.names(topic);
        sub.map = Some("site/+/{device}/#".into());
        sub.table = Some("t".into());
        let _ = sub.names(topic);
    }
}
