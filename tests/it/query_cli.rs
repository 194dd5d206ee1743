//! `telestore query` and `telestore export` as a user runs them: output
//! formats, one-line errors with exit code 2, the same answers embedded
//! and through `--server`, an interrupted export leaving no file, and the
//! exported files read by pyarrow and duckdb.

use crate::common;

use common::mixed::{self, Model, FIELDS, T0, TABLE};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use telestore::daemon::{start, ServerConfig};
use telestore::schema::BlockEncoding;
use telestore::{Options, Store};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_telestore"));
    c.env_remove("TELESTORE_SERVER").env_remove("TELESTORE_DIR");
    c
}

fn cli(dir: &Path, args: &[&str]) -> Output {
    bin().args(args).arg("--dir").arg(dir).output().unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// A data directory with the mixed table, closed again.
fn fixture() -> (tempfile::TempDir, Model) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let m = mixed::fill(&store);
    store.close().unwrap();
    (dir, m)
}

/// [`fixture`] with the table's blocks in `encoding`, major-compacted so
/// that every file is written in it.
fn fixture_with(encoding: BlockEncoding) -> (tempfile::TempDir, Model) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let m = mixed::fill_with(&store, encoding);
    store.compact(TABLE, true).unwrap();
    store.close().unwrap();
    (dir, m)
}

#[test]
fn latest_prints_csv_and_an_aligned_table() {
    let (dir, m) = fixture();
    let o = cli(
        dir.path(),
        &[
            "query", "latest", "--table", TABLE, "--device", "dev-2", "--n", "2", "--format", "csv",
        ],
    );
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "device_id,device,ts,f,g,i,j,u,w,b");
    let d2 = *m.names.iter().find(|(_, n)| *n == "dev-2").unwrap().0;
    let last = mixed::Vals::new(d2, mixed::ROUNDS - 1, 0);
    let ts = mixed::fmt_ts(T0 + (mixed::ROUNDS as i64 - 1) * 1000);
    assert_eq!(
        lines[1],
        format!(
            "{d2},dev-2,{ts},{:?},{:?},{},{},{},{},{}",
            last.f,
            f64::from(last.g),
            last.i,
            last.j,
            last.u,
            last.w,
            last.b
        )
    );
    assert_eq!(lines.len(), 3);

    let o = cli(
        dir.path(),
        &["query", "latest", "--table", TABLE, "--device", "dev-2"],
    );
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("device_id"), "{text}");
    assert!(lines[1].chars().all(|c| c == '-' || c == ' '), "{text}");
    assert_eq!(lines.len(), 3, "{text}");
    // Columns line up: every value starts under or ends under its header.
    let col = lines[0].find("ts").unwrap();
    assert_eq!(&lines[2][col..col + 4], "2023", "{text}");
}

/// Run a bad command: exit code 2 and one line on stderr naming `arg`.
/// `telestore regions` prints a header naming every column, then one
/// line per region (it once panicked: three columns had no header).
#[test]
fn regions_prints_a_header_and_one_line_per_region() {
    let (dir, _) = fixture();
    let text = stdout(&cli(dir.path(), &["regions", "--table", TABLE]));
    let json = stdout(&cli(
        dir.path(),
        &["regions", "--table", TABLE, "--format", "json"],
    ));
    let regions: serde_json::Value = serde_json::from_str(&json).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let head: Vec<&str> = lines[0].split_whitespace().collect();
    for col in ["id", "files", "flushes", "compactions", "write_amp", "hot"] {
        assert!(head.contains(&col), "no {col} in {head:?}");
    }
    assert_eq!(lines.len() - 1, regions.as_array().unwrap().len());
}

fn assert_usage_error(dir: &Path, args: &[&str], arg: &str) {
    let o = cli(dir, args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    assert!(
        err.starts_with("error: ") && err.contains(arg),
        "{args:?}: {err}"
    );
    assert!(o.stdout.is_empty(), "{args:?}");
}

#[test]
fn bad_arguments_exit_2_with_one_line() {
    let (dir, _m) = fixture();
    let d = dir.path();
    let t = TABLE;
    assert_usage_error(
        d,
        &["query", "scan", "--table", "nope"],
        "unknown table \"nope\" (tables: m)",
    );
    assert_usage_error(
        d,
        &["query", "scan", "--table", t, "--fields", "zz"],
        "--fields",
    );
    assert_usage_error(
        d,
        &["query", "latest", "--table", t, "--device", "ghost"],
        "--device",
    );
    assert_usage_error(
        d,
        &["query", "scan", "--table", t, "--from", "soon"],
        "--from",
    );
    assert_usage_error(
        d,
        &["query", "scan", "--table", t, "--to", "17000s0"],
        "--to",
    );
    assert_usage_error(
        d,
        &[
            "query", "range", "--table", t, "--device", "dev-1", "--from", "now", "--to", "-1d",
        ],
        "--from",
    );
    assert_usage_error(
        d,
        &["query", "agg", "--table", t, "--every", "0m"],
        "--every",
    );
    assert_usage_error(
        d,
        &["query", "agg", "--table", t, "--group-by", "color"],
        "--group-by",
    );
    assert_usage_error(d, &["export", "--table", t, "--out", "/"], "--out");
    let missing = d.join("no-such-dir");
    assert_usage_error(&missing, &["query", "scan", "--table", t], "--server");
}

/// Every query kind and text format gives the same bytes embedded and
/// through a daemon; while the daemon holds the directory, an embedded
/// query says so and suggests --server.
#[test]
fn embedded_and_server_answers_are_identical() {
    let (dir, _m) = fixture();
    let from = format!("{}ms", T0 + 100_000);
    let to = mixed::fmt_ts(T0 + 160_000);
    let queries: Vec<Vec<&str>> = vec![
        vec!["latest", "--device", "dev-4", "--n", "5"],
        vec![
            "range", "--device", "dev-1", "--from", &from, "--to", &to, "--order", "asc",
        ],
        vec!["range", "--device", "7", "--fields", "u,b", "--limit", "9"],
        vec![
            "scan",
            "--from",
            &from,
            "--to",
            &to,
            "--where",
            "fleet=West",
        ],
        vec!["scan", "--from", &from, "--to", &to, "--limit", "100"],
        vec![
            "agg",
            "--fn",
            "max",
            "--every",
            "1m",
            "--group-by",
            "device",
        ],
        vec![
            "agg",
            "--fn",
            "avg",
            "--every",
            "30s",
            "--group-by",
            "fleet",
            "--from",
            &from,
        ],
        vec![
            "agg",
            "--fn",
            "count",
            "--every",
            "1h",
            "--devices",
            "dev-0,dev-5",
        ],
    ];
    let run_all = |server: Option<&str>| -> Vec<String> {
        let mut outs = Vec::new();
        for q in &queries {
            for format in ["table", "csv", "jsonl", "json"] {
                let mut args = vec!["query", q[0], "--table", TABLE, "--format", format];
                args.extend(&q[1..]);
                if let Some(s) = server {
                    args.extend(["--server", s]);
                }
                let o = cli(dir.path(), &args);
                outs.push(stdout(&o));
            }
        }
        outs
    };
    let embedded = run_all(None);
    let empty = embedded.iter().filter(|o| o.trim().is_empty()).count();
    assert_eq!(empty, 0, "every query returns something");

    let store = Arc::new(Store::open(dir.path(), Options::default()).unwrap());
    let cfg = ServerConfig {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..ServerConfig::default()
    };
    let run = start(store.clone(), "127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let url = format!("http://{}", run.http_addr.unwrap());
    let served = run_all(Some(&url));
    for (i, (a, b)) in embedded.iter().zip(&served).enumerate() {
        assert_eq!(a, b, "query {} format {}", i / 4, i % 4);
    }
    // Errors come back the same way: exit 2, one line.
    assert_usage_error(
        dir.path(),
        &["query", "scan", "--table", "nope", "--server", &url],
        "unknown table",
    );
    assert_usage_error(dir.path(), &["query", "scan", "--table", TABLE], "--server");
    run.stop();
}

fn big_table(dir: &Path, rows_per_device: u64) {
    let store = Store::open(dir, Options::default()).unwrap();
    store
        .create_table(telestore::testkit::readings_schema("big"))
        .unwrap();
    let mut batch = Vec::new();
    for round in 0..rows_per_device {
        for d in 0..100 {
            telestore::testkit::push_fleet_row(&mut batch, d, round, 10_000);
        }
        if batch.len() > 4 << 20 {
            store
                .write("big", &batch, telestore::Durability::Async)
                .unwrap();
            batch.clear();
        }
    }
    store
        .write("big", &batch, telestore::Durability::Sync)
        .unwrap();
    store.close().unwrap();
}

#[test]
fn an_interrupted_export_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    big_table(dir.path(), 2_000);
    let out = dir.path().join("out.arrow");
    let mut child = bin()
        .args(["export", "--table", "big", "--batch-rows", "1", "--out"])
        .arg(&out)
        .arg("--dir")
        .arg(dir.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the temporary file: the export is under way.
    let started = std::time::Instant::now();
    let tmp_exists = || {
        std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(".out.arrow.tmp")
            })
    };
    while !tmp_exists() {
        assert!(started.elapsed().as_secs() < 60, "export never started");
        assert!(child.try_wait().unwrap().is_none(), "export ended early");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(!out.exists(), "no file under the final name");
    assert!(!tmp_exists(), "temporary file removed");

    // Uninterrupted, the same export completes.
    let o = bin()
        .args(["export", "--table", "big", "--out"])
        .arg(&out)
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let f = std::fs::File::open(&out).unwrap();
    let rows: usize = arrow_ipc::reader::FileReader::try_new(f, None)
        .unwrap()
        .map(|b| b.unwrap().num_rows())
        .sum();
    assert_eq!(rows, 200_000);
}

/// pyarrow and duckdb read the exported files: schema as specified, every
/// value as ingested. `tools/test-all.sh` installs them in a virtualenv
/// and sets TELESTORE_PYTHON; without it the test says so and checks
/// nothing.
#[test]
fn pyarrow_and_duckdb_read_the_exports() {
    let Ok(python) = std::env::var("TELESTORE_PYTHON") else {
        eprintln!("skipped: TELESTORE_PYTHON is not set (tools/test-all.sh sets it)");
        return;
    };
    for encoding in [BlockEncoding::Rows, BlockEncoding::Columnar] {
        exports_read_by_pyarrow_and_duckdb(&python, encoding);
    }
}

fn exports_read_by_pyarrow_and_duckdb(python: &str, encoding: BlockEncoding) {
    let (dir, m) = fixture_with(encoding);
    let d = dir.path();
    let mut specs = Vec::new();
    for (name, format, codec) in [
        ("x.arrow", "arrow", "none"),
        ("x.arrows", "arrow-stream", "zstd"),
        ("x.parquet", "parquet", "zstd"),
        ("y.arrow", "arrow", "lz4"),
        ("y.parquet", "parquet", "none"),
    ] {
        let path = d.join(name);
        let o = cli(
            d,
            &[
                "export",
                "--table",
                TABLE,
                "--out",
                path.to_str().unwrap(),
                "--format",
                format,
                "--compression",
                codec,
                "--batch-rows",
                "700",
            ],
        );
        stdout(&o);
        specs.push(format!("{}:{format}", path.display()));
    }
    let expected = d.join("expected.jsonl");
    let mut text = String::new();
    for ((dev, ts), v) in &m.rows {
        text.push_str(&m.row_json(*dev, *ts, v, &FIELDS).to_string());
        text.push('\n');
    }
    std::fs::write(&expected, text).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tools/verify_export.py");
    let o = Command::new(python)
        .arg(script)
        .arg(&expected)
        .arg(TABLE)
        .args(&specs)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "verify_export.py failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).lines().count(),
        specs.len()
    );
}

/// The HTTP endpoints themselves: an Arrow IPC stream by default, JSON
/// when asked, and a 400 naming the parameter.
#[test]
fn http_query_and_export_endpoints() {
    let (dir, m) = fixture();
    let store = Arc::new(Store::open(dir.path(), Options::default()).unwrap());
    let cfg = ServerConfig {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..ServerConfig::default()
    };
    let run = start(store.clone(), "127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let base = format!("http://{}", run.http_addr.unwrap());

    let r = ureq::get(&format!(
        "{base}/api/v1/export?table={TABLE}&batch_rows=300"
    ))
    .call()
    .unwrap();
    assert_eq!(r.content_type(), "application/vnd.apache.arrow.stream");
    // Longer than a chunk (64 KiB): streamed.
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.header("content-length"), None);
    let reader = arrow_ipc::reader::StreamReader::try_new(r.into_reader(), None).unwrap();
    let schema = reader.schema();
    assert_eq!(schema.metadata()["telestore.table"], TABLE);
    let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(rows, m.rows.len());

    let r = ureq::get(&format!(
        "{base}/api/v1/query?kind=latest&table={TABLE}&device=dev-3&n=2"
    ))
    .set("Accept", "application/json")
    .call()
    .unwrap();
    assert_eq!(r.content_type(), "application/json");
    // A small answer is sent whole, with its length.
    let len: usize = r.header("content-length").unwrap().parse().unwrap();
    let text = r.into_string().unwrap();
    assert_eq!(text.len(), len);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);
    assert_eq!(v[0]["device"], "dev-3");

    for (q, arg) in [
        (
            format!("kind=range&table={TABLE}&device=dev-3&from=tomorrow"),
            "from",
        ),
        (
            format!("kind=scan&table={TABLE}&limit=many"),
            "query string",
        ),
        (format!("kind=scan&table={TABLE}&format=xml"), "format"),
        ("kind=scan&table=nope".to_string(), "table"),
    ] {
        // An unknown table is a 404 (docs/errors.md), every other bad
        // parameter a 400; both name the argument.
        let want = if arg == "table" { 404 } else { 400 };
        match ureq::get(&format!("{base}/api/v1/query?{q}")).call() {
            Err(ureq::Error::Status(code, r)) if code == want => {
                let v: serde_json::Value = serde_json::from_str(&r.into_string().unwrap()).unwrap();
                assert_eq!(v["arg"], arg, "{q}: {v}");
                assert_eq!(v["code"], want);
            }
            other => panic!("{q}: expected {want}, got {other:?}"),
        }
    }
    run.stop();
}

/// The `device` column is there whenever the registry holds names, so a
/// query of one unnamed device has the schema of a whole-table scan.
#[test]
fn the_device_column_does_not_depend_on_the_devices_selected() {
    let (dir, _m) = fixture();
    let header = |args: &[&str]| {
        let o = cli(dir.path(), args);
        stdout(&o).lines().next().unwrap().to_string()
    };
    let raw = mixed::RAW_ID.to_string();
    let one = header(&[
        "query", "range", "--table", TABLE, "--device", &raw, "--from", "0s", "--to", "now",
        "--format", "csv",
    ]);
    let all = header(&[
        "query", "scan", "--table", TABLE, "--from", "0s", "--to", "now", "--format", "csv",
    ]);
    assert_eq!(one, all);
    assert!(one.starts_with("device_id,device,"), "{one}");
}
