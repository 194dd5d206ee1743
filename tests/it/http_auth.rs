//! With tokens configured, every HTTP route but `/health` (and `/metrics`
//! while it is public) needs one, sent any way InfluxDB clients send it;
//! a missing or wrong token gets 401 and a read-only token gets 403 on a
//! write, with nothing applied. Routes nobody declared are refused too.

use crate::common;

use common::{http_request, HttpAnswer};
use std::net::SocketAddr;
use std::sync::Arc;
use telestore::daemon::Running;
use telestore::Store;

const SPEC: &str = r#"{"name":"m","fields":[{"name":"v","type":"f64"}]}"#;
const LINE: &str = "m,device=d1 v=1.5 1700000000000\n";

fn server(metrics_public: bool) -> (tempfile::TempDir, Arc<Store>, Running, SocketAddr) {
    common::token_daemon(metrics_public)
}

fn with_auth(h: SocketAddr, method: &str, path: &str, auth: &str, body: &str) -> HttpAnswer {
    let head = if auth.is_empty() {
        String::new()
    } else {
        format!("Authorization: {auth}\r\n")
    };
    http_request(h, method, path, &head, body.as_bytes())
}

#[test]
fn every_route_but_health_needs_a_token() {
    let (_d, store, run, h) = server(true);
    let routes = [
        ("POST", "/api/v1/tables", SPEC),
        ("GET", "/api/v1/tables", ""),
        ("POST", "/api/v2/write?bucket=b&precision=ms", LINE),
        ("POST", "/write?db=x&precision=ms", LINE),
        ("GET", "/api/v1/query?kind=latest&table=m", ""),
        ("GET", "/api/v1/export?table=m&format=csv", ""),
        ("POST", "/api/v1/flush", ""),
        ("POST", "/api/v1/not-a-route", ""),
        ("GET", "/query?q=SHOW%20DATABASES", ""),
    ];
    for (method, path, body) in routes {
        for auth in ["", "Token nope", "Bearer w-secre", "Basic dTp4"] {
            let r = with_auth(h, method, path, auth, body);
            assert_eq!(r.status, 401, "{method} {path} with {auth:?}: {}", r.body);
            assert!(r.header("WWW-Authenticate").is_some(), "{}", r.head);
        }
    }
    assert!(store.table_names().is_empty(), "a refused request applied");
    let r = with_auth(h, "POST", "/write?db=x", "", LINE);
    let j: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert!(j["error"].is_string(), "v1 shape: {}", r.body);
    assert_eq!(with_auth(h, "GET", "/health", "", "").status, 200);
    assert_eq!(with_auth(h, "GET", "/metrics", "", "").status, 200);
    assert_eq!(with_auth(h, "GET", "/ping", "", "").status, 204);
    run.stop();
}

/// `/health` without a token says only the status (it listed every table
/// and the MQTT broker); with one, everything. An InfluxDB 2 client
/// library gets InfluxDB 2's shape; `/ping` and 1.x's `/query` probes
/// answer as InfluxDB does.
#[test]
fn health_says_little_without_a_token_and_influxdb_probes_answer() {
    let (_d, _store, run, h) = server(true);
    let w = "Token w-secret";
    assert_eq!(with_auth(h, "POST", "/api/v1/tables", w, SPEC).status, 201);
    let anon: serde_json::Value =
        serde_json::from_str(&with_auth(h, "GET", "/health", "", "").body).unwrap();
    assert_eq!(anon, serde_json::json!({"status": "ok"}));
    let told: serde_json::Value =
        serde_json::from_str(&with_auth(h, "GET", "/health", "Token r-secret", "").body).unwrap();
    assert_eq!(told["tables"], serde_json::json!(["m"]), "{told}");
    let ua = "User-Agent: influxdb-client-python/1.49.0\r\n";
    let r = http_request(h, "GET", "/health", ua, b"");
    let v2: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(
        (r.status, &v2["status"], &v2["name"]),
        (200, &"pass".into(), &"telestore".into()),
        "{v2}"
    );
    assert!(
        v2["version"].as_str().unwrap().starts_with("telestore-"),
        "{v2}"
    );
    let ping = with_auth(h, "GET", "/ping", "", "");
    assert_eq!(ping.status, 204);
    assert!(
        ping.header("X-Influxdb-Version")
            .unwrap()
            .starts_with("telestore-"),
        "{}",
        ping.head
    );
    // 1.x probes, with 1.x's u/p credentials.
    let q = |query: &str| -> serde_json::Value {
        let r = with_auth(
            h,
            "GET",
            &format!("/query?u=x&p=r-secret&q={query}"),
            "",
            "",
        );
        assert_eq!(r.status, 200, "{query}: {}", r.body);
        serde_json::from_str(&r.body).unwrap()
    };
    let dbs = q("SHOW%20DATABASES");
    assert_eq!(
        dbs["results"][0]["series"][0]["values"],
        serde_json::json!([["telestore"]]),
        "{dbs}"
    );
    assert_eq!(
        q("CREATE%20DATABASE%20x")["results"][0],
        serde_json::json!({"statement_id": 0})
    );
    let both = q("SHOW%20MEASUREMENTS%3B%20SELECT%20*%20FROM%20m");
    assert_eq!(
        both["results"][0]["series"][0]["values"],
        serde_json::json!([["m"]]),
        "{both}"
    );
    assert!(
        both["results"][1]["error"]
            .as_str()
            .unwrap()
            .contains("/api/v1/sql"),
        "{both}"
    );
    let form = with_auth(h, "POST", "/query", w, "q=SHOW+DATABASES");
    assert!(form.body.contains("telestore"), "{}", form.body);
    run.stop();
}

#[test]
fn read_only_tokens_read_and_write_tokens_write() {
    let (_d, store, run, h) = server(false);
    let create = with_auth(h, "POST", "/api/v1/tables", "Token r-secret", SPEC);
    assert_eq!(create.status, 403, "{}", create.body);
    assert!(store.table_names().is_empty());
    assert_eq!(
        with_auth(h, "POST", "/api/v1/tables", "Token w-secret", SPEC).status,
        201
    );
    // Every way InfluxDB clients send a token ("u:w-secret" in base64).
    let writes = [
        ("/api/v2/write?precision=ms", "Token w-secret"),
        ("/api/v2/write?precision=ms", "Bearer w-secret"),
        ("/write?db=x&precision=ms", "Basic dTp3LXNlY3JldA=="),
        ("/write?db=x&precision=ms&u=u&p=w-secret", ""),
    ];
    for (i, (path, auth)) in writes.iter().enumerate() {
        let line = format!("m,device=d1 v={i} {}\n", 1_700_000_000_000i64 + i as i64);
        let r = with_auth(h, "POST", path, auth, &line);
        assert_eq!(r.status, 204, "{path} {auth}: {}", r.body);
    }
    assert_eq!(common::row_count(&store, "m"), 4);
    let r = with_auth(
        h,
        "POST",
        "/api/v2/write?precision=ms",
        "Token r-secret",
        LINE,
    );
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(common::row_count(&store, "m"), 4);
    let q = "/api/v1/query?kind=range&table=m&device=d1&from=0s&to=now&format=csv";
    let r = with_auth(h, "GET", q, "Token r-secret", "");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("d1"), "{}", r.body);
    // Flushing is a write: read-only may not; read-write gets the result.
    let r = with_auth(h, "POST", "/api/v1/flush?table=m", "Token r-secret", "");
    assert_eq!(r.status, 403, "{}", r.body);
    let r = with_auth(h, "POST", "/api/v1/flush?table=m", "Token w-secret", "");
    assert_eq!(r.status, 200, "{}", r.body);
    let j: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(j["memstore_bytes"], 0, "{j}");
    assert!(store.stats().hfiles > 0);
    let r = with_auth(h, "POST", "/api/v1/flush?table=nope", "Token w-secret", "");
    assert_eq!(r.status, 404, "{}", r.body);
    // /metrics needs a token (any) once it is not public.
    assert_eq!(with_auth(h, "GET", "/metrics", "", "").status, 401);
    assert_eq!(
        with_auth(h, "GET", "/metrics", "Token r-secret", "").status,
        200
    );
    run.stop();
}

/// `serve --token-file`: the daemon reads its tokens from the file.
#[test]
fn serve_takes_tokens_from_a_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "# ops\nrw file-writer\nro file-reader\n").unwrap();
    let mut child = common::serve_command(&dir.path().join("data"), "127.0.0.1:0")
        .arg("--token-file")
        .arg(&tokens)
        .spawn()
        .unwrap();
    let h = common::logged_http_addr(&mut child);
    let r = with_auth(h, "POST", "/api/v1/tables", "Token file-reader", SPEC);
    assert_eq!(r.status, 403);
    let r = with_auth(h, "POST", "/api/v1/tables", "Token file-writer", SPEC);
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(with_auth(h, "GET", "/api/v1/tables", "", "").status, 401);
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A daemon bound beyond loopback with no token says so at start; a
/// token file that cannot be read stops it with the file's name.
#[test]
fn serve_warns_when_exposed_without_a_token_and_names_a_bad_token_file() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let mut child = common::serve_command(&dir.path().join("data"), "0.0.0.0:0")
        .spawn()
        .unwrap();
    let err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut warned = false;
    for line in err.lines() {
        let line = line.unwrap();
        // Not a terminal (a pipe, as a log file): no colour codes.
        assert!(!line.contains('\x1b'), "colour codes in a log: {line:?}");
        warned |= line.contains("not a loopback address and no token");
        if line.contains("http (") {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(warned, "no warning for 0.0.0.0 without a token");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_telestore"))
        .args(["serve", "--token-file"])
        .arg(dir.path().join("missing-tokens"))
        .arg("--dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("missing-tokens"), "{e}");
}
