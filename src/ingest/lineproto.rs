//! InfluxDB line protocol writes: parse a request body (`lineparse`: plain
//! lines directly, the rest by the `influxdb-line-protocol` crate), match
//! each line to its table (the
//! measurement), its device (the device tag, registered by name) and the
//! table's fields (by name and type), and build one fixed-width batch per
//! table. Every line is checked before anything is applied: one bad line
//! fails the whole request with its line number.

use super::lineparse::{Line, Val};
use crate::error::Result;
use crate::ingest::proto::{TS_MAX, TS_MIN};
use crate::schema::batch::push_row;
use crate::schema::{FieldType, TableSchema};
use crate::{Durability, Store};
use std::collections::{BTreeMap, HashMap};

/// Timestamp precision of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    Ns,
    Us,
    Ms,
    S,
}

impl Precision {
    /// `ns`/`n`, `us`/`u`, `ms`, `s` (v1 and v2 spellings); default ns.
    pub fn parse(s: Option<&str>) -> std::result::Result<Self, String> {
        Ok(match s.unwrap_or("ns") {
            "ns" | "n" => Precision::Ns,
            "us" | "u" => Precision::Us,
            "ms" => Precision::Ms,
            "s" => Precision::S,
            other => return Err(format!("precision {other:?} (expected ns, us, ms or s)")),
        })
    }
    fn to_ms(self, t: i64) -> Option<i64> {
        match self {
            Precision::Ns => Some(t.div_euclid(1_000_000)),
            Precision::Us => Some(t.div_euclid(1_000)),
            Precision::Ms => Some(t),
            Precision::S => t.checked_mul(1000),
        }
    }
}

/// A rejected request: the 1-based line and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineError {
    pub line: usize,
    pub message: String,
}

/// A parsed request, ready to apply.
pub struct Prepared {
    /// Per table: rows with the device field still to fill, and for each
    /// row the index of its device in `devices`.
    tables: BTreeMap<String, (Vec<u8>, usize, Vec<usize>)>,
    devices: Vec<(String, Vec<(String, String)>)>,
    pub lines: usize,
}

/// Parse and check `body`. `now_ms` stamps lines without a timestamp.
pub fn prepare(
    store: &Store,
    body: &str,
    precision: Precision,
    device_tag: &str,
    now_ms: i64,
) -> std::result::Result<Prepared, LineError> {
    let mut schemas: HashMap<String, TableSchema> = HashMap::new();
    let mut device_ix: HashMap<String, usize> = HashMap::new();
    let mut p = Prepared {
        tables: BTreeMap::new(),
        devices: Vec::new(),
        lines: 0,
    };
    let mut fields = Vec::new();
    let mut parsed = Line::default();
    for (n, raw) in body.split('\n').enumerate() {
        let line = n + 1;
        let text = raw.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let err = |message: String| LineError { line, message };
        if let Err(e) = parsed.parse(text) {
            return Err(err(format!("unable to parse '{}': {e}", clip(text))));
        }
        let table = &*parsed.measurement;
        if !schemas.contains_key(table) {
            let s = store
                .schema(table)
                .map_err(|_| err(format!("unknown table (measurement) {table:?}")))?;
            schemas.insert(table.to_string(), s);
        }
        let schema = &schemas[table];
        let dev = device_of(&parsed, device_tag, &mut device_ix, &mut p.devices).map_err(err)?;
        // Clients send every field in schema order: then the names are
        // the schema's, none foreign or repeated. Otherwise look each up.
        let in_order = parsed.fields.len() == schema.fields.len()
            && parsed
                .fields
                .iter()
                .zip(&schema.fields)
                .all(|((k, _), f)| *k == f.name);
        if !in_order {
            check_field_names(&parsed, schema).map_err(err)?;
        }
        fields.clear();
        for (i, f) in schema.fields.iter().enumerate() {
            let v = if in_order {
                &parsed.fields[i].1
            } else {
                field_value(&parsed, &f.name)
                    .ok_or_else(|| err(format!("missing field {:?} of table {table}", f.name)))?
            };
            encode_field(f.ty, v, &mut fields)
                .map_err(|m| err(format!("field {:?}: {m}", f.name)))?;
        }
        let ts = match parsed.timestamp {
            Some(t) => precision.to_ms(t).ok_or_else(|| {
                err(format!(
                    "timestamp {t} overflows at precision {precision:?}"
                ))
            })?,
            None => now_ms,
        };
        if !(TS_MIN..=TS_MAX).contains(&ts) {
            return Err(err(format!("timestamp {ts} ms outside 1970..9999")));
        }
        if !p.tables.contains_key(table) {
            let fresh = (Vec::new(), schema.row_width(), Vec::new());
            p.tables.insert(table.to_string(), fresh);
        }
        let entry = p
            .tables
            .get_mut(table)
            .ok_or_else(|| err(format!("table {table:?} lost while batching")))?;
        push_row(&mut entry.0, 0, ts, &fields);
        entry.2.push(dev);
        p.lines += 1;
    }
    Ok(p)
}

/// Fields out of schema order: each must be in the table, and given once.
fn check_field_names(line: &Line<'_>, schema: &TableSchema) -> std::result::Result<(), String> {
    for (i, (k, _)) in line.fields.iter().enumerate() {
        if !schema.fields.iter().any(|f| f.name == *k) {
            return Err(format!("field {k:?} is not in table {}", schema.name));
        }
        if line.fields[..i].iter().any(|(k2, _)| k2 == k) {
            return Err(format!("field {k:?} given twice"));
        }
    }
    Ok(())
}

fn field_value<'l>(line: &'l Line<'_>, name: &str) -> Option<&'l Val<'l>> {
    line.fields.iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

/// The device a line names (its index in `devices`), allocating only for
/// a device first seen in this request or whose tags changed.
fn device_of(
    parsed: &Line<'_>,
    device_tag: &str,
    index: &mut HashMap<String, usize>,
    devices: &mut Vec<(String, Vec<(String, String)>)>,
) -> std::result::Result<usize, String> {
    let tag_set = &parsed.tags;
    let name: &str = tag_set
        .iter()
        .find(|(k, _)| k == device_tag)
        .map(|(_, v)| &**v)
        .ok_or_else(|| format!("no {device_tag:?} tag naming the device"))?;
    let others = || tag_set.iter().filter(|(k, _)| k != device_tag);
    if let Some(&i) = index.get(name) {
        let same = devices[i].1.len() == others().count()
            && others()
                .zip(&devices[i].1)
                .all(|((k, v), (k2, v2))| k == k2 && v == v2);
        if same {
            return Ok(i);
        }
    }
    let tags: Vec<(String, String)> = others()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    check_device_text(name, &tags)?;
    Ok(match index.get(name) {
        Some(&i) => {
            devices[i].1 = tags;
            i
        }
        None => {
            index.insert(name.to_string(), devices.len());
            devices.push((name.to_string(), tags));
            devices.len() - 1
        }
    })
}

/// The registry's limits, checked per line (so the line is named).
fn check_device_text(name: &str, tags: &[(String, String)]) -> std::result::Result<(), String> {
    use crate::manifest::record::{DEVICE_TAGS_MAX, DEVICE_TEXT_MAX};
    let ok = |t: &str| !t.is_empty() && t.len() <= DEVICE_TEXT_MAX;
    if !ok(name) {
        return Err(format!(
            "device name of {} bytes (1..={DEVICE_TEXT_MAX})",
            name.len()
        ));
    }
    if tags.len() > DEVICE_TAGS_MAX {
        return Err(format!("{} tags (at most {DEVICE_TAGS_MAX})", tags.len()));
    }
    for (i, (k, v)) in tags.iter().enumerate() {
        if !ok(k) || !ok(v) {
            return Err(format!(
                "tag {k:?}: keys and values must be 1..={DEVICE_TEXT_MAX} bytes"
            ));
        }
        if tags[..i].iter().any(|(k2, _)| k2 == k) {
            return Err(format!("tag {k:?} given twice"));
        }
    }
    Ok(())
}

fn clip(s: &str) -> String {
    s.chars().take(120).collect()
}

fn encode_field(ty: FieldType, v: &Val<'_>, out: &mut Vec<u8>) -> std::result::Result<(), String> {
    let bad = || format!("{v} does not fit type {}", ty.name());
    match (ty, v) {
        (FieldType::F64, Val::F64(x)) => out.extend_from_slice(&x.to_le_bytes()),
        (FieldType::F64, Val::I64(x)) => out.extend_from_slice(&(*x as f64).to_le_bytes()),
        (FieldType::F64, Val::U64(x)) => out.extend_from_slice(&(*x as f64).to_le_bytes()),
        (FieldType::F32, Val::F64(x)) => out.extend_from_slice(&(*x as f32).to_le_bytes()),
        (FieldType::I64, Val::I64(x)) => out.extend_from_slice(&x.to_le_bytes()),
        (FieldType::I64, Val::U64(x)) => {
            out.extend_from_slice(&i64::try_from(*x).map_err(|_| bad())?.to_le_bytes())
        }
        (FieldType::I32, Val::I64(x)) => {
            out.extend_from_slice(&i32::try_from(*x).map_err(|_| bad())?.to_le_bytes())
        }
        (FieldType::U64, Val::U64(x)) => out.extend_from_slice(&x.to_le_bytes()),
        (FieldType::U64, Val::I64(x)) => {
            out.extend_from_slice(&u64::try_from(*x).map_err(|_| bad())?.to_le_bytes())
        }
        (FieldType::U32, Val::U64(x)) => {
            out.extend_from_slice(&u32::try_from(*x).map_err(|_| bad())?.to_le_bytes())
        }
        (FieldType::U32, Val::I64(x)) => {
            out.extend_from_slice(&u32::try_from(*x).map_err(|_| bad())?.to_le_bytes())
        }
        (FieldType::Bool, Val::Bool(b)) => out.push(u8::from(*b)),
        _ => return Err(bad()),
    }
    Ok(())
}

/// Register the request's devices, then write each table's rows. Returns
/// the rows written. A request spanning several tables is applied table
/// by table (each table's rows as one batch when they fit one WAL entry).
pub fn apply(store: &Store, p: Prepared, durability: Durability) -> Result<usize> {
    let ids = store.register_devices(&p.devices)?;
    let mut n = 0;
    for (table, (mut rows, width, devs)) in p.tables {
        for (row, dev) in rows.chunks_exact_mut(width).zip(&devs) {
            row[..8].copy_from_slice(&ids[*dev].to_le_bytes());
        }
        let per = (crate::wal::frame::FRAME_PAYLOAD_MAX / width).max(1);
        if rows.len() <= per * width {
            store.write_vec(&table, rows, durability)?;
        } else {
            for chunk in rows.chunks(per * width) {
                store.write(&table, chunk, durability)?;
            }
        }
        n += devs.len();
    }
    Ok(n)
}
