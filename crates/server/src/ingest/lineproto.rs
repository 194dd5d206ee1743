//! InfluxDB line protocol writes: parse a request body (`lineparse`: plain
//! lines directly, the rest by the `influxdb-line-protocol` crate), match
//! each line to its table (the measurement; created from the line when it
//! does not exist and [`Rules::create`] allows), its series (the device
//! tag's value, or else the whole tag set; registered by name) and the
//! table's fields (by name and type), and build one fixed-width batch per
//! table. Every line is checked before anything is applied: one bad line
//! fails the whole request with its line number.

use super::lineparse::{Line, Val};
use crate::ingest::proto::{TS_MAX, TS_MIN};
use std::collections::{BTreeMap, HashMap};
use telestore_engine::engine::{check_device_text, tag_conflict, DEVICE_TEXT_MAX};
use telestore_engine::error::{Error, Result};
use telestore_engine::schema::batch::push_row;
use telestore_engine::schema::{Field, FieldType, TableOptions, TableSchema};
use telestore_engine::{Durability, Store};

/// Timestamp precision of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// Nanoseconds.
    Ns,
    /// Microseconds.
    Us,
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
    /// Minutes and hours: InfluxDB 1.x's `m` and `h`.
    M,
    /// Hours.
    H,
}

impl Precision {
    /// `ns`/`n`, `us`/`u`, `ms`, `s`, and 1.x's `m` and `h`; default ns.
    pub fn parse(s: Option<&str>) -> std::result::Result<Self, String> {
        Ok(match s.unwrap_or("ns") {
            "ns" | "n" => Precision::Ns,
            "us" | "u" => Precision::Us,
            "ms" => Precision::Ms,
            "s" => Precision::S,
            "m" => Precision::M,
            "h" => Precision::H,
            other => {
                return Err(format!(
                    "precision {other:?} (expected ns, us, ms, s, m or h)"
                ))
            }
        })
    }

    /// `t` in milliseconds. A timestamp finer than a millisecond is
    /// refused: the store keeps milliseconds, and flooring would merge
    /// points that differ below one into one row, silently.
    fn to_ms(self, t: i64) -> std::result::Result<i64, String> {
        let per_ms = match self {
            Precision::Ns => 1_000_000,
            Precision::Us => 1_000,
            _ => 1,
        };
        if t % per_ms != 0 {
            return Err(format!(
                "timestamp {t} ({self:?}) is not a whole millisecond: telestore stores \
                 milliseconds, and two points within one would become one row \
                 (send whole milliseconds, or precision=ms)"
            ));
        }
        let mul = match self {
            Precision::S => 1_000,
            Precision::M => 60_000,
            Precision::H => 3_600_000,
            _ => 1,
        };
        (t / per_ms)
            .checked_mul(mul)
            .ok_or_else(|| format!("timestamp {t} overflows at precision {self:?}"))
    }
}

/// How lines map to tables and series.
#[derive(Clone, Debug)]
pub struct Rules {
    /// The tag whose value names a line's device (its other tags are the
    /// device's attributes); a line without it is a series named by its
    /// whole tag set.
    pub device_tag: String,
    /// Options of a table created by the first line of its measurement
    /// (`None`: an unknown measurement is refused).
    pub create: Option<TableOptions>,
}

impl Rules {
    /// Devices named by `device_tag`, tables created with the default
    /// options.
    pub fn new(device_tag: &str) -> Self {
        Rules {
            device_tag: device_tag.to_string(),
            create: Some(TableOptions::default()),
        }
    }
}

/// A rejected request: the 1-based line and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineError {
    /// The line, from 1.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

/// A parsed request, ready to apply.
#[derive(Debug)]
pub struct Prepared {
    /// Per table: rows with the device field still to fill, and for each
    /// row the index of its device in `devices`.
    tables: BTreeMap<String, (Vec<u8>, usize, Vec<usize>)>,
    devices: Vec<(String, Vec<(String, String)>)>,
    /// Tables to create before writing (their first lines are here).
    create: Vec<TableSchema>,
    /// Lines in the request.
    pub lines: usize,
}

/// Parse and check `body`. `now_ms` stamps lines without a timestamp.
pub fn prepare(
    store: &Store,
    body: &str,
    precision: Precision,
    rules: &Rules,
    now_ms: i64,
) -> std::result::Result<Prepared, LineError> {
    let mut schemas: HashMap<String, TableSchema> = HashMap::new();
    let mut device_ix: HashMap<String, usize> = HashMap::new();
    let mut p = Prepared {
        tables: BTreeMap::new(),
        devices: Vec::new(),
        create: Vec::new(),
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
            let s = table_schema(store, &parsed, rules, &mut p.create).map_err(err)?;
            schemas.insert(table.to_string(), s);
        }
        let schema = &schemas[table];
        let dev = device_of(
            store,
            &parsed,
            &rules.device_tag,
            &mut device_ix,
            &mut p.devices,
        )
        .map_err(err)?;
        encode_fields(&parsed, schema, &mut fields).map_err(|m| {
            // The user never made this table: say where its fields came from.
            err(match p.create.iter().any(|s| s.name == table) {
                true => format!(
                    "{m} (created by an earlier line of this request with {})",
                    field_list(schema)
                ),
                false => m,
            })
        })?;
        let ts = match parsed.timestamp {
            Some(t) => precision.to_ms(t).map_err(err)?,
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

/// The schema of `line`'s table: the store's, or (when it does not exist
/// and `rules` allow) the one this line creates, noted in `create`.
fn table_schema(
    store: &Store,
    line: &Line<'_>,
    rules: &Rules,
    create: &mut Vec<TableSchema>,
) -> std::result::Result<TableSchema, String> {
    let table = &*line.measurement;
    match (store.schema(table), &rules.create) {
        (Ok(s), _) => Ok(s),
        (Err(Error::UnknownTable(_)), Some(options)) => {
            let s = inferred_schema(line, options)?;
            create.push(s.clone());
            Ok(s)
        }
        (Err(Error::UnknownTable(_)), None) => Err(format!(
            "unknown table (measurement) {table:?}, and tables are not created on first \
             write (auto_create is off)"
        )),
        (Err(e), _) => Err(e.to_string()),
    }
}

/// The schema of a table created by `line`, its first line: the line's
/// fields in its order, typed by their values (a float `f64`, `i` `i64`,
/// `u` `u64`, a boolean `bool`).
fn inferred_schema(
    line: &Line<'_>,
    options: &TableOptions,
) -> std::result::Result<TableSchema, String> {
    let table = &*line.measurement;
    let mut fields: Vec<Field> = Vec::with_capacity(line.fields.len());
    for (k, v) in &line.fields {
        let ty = match v {
            Val::F64(_) => FieldType::F64,
            Val::I64(_) => FieldType::I64,
            Val::U64(_) => FieldType::U64,
            Val::Bool(_) => FieldType::Bool,
            Val::Str(_) => {
                return Err(format!(
                    "field {k:?} is a string, which telestore does not store yet: table \
                     {table:?} cannot be created from this line"
                ))
            }
        };
        if fields.iter().any(|f| f.name == *k) {
            return Err(format!("field {k:?} given twice"));
        }
        fields.push(Field::new(k, ty));
    }
    TableSchema::new(table, fields, options.clone())
        .map_err(|e| format!("table {table:?} cannot be created from this line: {e}"))
}

/// `fields a (f64), b (i64); …`.
fn field_list(schema: &TableSchema) -> String {
    let names: Vec<String> = schema
        .fields
        .iter()
        .map(|f| format!("{} ({})", f.name, f.ty.name()))
        .collect();
    format!("fields {}; fields cannot be added yet", names.join(", "))
}

/// `line`'s fields as `schema`'s field bytes, into `out` (cleared first).
fn encode_fields(
    line: &Line<'_>,
    schema: &TableSchema,
    out: &mut Vec<u8>,
) -> std::result::Result<(), String> {
    // Clients send every field in schema order: then the names are the
    // schema's, none foreign or repeated. Otherwise look each up.
    let in_order = line.fields.len() == schema.fields.len()
        && line
            .fields
            .iter()
            .zip(&schema.fields)
            .all(|((k, _), f)| *k == f.name);
    if !in_order {
        check_field_names(line, schema)?;
    }
    out.clear();
    for (i, f) in schema.fields.iter().enumerate() {
        let v = if in_order {
            &line.fields[i].1
        } else {
            field_value(line, &f.name)
                .ok_or_else(|| format!("missing field {:?} of table {}", f.name, schema.name))?
        };
        encode_field(f.ty, v, out).map_err(|m| format!("field {:?}: {m}", f.name))?;
    }
    Ok(())
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

/// The series a line names (its index in `devices`): the device its
/// `device_tag` names, or else the series of its whole tag set.
fn device_of(
    store: &Store,
    parsed: &Line<'_>,
    device_tag: &str,
    index: &mut HashMap<String, usize>,
    devices: &mut Vec<(String, Vec<(String, String)>)>,
) -> std::result::Result<usize, String> {
    match parsed.tags.iter().find(|(k, _)| k == device_tag) {
        Some((_, name)) => named_device(store, parsed, name, device_tag, index, devices),
        None => tag_set_series(store, parsed, device_tag, index, devices),
    }
}

/// The device named `name` by the device tag. A device's other tags are
/// fixed at its first write: a line giving other tags than the registry
/// (or an earlier line of the request) holds is refused; a line without
/// them takes the device as registered.
fn named_device(
    store: &Store,
    parsed: &Line<'_>,
    name: &str,
    device_tag: &str,
    index: &mut HashMap<String, usize>,
    devices: &mut Vec<(String, Vec<(String, String)>)>,
) -> std::result::Result<usize, String> {
    let others = || parsed.tags.iter().filter(|(k, _)| k != device_tag);
    if let Some(&i) = index.get(name) {
        let known = &devices[i].1;
        let same = others().count() == 0
            || (known.len() == others().count()
                && others()
                    .zip(known)
                    .all(|((k, v), (k2, v2))| k == k2 && v == v2));
        if same {
            return Ok(i);
        }
    }
    let tags: Vec<(String, String)> = others()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    check_device_text(name, &tags)?;
    let known = match index.get(name) {
        Some(&i) => Some(devices[i].1.clone()),
        None => registered_tags(store, name),
    };
    let tags = match known {
        Some(k) => {
            if let Some(m) = tag_conflict(name, &k, &tags) {
                return Err(m);
            }
            k
        }
        None => tags,
    };
    Ok(match index.get(name) {
        Some(&i) => i,
        None => add_series(index, devices, name.to_string(), tags),
    })
}

/// A line without the device tag: its series is its whole tag set (what
/// InfluxDB calls the series key), named by the set in key order as the
/// line protocol writes it (`cpu=cpu0,host=truck-0`, with `,`, `=`, ` `
/// and `\` escaped), the tags held as the device's tags.
fn tag_set_series(
    store: &Store,
    parsed: &Line<'_>,
    device_tag: &str,
    index: &mut HashMap<String, usize>,
    devices: &mut Vec<(String, Vec<(String, String)>)>,
) -> std::result::Result<usize, String> {
    if parsed.tags.is_empty() {
        return Err(format!(
            "the line has no tags: a series is named by its {device_tag:?} tag, or else by \
             its whole tag set"
        ));
    }
    let mut tags: Vec<(String, String)> = parsed
        .tags
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tags.sort();
    let name = series_key(&tags);
    // A device tag may name a device like a series key (`device=host\=a`):
    // one name, so the tags must agree.
    let known = match index.get(&name) {
        Some(&i) if devices[i].1 == tags => return Ok(i),
        Some(&i) => Some(devices[i].1.clone()),
        None => None,
    };
    if name.len() > DEVICE_TEXT_MAX {
        return Err(format!(
            "the line's tag set names its series (there is no {device_tag:?} tag), and that \
             name is {} bytes, over the {DEVICE_TEXT_MAX} a device name may have",
            name.len()
        ));
    }
    check_device_text(&name, &tags)?;
    if let Some(known) = known.or_else(|| registered_tags(store, &name)) {
        if let Some(m) = tag_conflict(&name, &known, &tags) {
            return Err(m);
        }
    }
    Ok(add_series(index, devices, name, tags))
}

/// `k=v,k=v` of `tags` (in their order), escaped as line-protocol tags
/// are, so that two tag sets never share a name.
fn series_key(tags: &[(String, String)]) -> String {
    let mut out = String::new();
    for (i, (k, v)) in tags.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        escape_into(&mut out, k);
        out.push('=');
        escape_into(&mut out, v);
    }
    out
}

fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        if matches!(c, ',' | '=' | ' ' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
}

fn registered_tags(store: &Store, name: &str) -> Option<Vec<(String, String)>> {
    store
        .device_id(name)
        .and_then(|id| store.device(id))
        .map(|d| d.tags)
}

fn add_series(
    index: &mut HashMap<String, usize>,
    devices: &mut Vec<(String, Vec<(String, String)>)>,
    name: String,
    tags: Vec<(String, String)>,
) -> usize {
    index.insert(name.clone(), devices.len());
    devices.push((name, tags));
    devices.len() - 1
}

fn clip(s: &str) -> String {
    s.chars().take(120).collect()
}

/// Integers go into any numeric field that holds them exactly; floats
/// must be finite (`1e999` parses as infinity), and an `f32` field takes
/// the nearest `f32` of a value within its range. Anything else is
/// refused, never rounded or clamped silently.
fn encode_field(ty: FieldType, v: &Val<'_>, out: &mut Vec<u8>) -> std::result::Result<(), String> {
    let bad = || format!("{v} does not fit type {}", ty.name());
    match (ty, v) {
        (_, Val::I64(x)) => encode_int(ty, i128::from(*x), v, out)?,
        (_, Val::U64(x)) => encode_int(ty, i128::from(*x), v, out)?,
        (FieldType::F64 | FieldType::F32, Val::F64(x)) if !x.is_finite() => {
            return Err(format!("{v} is not a finite number"))
        }
        (FieldType::F64, Val::F64(x)) => out.extend_from_slice(&x.to_le_bytes()),
        (FieldType::F32, Val::F64(x)) => {
            let f = *x as f32;
            if !f.is_finite() {
                return Err(format!("{v} is outside the range of f32"));
            }
            out.extend_from_slice(&f.to_le_bytes())
        }
        (FieldType::Bool, Val::Bool(b)) => out.push(u8::from(*b)),
        _ => return Err(bad()),
    }
    Ok(())
}

/// An integer `n` (from an `i` or `u` value `v`) into a field of type
/// `ty`. Through `i128` no conversion saturates: 2^63 as a float is not
/// taken for `i64::MAX`.
fn encode_int(
    ty: FieldType,
    n: i128,
    v: &Val<'_>,
    out: &mut Vec<u8>,
) -> std::result::Result<(), String> {
    let bad = || format!("{v} does not fit type {}", ty.name());
    let inexact = || format!("{v} is not exactly representable as {}", ty.name());
    match ty {
        FieldType::F64 => {
            let f = n as f64;
            if f as i128 != n {
                return Err(inexact());
            }
            out.extend_from_slice(&f.to_le_bytes())
        }
        FieldType::F32 => {
            let f = n as f32;
            if f as i128 != n {
                return Err(inexact());
            }
            out.extend_from_slice(&f.to_le_bytes())
        }
        FieldType::I64 => {
            out.extend_from_slice(&i64::try_from(n).map_err(|_| bad())?.to_le_bytes())
        }
        FieldType::I32 => {
            out.extend_from_slice(&i32::try_from(n).map_err(|_| bad())?.to_le_bytes())
        }
        FieldType::U64 => {
            out.extend_from_slice(&u64::try_from(n).map_err(|_| bad())?.to_le_bytes())
        }
        FieldType::U32 => {
            out.extend_from_slice(&u32::try_from(n).map_err(|_| bad())?.to_le_bytes())
        }
        FieldType::Bool => return Err(bad()),
    }
    Ok(())
}

/// Why a write of lines failed.
#[derive(Debug)]
pub enum Refused {
    /// A line is wrong: nothing was created or written.
    Line(LineError),
    /// The store refused it.
    Store(Error),
}

/// [`prepare`] then [`apply`]. When a table the request was creating was
/// created meanwhile by another writer with other fields (or the same in
/// another order), the request is prepared once more against that table,
/// as a later request would be; nothing of it was written the first time.
pub fn write(
    store: &Store,
    body: &str,
    precision: Precision,
    rules: &Rules,
    now_ms: i64,
    durability: Durability,
) -> std::result::Result<usize, Refused> {
    let mut retried = false;
    loop {
        let p = prepare(store, body, precision, rules, now_ms).map_err(Refused::Line)?;
        let creates = p.creates();
        match apply(store, p, durability) {
            Err(Error::SchemaConflict { .. }) if creates && !retried => retried = true,
            r => return r.map_err(Refused::Store),
        }
    }
}

impl Prepared {
    /// The request creates a table.
    pub fn creates(&self) -> bool {
        !self.create.is_empty()
    }
}

/// Create the request's new tables, register its devices, then write each
/// table's rows. Returns the rows written. A request spanning several
/// tables is applied table by table (each table's rows as one batch when
/// they fit one, see [`Store::write_rows`]).
pub fn apply(store: &Store, p: Prepared, durability: Durability) -> Result<usize> {
    // Creating a table that exists with the same schema (another request
    // created it meanwhile) does nothing; with another, it is refused
    // (SchemaConflict) before anything of this request is written.
    for schema in p.create {
        store.create_table(schema)?;
    }
    let ids = store.register_devices(&p.devices)?;
    let mut n = 0;
    for (table, (mut rows, width, devs)) in p.tables {
        for (row, dev) in rows.chunks_exact_mut(width).zip(&devs) {
            row[..8].copy_from_slice(&ids[*dev].to_le_bytes());
        }
        store.write_rows(&table, rows, durability)?;
        n += devs.len();
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(ty: FieldType, v: Val<'_>) -> std::result::Result<Vec<u8>, String> {
        let mut out = Vec::new();
        encode_field(ty, &v, &mut out).map(|()| out)
    }

    #[test]
    fn conversions_are_exact_or_refused() {
        assert!(enc(FieldType::F64, Val::F64(f64::INFINITY)).is_err());
        assert!(enc(FieldType::F32, Val::F64(f64::NAN)).is_err());
        assert!(
            enc(FieldType::F32, Val::F64(1e300)).is_err(),
            "f32 overflow"
        );
        assert_eq!(
            enc(FieldType::F32, Val::F64(0.1)).unwrap(),
            0.1f32.to_le_bytes()
        );
        let two53 = 1i64 << 53;
        assert_eq!(
            enc(FieldType::F64, Val::I64(two53)).unwrap(),
            (two53 as f64).to_le_bytes()
        );
        assert!(enc(FieldType::F64, Val::I64(two53 + 1)).is_err());
        assert!(enc(FieldType::F64, Val::I64(i64::MAX)).is_err());
        assert!(enc(FieldType::F64, Val::U64(u64::MAX)).is_err());
        assert!(
            enc(FieldType::F64, Val::I64(i64::MIN)).is_ok(),
            "-2^63 is exact"
        );
        assert_eq!(
            enc(FieldType::F32, Val::I64(7)).unwrap(),
            7f32.to_le_bytes()
        );
        assert_eq!(
            enc(FieldType::F32, Val::U64(1 << 30)).unwrap(),
            ((1u64 << 30) as f32).to_le_bytes()
        );
        assert!(enc(FieldType::F32, Val::I64((1 << 24) + 1)).is_err());
        assert_eq!(
            enc(FieldType::I32, Val::U64(5)).unwrap(),
            5i32.to_le_bytes()
        );
    }

    #[test]
    fn a_table_created_meanwhile_with_other_fields_is_written_against_not_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), telestore_engine::Options::default()).unwrap();
        let rules = Rules::new("device");
        let ms = Precision::Ms;
        // Prepared while the table is missing: it would create (b, a).
        let late = prepare(&store, "t,host=x b=1,a=2 1", ms, &rules, 0).unwrap();
        assert!(late.creates());
        // Meanwhile another request creates it as (a, b).
        let early = "t,host=y a=1,b=2 1";
        assert_eq!(
            write(&store, early, ms, &rules, 0, Durability::Sync).unwrap(),
            1
        );
        // Applied as prepared, the late request conflicts, writing nothing...
        let e = apply(&store, late, Durability::Sync).unwrap_err();
        assert!(matches!(e, Error::SchemaConflict { .. }), "{e}");
        assert_eq!(store.device_id("host=x"), None);
        // ...which is why `write` prepares it again: against (a, b).
        let n = write(
            &store,
            "t,host=x b=1,a=2 1",
            ms,
            &rules,
            0,
            Durability::Sync,
        )
        .unwrap();
        assert_eq!(n, 1);
        let x = store.device_id("host=x").unwrap();
        let row = &store.latest("t", x, 1).unwrap()[0];
        assert_eq!(row.fields[..8], 2f64.to_le_bytes(), "a first");
    }

    #[test]
    fn a_device_tag_and_a_tag_set_naming_one_device_must_agree() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), telestore_engine::Options::default()).unwrap();
        let rules = Rules::new("device");
        let body = "t,device=host\\=a,fleet=x v=1 1\nt,host=a v=2 2\n";
        let e = prepare(&store, body, Precision::Ms, &rules, 0).unwrap_err();
        assert_eq!(e.line, 2, "{e:?}");
        let long = format!("t,host={} v=1 1", "h".repeat(300));
        let e = prepare(&store, &long, Precision::Ms, &rules, 0).unwrap_err();
        assert!(e.message.contains("tag set names its series"), "{e:?}");
    }

    #[test]
    fn sub_millisecond_timestamps_are_refused_not_floored() {
        assert_eq!(
            Precision::Ns.to_ms(1_700_000_000_000_000_000),
            Ok(1_700_000_000_000)
        );
        assert!(Precision::Ns.to_ms(1_700_000_000_000_000_001).is_err());
        assert!(Precision::Us.to_ms(1_700_000_000_000_001).is_err());
        assert_eq!(Precision::Us.to_ms(-1_000), Ok(-1));
        assert_eq!(Precision::M.to_ms(2), Ok(120_000));
        assert_eq!(Precision::H.to_ms(1), Ok(3_600_000));
        assert!(Precision::H.to_ms(i64::MAX).is_err());
    }
}
