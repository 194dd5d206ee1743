//! Every shell example of README.md and docs/ runs, as written, against
//! fresh daemons, and prints what the docs say it prints; so does every
//! command's example (`--help`, docs/cli.md; see `every_command_example_runs`).
//!
//! Each page runs in a sandbox of its own (a temporary directory as the
//! current directory), its fenced `sh` blocks in order, each as one
//! `bash -e` script. On the sandbox's `PATH`:
//! - `telestore` is this build's binary, except that `telestore serve …`
//!   starts the daemon in the background (stopping one started before, as
//!   Ctrl-C would) and returns once its `/health` answers; the daemons are
//!   stopped when the page is done;
//! - `cargo run --release -- ARGS` runs `telestore ARGS` (anything else
//!   `cargo` is refused);
//! - `curl` fails on an HTTP error status (`--fail-with-body`), so an
//!   example answered 4xx or 5xx fails the test;
//! - `python3` is `TELESTORE_PYTHON` (pyarrow, DuckDB), when set.
//!
//! The examples use the documented default ports (7070-7072, MQTT 1883),
//! which must be free. A page that talks to a daemon without starting one
//! (http-api.md, queries.md) gets one started first, with the README's
//! demo fleet loaded. Paths under `/var/lib/telestore` and `/etc/telestore`
//! are moved into the sandbox, with the page's `toml` block as
//! `/etc/telestore.toml`; a page with `mqtt://` examples gets Debian's
//! mosquitto on port 1883 configured with the page's `conf` block. A
//! fenced `text` block right after an `sh` block (nothing between, or
//! prose ending in a colon) is its expected output: each line's pieces between `…` must appear in
//! the output, in order.
//!
//! - `telestore-lab` is the lab's binary, when the workspace built it
//!   (otherwise its lines are skipped, and said).
//!
//! The heavy example, `telestore-lab ingest` (2 M rows by default), is scaled by
//! `DOCS_SCALE` (default 0.05): it gets `--devices` and `--scan-rows` at
//! that share of their defaults. `DOCS_SCALE=1` runs it as written. The
//! demo fleet (360,000 rows) runs at full size, so the outputs the docs
//! show are checked as they are. `DOCS_SHOW=1` prints every example's output. Not run: `tools/test-all.sh` (the suite this test is
//! part of); without `TELESTORE_PYTHON`, the `python3` lines; without
//! Debian's `mosquitto`, the blocks that need a broker. Each is said.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const PORTS: [u16; 3] = [7070, 7071, 7072];
const MQTT_PORT: u16 = 1883;

/// One fenced `sh` block and the output the page shows for it.
struct Example {
    line: usize,
    script: String,
    expected: Option<String>,
}

struct Page {
    name: String,
    text: String,
    examples: Vec<Example>,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn pages() -> Vec<Page> {
    let mut files = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            let name = f.strip_prefix(root()).unwrap().display().to_string();
            Page {
                examples: examples(&text),
                name,
                text,
            }
        })
        .collect()
}

/// The fenced blocks of a page: `(info, first line number, body)`.
fn fences(text: &str) -> Vec<(String, usize, String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut v = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(info) = lines[i].strip_prefix("```") else {
            i += 1;
            continue;
        };
        let start = i + 1;
        let mut end = start;
        while end < lines.len() && !lines[end].starts_with("```") {
            end += 1;
        }
        v.push((
            info.trim().to_string(),
            start,
            lines[start..end].join("\n"),
            end,
        ));
        i = end + 1;
    }
    v
}

fn examples(text: &str) -> Vec<Example> {
    let lines: Vec<&str> = text.lines().collect();
    let blocks = fences(text);
    let mut v = Vec::new();
    for (k, (info, start, body, end)) in blocks.iter().enumerate() {
        if info != "sh" {
            continue;
        }
        // The next block, a `text` one, with nothing between or prose
        // ending in a colon ("It prints:").
        let expected = blocks.get(k + 1).and_then(|(ninfo, nstart, nbody, _)| {
            let gap = &lines[end + 1..nstart - 1];
            let prose: Vec<&str> = gap
                .iter()
                .map(|l| l.trim())
                .skip_while(|l| l.is_empty())
                .collect();
            let prose: Vec<&str> = prose
                .into_iter()
                .rev()
                .skip_while(|l| l.is_empty())
                .collect();
            // One short paragraph (`prose` is reversed).
            let introduced = prose.is_empty()
                || (prose.len() <= 3 && !prose.contains(&"") && prose[0].ends_with(':'));
            (ninfo == "text" && introduced).then(|| nbody.clone())
        });
        v.push(Example {
            line: *start,
            script: body.clone(),
            expected,
        });
    }
    v
}

fn scale() -> f64 {
    std::env::var("DOCS_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.05)
}

/// The lab's binary (tools/lab), built beside `telestore` when the whole
/// workspace is (`cargo test` at the top); `None` when only this package is.
fn lab_binary() -> Option<PathBuf> {
    let lab = Path::new(env!("CARGO_BIN_EXE_telestore")).with_file_name("telestore-lab");
    lab.exists().then_some(lab)
}

fn scaled(n: u64, s: f64) -> u64 {
    ((n as f64 * s).round() as u64).max(1)
}

/// An example as the sandbox runs it: heavy commands scaled down, system
/// paths moved into the sandbox, lines that cannot run here dropped (and
/// said).
fn prepared(script: &str, sandbox: &Path, python: bool, notes: &mut Vec<String>) -> String {
    let s = scale();
    let mut out = Vec::new();
    for line in script.lines() {
        let cmd = line.trim_start();
        if cmd.starts_with("tools/test-all.sh") {
            notes.push("not run: tools/test-all.sh (the suite this test is part of)".into());
            continue;
        }
        if cmd.starts_with("telestore-lab ") && lab_binary().is_none() {
            notes.push(format!(
                "SKIPPED (telestore-lab not built: cargo build -p telestore-lab): {cmd}"
            ));
            continue;
        }
        if cmd.starts_with("python3 ") && !python {
            notes.push(format!("SKIPPED (TELESTORE_PYTHON not set): {cmd}"));
            continue;
        }
        let mut line = line.to_string();
        if s < 1.0 && line.contains("telestore-lab ingest") && !line.contains("--devices") {
            let extra = format!(
                " --devices {} --scan-rows {}",
                scaled(10_000, s),
                scaled(1_000_000, s)
            );
            let (cmd, comment) = line.split_at(line.find(" #").unwrap_or(line.len()));
            line = format!("{}{extra}{comment}", cmd.trim_end());
        }
        out.push(line);
    }
    out.join("\n")
        .replace(
            "/var/lib/telestore",
            &format!("{}/var/lib/telestore", sandbox.display()),
        )
        .replace(
            "/etc/telestore",
            &format!("{}/etc/telestore", sandbox.display()),
        )
}

/// The expected output's pieces (between `…`, line by line) appear in
/// `actual` in order.
fn matches(expected: &str, actual: &str) -> Result<(), String> {
    let mut at = 0;
    for line in expected.lines().map(str::trim).filter(|l| !l.is_empty()) {
        for piece in line.split('…').filter(|p| !p.is_empty()) {
            match actual[at..].find(piece) {
                Some(i) => at += i + piece.len(),
                None => return Err(format!("{piece:?} (of the line {line:?})")),
            }
        }
    }
    Ok(())
}

const TELESTORE_SHIM: &str = r#"#!/bin/bash
# `telestore serve` in the background (stopping the one before), the rest
# as they are.
if [ "$1" != serve ]; then exec "$TELESTORE_REAL" "$@"; fi
if [ -f "$SANDBOX/serve.pid" ]; then
  old=$(cat "$SANDBOX/serve.pid")
  kill -TERM "$old" 2>/dev/null
  for _ in $(seq 600); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$old" 2>/dev/null
fi
"$TELESTORE_REAL" "$@" >>"$SANDBOX/serve.log" 2>&1 &
pid=$!
echo "$pid" >"$SANDBOX/serve.pid"
for _ in $(seq 600); do
  if "$CURL_REAL" -sf http://127.0.0.1:7071/health >/dev/null 2>&1; then exit 0; fi
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "telestore serve exited:" >&2; tail -20 "$SANDBOX/serve.log" >&2; exit 1
  fi
  sleep 0.1
done
echo "telestore serve did not answer /health within 60 s" >&2
exit 1
"#;

const CARGO_SHIM: &str = r#"#!/bin/bash
if [ "$1" = run ] && [ "$2" = --release ] && [ "$3" = -- ]; then shift 3; exec telestore "$@"; fi
echo "the docs test runs only 'cargo run --release -- …'" >&2
exit 2
"#;

/// The sandbox's shims and its processes, stopped on drop.
struct Sandbox {
    dir: tempfile::TempDir,
    broker: Option<std::process::Child>,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        let curl = which("curl").expect("curl is needed by the docs' examples");
        let shims = [
            ("telestore", TELESTORE_SHIM.to_string()),
            ("cargo", CARGO_SHIM.to_string()),
            (
                "curl",
                format!(
                    "#!/bin/sh\nexec {} --fail-with-body \"$@\"\n",
                    curl.display()
                ),
            ),
        ];
        for (name, text) in shims {
            write_executable(&bin.join(name), &text);
        }
        if let Some(lab) = lab_binary() {
            write_executable(
                &bin.join("telestore-lab"),
                &format!("#!/bin/sh\nexec '{}' \"$@\"\n", lab.display()),
            );
        }
        // A script, not a symlink: a virtualenv's python finds its
        // packages from the path it is started by.
        if let Ok(py) = std::env::var("TELESTORE_PYTHON") {
            write_executable(
                &bin.join("python3"),
                &format!("#!/bin/sh\nexec '{py}' \"$@\"\n"),
            );
        }
        Sandbox { dir, broker: None }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `bash -e` on `script` in the sandbox: (success, stdout + stderr).
    fn run(&self, script: &str) -> (bool, String) {
        let path = format!(
            "{}:{}",
            self.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut c = Command::new("timeout");
        let script = format!("exec 2>&1\n{script}");
        c.args(["900", "bash", "-e", "-c", &script])
            .current_dir(self.path().join("work"))
            .env("PATH", path)
            .env("SANDBOX", self.path())
            .env("CURL_REAL", which("curl").unwrap_or_default())
            .env("TELESTORE_REAL", env!("CARGO_BIN_EXE_telestore"));
        for (k, _) in std::env::vars() {
            let kept = ["TELESTORE_PYTHON", "TELESTORE_IO"];
            if k.starts_with("TELESTORE_") && !kept.contains(&k.as_str()) {
                c.env_remove(k);
            }
        }
        c.env_remove("RUST_LOG");
        let out = c.output().unwrap();
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text)
    }

    fn daemon_log(&self) -> String {
        std::fs::read_to_string(self.path().join("serve.log")).unwrap_or_default()
    }

    /// Debian's mosquitto on the default MQTT port with the page's
    /// `conf` block as its configuration; an error (said) when it is not
    /// installed or the port is taken.
    fn start_broker(&mut self, conf: &str) -> Result<(), String> {
        let Some(bin) = which("mosquitto").or_else(|| {
            let p = PathBuf::from("/usr/sbin/mosquitto");
            p.exists().then_some(p)
        }) else {
            return Err("mosquitto not installed (tools/test-all.sh installs it as root)".into());
        };
        if which("mosquitto_pub").is_none() {
            return Err("mosquitto_pub not installed".into());
        }
        if std::net::TcpListener::bind(("127.0.0.1", MQTT_PORT)).is_err() {
            return Err(format!("port {MQTT_PORT} is taken"));
        }
        // Started as root, mosquitto drops to its own user, which must be
        // able to write its persistence file here.
        let dir = self.path().join("broker");
        std::fs::create_dir_all(&dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let conf_file = dir.join("mosquitto.conf");
        let conf = format!("{conf}\npersistence_location {}/\n", dir.display());
        std::fs::write(&conf_file, conf).unwrap();
        let child = Command::new(bin)
            .arg("-c")
            .arg(&conf_file)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        self.broker = Some(child);
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", MQTT_PORT)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err("mosquitto did not start".into())
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let pid_file = self.path().join("serve.pid");
        if let Ok(pid) = std::fs::read_to_string(pid_file) {
            let pid = pid.trim().to_string();
            let _ = Command::new("kill").args(["-TERM", &pid]).status();
            for _ in 0..300 {
                let alive = Command::new("kill")
                    .args(["-0", &pid])
                    .stderr(std::process::Stdio::null())
                    .status();
                if !alive.is_ok_and(|s| s.success()) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = Command::new("kill")
                .args(["-KILL", &pid])
                .stderr(std::process::Stdio::null())
                .status();
        }
        if let Some(mut b) = self.broker.take() {
            let _ = b.kill();
            let _ = b.wait();
        }
    }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var("PATH")
        .ok()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

fn write_executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// What a page needs before its examples run.
fn set_up(page: &Page, sb: &mut Sandbox) -> Result<(), String> {
    let scripts: String = page.examples.iter().map(|e| e.script.as_str()).collect();
    if scripts.contains("/etc/telestore.toml") {
        let toml = fences(&page.text)
            .into_iter()
            .find(|(info, ..)| info == "toml")
            .map(|(_, _, body, _)| body)
            .ok_or("the page names /etc/telestore.toml but shows no toml block")?;
        let toml = prepared(&toml, sb.path(), false, &mut Vec::new());
        let etc = sb.path().join("etc/telestore");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(sb.path().join("etc/telestore.toml"), toml).unwrap();
        std::fs::write(etc.join("tokens"), "rw docs-example-token\n").unwrap();
    }
    if scripts.contains("mqtt://") {
        let conf = fences(&page.text)
            .into_iter()
            .find(|(info, ..)| info == "conf")
            .map(|(_, _, body, _)| body)
            .ok_or("the page uses a broker but shows no mosquitto.conf (a conf block)")?;
        sb.start_broker(&conf)?;
    }
    let starts_one = scripts.contains(" serve");
    if !starts_one && scripts.contains(":7071") {
        let fleet = "telestore serve\ntelestore load --trucks 1000 --duration 1h --line-protocol";
        let (ok, out) = sb.run(fleet);
        if !ok {
            return Err(format!(
                "the page's daemon and fleet: {out}\n{}",
                sb.daemon_log()
            ));
        }
    }
    Ok(())
}

/// The tests here share the default ports: one at a time.
static PORTS_IN_USE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn ports_free() -> std::sync::MutexGuard<'static, ()> {
    let guard = PORTS_IN_USE.lock().unwrap_or_else(|p| p.into_inner());
    for p in PORTS {
        assert!(
            std::net::TcpListener::bind(("127.0.0.1", p)).is_ok(),
            "port {p} is taken: the docs' examples use the default ports 7070-7072; stop what listens there"
        );
    }
    guard
}

#[test]
fn every_shell_example_runs() {
    let _ports = ports_free();
    let python = std::env::var_os("TELESTORE_PYTHON").is_some();
    let mut ran = 0;
    let mut failures = Vec::new();
    for page in pages().iter().filter(|p| !p.examples.is_empty()) {
        let mut sb = Sandbox::new();
        if let Err(why) = set_up(page, &mut sb) {
            if why.contains("mosquitto") || why.contains("port 1883") {
                eprintln!("SKIPPED {}: {why}", page.name);
                continue;
            }
            failures.push(format!("{}: set-up: {why}", page.name));
            continue;
        }
        for ex in &page.examples {
            let mut notes = Vec::new();
            let script = prepared(&ex.script, sb.path(), python, &mut notes);
            for n in &notes {
                eprintln!("{}:{}: {n}", page.name, ex.line);
            }
            let (ok, out) = sb.run(&script);
            ran += 1;
            let at = format!("{}:{}", page.name, ex.line);
            eprintln!("--- {at} ({} bytes of output)", out.len());
            if std::env::var_os("DOCS_SHOW").is_some() {
                eprintln!("{out}");
            }
            if !ok {
                failures.push(format!(
                    "{at}: failed:\n{script}\n--- output:\n{out}\n--- daemon log (tail):\n{}",
                    tail(&sb.daemon_log(), 20)
                ));
                continue;
            }
            if let Some(expected) = &ex.expected {
                if let Err(missing) = matches(expected, &out) {
                    failures.push(format!(
                        "{at}: the output lacks {missing}:\n--- expected:\n{expected}\n--- output:\n{out}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(ran >= 10, "only {ran} examples ran: is the parser right?");
}

/// Each command's example in docs/cli.md (from its `--help`): an
/// indented line after `Example:`, with its line number.
fn cli_examples(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut v = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if *l != "Example:" {
            continue;
        }
        let ex = lines[i + 1..].iter().find(|l| !l.trim().is_empty());
        if let Some(ex) = ex.and_then(|l| l.strip_prefix("    ")) {
            v.push((i + 1, ex.to_string()));
        }
    }
    v
}

/// Every command's example (docs/cli.md) runs against the README's demo
/// fleet: the ones that talk to a daemon (`--server`, `load`, `top`)
/// while one runs, then the rest on the stopped store, `serve` last.
#[test]
fn every_command_example_runs() {
    let _ports = ports_free();
    let text = std::fs::read_to_string(root().join("docs/cli.md")).unwrap();
    let all = cli_examples(&text);
    assert!(all.len() >= 20, "only {} command examples found", all.len());
    let live = |e: &str| {
        e.contains("--server") || e.starts_with("telestore load") || e.starts_with("telestore top")
    };
    let serve = |e: &str| e.starts_with("telestore serve");
    let order = all
        .iter()
        .filter(|(_, e)| live(e))
        .chain(all.iter().filter(|(_, e)| !live(e) && !serve(e)))
        .chain(all.iter().filter(|(_, e)| serve(e)));
    let sb = Sandbox::new();
    let fleet = "telestore serve\ntelestore load --trucks 1000 --duration 1h --line-protocol";
    let (ok, out) = sb.run(fleet);
    assert!(ok, "the daemon and the fleet: {out}\n{}", sb.daemon_log());
    let stop = r#"pid=$(cat "$SANDBOX/serve.pid"); kill -TERM "$pid"
while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done; rm "$SANDBOX/serve.pid""#;
    let mut stopped = false;
    let mut failures = Vec::new();
    for (line, ex) in order {
        if !live(ex) && !stopped {
            let (ok, out) = sb.run(stop);
            assert!(ok, "stopping the daemon: {out}");
            stopped = true;
        }
        let script = prepared(ex, sb.path(), false, &mut Vec::new());
        let (ok, out) = sb.run(&script);
        eprintln!("--- docs/cli.md:{line} ({} bytes of output)", out.len());
        if std::env::var_os("DOCS_SHOW").is_some() {
            eprintln!("{out}");
        }
        if !ok {
            failures.push(format!(
                "docs/cli.md:{line}: {ex}\n{out}\n--- daemon log (tail):\n{}",
                tail(&sb.daemon_log(), 20)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[test]
fn the_example_parser_and_matcher() {
    let page =
        "x\n```sh\necho hi\n```\n\n```text\nh…i\n```\n```sh\nls\n```\ntext\n```text\nno\n```\n\
                ```sh\nid\n```\nIt prints:\n\n```text\nuid\n```\n\
                ```sh\ndate\n```\nA paragraph.\n\nAnother:\n```text\nnot its output\n```\n";
    let ex = examples(page);
    assert_eq!(ex.len(), 4);
    assert_eq!(ex[2].expected.as_deref(), Some("uid"));
    assert!(
        ex[3].expected.is_none(),
        "two paragraphs between: not its output"
    );
    assert_eq!(ex[0].script, "echo hi");
    assert_eq!(ex[0].line, 2);
    assert_eq!(ex[0].expected.as_deref(), Some("h…i"));
    assert!(ex[1].expected.is_none(), "prose between: not its output");
    assert!(matches("h…i\n\nx…", "hello\nix").is_ok());
    assert!(matches("b…a", "ab").is_err());
    assert!(matches("{\"id\":…,\"name\":\"m\"}", "[]{\"id\":3,\"name\":\"m\"}").is_ok());
    let mut notes = Vec::new();
    let sb = Path::new("/sb");
    let p = prepared(
        "telestore load --trucks 1000 --duration 1h\ntools/test-all.sh\ntelestore-lab ingest --encoding columnar   # bytes\ncat /etc/telestore.toml",
        sb,
        true,
        &mut notes,
    );
    let s = scale();
    let lab = lab_binary().is_some();
    if s < 1.0 {
        assert!(
            p.starts_with("telestore load --trucks 1000 --duration 1h\n"),
            "{p}"
        );
        assert_eq!(p.contains("--encoding columnar --devices "), lab, "{p}");
        assert!(p.ends_with("cat /sb/etc/telestore.toml"), "{p}");
    }
    assert!(!p.contains("test-all"), "{p}");
    assert_eq!(notes.len(), if lab { 1 } else { 2 }, "{notes:?}");
}
