//! Guards durability: a child process ingests with `sync` durability from
//! four threads while flushing and rolling WAL segments; it is killed with
//! SIGKILL at random moments (more than 20 times). After every kill the
//! store reopens and must hold every acknowledged batch, whole, with the
//! exact values sent, and nothing that was never sent.

use crate::common;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use telestore::testkit::crash_row;
use telestore::{Options, Order, Store};

const ROWS: u64 = 10;
const DEVICES: u64 = 64;
const THREADS: u64 = 4;
const KILLS: u64 = 24;

/// Acknowledged batch numbers per (run, thread).
type Acks = Arc<Mutex<HashMap<(u64, u64), Vec<u64>>>>;

/// When to kill the child.
enum Kill<'a> {
    After(Duration),
    /// When it reports `PAUSED <point>` (a split/merge step).
    AtPause(&'a str),
}

fn run_child(dir: &std::path::Path, run: u64, kill_after: Duration, acks: &Acks, durability: &str) {
    run_child_with(dir, run, Kill::After(kill_after), acks, durability, &[]);
}

fn run_child_with(
    dir: &std::path::Path,
    run: u64,
    kill: Kill<'_>,
    acks: &Acks,
    durability: &str,
    extra: &[&str],
) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_telestore"));
    if let Kill::AtPause(p) = kill {
        cmd.env("TELESTORE_PAUSE_AT", p);
    }
    let mut child = cmd
        .args(["debug", "crash-writer", "--dir"])
        .arg(dir)
        .args([
            "--base",
            &(run * 1_000_000).to_string(),
            "--threads",
            &THREADS.to_string(),
        ])
        .args(["--durability", durability])
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn crash writer");
    let stderr = child.stderr.take().unwrap();
    let (paused_tx, paused_rx) = std::sync::mpsc::channel();
    let errs = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if line.starts_with("PAUSED ") {
                let _ = paused_tx.send(line.clone());
            }
            eprintln!("child: {line}");
        }
    });
    let stdout = child.stdout.take().unwrap();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let acks2 = acks.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let parts: Vec<&str> = line.split_whitespace().collect();
            match parts.as_slice() {
                ["READY", _] => {
                    let _ = ready_tx.send(());
                }
                ["ACK", t, b] => {
                    let (t, b): (u64, u64) = (t.parse().unwrap(), b.parse().unwrap());
                    acks2.lock().unwrap().entry((run, t)).or_default().push(b);
                }
                _ => panic!("unexpected child output {line:?}"),
            }
        }
    });
    ready_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("child became ready");
    match kill {
        Kill::After(d) => std::thread::sleep(d),
        Kill::AtPause(p) => {
            let got = paused_rx.recv_timeout(Duration::from_secs(120));
            assert!(got.is_ok(), "child never reached {p}");
        }
    }
    child.kill().expect("SIGKILL child");
    child.wait().unwrap();
    reader.join().unwrap();
    errs.join().unwrap();
}

/// Decode a stored row back to (batch, index) and check it is a row that
/// was really sent.
fn verify(dir: &std::path::Path, acks: &Acks) -> usize {
    let store = Store::open(dir, Options::default()).expect("reopen after SIGKILL");
    let mut per_batch: BTreeMap<u64, u64> = BTreeMap::new();
    for d in 0..DEVICES {
        for r in store
            .scan("crash", d, i64::MIN, i64::MAX, Order::OldestFirst)
            .unwrap()
        {
            let b = r.ts as u64 / 16;
            let i = r.ts as u64 % 16;
            assert!(i < ROWS, "row with impossible index: {r:?}");
            let (dev, ts, fields) = crash_row(b, i, ROWS, DEVICES);
            assert_eq!((dev, ts), (r.device, r.ts), "row under the wrong device");
            assert_eq!(fields, r.fields, "value of batch {b} row {i} differs");
            *per_batch.entry(b).or_default() += 1;
        }
    }
    for (b, n) in &per_batch {
        assert_eq!(
            *n, ROWS,
            "batch {b} partially present or duplicated ({n} of {ROWS} rows)"
        );
    }
    let regions = store.regions("crash").unwrap();
    assert_eq!(
        regions[0].start, "0000",
        "region map starts at the zero key"
    );
    for w in regions.windows(2) {
        assert_eq!(
            w[0].end.as_ref(),
            Some(&w[1].start),
            "regions leave a gap or overlap"
        );
    }
    assert_eq!(
        regions.last().unwrap().end,
        None,
        "region map reaches the end"
    );
    let mut all = 0u64;
    store
        .scan_all("crash", i64::MIN, i64::MAX, |_| {
            all += 1;
            true
        })
        .unwrap();
    assert_eq!(
        all,
        per_batch.len() as u64 * ROWS,
        "table scan disagrees with device scans"
    );
    let acks = acks.lock().unwrap();
    let mut acked = 0;
    for ((run, t), bs) in acks.iter() {
        for b in bs {
            assert!(
                per_batch.contains_key(b),
                "acknowledged batch {b} (run {run}, thread {t}) lost"
            );
            acked += 1;
        }
    }
    // Nothing that was never sent: each thread had at most one batch in
    // flight beyond its last acknowledgement.
    for b in per_batch.keys() {
        let (run, t, n) = (b / 1_000_000, (b % 1_000_000) / 100_000, b % 100_000);
        let last = acks
            .get(&(run, t))
            .and_then(|v| v.iter().max().copied())
            .map(|x| x % 100_000);
        let limit = last.map_or(0, |l| l + 1);
        assert!(
            n <= limit,
            "batch {b} present but thread {t} of run {run} never got past {last:?}"
        );
    }
    store.close().unwrap();
    acked
}

#[test]
fn sigkill_during_sync_ingest_loses_no_acknowledged_row() {
    let mut rng = SmallRng::seed_from_u64(common::seed(0xc4a5_4001));
    let dir = tempfile::tempdir().unwrap();
    let acks: Acks = Arc::default();
    let start = Instant::now();
    for run in 0..KILLS {
        let kill_after = Duration::from_millis(rng.gen_range(0..400));
        run_child(dir.path(), run, kill_after, &acks, "sync");
        let n = verify(dir.path(), &acks);
        eprintln!("run {run}: killed after {kill_after:?}, {n} acknowledged batches verified");
    }
    let total: usize = acks.lock().unwrap().values().map(|v| v.len()).sum();
    assert!(
        total > 0,
        "no batch was ever acknowledged: the test proved nothing"
    );
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let st = store.stats();
    assert!(st.hfiles > 0, "no flush happened during the crash runs");
    eprintln!(
        "{KILLS} kills, {total} acknowledged batches, {:?}, {st:?}",
        start.elapsed()
    );
}

/// `async` acknowledges before the fsync but after the WAL write reached the
/// OS, so killing the process (not the machine) must not lose it either.
#[test]
fn sigkill_during_async_ingest_loses_no_acknowledged_row() {
    let mut rng = SmallRng::seed_from_u64(common::seed(0xa5c0_0002));
    let dir = tempfile::tempdir().unwrap();
    let acks: Acks = Arc::default();
    for run in 0..6 {
        let kill_after = Duration::from_millis(rng.gen_range(0..300));
        run_child(dir.path(), run, kill_after, &acks, "async");
        let n = verify(dir.path(), &acks);
        eprintln!(
            "async run {run}: killed after {kill_after:?}, {n} acknowledged batches verified"
        );
    }
}

/// A split or merge killed at each of its steps reopens as the old or the
/// new regions, with every acknowledged row exactly once; then kills at
/// random moments while regions are reshaped every few milliseconds.
#[test]
fn sigkill_during_splits_and_merges_keeps_every_row_exactly_once() {
    let mut rng = SmallRng::seed_from_u64(common::seed(0x5b17_0003));
    let dir = tempfile::tempdir().unwrap();
    let acks: Acks = Arc::default();
    let points = [
        "split-before-record",
        "split-after-record",
        "split-after-swap",
        "merge-before-record",
        "merge-after-record",
    ];
    let reshape = ["--split-every-ms", "5"];
    let mut run = 0;
    for p in points {
        run_child_with(dir.path(), run, Kill::AtPause(p), &acks, "sync", &reshape);
        let n = verify(dir.path(), &acks);
        eprintln!("run {run}: killed at {p}, {n} acknowledged batches verified");
        run += 1;
    }
    for _ in 0..6 {
        let d = Duration::from_millis(rng.gen_range(50..400));
        run_child_with(dir.path(), run, Kill::After(d), &acks, "sync", &reshape);
        let n = verify(dir.path(), &acks);
        eprintln!("run {run}: killed after {d:?} while reshaping, {n} batches verified");
        run += 1;
    }
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let regions = store.regions("crash").unwrap();
    assert_ne!(regions.len(), 16, "no split or merge ever happened");
}

/// A compaction killed while writing its output, before and after its
/// manifest record, and at random moments: every acknowledged row is
/// there exactly once, and recovery leaves no temporary file behind.
#[test]
fn sigkill_during_compaction_keeps_every_row_and_leaves_no_temp_files() {
    let mut rng = SmallRng::seed_from_u64(common::seed(0xc0_0004));
    let dir = tempfile::tempdir().unwrap();
    let acks: Acks = Arc::default();
    let compact = ["--compact-every-ms", "30"];
    let mut run = 0;
    for p in [
        "compact-writing",
        "compact-before-record",
        "compact-after-record",
    ] {
        run_child_with(dir.path(), run, Kill::AtPause(p), &acks, "sync", &compact);
        let n = verify(dir.path(), &acks);
        eprintln!("run {run}: killed at {p}, {n} acknowledged batches verified");
        run += 1;
    }
    for _ in 0..5 {
        let d = Duration::from_millis(rng.gen_range(50..400));
        run_child_with(dir.path(), run, Kill::After(d), &acks, "sync", &compact);
        let n = verify(dir.path(), &acks);
        eprintln!("run {run}: killed after {d:?} while compacting, {n} batches verified");
        run += 1;
    }
    let tmp: Vec<_> = walk(dir.path())
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "tmp"))
        .collect();
    assert!(
        tmp.is_empty(),
        "temporary files left after recovery: {tmp:?}"
    );
}

fn walk(p: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(p).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
