//! The OpenAPI document (`GET /api/v1/openapi.json`, checked in as
//! `docs/openapi.json`) lists every HTTP route, and only those: the
//! checked-in file is the generated one (regenerate with
//! `UPDATE_DOCS=1 cargo test -p telestore-server --test it openapi::`), every documented operation
//! reaches a handler, no other method on its path does, routes are added
//! only through the macro that documents them, and each operation's
//! `security` is what the daemon enforces.

use crate::common;

use common::http_request;
use serde_json::Value;
use std::path::Path;
use telestore_engine::Options;
use telestore_server::daemon::ServerConfig;

const METHODS: [&str; 5] = ["get", "post", "put", "delete", "patch"];

fn generated() -> Value {
    serde_json::from_str(telestore_server::server::openapi_json()).unwrap()
}

/// `(path, method)` of every documented operation.
fn operations(doc: &Value) -> Vec<(String, &'static str)> {
    let mut v = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for m in METHODS {
            if item.get(m).is_some() {
                v.push((path.clone(), m));
            }
        }
    }
    v
}

/// A concrete request path for a documented one.
fn concrete(path: &str) -> String {
    path.replace("{asset}", "console.js")
}

#[test]
fn the_checked_in_document_is_the_generated_one() {
    let text = telestore_server::server::openapi_json();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, text).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == text,
        "docs/openapi.json differs from the routes' document: run UPDATE_DOCS=1 cargo test -p telestore-server --test it openapi::"
    );
}

/// An independent validator (openapi-spec-validator, installed by
/// `tools/test-all.sh`) takes the document.
#[test]
fn the_document_is_valid_openapi() {
    let Ok(python) = std::env::var("TELESTORE_PYTHON") else {
        eprintln!("skipped openapi-spec-validator: TELESTORE_PYTHON is not set (tools/test-all.sh sets it)");
        return;
    };
    let script = "import json, sys\n\
        from openapi_spec_validator import validate\n\
        validate(json.load(sys.stdin))\n";
    let mut child = std::process::Command::new(python)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    std::thread::spawn(move || {
        let mut stdin = stdin;
        std::io::Write::write_all(
            &mut stdin,
            telestore_server::server::openapi_json().as_bytes(),
        )
    });
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "openapi-spec-validator refuses the document:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_operation_is_described() {
    let doc = generated();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let ops = operations(&doc);
    assert!(ops.len() >= 15, "{ops:?}");
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for (path, m) in &ops {
        let op = &doc["paths"][path][m];
        let at = format!("{m} {path}");
        assert!(
            op["summary"].as_str().is_some_and(|s| !s.is_empty()),
            "{at}: no summary"
        );
        assert!(
            op["tags"].as_array().is_some_and(|t| !t.is_empty()),
            "{at}: no tag"
        );
        assert!(op["security"].is_array(), "{at}: no security");
        let responses = op["responses"].as_object().unwrap();
        assert!(
            responses.keys().any(|k| k.starts_with('2')),
            "{at}: no success"
        );
        let text = op.to_string();
        for (i, _) in text.match_indices("#/components/schemas/") {
            let name: String = text[i + 21..]
                .chars()
                .take_while(|c| c.is_alphanumeric())
                .collect();
            assert!(schemas.contains_key(&name), "{at}: no schema {name}");
        }
    }
}

#[test]
fn routes_are_added_only_through_the_documenting_macro() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stack = vec![src];
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            seen += 1;
            for (no, line) in text.lines().enumerate() {
                let undocumented = [
                    ".route(",
                    ".route_service(",
                    ".nest(",
                    ".nest_service(",
                    "Router::new(",
                ]
                .iter()
                .any(|s| line.contains(s));
                assert!(
                    !undocumented,
                    "{}:{}: a route added without routes!(), so missing from the OpenAPI document: {line}",
                    p.display(),
                    no + 1
                );
            }
        }
    }
    assert!(seen > 30, "read only {seen} source files");
}

#[test]
fn the_document_matches_the_daemon() {
    let (_d, _store, _run, open) = common::http_daemon(Options::default(), ServerConfig::default());
    let doc = generated();
    let served = http_request(open, "GET", "/api/v1/openapi.json", "", b"");
    assert_eq!(served.status, 200);
    assert_eq!(served.body, telestore_server::server::openapi_json());

    let (_d2, _store2, _run2, locked) = common::token_daemon(false);

    for (path, m) in operations(&doc) {
        let at = format!("{m} {path}");
        let method = m.to_uppercase();
        let url = concrete(&path);
        let r = http_request(open, &method, &url, "", b"");
        assert!(
            !(r.status == 404 && r.body.is_empty()) && r.status != 405,
            "{at} is documented but reaches no handler: {} {}",
            r.status,
            r.body
        );
        for other in METHODS
            .iter()
            .filter(|o| doc["paths"][&path].get(**o).is_none())
        {
            let r = http_request(open, &other.to_uppercase(), &url, "", b"");
            assert_eq!(
                r.status, 405,
                "{other} {path} answers but is not documented"
            );
        }

        // The documented security is what the daemon enforces.
        let security = doc["paths"][&path][m]["security"].as_array().unwrap();
        let needs_token = !security.is_empty();
        let r = http_request(locked, &method, &url, "", b"");
        assert_eq!(
            r.status == 401,
            needs_token,
            "{at} without a token: {}",
            r.status
        );
        if needs_token {
            let read = http_request(
                locked,
                &method,
                &url,
                "Authorization: Token r-secret\r\n",
                b"",
            );
            let documented_403 = doc["paths"][&path][m]["responses"].get("403").is_some();
            assert_eq!(
                read.status == 403,
                documented_403,
                "{at} with a read-only token"
            );
        }
    }
}

/// A query string a route cannot read (a parameter given twice) gets the
/// route's documented 400 body, not a bare text answer.
#[test]
fn an_unreadable_query_string_gets_the_documented_error_body() {
    let (_d, _store, _run, open) = common::http_daemon(Options::default(), ServerConfig::default());
    let doc = generated();
    let mut checked = 0;
    for (path, m) in operations(&doc) {
        let op = &doc["paths"][&path][m];
        let Some(schema) = op["responses"]["400"]["content"]["application/json"]["schema"]["$ref"]
            .as_str()
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
        else {
            continue;
        };
        let Some(param) = op["parameters"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["in"] == "query"))
            .and_then(|p| p["name"].as_str())
        else {
            continue;
        };
        let url = format!("{}?{param}=a&{param}=b", concrete(&path));
        let r = http_request(open, &m.to_uppercase(), &url, "", b"");
        assert_eq!(r.status, 400, "{m} {url}: {}", r.body);
        let body: Value = serde_json::from_str(&r.body)
            .unwrap_or_else(|e| panic!("{m} {url}: not JSON ({e}): {}", r.body));
        for key in doc["components"]["schemas"][schema]["required"]
            .as_array()
            .unwrap()
        {
            let key = key.as_str().unwrap();
            assert!(body.get(key).is_some(), "{m} {url}: no {key:?} in {body}");
        }
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} routes checked");
}
