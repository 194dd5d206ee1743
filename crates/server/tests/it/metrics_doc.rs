//! `docs/metrics.md` lists every family `/metrics` serves, as the daemon's
//! registry (built once from each counter's declaration) describes it:
//! this keeps the file current (regenerate with
//! `UPDATE_DOCS=1 cargo test -p telestore-server --test it metrics_doc::`)
//! and checks that no family is declared twice.

use crate::common::daemon::http_daemon;
use std::collections::BTreeMap;
use std::path::Path;
use telestore_engine::Options;

/// Family name → (type, unit, help), from the OpenMetrics text.
fn families(text: &str) -> BTreeMap<String, [String; 3]> {
    let mut out: BTreeMap<String, [String; 3]> = BTreeMap::new();
    let mut helps = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# ") else {
            continue;
        };
        let Some((what, rest)) = rest.split_once(' ') else {
            continue;
        };
        let (name, value) = rest.split_once(' ').unwrap_or((rest, ""));
        let slot = match what {
            "TYPE" => 0,
            "UNIT" => 1,
            "HELP" => {
                helps.push(name.to_string());
                2
            }
            _ => continue,
        };
        out.entry(name.to_string()).or_default()[slot] = value.to_string();
    }
    let mut seen = std::collections::HashSet::new();
    for h in &helps {
        assert!(seen.insert(h), "{h} is registered twice");
    }
    out
}

fn markdown(fams: &BTreeMap<String, [String; 3]>) -> String {
    let mut out = String::from(
        "# Metrics\n\n\
         <!-- Generated from a running daemon's /metrics: \
         `UPDATE_DOCS=1 cargo test -p telestore-server --test it metrics_doc::` rewrites it. -->\n\n\
         Every family `GET /metrics` serves (OpenMetrics; a counter's samples end in\n\
         `_total`). Each is declared once, next to what counts it: the frontends'\n\
         counters in `crates/server/src/frontend/stats.rs`, the MQTT subscriber's in\n\
         `crates/server/src/mqtt/mod.rs`, the engine's, the regions' and the query\n\
         pool's in `crates/server/src/server/metrics.rs`. [operations.md](operations.md)\n\
         says which to watch.\n\n\
         | family | type | unit | help |\n| --- | --- | --- | --- |\n",
    );
    for (name, [ty, unit, help]) in fams {
        out.push_str(&format!(
            "| `{name}` | {ty} | {unit} | {} |\n",
            help.replace('|', "\\|")
        ));
    }
    out
}

#[test]
fn the_checked_in_list_is_what_the_daemon_serves() {
    let (_dir, _store, run, http) = http_daemon(Options::default(), Default::default());
    let text = ureq::get(&format!("http://{http}/metrics"))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    run.stop();
    let fams = families(&text);
    for must in [
        "telestore_ingest_rows",
        "telestore_mqtt_lag_seconds",
        "telestore_queries",
        "telestore_region_hot",
        "telestore_wal_sync_seconds",
    ] {
        assert!(fams.contains_key(must), "{must} missing from\n{text}");
    }
    let md = markdown(&fams);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/metrics.md");
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &md).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == md,
        "docs/metrics.md differs from /metrics: run UPDATE_DOCS=1 cargo test -p telestore-server --test it metrics_doc::"
    );
}
