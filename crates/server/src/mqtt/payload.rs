//! MQTT payloads to rows: InfluxDB line protocol, a flat JSON object, or
//! the binary rows of `formats/row.md`. The topic names the table and the
//! device for JSON and binary payloads (the subscription's `map`, by
//! default `…/{table}/{device}`); line protocol names its own (measurement
//! = table, the device tag).

use super::config::Subscription;
use crate::ingest::lineproto::{self, Precision, Rules};
use telestore_engine::engine::check_device_text;
use telestore_engine::error::{Error, Result};
use telestore_engine::schema::batch::{push_row, Batch};
use telestore_engine::schema::{Field, FieldType, TableOptions, TableSchema};
use telestore_engine::Store;

/// How a subscription's payloads are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// InfluxDB line protocol (nanosecond timestamps unless `precision`).
    Line,
    /// `{"ts": …, "field": value, …}`: `ts` as RFC 3339, epoch with a unit
    /// (`1700000000s`, `…ms`, `…us`, `…ns`), or a number of milliseconds;
    /// absent: now.
    Json,
    /// Rows of `formats/row.md` (device ids inside).
    Row,
}

/// Why a payload was refused (a `/metrics` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    /// The topic names no table or device.
    Topic,
    /// No such table.
    Table,
    /// The payload cannot be read (not UTF-8 or JSON, a bad row length, a bad line).
    Encoding,
    /// Fields missing, unknown or of the wrong type.
    Fields,
    /// Over [`super::MESSAGE_MAX`].
    Size,
}

impl Bad {
    /// Every reason, in label order.
    pub const ALL: [Bad; 5] = [
        Bad::Topic,
        Bad::Table,
        Bad::Encoding,
        Bad::Fields,
        Bad::Size,
    ];
    /// The `/metrics` label.
    pub fn name(self) -> &'static str {
        match self {
            Bad::Topic => "topic",
            Bad::Table => "table",
            Bad::Encoding => "encoding",
            Bad::Fields => "fields",
            Bad::Size => "size",
        }
    }
}

/// What a message holds, checked and ready to write.
pub enum Decoded {
    /// Line protocol: its own tables and devices (the topic is not read).
    Lines(lineproto::Prepared),
    /// Rows of one table (device ids filled in).
    Rows {
        /// The table.
        table: String,
        /// Its rows.
        rows: Vec<u8>,
        /// How many.
        n: usize,
    },
}

/// Read one message under its subscription: nothing is written yet (a
/// JSON message's device is registered, as on the line protocol, and its
/// table created if it is missing and `rules.create` allows).
pub fn decode(
    store: &Store,
    sub: &Subscription,
    topic: &str,
    payload: &[u8],
    rules: &Rules,
) -> std::result::Result<Decoded, (Bad, Error)> {
    let now = store.now_ms();
    if sub.format == Format::Line {
        let text = std::str::from_utf8(payload)
            .map_err(|_| (Bad::Encoding, Error::invalid("payload", "not UTF-8")))?;
        let p = lineproto::prepare(store, text, Precision::Ns, rules, now).map_err(|e| {
            let m = format!("line {}: {}", e.line, e.message);
            (Bad::Fields, Error::invalid("payload", m))
        })?;
        return Ok(Decoded::Lines(p));
    }
    let (table, device) = sub.names(topic).ok_or_else(|| {
        let m = format!("topic {topic:?} does not name a table and a device");
        (Bad::Topic, Error::invalid("topic", m))
    })?;
    let (schema, create) = match (store.schema(table), &rules.create) {
        (Ok(s), _) => (s, false),
        (Err(Error::UnknownTable(_)), Some(options)) if sub.format == Format::Json => {
            let s = json_schema(table, payload, options).map_err(|e| (Bad::Fields, e))?;
            (s, true)
        }
        (Err(e), _) => return Err((Bad::Table, e)),
    };
    let (schema, rows) = match (sub.format, device) {
        (Format::Json, Some(device)) => {
            let message = JsonMessage {
                table,
                device,
                payload,
                now,
            };
            message.row(store, schema, create)?
        }
        (Format::Json, None) => {
            let m = format!("topic {topic:?} names no device");
            return Err((Bad::Topic, Error::invalid("topic", m)));
        }
        _ => {
            Batch::new(payload, schema.row_width()).map_err(|e| (Bad::Encoding, e))?;
            check_times(payload, &schema)?;
            (schema, payload.to_vec())
        }
    };
    Ok(Decoded::Rows {
        table: table.to_string(),
        n: rows.len() / schema.row_width(),
        rows,
    })
}

/// Checked message by message: the batch of many messages is written at
/// once, and one bad timestamp must not refuse the others.
fn check_times(rows: &[u8], schema: &TableSchema) -> std::result::Result<(), (Bad, Error)> {
    Batch::new(rows, schema.row_width())
        .and_then(|b| b.check_timestamps())
        .map_err(|e| (Bad::Fields, e))
}

/// A JSON message for one table and device.
struct JsonMessage<'a> {
    table: &'a str,
    device: &'a str,
    payload: &'a [u8],
    now: i64,
}

impl JsonMessage<'_> {
    /// The message's row under `schema`.
    fn encode(&self, schema: &TableSchema) -> std::result::Result<Vec<u8>, (Bad, Error)> {
        let (ts, fields) =
            json_fields(schema, self.payload, self.now).map_err(|e| (Bad::Fields, e))?;
        let mut row = Vec::with_capacity(schema.row_width());
        push_row(&mut row, 0, ts, &fields);
        check_times(&row, schema)?;
        Ok(row)
    }

    /// Its row, once it is known to be good: then (`create`) `schema`'s
    /// table is created (one created meanwhile by another message is
    /// taken as it is, and the message checked against it) and the device
    /// registered if it is new.
    fn row(
        &self,
        store: &Store,
        schema: TableSchema,
        create: bool,
    ) -> std::result::Result<(TableSchema, Vec<u8>), (Bad, Error)> {
        let mut row = self.encode(&schema)?;
        check_device_text(self.device, &[])
            .map_err(|m| (Bad::Topic, Error::invalid("topic", m)))?;
        let schema = match create.then(|| store.create_table(schema.clone())) {
            None | Some(Ok(_)) => schema,
            Some(Err(Error::SchemaConflict { .. })) => {
                let s = store.schema(self.table).map_err(|e| (Bad::Table, e))?;
                row = self.encode(&s)?;
                s
            }
            Some(Err(e)) => return Err((Bad::Table, e)),
        };
        // A known device is one lookup; a new one is registered.
        let id = match store.device_id(self.device) {
            Some(id) => id,
            None => {
                let names = [(self.device.to_string(), Vec::new())];
                store
                    .register_devices(&names)
                    .map_err(|e| (Bad::Topic, e))?[0]
            }
        };
        row[..8].copy_from_slice(&id.to_le_bytes());
        Ok((schema, row))
    }
}

/// A reading's timestamp given as text: what `parse_time` takes (RFC
/// 3339, an epoch with a unit, a time relative to now), but never rounded:
/// a time finer than a millisecond is refused (two readings within one
/// would silently become one row).
fn data_time(s: &str, now: i64) -> Result<i64> {
    let ms = telestore_query::time::parse_time("ts", s, now)?;
    let t = s.trim();
    let exact = match chrono::DateTime::parse_from_rfc3339(t) {
        Ok(d) => d.timestamp_subsec_nanos() % 1_000_000 == 0,
        Err(_) => {
            let per = [("ns", 1_000_000), ("us", 1_000), ("µs", 1_000)];
            per.iter().all(|(unit, per)| {
                t.strip_suffix(unit)
                    .and_then(|n| n.parse::<i64>().ok())
                    .is_none_or(|n| n % per == 0)
            })
        }
    };
    if !exact {
        let m = format!("{s:?} is finer than a millisecond (telestore keeps milliseconds)");
        return Err(Error::invalid("payload", m));
    }
    Ok(ms)
}

/// The schema of a table created by a JSON message: its keys but `ts`, in
/// the message's order, numbers as `f64` (JSON does not tell `5` from `5.0`),
/// booleans as `bool`.
fn json_schema(table: &str, payload: &[u8], options: &TableOptions) -> Result<TableSchema> {
    let bad = |m: String| Error::invalid("payload", m);
    let obj = json_object(payload)?;
    let mut fields = Vec::with_capacity(obj.len());
    for (k, v) in obj.iter().filter(|(k, _)| *k != "ts") {
        let ty = match v {
            serde_json::Value::Number(_) => FieldType::F64,
            serde_json::Value::Bool(_) => FieldType::Bool,
            other => {
                return Err(bad(format!(
                    "field {k:?}: {other} is neither a number nor a boolean, so table \
                     {table:?} cannot be created from this message"
                )))
            }
        };
        fields.push(Field::new(k, ty));
    }
    if fields.is_empty() {
        return Err(bad(format!(
            "no fields: table {table:?} cannot be created from this message"
        )));
    }
    TableSchema::new(table, fields, options.clone())
}

/// The payload as a JSON object.
fn json_object(payload: &[u8]) -> Result<serde_json::Map<String, serde_json::Value>> {
    let bad = |m: String| Error::invalid("payload", m);
    match serde_json::from_slice(payload) {
        Ok(serde_json::Value::Object(obj)) => Ok(obj),
        Ok(_) => Err(bad("not a JSON object".into())),
        Err(e) => Err(bad(format!("not JSON: {e}"))),
    }
}

/// A flat JSON object as `(ts, field bytes)`.
pub(crate) fn json_fields(
    schema: &TableSchema,
    payload: &[u8],
    now: i64,
) -> Result<(i64, Vec<u8>)> {
    let bad = |m: String| Error::invalid("payload", m);
    let obj = json_object(payload)?;
    for k in obj.keys() {
        if k != "ts" && schema.field_index(k).is_none() {
            return Err(bad(format!(
                "{k:?} is not a field of table {}",
                schema.name
            )));
        }
    }
    let ts = match obj.get("ts") {
        None => now,
        Some(serde_json::Value::Number(n)) => n
            .as_i64()
            .ok_or_else(|| bad(format!("ts {n} is not whole milliseconds")))?,
        Some(serde_json::Value::String(s)) => data_time(s, now)?,
        Some(other) => return Err(bad(format!("ts {other} is neither a number nor text"))),
    };
    let mut out = Vec::with_capacity(schema.fields_width());
    for f in &schema.fields {
        let v = obj
            .get(&f.name)
            .ok_or_else(|| bad(format!("field {:?} is missing", f.name)))?;
        let wrong = || bad(format!("field {:?}: {v} is not a {}", f.name, f.ty.name()));
        match f.ty {
            FieldType::F64 => out.extend(v.as_f64().ok_or_else(wrong)?.to_le_bytes()),
            FieldType::F32 => {
                // The nearest f32, as the line protocol stores it; a value
                // past f32's range is refused, not made infinite.
                let x = v.as_f64().map(|x| x as f32).filter(|x| x.is_finite());
                out.extend(x.ok_or_else(wrong)?.to_le_bytes())
            }
            FieldType::I64 => out.extend(v.as_i64().ok_or_else(wrong)?.to_le_bytes()),
            FieldType::I32 => {
                let x = v.as_i64().and_then(|x| i32::try_from(x).ok());
                out.extend(x.ok_or_else(wrong)?.to_le_bytes())
            }
            FieldType::U64 => out.extend(v.as_u64().ok_or_else(wrong)?.to_le_bytes()),
            FieldType::U32 => {
                let x = v.as_u64().and_then(|x| u32::try_from(x).ok());
                out.extend(x.ok_or_else(wrong)?.to_le_bytes())
            }
            FieldType::Bool => out.push(v.as_bool().ok_or_else(wrong)? as u8),
        }
    }
    Ok((ts, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use telestore_engine::schema::{Field, TableOptions};

    fn schema() -> TableSchema {
        let fields = vec![
            Field::new("v", FieldType::F64),
            Field::new("n", FieldType::I32),
            Field::new("ok", FieldType::Bool),
        ];
        TableSchema::new("t", fields, TableOptions::default()).unwrap()
    }

    #[test]
    fn an_f32_field_takes_the_nearest_f32_and_refuses_what_it_cannot_hold() {
        let fields = vec![Field::new("x", FieldType::F32)];
        let s = TableSchema::new("t", fields, TableOptions::default()).unwrap();
        let (_, f) = json_fields(&s, br#"{"x":0.1}"#, 0).unwrap();
        assert_eq!(f, 0.1f32.to_le_bytes());
        let e = json_fields(&s, br#"{"x":1e300}"#, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a f32"), "{e}");
    }

    /// serde_json's default float parser can miss by one ULP on 17
    /// significant digits (12-34 % of real readings were stored off);
    /// with `float_roundtrip` the stored double is the one the text names.
    #[test]
    fn seventeen_digit_json_floats_are_stored_exactly() {
        let fields = vec![Field::new("x", FieldType::F64)];
        let s = TableSchema::new("t", fields, TableOptions::default()).unwrap();
        for text in [
            "-31871.714327714286",
            "0.30000000000000004",
            "123456.78901234567",
            "-0.000123456789012345678",
            "1.7976931348623157e308",
        ] {
            let want: f64 = text.parse().unwrap();
            let p = format!(r#"{{"x":{text}}}"#);
            let (_, f) = json_fields(&s, p.as_bytes(), 0).unwrap();
            assert_eq!(f, want.to_le_bytes(), "{text}");
        }
    }

    fn json_sub() -> Subscription {
        Subscription {
            topic: "fleet/#".into(),
            format: Format::Json,
            qos: 1,
            map: None,
            table: None,
            durability: None,
        }
    }

    #[test]
    fn a_json_message_creates_its_table_unless_it_cannot_or_may_not() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), telestore_engine::Options::default()).unwrap();
        let (sub, rules) = (json_sub(), Rules::new("device"));
        let msg = br#"{"ts":1700000000000,"temp":21.5,"n":3,"ok":true}"#;
        let d = decode(&store, &sub, "fleet/engine/truck-1", msg, &rules).unwrap();
        let s = store.schema("engine").unwrap();
        let fields: Vec<_> = s.fields.iter().map(|f| (f.name.as_str(), f.ty)).collect();
        // The message's order (the workspace turns on serde_json's
        // preserve_order); numbers are f64, point or not.
        let want = [
            ("temp", FieldType::F64),
            ("n", FieldType::F64),
            ("ok", FieldType::Bool),
        ];
        assert_eq!(fields, want);
        let Decoded::Rows { table, n, rows } = d else {
            panic!("not rows")
        };
        assert_eq!((table.as_str(), n), ("engine", 1));
        assert_eq!(&rows[16..24], &21.5f64.to_le_bytes());
        assert_eq!(&rows[24..32], &3f64.to_le_bytes());
        assert_eq!(rows[32], 1);
        // A string (or a null, an array) cannot be a field: refused,
        // nothing created.
        let before_1970 = br#"{"ts":-5,"v":1}"#;
        for bad in [
            &br#"{"fw":"1.2.3"}"#[..],
            br#"{"v":null}"#,
            br#"{"v":[1]}"#,
            br#"{"ts":1}"#,
            before_1970,
        ] {
            let Err(e) = decode(&store, &sub, "fleet/other/truck-1", bad, &rules) else {
                panic!("{bad:?} was taken")
            };
            assert_eq!(e.0, Bad::Fields, "{e:?}");
            assert!(store.schema("other").is_err());
        }
        let off = Rules {
            create: None,
            ..rules
        };
        let Err(e) = decode(&store, &sub, "fleet/other/truck-1", msg, &off) else {
            panic!("created with auto_create off")
        };
        assert_eq!(e.0, Bad::Table, "{e:?}");
        assert!(store.schema("other").is_err());
    }

    #[test]
    fn json_objects_become_rows_or_say_why_not() {
        let s = schema();
        let (ts, f) =
            json_fields(&s, br#"{"ts":"1700000000s","v":1.5,"n":-3,"ok":true}"#, 0).unwrap();
        assert_eq!(ts, 1_700_000_000_000);
        assert_eq!(&f[..8], &1.5f64.to_le_bytes());
        assert_eq!(&f[8..12], &(-3i32).to_le_bytes());
        assert_eq!(f[12], 1);
        let (ts, _) = json_fields(&s, br#"{"v":1,"n":0,"ok":false}"#, 42).unwrap();
        assert_eq!(ts, 42);
        for (t, ms) in [
            ("1700000000123000us", 1_700_000_000_123),
            ("1700000000123000000ns", 1_700_000_000_123),
            ("2023-11-14T22:13:20.123Z", 1_700_000_000_123),
            ("-5s", 37_000),
        ] {
            let p = format!(r#"{{"ts":"{t}","v":1,"n":0,"ok":true}}"#);
            assert_eq!(json_fields(&s, p.as_bytes(), 42_000).unwrap().0, ms, "{t}");
        }
        for (p, says) in [
            (&br#"{"v":1,"n":0}"#[..], "missing"),
            (br#"{"v":1,"n":0,"ok":true,"x":1}"#, "not a field"),
            (br#"{"v":"a","n":0,"ok":true}"#, "not a f64"),
            (br#"{"v":1,"n":3000000000,"ok":true}"#, "not a i32"),
            (br#"{"ts":1.5,"v":1,"n":0,"ok":true}"#, "whole milliseconds"),
            (
                br#"{"ts":"1700000000000001us","v":1,"n":0,"ok":true}"#,
                "finer than a millisecond",
            ),
            (
                br#"{"ts":"2026-12-05T10:00:00.0001Z","v":1,"n":0,"ok":true}"#,
                "finer than a millisecond",
            ),
            (
                br#"{"ts":"1700000000000000001ns","v":1,"n":0,"ok":true}"#,
                "finer than a millisecond",
            ),
            (br#"{"ts":"yesterday","v":1,"n":0,"ok":true}"#, "yesterday"),
            (br#"{"v":null,"n":0,"ok":true}"#, "not a f64"),
            (br#"[1]"#, "not a JSON object"),
            (b"\xff", "not JSON"),
        ] {
            let e = json_fields(&s, p, 0).unwrap_err().to_string();
            assert!(e.contains(says), "{}: {e}", String::from_utf8_lossy(p));
        }
    }
}
