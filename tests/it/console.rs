//! The operator console: `GET /api/v1/status` against its published JSON
//! Schema (`formats/status.schema.json`), its auth rules, `telestore top`
//! drawn from a running daemon on an in-memory terminal, and the page at
//! `/` in a real headless Chromium (through ChromeDriver) while
//! `telestore load` runs: region bars and the ingest chart appear and
//! change, a hot region is flagged under a skewed load, and the device
//! panel shows a truck's latest reading. The browser test is skipped, with
//! the reason printed, only where Chromium and ChromeDriver are missing
//! (`tools/test-all.sh` installs them where it can).

use crate::common;

use common::{http_daemon, http_request, small_rows, small_schema};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use telestore::daemon::ServerConfig;
use telestore::region::hotspot::HotspotConfig;
use telestore::server::auth::{Access, Tokens};
use telestore::server::status::Status;
use telestore::{Durability, Options, Store, TableOptions};

/// Hot after 1 s over 3× the table mean (the default waits 30 s).
fn quick_hotspots() -> Options {
    Options {
        hotspot: HotspotConfig {
            grace_ms: 1_000,
            window_secs: 2,
            ..HotspotConfig::default()
        },
        ..Options::default()
    }
}

fn status(http: SocketAddr, headers: &str) -> (u16, Value) {
    let a = http_request(http, "GET", "/api/v1/status", headers, b"");
    let v = serde_json::from_str(&a.body).unwrap_or(Value::Null);
    (a.status, v)
}

fn schema_errors(doc: &Value) -> Vec<String> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/formats/status.schema.json"
    ))
    .unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    let v = jsonschema::validator_for(&schema).expect("the schema compiles");
    v.iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// A table of `small_schema` fields over `regions` regions.
fn table_of(store: &Store, name: &str, regions: u32) {
    let opts = TableOptions {
        regions,
        ..TableOptions::default()
    };
    store.create_table(small_schema(name, opts)).unwrap();
}

/// A writer hammering one device of `table` (its region turns hot) until
/// stopped.
struct Skew {
    stop: Arc<AtomicBool>,
    writer: std::thread::JoinHandle<()>,
}

impl Skew {
    fn start(store: &Arc<Store>, table: &'static str, device: u64) -> Skew {
        let stop = Arc::new(AtomicBool::new(false));
        let (store, flag) = (store.clone(), stop.clone());
        let writer = std::thread::spawn(move || {
            let mut ts = 1_000_000i64;
            while !flag.load(Ordering::Relaxed) {
                let rows: Vec<(u64, i64, u64)> =
                    (0..500).map(|i| (device, ts + i, i as u64)).collect();
                ts += 500;
                store
                    .write(table, &small_rows(&rows), Durability::Async)
                    .unwrap();
            }
        });
        Skew { stop, writer }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.writer.join().unwrap();
    }
}

#[test]
fn status_follows_its_schema_and_reports_the_regions_and_the_hot_one() {
    let (_dir, store, _run, http) = http_daemon(quick_hotspots(), ServerConfig::default());
    table_of(&store, "t", 8);
    let rows: Vec<(u64, i64, u64)> = (0..64).map(|d| (d, 1_000, d)).collect();
    store
        .write("t", &small_rows(&rows), Durability::Sync)
        .unwrap();
    let skew = Skew::start(&store, "t", 5);
    // The sampler needs two ticks for a rate, the detector its grace.
    let deadline = Instant::now() + Duration::from_secs(20);
    let doc = loop {
        let (code, doc) = status(http, "");
        assert_eq!(code, 200, "{doc}");
        let hot = doc["tables"][0]["regions"]
            .as_array()
            .is_some_and(|rs| rs.iter().any(|r| r["hot"] == json!(true)));
        let rated = doc["ingest"]["history"]
            .as_array()
            .is_some_and(|h| h.len() >= 2);
        if (hot && rated) || Instant::now() > deadline {
            break doc;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    skew.stop();
    let errors = schema_errors(&doc);
    assert!(errors.is_empty(), "{errors:#?}\n{doc:#}");
    let s: Status = serde_json::from_value(doc.clone()).expect("the Rust type reads it");
    assert_eq!(s.version, 1);
    assert_eq!(s.health, "ok");
    let t = &s.tables[0];
    assert_eq!(t.name, "t");
    assert_eq!(t.fields, ["v", "x", "ok"]);
    assert_eq!(t.regions.len(), 8);
    // The regions tile the hash space in order.
    assert_eq!(t.regions[0].start_fraction, 0.0);
    assert_eq!(t.regions.last().unwrap().end_fraction, 1.0);
    for w in t.regions.windows(2) {
        assert_eq!(w[0].end_fraction, w[1].start_fraction);
    }
    let hot: Vec<u32> = t.regions.iter().filter(|r| r.hot).map(|r| r.id).collect();
    assert_eq!(
        hot.len(),
        1,
        "only the skewed device's region is hot: {doc:#}"
    );
    let busiest = t
        .regions
        .iter()
        .max_by(|a, b| a.write_rate.total_cmp(&b.write_rate))
        .unwrap();
    assert_eq!(busiest.id, hot[0]);
    assert!(s.ingest.rows_total >= 64 + 500, "{:?}", s.ingest);
    assert!(s.ingest.history.iter().any(|h| h.rows_per_second > 0.0));
    assert!(s.memstores.limit_bytes > 0 && s.block_cache.capacity_bytes > 0);

    // The schema is strict: a field the spec does not name fails it.
    let mut extra = doc.clone();
    extra["writes"]["surprise"] = json!(1);
    assert!(
        !schema_errors(&extra).is_empty(),
        "additionalProperties is enforced"
    );
    let mut wrong = doc;
    wrong["tables"][0]["regions"][0]["hot"] = json!("yes");
    assert!(!schema_errors(&wrong).is_empty(), "types are enforced");
}

#[test]
fn the_page_is_open_and_its_data_needs_a_token() {
    let tokens = Tokens::single("rw-secret")
        .unwrap()
        .with("ro-secret", Access::Read)
        .unwrap();
    let cfg = ServerConfig {
        tokens,
        ..ServerConfig::default()
    };
    let (_dir, _store, _run, http) = http_daemon(Options::default(), cfg);
    let page = http_request(http, "GET", "/", "", b"");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("/console/console.js"), "{}", page.body);
    assert!(
        !page.body.contains("://"),
        "no outside addresses in the page"
    );
    assert!(page
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    for (asset, ct) in [
        ("console.js", "text/javascript"),
        ("console.css", "text/css"),
    ] {
        let a = http_request(http, "GET", &format!("/console/{asset}"), "", b"");
        assert_eq!(a.status, 200, "{asset}");
        assert!(a.header("content-type").unwrap().starts_with(ct));
        // Nothing from elsewhere: the only absolute URL is the SVG
        // namespace name (an identifier, never fetched).
        let outside = a
            .body
            .replace("http://www.w3.org/2000/svg", "")
            .contains("://");
        assert!(!outside, "no outside addresses in {asset}");
    }
    assert_eq!(
        http_request(http, "GET", "/console/nope.js", "", b"").status,
        404
    );
    assert_eq!(status(http, "").0, 401);
    assert_eq!(status(http, "Authorization: Token wrong\r\n").0, 401);
    let (code, doc) = status(http, "Authorization: Token ro-secret\r\n");
    assert_eq!(code, 200);
    assert!(schema_errors(&doc).is_empty());
}

#[test]
fn devices_are_found_by_part_of_their_name() {
    let (_dir, store, _run, http) = http_daemon(Options::default(), ServerConfig::default());
    table_of(&store, "t", 2);
    let lines = ["truck-10", "bus-1", "truck-2", "Truck-1"]
        .iter()
        .map(|d| format!("t,device={d},fleet=East v=1u,x=1,ok=true 1700000000000"))
        .collect::<Vec<_>>()
        .join("\n");
    let w = http_request(
        http,
        "POST",
        "/api/v2/write?bucket=b&precision=ms",
        "",
        lines.as_bytes(),
    );
    assert_eq!(w.status, 204, "{}", w.body);
    let names = |path: &str| -> Vec<String> {
        let a = http_request(http, "GET", path, "", b"");
        assert_eq!(a.status, 200, "{path}: {}", a.body);
        let v: Value = serde_json::from_str(&a.body).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        names("/api/v1/devices?match=TRUCK-1"),
        ["Truck-1", "truck-10"]
    );
    assert_eq!(names("/api/v1/devices?match=truck&limit=1"), ["Truck-1"]);
    assert_eq!(names("/api/v1/devices").len(), 4);
    assert!(names("/api/v1/devices?match=nope").is_empty());
    let a = http_request(http, "GET", "/api/v1/devices?match=bus", "", b"");
    let v: Value = serde_json::from_str(&a.body).unwrap();
    assert_eq!(v[0]["tags"], json!({"fleet": "East"}));
    assert_eq!(v[0]["id"].as_u64(), store.device_id("bus-1"));
    let bad = http_request(http, "GET", "/api/v1/devices?limit=0", "", b"");
    assert_eq!(bad.status, 400, "{}", bad.body);
}

#[test]
fn top_draws_every_region_busiest_first_with_the_hot_one_marked() {
    let (_dir, store, _run, http) = http_daemon(quick_hotspots(), ServerConfig::default());
    table_of(&store, "fleet", 4);
    let skew = Skew::start(&store, "fleet", 9);
    let server = format!("http://{http}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let s = loop {
        let s = telestore::top::fetch(&server, None, Duration::from_secs(60)).unwrap();
        if s.tables[0].regions.iter().any(|r| r.hot) || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    // The command prints the same screen with --once (while the region
    // is still hot).
    let out = Command::new(env!("CARGO_BIN_EXE_telestore"))
        .args(["top", "--server", &server, "--once", "120x16"])
        .output()
        .unwrap();
    skew.stop();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("regions, busiest first") && text.contains("HOT"),
        "{text}"
    );
    let screen = telestore::top::render_text(&s, &server, 140, 20);
    let region_lines: Vec<&str> = screen
        .lines()
        .filter(|l| l.trim_start_matches('│').trim_start().starts_with("fleet"))
        .collect();
    assert_eq!(region_lines.len(), 4, "one line per region:\n{screen}");
    assert!(
        region_lines[0].contains("HOT"),
        "the hot region first:\n{screen}"
    );
    assert!(
        region_lines[1..].iter().all(|l| !l.contains("HOT")),
        "{screen}"
    );
    assert!(
        screen.contains("telestore top") && screen.contains("rows/s"),
        "{screen}"
    );

    // And says what is wrong when nobody listens.
    let out = Command::new(env!("CARGO_BIN_EXE_telestore"))
        .args(["top", "--server", "http://127.0.0.1:9", "--once", "120x16"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach"));
}

/// ChromeDriver and Chromium, or why not.
fn browser() -> Result<(String, String), String> {
    let find = |env: &str, names: &[&str]| -> Option<String> {
        if let Ok(p) = std::env::var(env) {
            return Some(p);
        }
        names
            .iter()
            .map(|n| format!("/usr/bin/{n}"))
            .find(|p| std::path::Path::new(p).exists())
    };
    let driver = find("TELESTORE_CHROMEDRIVER", &["chromedriver"])
        .ok_or("chromedriver not found (apt-get install chromium-driver)")?;
    let chrome = find("TELESTORE_CHROMIUM", &["chromium", "chromium-browser"])
        .ok_or("chromium not found (apt-get install chromium)")?;
    Ok((driver, chrome))
}

struct Driver {
    child: Child,
    base: String,
    session: String,
}

impl Driver {
    fn start(driver: &str, chrome: &str) -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while ureq::get(&format!("{base}/status")).call().is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let caps = json!({"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
            "binary": chrome,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1400,2000"]
        }}}});
        let mut d = Driver {
            child,
            base,
            session: String::new(),
        };
        let v = d.call("POST", "/session", Some(caps));
        d.session = v["sessionId"].as_str().expect("a session").to_string();
        d
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let req = ureq::request(method, &url).timeout(Duration::from_secs(60));
        let r = match body {
            Some(b) => req
                .set("Content-Type", "application/json")
                .send_string(&b.to_string()),
            None => req.call(),
        };
        let text = match r {
            Ok(r) => r.into_string().unwrap(),
            Err(ureq::Error::Status(code, r)) => {
                panic!(
                    "webdriver {method} {path}: {code} {}",
                    r.into_string().unwrap_or_default()
                )
            }
            Err(e) => panic!("webdriver {method} {path}: {e}"),
        };
        let v: Value = serde_json::from_str(&text).unwrap();
        v["value"].clone()
    }

    fn session_call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.call(method, &format!("/session/{}{path}", self.session), body)
    }

    fn js(&self, script: &str) -> Value {
        self.session_call(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
    }

    /// Run `script` until it returns something truthy (or time runs out).
    fn wait_for(&self, what: &str, script: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            let v = self.js(script);
            let truthy = !(v.is_null() || v == json!(false) || v == json!(0) || v == json!(""));
            if truthy {
                return v;
            }
            if Instant::now() > deadline {
                let page = self.js(PAGE_STATE);
                let log = self.js("return document.getElementById('health').textContent + ' | ' + document.getElementById('device-error').textContent;");
                panic!("timed out waiting for {what}; the page: {page} {log}");
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn screenshot(&self, path: &std::path::Path) {
        use base64::Engine as _;
        let v = self.session_call("GET", "/screenshot", None);
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap())
            .unwrap();
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = ureq::delete(&format!("{}/session/{}", self.base, self.session)).call();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The state of the page the test compares over time.
const PAGE_STATE: &str = r#"
  const q = (s) => document.querySelectorAll(s);
  const chart = document.getElementById("ingest-chart");
  return {
    regions: q(".hashmap .region").length,
    rows: q(".region-row").length,
    bars: Array.from(q(".region-row .bar.write")).map((b) => b.style.width).join(","),
    samples: Number(chart.dataset.samples || 0),
    points: chart.querySelector("polyline") ? chart.querySelector("polyline").getAttribute("points") : "",
    refreshes: Number(document.getElementById("updated").dataset.refreshes || 0),
    hot: q(".hashmap .region.hot").length,
    hotIds: Array.from(q(".hashmap .region.hot")).map((e) => Number(e.dataset.region)),
    hotFlags: q(".hot-flag").length,
    health: document.getElementById("health").textContent,
  };
"#;

#[test]
fn the_console_in_chromium_while_load_runs() {
    let (driver, chrome) = match browser() {
        Ok(b) => b,
        Err(why) => {
            eprintln!("SKIPPED the browser test: {why}");
            return;
        }
    };
    let (_dir, store, run, http) = http_daemon(quick_hotspots(), ServerConfig::default());
    // The README's load, through the line protocol (trucks named
    // truck-N), paced so that it is still running while the page is read.
    let mut load = Command::new(env!("CARGO_BIN_EXE_telestore"))
        .args([
            "load",
            "--line-protocol",
            "--trucks",
            "200",
            "--duration",
            "12h",
        ])
        .args(["--rate", "20000", "--connections", "2", "--batch", "500"])
        .args([
            "--addr",
            &run.addr.to_string(),
            "--http",
            &format!("http://{http}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let d = Driver::start(&driver, &chrome);
    let url = format!("http://{http}/#device=truck-7&table=readings&field=velocity&window=3600000");
    d.session_call("POST", "/url", Some(json!({ "url": url })));

    // Region bars and the ingest chart appear...
    d.wait_for(
        "16 regions with write bars and 3 ingest samples",
        &format!("const s = (() => {{ {PAGE_STATE} }})(); return s.regions === 16 && s.rows === 16 && s.samples >= 3 && s.bars.includes('%') ? s : null;"),
    );
    let first = d.js(PAGE_STATE);
    assert_eq!(first["health"], json!("healthy"), "{first}");
    // ...and the chart moves while the load runs (the bars of a steady
    // fleet hold still; they move under the skewed load below).
    let later = d.wait_for(
        "the ingest chart to move",
        &format!(
            "const s = (() => {{ {PAGE_STATE} }})(); return s.samples > {} && s.points !== {} ? s : null;",
            first["samples"],
            serde_json::to_string(&first["points"]).unwrap()
        ),
    );
    assert!(later["refreshes"].as_u64() > first["refreshes"].as_u64());
    assert!(load.try_wait().unwrap().is_none(), "load still runs");

    // The device panel shows truck-7's latest reading, as the store has it.
    let id = store.device_id("truck-7").expect("load registered truck-7");
    let shown = d.wait_for(
        "the device panel",
        r#"const c = document.querySelector('#device-latest td[data-field="velocity"]');
           const pts = Number(document.getElementById('device-chart').dataset.points || 0);
           return c && pts > 0 ? {velocity: c.textContent, ts: document.querySelector('#device-latest td[data-field="ts"]').textContent, device: document.querySelector('#device-latest td[data-field="device"]').textContent, points: pts} : null;"#,
    );
    assert_eq!(shown["device"], json!("truck-7"), "{shown}");
    let latest = store.latest("readings", id, 1).unwrap();
    let newest_ts = latest[0].ts;
    let shown_ts = chrono::DateTime::parse_from_rfc3339(shown["ts"].as_str().unwrap())
        .unwrap()
        .timestamp_millis();
    // Load keeps writing: the page's reading is one the truck reported.
    assert!(shown_ts <= newest_ts, "{shown} vs {newest_ts}");
    let rows = store
        .scan(
            "readings",
            id,
            shown_ts,
            shown_ts,
            telestore::Order::NewestFirst,
        )
        .unwrap();
    let velocity = f64::from_le_bytes(rows[0].fields[24..32].try_into().unwrap());
    let on_page: f64 = shown["velocity"].as_str().unwrap().parse().unwrap();
    assert_eq!(on_page, velocity, "{shown}");
    // The chart is scaled to the readings (not from 0: a latitude drew a
    // flat line) and plots time: the newest reading at the right edge.
    let line = d.js(
        "return Array.from(document.querySelectorAll('#device-chart polyline')).map((p) => p.getAttribute('points'))[0] || '';",
    );
    let pts: Vec<(f64, f64)> = line
        .as_str()
        .unwrap()
        .split_whitespace()
        .map(|p| {
            let (x, y) = p.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect();
    let (lo, hi) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    if pts.len() > 2 && hi > lo {
        assert!(lo < 10.0 && hi > 150.0, "not scaled to the data: {line}");
    }
    assert_eq!(pts.last().unwrap().0, 600.0, "{line}");
    assert!(pts.iter().all(|p| (0.0..=600.0).contains(&p.0)), "{line}");

    // Typing part of a name offers the matching trucks.
    d.js("const i = document.getElementById('device-input'); i.value = 'truck-19'; i.dispatchEvent(new Event('input'));");
    let offered = d.wait_for(
        "device suggestions",
        "const o = Array.from(document.querySelectorAll('#device-list option')).map((e) => e.value); return o.length ? o : null;",
    );
    let offered: Vec<&str> = offered
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        offered.contains(&"truck-19") && offered.iter().all(|n| n.contains("truck-19")),
        "{offered:?}"
    );

    // A skewed load: one device (not in the fleet) writes far more than
    // the others, and its region turns hot and is flagged.
    const SKEWED: u64 = 424_242;
    let key = telestore::key::encode(telestore::key::DeviceId(SKEWED), 0);
    let regions = store.regions("readings").unwrap();
    let mine = regions
        .iter()
        .rev()
        .find(|r| r.start_key <= key)
        .unwrap()
        .id;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut ts = 1_700_000_000_000i64;
            let fields = [0u8; 56];
            while !stop.load(Ordering::Relaxed) {
                let mut b = Vec::with_capacity(2000 * 72);
                for _ in 0..2000 {
                    telestore::schema::batch::push_row(&mut b, SKEWED, ts, &fields);
                    ts += 1;
                }
                store.write("readings", &b, Durability::Async).unwrap();
            }
        })
    };
    let hot = d.wait_for(
        "a hot region, and the bars moved",
        &format!(
            "const s = (() => {{ {PAGE_STATE} }})(); return s.hot >= 1 && s.hotFlags >= 1 && s.hotIds.includes({mine}) && s.bars !== {} ? s : null;",
            serde_json::to_string(&first["bars"]).unwrap()
        ),
    );
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    // The skewed device's region is flagged (another may be too, for a
    // moment, when the fleet's first batches land unevenly).
    assert!(
        hot["hotIds"].as_array().unwrap().contains(&json!(mine)),
        "region {mine}: {hot}"
    );

    let shot =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/console-screenshot.png");
    d.screenshot(&shot);
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 10_000,
        "a real screenshot"
    );
    eprintln!("screenshot: {}", shot.display());
    let _ = load.kill();
    let _ = load.wait();
}
