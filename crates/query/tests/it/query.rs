//! The query engine (`telestore_query`) against a reference model:
//! latest, range, scan and agg over every field type, device names and
//! tags, overwrites and deletes across memstore and HFiles; argument
//! errors naming the argument; exports read back by the Arrow and
//! Parquet readers.

use crate::common;

use arrow_array::RecordBatch;
use common::mixed::{self, fmt_ts, Model, Vals, FIELDS, RAW_ID, T0, TABLE};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use telestore_engine::{Error, Options, Store};
use telestore_query::export::{Codec, FileFormat, FileSink};
use telestore_query::output::{Format, Printer};
use telestore_query::{Kind, Params, Plan, Prepared};

fn setup() -> (tempfile::TempDir, Store, Model) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let model = mixed::fill(&store);
    (dir, store, model)
}

fn params(kind: Kind) -> Params {
    Params {
        kind,
        table: TABLE.into(),
        ..Params::default()
    }
}

fn batches(store: &Store, p: &Params) -> (arrow_schema::SchemaRef, Vec<RecordBatch>) {
    let plan = Plan::resolve(store, p, store.now_ms()).unwrap();
    let prepared = Prepared::new(store, plan);
    let schema = prepared.schema();
    let mut out = Vec::new();
    prepared
        .run(store, &mut |b| {
            out.push(b);
            Ok(())
        })
        .unwrap();
    (schema, out)
}

/// The result as JSON objects, through the JSON-lines printer.
fn run(store: &Store, p: &Params) -> Vec<Value> {
    let (schema, bs) = batches(store, p);
    json_rows(schema, &bs)
}

fn json_rows(schema: arrow_schema::SchemaRef, bs: &[RecordBatch]) -> Vec<Value> {
    let mut pr = Printer::new(Format::Jsonl, schema, Vec::new()).unwrap();
    for b in bs {
        pr.write(b).unwrap();
    }
    let text = String::from_utf8(pr.finish().unwrap()).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn err(store: &Store, p: &Params) -> (&'static str, String) {
    match Plan::resolve(store, p, store.now_ms()) {
        Err(Error::InvalidInput { what, message }) => (what, message),
        Err(e) => panic!("expected InvalidInput, got {e}"),
        Ok(_) => panic!("expected an error for {p:?}"),
    }
}

/// A device's rows in `[from, to)`, newest first.
fn model_rows(m: &Model, d: u64, from: i64, to: i64) -> Vec<(i64, Vals)> {
    m.rows
        .range((d, from)..(d, to))
        .rev()
        .map(|((_, ts), v)| (*ts, *v))
        .collect()
}

fn id_of(m: &Model, name: &str) -> u64 {
    *m.names.iter().find(|(_, n)| n.as_str() == name).unwrap().0
}

#[test]
fn latest_and_range_match_the_model() {
    let (_d, store, m) = setup();
    let d1 = id_of(&m, "dev-1");
    let mut p = params(Kind::Latest);
    p.device = Some("dev-1".into());
    p.n = Some(3);
    let want: Vec<Value> = model_rows(&m, d1, i64::MIN, i64::MAX)
        .iter()
        .take(3)
        .map(|(ts, v)| m.row_json(d1, *ts, v, &FIELDS))
        .collect();
    assert_eq!(run(&store, &p), want);

    // By numeric id, a window, ascending, two fields, a limit.
    let mut p = params(Kind::Range);
    p.device = Some(d1.to_string());
    p.from = Some(format!("{}ms", T0 + 100_000));
    p.to = Some(format!("{}s", (T0 + 200_000) / 1000));
    p.order = Some("asc".into());
    p.fields = Some("u,b".into());
    p.limit = Some(20);
    let mut want: Vec<(i64, Vals)> = model_rows(&m, d1, T0 + 100_000, T0 + 200_000);
    want.reverse();
    let want: Vec<Value> = want
        .iter()
        .take(20)
        .map(|(ts, v)| m.row_json(d1, *ts, v, &["u", "b"]))
        .collect();
    assert_eq!(run(&store, &p), want);

    // `to` is exclusive, `from` inclusive; an RFC 3339 window of one row.
    let mut p = params(Kind::Range);
    p.device = Some("dev-1".into());
    p.from = Some(fmt_ts(T0 + 50_000));
    p.to = Some(fmt_ts(T0 + 51_000));
    let got = run(&store, &p);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["ts"], json!(fmt_ts(T0 + 50_000)));
    assert_eq!(
        got[0]["u"],
        json!(Vals::new(d1, 50, 1).u),
        "the overwrite wins"
    );

    // The deleted reading is gone; the unnamed device has a null name.
    let d0 = id_of(&m, "dev-0");
    let mut p = params(Kind::Range);
    p.device = Some("dev-0".into());
    p.from = Some(format!("{}ms", T0 + 7_000));
    p.to = Some(format!("{}ms", T0 + 8_000));
    assert!(run(&store, &p).is_empty(), "deleted at {}", T0 + 7_000);
    let mut p = params(Kind::Latest);
    p.device = Some(RAW_ID.to_string());
    let got = run(&store, &p);
    assert_eq!(got[0]["device"], Value::Null);
    assert_eq!(got[0]["device_id"], json!(RAW_ID));
    assert!(m.rows.contains_key(&(d0, T0)));
}

#[test]
fn scans_select_devices_by_tag_list_or_all() {
    let (_d, store, m) = setup();
    let from = T0 + 390_000;
    let to = T0 + 395_000;
    let rows_of = |ds: &[u64]| -> Vec<Value> {
        let mut v: Vec<Value> = Vec::new();
        for &d in ds {
            for (ts, vals) in model_rows(&m, d, from, to) {
                v.push(m.row_json(d, ts, &vals, &FIELDS));
            }
        }
        v
    };
    let sorted = |mut v: Vec<Value>| {
        v.sort_by_key(|r| (r["device_id"].as_u64(), r["ts"].as_str().map(String::from)));
        v
    };
    let mut p = params(Kind::Scan);
    p.from = Some(format!("{from}ms"));
    p.to = Some(format!("{to}ms"));
    let all: Vec<u64> = m.names.keys().copied().chain([RAW_ID]).collect();
    let got = run(&store, &p);
    assert_eq!(sorted(got.clone()), sorted(rows_of(&all)));
    // Each device's rows are contiguous and newest first (key order).
    for w in got.windows(2) {
        if w[0]["device_id"] == w[1]["device_id"] {
            assert!(w[0]["ts"].as_str() > w[1]["ts"].as_str());
        }
    }

    p.where_ = Some("fleet=East".into());
    let east: Vec<u64> = m
        .fleet
        .iter()
        .filter(|(_, f)| *f == "East")
        .map(|(d, _)| *d)
        .collect();
    assert_eq!(sorted(run(&store, &p)), sorted(rows_of(&east)));

    p.where_ = None;
    p.devices = Some(format!("dev-3,{RAW_ID}"));
    let d3 = id_of(&m, "dev-3");
    assert_eq!(sorted(run(&store, &p)), sorted(rows_of(&[d3, RAW_ID])));
    p.limit = Some(4);
    assert_eq!(run(&store, &p).len(), 4);

    // An empty window [t, t) is empty.
    let mut p = params(Kind::Scan);
    p.from = Some(format!("{from}ms"));
    p.to = Some(format!("{from}ms"));
    assert!(run(&store, &p).is_empty());
}

/// (ts, values, device)
type Reading = (i64, Vals, u64);
/// Edits one parameter.
type Edit = Box<dyn Fn(&mut Params)>;

/// Reference aggregation over the model.
fn model_agg(
    m: &Model,
    devices: &[u64],
    func: &str,
    every: i64,
    group: &dyn Fn(u64) -> Value,
) -> BTreeMap<(String, i64), Map<String, Value>> {
    let mut buckets: BTreeMap<(String, i64), Vec<Reading>> = BTreeMap::new();
    for ((d, ts), v) in &m.rows {
        if devices.contains(d) {
            let g = group(*d).to_string();
            buckets
                .entry((g, ts.div_euclid(every) * every))
                .or_default()
                .push((*ts, *v, *d));
        }
    }
    let mut out = BTreeMap::new();
    for (k, rows) in buckets {
        let mut o = Map::new();
        // Ties on the timestamp go to the smaller device id.
        let first = rows.iter().min_by_key(|r| (r.0, r.2)).unwrap().1;
        let last = rows
            .iter()
            .max_by_key(|r| (r.0, std::cmp::Reverse(r.2)))
            .unwrap()
            .1;
        for (fi, name) in FIELDS.iter().enumerate() {
            let vals: Vec<Value> = rows.iter().map(|r| r.1.json()[fi].1.clone()).collect();
            let nums: Vec<f64> = vals
                .iter()
                .map(|v| {
                    v.as_f64()
                        .unwrap_or(if v == &json!(true) { 1.0 } else { 0.0 })
                })
                .collect();
            let pick = |x: &Vals| x.json()[fi].1.clone();
            let cmp = |a: &&f64, b: &&f64| a.partial_cmp(b).unwrap();
            let at = |target: f64| vals[nums.iter().position(|n| *n == target).unwrap()].clone();
            let v = match func {
                "count" => json!(rows.len()),
                "avg" => json!(nums.iter().sum::<f64>() / nums.len() as f64),
                "sum" if fi < 2 => json!(nums.iter().sum::<f64>()),
                "sum" => json!(nums.iter().sum::<f64>() as i128),
                "min" => at(*nums.iter().min_by(cmp).unwrap()),
                "max" => at(*nums.iter().max_by(cmp).unwrap()),
                "first" => pick(&first),
                "last" => pick(&last),
                _ => unreachable!(),
            };
            o.insert((*name).into(), v);
        }
        out.insert(k, o);
    }
    out
}

#[test]
fn agg_matches_the_model_for_every_function_and_grouping() {
    let (_d, store, m) = setup();
    let every = 60_000;
    let named: Vec<u64> = m.names.keys().copied().collect();
    let all: Vec<u64> = named.iter().copied().chain([RAW_ID]).collect();
    for func in ["avg", "min", "max", "sum", "count", "first", "last"] {
        for group in ["none", "device", "fleet"] {
            let mut p = params(Kind::Agg);
            p.func = Some(func.into());
            p.every = Some("1m".into());
            if group != "none" {
                p.group_by = Some(group.into());
            }
            let got = run(&store, &p);
            let gkey = |d: u64| match group {
                "device" => json!(d),
                "fleet" => m.fleet.get(&d).map_or(Value::Null, |f| json!(f)),
                _ => Value::Null,
            };
            let want = model_agg(&m, &all, func, every, &gkey);
            assert_eq!(got.len(), want.len(), "{func} by {group}");
            for r in &got {
                let g = match group {
                    "device" => r["device_id"].to_string(),
                    "fleet" => r["fleet"].to_string(),
                    _ => "null".into(),
                };
                let ts = r["ts"].as_str().unwrap().to_string();
                let bucket = want
                    .iter()
                    .find(|((wg, b), _)| *wg == g && fmt_ts(*b) == ts)
                    .unwrap_or_else(|| panic!("{func} by {group}: no bucket {g} {ts}"))
                    .1;
                for name in FIELDS {
                    let (a, b) = (&r[name], &bucket[name]);
                    let close = match (a.as_f64(), b.as_f64()) {
                        (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * y.abs().max(1.0),
                        _ => a == b,
                    };
                    assert!(close, "{func} by {group}, {g} {ts}, {name}: {a} != {b}");
                }
                if group == "device" {
                    let d = r["device_id"].as_u64().unwrap();
                    let name = m.name(d).map_or(Value::Null, |n| json!(n));
                    assert_eq!(r["device"], name);
                }
            }
            // Time order within each group.
            for w in got.windows(2) {
                let same = match group {
                    "device" => w[0]["device_id"] == w[1]["device_id"],
                    "fleet" => w[0]["fleet"] == w[1]["fleet"],
                    _ => true,
                };
                if same {
                    assert!(w[0]["ts"].as_str() < w[1]["ts"].as_str(), "{func} {group}");
                }
            }
        }
    }
    // One device, a limit.
    let mut p = params(Kind::Agg);
    p.device = Some("dev-2".into());
    p.func = Some("count".into());
    p.every = Some("100s".into());
    p.fields = Some("f".into());
    let got = run(&store, &p);
    assert_eq!(got.len(), 4);
    assert!(got.iter().all(|r| r["f"] == json!(100)), "{got:?}");
    p.limit = Some(2);
    assert_eq!(run(&store, &p).len(), 2);
}

#[test]
fn bad_arguments_are_refused_naming_the_argument() {
    let (_d, store, _m) = setup();
    // An unknown table is its own error, naming the tables there are.
    let mut p = params(Kind::Scan);
    p.table = "nope".into();
    let Err(e) = Plan::resolve(&store, &p, store.now_ms()) else {
        panic!("an unknown table was taken")
    };
    assert!(matches!(e, Error::UnknownTable(_)), "{e}");
    assert!(e.to_string().contains("(tables: "), "{e}");
    let cases: Vec<(&str, Edit)> = vec![
        ("--fields", Box::new(|p| p.fields = Some("f,nope".into()))),
        (
            "--device",
            Box::new(|p| p.device = Some("no-such-truck".into())),
        ),
        ("--from", Box::new(|p| p.from = Some("yesterday".into()))),
        ("--to", Box::new(|p| p.to = Some("1700000000".into()))),
        (
            "--from",
            Box::new(|p| {
                p.from = Some("now".into());
                p.to = Some("-1h".into());
            }),
        ),
        ("--where", Box::new(|p| p.where_ = Some("color=red".into()))),
        ("--where", Box::new(|p| p.where_ = Some("fleet".into()))),
        ("--order", Box::new(|p| p.order = Some("up".into()))),
        ("--fn", Box::new(|p| p.func = Some("avg".into()))),
    ];
    for (arg, f) in cases {
        let mut p = params(Kind::Scan);
        f(&mut p);
        let (what, msg) = err(&store, &p);
        assert_eq!(what, arg, "{msg}");
    }
    let mut p = params(Kind::Latest);
    assert_eq!(err(&store, &p).0, "--device", "latest needs a device");
    p.device = Some("dev-1".into());
    p.n = Some(0);
    assert_eq!(err(&store, &p).0, "--n");
    let mut p = params(Kind::Agg);
    p.group_by = Some("color".into());
    assert_eq!(err(&store, &p).0, "--group-by");
    p.group_by = None;
    p.every = Some("0s".into());
    assert_eq!(err(&store, &p).0, "--every");
    p.every = None;
    p.func = Some("median".into());
    assert_eq!(err(&store, &p).0, "--fn");
}

fn read_back(path: &std::path::Path, format: FileFormat) -> Vec<RecordBatch> {
    let f = std::fs::File::open(path).unwrap();
    match format {
        FileFormat::Arrow => arrow_ipc::reader::FileReader::try_new(f, None)
            .unwrap()
            .map(|b| b.unwrap())
            .collect(),
        FileFormat::ArrowStream => arrow_ipc::reader::StreamReader::try_new(f, None)
            .unwrap()
            .map(|b| b.unwrap())
            .collect(),
        FileFormat::Parquet => {
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
                .unwrap()
                .build()
                .unwrap()
                .map(|b| b.unwrap())
                .collect()
        }
    }
}

#[test]
fn exports_read_back_equal_the_scan() {
    let (dir, store, m) = setup();
    let mut p = params(Kind::Scan);
    p.batch_rows = Some(500);
    p.from = Some(format!("{T0}ms"));
    let (schema, scan) = batches(&store, &p);
    assert!(scan.len() > 2, "several batches");
    let want = json_rows(schema.clone(), &scan);
    assert_eq!(want.len(), m.rows.len());
    let meta = schema.metadata();
    assert_eq!(meta["telestore.table"], TABLE);
    assert_eq!(meta["telestore.from_ms"], T0.to_string());
    assert_eq!(meta["telestore.to_ms"], "unbounded");
    for (format, codecs) in [
        (FileFormat::Arrow, [Codec::None, Codec::Zstd, Codec::Lz4]),
        (
            FileFormat::ArrowStream,
            [Codec::None, Codec::Zstd, Codec::Lz4],
        ),
        (FileFormat::Parquet, [Codec::None, Codec::Zstd, Codec::Lz4]),
    ] {
        for codec in codecs {
            let path = dir.path().join(format!("out-{format:?}-{codec:?}"));
            let mut sink = FileSink::create(&path, format, codec, &schema).unwrap();
            for b in &scan {
                sink.write(b).unwrap();
            }
            assert!(!path.exists(), "nothing under the final name before commit");
            sink.commit().unwrap();
            let back = read_back(&path, format);
            let got_schema = back[0].schema();
            assert_eq!(got_schema.fields(), schema.fields(), "{format:?} {codec:?}");
            assert_eq!(json_rows(got_schema, &back), want, "{format:?} {codec:?}");
        }
    }
    // Dropped before commit: neither the file nor its temporary remain.
    let path = dir.path().join("dropped.arrow");
    let mut sink = FileSink::create(&path, FileFormat::Arrow, Codec::None, &schema).unwrap();
    sink.write(&scan[0]).unwrap();
    drop(sink);
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("dropped"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
