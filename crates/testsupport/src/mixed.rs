//! A table with every field type, named devices with tags, an unnamed
//! device, and a reference model of what it holds — for the query and
//! export tests.

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use telestore_engine::schema::batch::push_row;
use telestore_engine::schema::{BlockEncoding, Field, FieldType, TableOptions, TableSchema};
use telestore_engine::{Durability, Store};

pub const TABLE: &str = "m";
pub const T0: i64 = 1_700_000_000_000;
/// Readings per device, one per second.
pub const ROUNDS: u64 = 400;
/// A device written by numeric id, never registered.
pub const RAW_ID: u64 = 7;
pub const FIELDS: [&str; 7] = ["f", "g", "i", "j", "u", "w", "b"];

pub fn schema() -> TableSchema {
    schema_with(TableOptions::default().encoding)
}

/// [`schema`] with its blocks in `encoding`.
pub fn schema_with(encoding: BlockEncoding) -> TableSchema {
    let t = FieldType::ALL;
    let fields = FIELDS
        .iter()
        .zip(t)
        .map(|(n, t)| Field::new(n, t))
        .collect();
    let opts = TableOptions {
        regions: 4,
        encoding,
        ..TableOptions::default()
    };
    TableSchema::new(TABLE, fields, opts).unwrap()
}

/// One row's values; `gen` distinguishes an overwrite.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Vals {
    pub f: f64,
    pub g: f32,
    pub i: i64,
    pub j: i32,
    pub u: u64,
    pub w: u32,
    pub b: bool,
}

impl Vals {
    pub fn new(d: u64, k: u64, gen: u64) -> Vals {
        Vals {
            f: (d % 1000) as f64 * 1000.0 + k as f64 + 0.5 + gen as f64,
            g: k as f32 * 0.25,
            i: -(k as i64) * 3 + (d % 100) as i64,
            j: k as i32 - 100,
            u: (d % 1000) * 1_000_000 + k + gen,
            w: k as u32,
            b: k.is_multiple_of(3),
        }
    }

    pub fn bytes(&self) -> Vec<u8> {
        let mut v = self.f.to_le_bytes().to_vec();
        v.extend_from_slice(&self.g.to_le_bytes());
        v.extend_from_slice(&self.i.to_le_bytes());
        v.extend_from_slice(&self.j.to_le_bytes());
        v.extend_from_slice(&self.u.to_le_bytes());
        v.extend_from_slice(&self.w.to_le_bytes());
        v.push(u8::from(self.b));
        v
    }

    /// The values as JSON numbers/booleans by field name.
    pub fn json(&self) -> [(&'static str, Value); 7] {
        [
            ("f", json!(self.f)),
            ("g", json!(f64::from(self.g))),
            ("i", json!(self.i)),
            ("j", json!(self.j)),
            ("u", json!(self.u)),
            ("w", json!(self.w)),
            ("b", json!(self.b)),
        ]
    }
}

/// What the table holds: (device, ts) → values; plus device names/tags.
pub struct Model {
    pub rows: BTreeMap<(u64, i64), Vals>,
    pub names: BTreeMap<u64, String>,
    pub fleet: BTreeMap<u64, String>,
}

impl Model {
    pub fn name(&self, d: u64) -> Option<&str> {
        self.names.get(&d).map(String::as_str)
    }

    /// A row as a JSON object with the export columns, in order.
    pub fn row_json(&self, d: u64, ts: i64, v: &Vals, fields: &[&str]) -> Value {
        let mut o = Map::new();
        o.insert("device_id".into(), json!(d));
        o.insert(
            "device".into(),
            self.name(d).map_or(Value::Null, |n| json!(n)),
        );
        o.insert("ts".into(), json!(fmt_ts(ts)));
        for (k, val) in v.json() {
            if fields.contains(&k) {
                o.insert(k.into(), val);
            }
        }
        Value::Object(o)
    }
}

/// `ms` as the query layer prints it (RFC 3339, milliseconds, UTC);
/// written here, apart from `telestore_query::time`, as the tests' oracle.
pub fn fmt_ts(ms: i64) -> String {
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(t) => t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        None => format!("{ms}ms"),
    }
}

/// Create the table in `store` and fill it: six named devices (fleet East
/// for even, West for odd), one unnamed device, a flush in the middle,
/// overwrites of every 50th reading after it, and one deleted reading.
pub fn fill(store: &Store) -> Model {
    fill_with(store, TableOptions::default().encoding)
}

/// [`fill`] into a table whose blocks are `encoding`.
pub fn fill_with(store: &Store, encoding: BlockEncoding) -> Model {
    store.create_table(schema_with(encoding)).unwrap();
    let mut names = BTreeMap::new();
    let mut fleet = BTreeMap::new();
    let regs: Vec<(String, Vec<(String, String)>)> = (0..6)
        .map(|n| {
            let f = if n % 2 == 0 { "East" } else { "West" };
            (
                format!("dev-{n}"),
                vec![("fleet".to_string(), f.to_string())],
            )
        })
        .collect();
    let ids = store.register_devices(&regs).unwrap();
    for (id, (n, tags)) in ids.iter().zip(&regs) {
        names.insert(*id, n.clone());
        fleet.insert(*id, tags[0].1.clone());
    }
    let mut devices = ids.clone();
    devices.push(RAW_ID);
    let mut rows = BTreeMap::new();
    let mut batch = Vec::new();
    for &d in &devices {
        for k in 0..ROUNDS {
            let ts = T0 + k as i64 * 1000;
            let v = Vals::new(d, k, 0);
            push_row(&mut batch, d, ts, &v.bytes());
            rows.insert((d, ts), v);
        }
    }
    store.write(TABLE, &batch, Durability::Sync).unwrap();
    store.flush().unwrap();
    batch.clear();
    for &d in &devices {
        for k in (0..ROUNDS).step_by(50) {
            let ts = T0 + k as i64 * 1000;
            let v = Vals::new(d, k, 1);
            push_row(&mut batch, d, ts, &v.bytes());
            rows.insert((d, ts), v);
        }
    }
    store.write(TABLE, &batch, Durability::Sync).unwrap();
    let gone = T0 + 7_000;
    store
        .delete(TABLE, &[(ids[0], gone)], Durability::Sync)
        .unwrap();
    rows.remove(&(ids[0], gone));
    Model { rows, names, fleet }
}
