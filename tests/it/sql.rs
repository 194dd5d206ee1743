//! SQL through DataFusion: answers checked against the reference model of
//! `common::mixed` (every field type, tags, overwrites, a delete), filter
//! and limit pushdown read from the plan, DDL/DML refused, bad SQL a
//! clear error; and `telestore sql` embedded and through `--server`
//! giving the same answers. The DuckDB oracle (the same queries over the
//! exported Parquet file) runs when `TELESTORE_PYTHON` is set.

use crate::common;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, UInt64Type};
use arrow_array::RecordBatch;
use common::mixed::{self, Model, T0, TABLE};
use futures::StreamExt;
use std::collections::BTreeMap;
use std::sync::Arc;
use telestore::query::export::{FileFormat, FileSink};
use telestore::sql::{QueryLimits, QueryPool};
use telestore::{Error, Options, Store};

fn fixture() -> (tempfile::TempDir, Arc<Store>, Model) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let m = mixed::fill(&store);
    (dir, Arc::new(store), m)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn run(
    rt: &tokio::runtime::Runtime,
    store: &Arc<Store>,
    sql: &str,
) -> telestore::Result<Vec<RecordBatch>> {
    let pool = pool();
    rt.block_on(async {
        let (_, mut s) = telestore::sql::execute(store, &pool, sql).await?;
        let mut out = Vec::new();
        while let Some(b) = s.next().await {
            out.push(b?);
        }
        Ok(out)
    })
}

/// A query pool of the daemon's defaults, spilling nowhere.
fn pool() -> Arc<QueryPool> {
    QueryPool::new(None, QueryLimits::default()).unwrap()
}

fn explain(rt: &tokio::runtime::Runtime, store: &Arc<Store>, sql: &str) -> String {
    let batches = run(rt, store, &format!("EXPLAIN {sql}")).unwrap();
    let mut text = String::new();
    for b in batches {
        let plan = b.column(1).as_string::<i32>();
        for i in 0..b.num_rows() {
            text.push_str(plan.value(i));
            text.push('\n');
        }
    }
    text
}

fn u64s(b: &[RecordBatch], col: usize) -> Vec<u64> {
    b.iter()
        .flat_map(|b| b.column(col).as_primitive::<UInt64Type>().values().to_vec())
        .collect()
}

fn i64s(b: &[RecordBatch], col: usize) -> Vec<i64> {
    b.iter()
        .flat_map(|b| b.column(col).as_primitive::<Int64Type>().values().to_vec())
        .collect()
}

#[test]
fn answers_match_the_model() {
    let (_dir, store, m) = fixture();
    let rt = rt();
    let count = run(&rt, &store, &format!("SELECT count(*) FROM {TABLE}")).unwrap();
    assert_eq!(i64s(&count, 0), vec![m.rows.len() as i64]);

    // Per device: rows and the sum of an integer field, exactly.
    let per = run(
        &rt,
        &store,
        &format!(
            "SELECT device_id, count(*), sum(i) FROM {TABLE} GROUP BY device_id ORDER BY device_id"
        ),
    )
    .unwrap();
    let mut want: BTreeMap<u64, (i64, i64)> = BTreeMap::new();
    for ((d, _), v) in &m.rows {
        let e = want.entry(*d).or_default();
        e.0 += 1;
        e.1 += v.i;
    }
    let got: BTreeMap<u64, (i64, i64)> = u64s(&per, 0)
        .into_iter()
        .zip(i64s(&per, 1).into_iter().zip(i64s(&per, 2)))
        .collect();
    assert_eq!(got, want);

    // A tag column, filtered and grouped, and a time window.
    let (from, to) = (T0 + 100_000, T0 + 200_000);
    let sql = format!(
        "SELECT fleet, count(*), avg(f) FROM {TABLE} \
         WHERE fleet = 'East' AND ts >= to_timestamp_millis({from}) AND ts < to_timestamp_millis({to}) \
         GROUP BY fleet"
    );
    let east = run(&rt, &store, &sql).unwrap();
    let rows: Vec<_> = m
        .rows
        .iter()
        .filter(|((d, ts), _)| {
            m.fleet.get(d).map(String::as_str) == Some("East") && (from..to).contains(ts)
        })
        .collect();
    assert_eq!(east[0].column(0).as_any_dictionary().len(), 1);
    assert_eq!(i64s(&east, 1), vec![rows.len() as i64]);
    let avg = rows.iter().map(|(_, v)| v.f).sum::<f64>() / rows.len() as f64;
    let got = east[0].column(2).as_primitive::<Float64Type>().value(0);
    assert!((got - avg).abs() <= avg.abs() * 1e-12, "{got} vs {avg}");

    // Downsampling with date_bin: one bucket per minute of the 400 s.
    let buckets = run(
        &rt,
        &store,
        &format!(
            "SELECT date_bin(INTERVAL '1 minute', ts) AS bucket, count(*) AS n FROM {TABLE} \
             GROUP BY bucket ORDER BY bucket"
        ),
    )
    .unwrap();
    let n: i64 = i64s(&buckets, 1).iter().sum();
    assert_eq!(n, m.rows.len() as i64);
    assert_eq!(buckets.iter().map(|b| b.num_rows()).sum::<usize>(), 7);

    // Latest per device, and a join with the registry.
    let latest = run(
        &rt,
        &store,
        &format!("SELECT device_id, max(ts) FROM {TABLE} GROUP BY device_id"),
    )
    .unwrap();
    assert_eq!(latest.iter().map(|b| b.num_rows()).sum::<usize>(), 7);
    let joined = run(
        &rt,
        &store,
        &format!(
            "SELECT d.fleet, count(*) FROM {TABLE} t JOIN devices d ON t.device_id = d.device_id \
             GROUP BY d.fleet ORDER BY d.fleet"
        ),
    )
    .unwrap();
    let west = m
        .rows
        .keys()
        .filter(|(d, _)| m.fleet.get(d).map(String::as_str) == Some("West"))
        .count();
    let east_all = m
        .rows
        .keys()
        .filter(|(d, _)| m.fleet.get(d).map(String::as_str) == Some("East"))
        .count();
    assert_eq!(i64s(&joined, 1), vec![east_all as i64, west as i64]);
}

#[test]
fn filters_and_limits_reach_the_scan() {
    let (_dir, store, _m) = fixture();
    let rt = rt();
    let all = explain(&rt, &store, &format!("SELECT * FROM {TABLE}"));
    assert!(all.contains("devices=all"), "{all}");
    assert!(!all.contains("regions=1,"), "{all}");
    let one = explain(
        &rt,
        &store,
        &format!("SELECT ts, f FROM {TABLE} WHERE device = 'dev-2'"),
    );
    assert!(
        one.contains("regions=1,") && one.contains("devices=1"),
        "{one}"
    );
    assert!(
        !one.contains("FilterExec"),
        "the scan applies the filter: {one}"
    );
    let by_id = explain(
        &rt,
        &store,
        &format!("SELECT * FROM {TABLE} WHERE device_id IN (7, 8)"),
    );
    assert!(by_id.contains("devices=2"), "{by_id}");
    let tag = explain(
        &rt,
        &store,
        &format!("SELECT * FROM {TABLE} WHERE fleet = 'West'"),
    );
    assert!(tag.contains("devices=3"), "{tag}");
    let window = explain(
        &rt,
        &store,
        &format!("SELECT * FROM {TABLE} WHERE ts >= to_timestamp_millis({T0}) AND ts < to_timestamp_millis({})", T0 + 5000),
    );
    assert!(
        window.contains(&format!("window=[{T0}, {})", T0 + 5000)),
        "{window}"
    );
    let limit = explain(&rt, &store, &format!("SELECT * FROM {TABLE} LIMIT 5"));
    assert!(limit.contains("limit=5"), "{limit}");
    let five = run(&rt, &store, &format!("SELECT * FROM {TABLE} LIMIT 5")).unwrap();
    assert_eq!(five.iter().map(|b| b.num_rows()).sum::<usize>(), 5);
    // An unknown device matches nothing and reads nothing.
    let none = run(
        &rt,
        &store,
        &format!("SELECT count(*) FROM {TABLE} WHERE device = 'nope'"),
    )
    .unwrap();
    assert_eq!(i64s(&none, 0), vec![0]);
    // Only the projected fields are read.
    let cols = explain(&rt, &store, &format!("SELECT max(f) FROM {TABLE}"));
    assert!(cols.contains("columns=[f]"), "{cols}");
}

#[test]
fn bad_sql_is_a_clear_error_and_nothing_changes() {
    let (_dir, store, m) = fixture();
    let rt = rt();
    for (sql, says) in [
        ("SELEC 1", "SELEC"),
        ("SELECT nope FROM m", "nope"),
        ("SELECT * FROM missing", "missing"),
        ("CREATE TABLE x AS SELECT 1", "DDL"),
        ("INSERT INTO m (device_id) VALUES (1)", "DML"),
        ("SET datafusion.execution.batch_size = 1", "Statement"),
        ("", "empty"),
    ] {
        match run(&rt, &store, sql) {
            Err(Error::InvalidInput { what, message }) => {
                assert_eq!(what, "sql");
                assert!(message.contains(says), "{sql}: {message}");
            }
            other => panic!("{sql}: {other:?}"),
        }
    }
    let count = run(&rt, &store, &format!("SELECT count(*) FROM {TABLE}")).unwrap();
    assert_eq!(i64s(&count, 0), vec![m.rows.len() as i64]);
}

#[test]
fn the_cli_answers_embedded_and_through_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path(), Options::default()).unwrap();
        mixed::fill(&store);
        store.close().unwrap();
    }
    let sql = format!("SELECT device, count(*) AS n FROM {TABLE} WHERE fleet = 'East' GROUP BY device ORDER BY device");
    let embedded = common::telestore_cli(dir.path(), &["sql", &sql, "--format", "csv"]);
    assert!(
        embedded.status.success(),
        "{}",
        String::from_utf8_lossy(&embedded.stderr)
    );
    let text = String::from_utf8(embedded.stdout).unwrap();
    assert_eq!(text, "device,n\ndev-0,399\ndev-2,400\ndev-4,400\n");
    // Types only SQL produces print too (Arrow's rendering).
    let typed = common::telestore_cli(
        dir.path(),
        &[
            "sql",
            "SELECT CAST(5 AS TINYINT) AS x, to_timestamp_nanos(1500000000) AS t, \
             arrow_cast('abc', 'Utf8View') AS s, CAST(1.25 AS DECIMAL(5,2)) AS d",
            "--format",
            "json",
        ],
    );
    assert!(
        typed.status.success(),
        "{}",
        String::from_utf8_lossy(&typed.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&typed.stdout).unwrap();
    assert_eq!(v[0]["x"], 5);
    assert_eq!(v[0]["s"], "abc");
    assert_eq!(v[0]["d"], 1.25);
    assert!(
        v[0]["t"]
            .as_str()
            .unwrap()
            .starts_with("1970-01-01T00:00:01.5"),
        "{v}"
    );
    let bad = common::telestore_cli(dir.path(), &["sql", "SELECT nope FROM m"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("nope"));

    let store = Arc::new(Store::open(dir.path(), Options::default()).unwrap());
    let cfg = telestore::daemon::ServerConfig {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    };
    let srv = telestore::daemon::start(store.clone(), "127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let url = format!("http://{}", srv.http_addr.unwrap());
    let remote = std::process::Command::new(env!("CARGO_BIN_EXE_telestore"))
        .args(["sql", &sql, "--format", "csv", "--server", &url])
        .output()
        .unwrap();
    assert!(
        remote.status.success(),
        "{}",
        String::from_utf8_lossy(&remote.stderr)
    );
    assert_eq!(String::from_utf8(remote.stdout).unwrap(), text);
    // JSON body and format, and a bad query: 400 with the message.
    let body = serde_json::json!({"query": "SELECT count(*) AS n FROM m", "format": "json"});
    let text = ureq::post(&format!("{url}/api/v1/sql"))
        .set("Content-Type", "application/json")
        .send_string(&body.to_string())
        .unwrap()
        .into_string()
        .unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json, serde_json::json!([{"n": 2799}]));
    match ureq::post(&format!("{url}/api/v1/sql")).send_string("SELECT FROM WHERE") {
        Err(ureq::Error::Status(400, r)) => {
            let body: serde_json::Value = serde_json::from_str(&r.into_string().unwrap()).unwrap();
            assert_eq!(body["arg"], "sql", "{body}");
        }
        other => panic!("{other:?}"),
    }
    let metrics = ureq::get(&format!("{url}/metrics"))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    assert!(
        metrics.contains("telestore_sql_queries_total 2\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("telestore_sql_failed_total 1\n"),
        "{metrics}"
    );
    srv.stop();
    Arc::try_unwrap(store).ok().unwrap().close().unwrap();
}

/// The same telemetry queries in DuckDB over the rows exported to
/// Parquet (with the registry's tags joined on) give the same answers:
/// filters, group by tag, time buckets, order/limit, latest per device, a
/// join. Needs `TELESTORE_PYTHON` (tools/test-all.sh sets it).
#[test]
fn duckdb_agrees_on_telemetry_queries() {
    let Ok(python) = std::env::var("TELESTORE_PYTHON") else {
        eprintln!("skipped: TELESTORE_PYTHON is not set (tools/test-all.sh sets it)");
        return;
    };
    let (dir, store, _m) = fixture();
    let rt = rt();
    let out = dir.path().join("oracle");
    std::fs::create_dir_all(&out).unwrap();
    let save = |name: &str, sql: &str, format: FileFormat| {
        let batches = run(&rt, &store, sql).unwrap();
        let schema = rt
            .block_on(telestore::sql::plan(&store, &pool(), sql))
            .unwrap()
            .schema()
            .as_arrow()
            .clone();
        let path = out.join(name);
        let mut sink =
            FileSink::create(&path, format, format.default_codec(), &Arc::new(schema)).unwrap();
        for b in &batches {
            sink.write(b).unwrap();
        }
        sink.commit().unwrap();
        path
    };
    save(
        "m.parquet",
        &format!(
            "SELECT device_id, device, ts, {} FROM {TABLE}",
            mixed::FIELDS.join(", ")
        ),
        FileFormat::Parquet,
    );
    save(
        "devices.parquet",
        "SELECT * FROM devices",
        FileFormat::Parquet,
    );
    let (a, b) = (T0 + 60_000, T0 + 181_000);
    let queries = [
        (
            "filter",
            format!("SELECT device, ts, f, i FROM {TABLE} WHERE device = 'dev-3' AND ts >= to_timestamp_millis({a}) AND ts < to_timestamp_millis({b}) ORDER BY ts"),
            format!("SELECT device, ts, f, i FROM m WHERE device = 'dev-3' AND ts >= epoch_ms({a}) AND ts < epoch_ms({b}) ORDER BY ts"),
        ),
        (
            "group_by_tag",
            format!("SELECT fleet, count(*) AS n, avg(f) AS f, min(j) AS j, max(u) AS u, sum(i) AS i FROM {TABLE} GROUP BY fleet ORDER BY fleet NULLS LAST"),
            "SELECT fleet, count(*) AS n, avg(f) AS f, min(j) AS j, max(u) AS u, sum(i) AS i FROM m GROUP BY fleet ORDER BY fleet NULLS LAST".to_string(),
        ),
        (
            "time_buckets",
            format!("SELECT date_bin(INTERVAL '1 minute', ts) AS bucket, fleet, avg(g) AS g, count(*) AS n FROM {TABLE} WHERE fleet IN ('East', 'West') GROUP BY bucket, fleet ORDER BY bucket, fleet"),
            "SELECT time_bucket(INTERVAL '1 minute', ts) AS bucket, fleet, avg(g) AS g, count(*) AS n FROM m WHERE fleet IN ('East', 'West') GROUP BY bucket, fleet ORDER BY bucket, fleet".to_string(),
        ),
        (
            "order_limit",
            format!("SELECT device_id, ts, f, b FROM {TABLE} ORDER BY ts DESC, device_id LIMIT 10"),
            "SELECT device_id, ts, f, b FROM m ORDER BY ts DESC, device_id LIMIT 10".to_string(),
        ),
        (
            "latest_per_device",
            format!("SELECT device_id, max(ts) AS last FROM {TABLE} GROUP BY device_id ORDER BY device_id"),
            "SELECT device_id, max(ts) AS last FROM m GROUP BY device_id ORDER BY device_id".to_string(),
        ),
        (
            "join_devices",
            format!("SELECT d.device, count(*) AS n, max(t.w) AS w FROM {TABLE} t JOIN devices d ON t.device_id = d.device_id WHERE d.fleet = 'West' GROUP BY d.device ORDER BY d.device"),
            "SELECT d.device, count(*) AS n, max(t.w) AS w FROM m t JOIN devices d ON t.device_id = d.device_id WHERE d.fleet = 'West' GROUP BY d.device ORDER BY d.device".to_string(),
        ),
    ];
    let mut spec = Vec::new();
    for (name, ours, duck) in &queries {
        let path = save(&format!("{name}.arrow"), ours, FileFormat::Arrow);
        spec.push(serde_json::json!({"name": name, "ours": path, "duckdb": duck}));
    }
    let spec_path = out.join("queries.json");
    std::fs::write(&spec_path, serde_json::to_vec(&spec).unwrap()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tools/sql_oracle.py");
    let o = std::process::Command::new(python)
        .arg(script)
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A time literal finer than the table's milliseconds rounds to the rows
/// it keeps, as the CLI's `--from …500us` does: `ts >= X.5 ms` keeps
/// `X+1..`, never `X` (DataFusion's coercion cast the literal down to
/// milliseconds, truncating, before the scan saw it).
#[test]
fn sub_millisecond_literals_round_to_the_rows_they_keep() {
    let (_dir, store, _m) = fixture();
    let rt = rt();
    let count = |cond: &str| {
        let b = run(
            &rt,
            &store,
            &format!("SELECT count(*) FROM {TABLE} WHERE {cond}"),
        )
        .unwrap();
        i64s(&b, 0)[0]
    };
    let x = T0;
    let at_x = count(&format!("ts = to_timestamp_millis({x})"));
    assert!(at_x > 0, "the fixture has rows at T0");
    let ms = |v: i64| format!("to_timestamp_millis({v})");
    let finer = [
        format!("to_timestamp_micros({})", x * 1000 + 500),
        format!("to_timestamp_nanos({})", x * 1_000_000 + 1),
        format!("CAST('{}' AS TIMESTAMP)", "2023-11-14T22:13:20.000500"),
    ];
    assert_eq!(
        T0, 1_700_000_000_000,
        "the text literal above is T0 + 0.5 ms"
    );
    for lit in &finer {
        for (op, same) in [
            (">=", format!("ts >= {}", ms(x + 1))),
            (">", format!("ts >= {}", ms(x + 1))),
            ("<", format!("ts < {}", ms(x + 1))),
            ("<=", format!("ts < {}", ms(x + 1))),
        ] {
            let got = count(&format!("ts {op} {lit}"));
            assert_eq!(got, count(&same), "ts {op} {lit} (rows at T0: {at_x})");
            let flipped = count(&format!("{lit} {} ts", flip(op)));
            assert_eq!(flipped, got, "{lit} {} ts", flip(op));
        }
        assert_eq!(count(&format!("ts = {lit}")), 0, "ts = {lit}");
        let between = format!("ts BETWEEN {lit} AND {}", ms(x + 10_000));
        let same = format!("ts >= {} AND ts <= {}", ms(x + 1), ms(x + 10_000));
        assert_eq!(count(&between), count(&same), "{between}");
    }
}

fn flip(op: &str) -> &str {
    match op {
        ">=" => "<=",
        ">" => "<",
        "<" => ">",
        "<=" => ">=",
        o => o,
    }
}
