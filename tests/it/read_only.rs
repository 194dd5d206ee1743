//! Read paths change nothing. `query`, `export`, `devices`, `regions`,
//! `table list` and `verify` on a stopped store with a torn WAL tail and a
//! torn manifest append leave every byte of the directory as it was (no
//! truncation, no new segment); several read-only opens run at once, none
//! beside a writer, and a read-only store refuses writes. `verify` reports
//! damage with file and offset and exits 1; `repair` fixes what a crash
//! leaves.

use crate::common;

use common::mixed;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;
use telestore::{Durability, Error, Options, Store};

/// A store with an HFile, unflushed rows in the WAL, and torn tails on
/// the last WAL segment and on the manifest (what a crash leaves).
fn crashed_store(dir: &Path) {
    let s = Store::open(dir, Options::default()).unwrap();
    mixed::fill(&s);
    s.close().unwrap();
    let wal = last_wal_segment(dir);
    append(&wal, &[0x5a; 11]);
    append(&dir.join("MANIFEST"), &[0x01, 0x02, 0x03]);
}

fn last_wal_segment(dir: &Path) -> std::path::PathBuf {
    let mut segs: Vec<_> = std::fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    segs.sort();
    segs.pop().expect("a WAL segment")
}

fn append(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn telestore(dir: &Path, args: &[&str]) -> Output {
    common::telestore_cli(dir, args)
}

fn ok(o: &Output) -> String {
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    text
}

#[test]
fn read_commands_leave_every_byte_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    crashed_store(dir);
    let before = snapshot(dir);
    let out = tmp.path().join("..").join("read_only_export.arrow");
    let t = mixed::TABLE;
    let commands: Vec<Vec<&str>> = vec![
        vec![
            "query", "scan", "--table", t, "--from", "0s", "--to", "now", "--format", "csv",
        ],
        vec!["query", "latest", "--table", t, "--device", "dev-1"],
        vec!["devices"],
        vec!["regions", "--table", t],
        vec!["table", "list"],
        vec!["verify"],
    ];
    for args in &commands {
        ok(&telestore(dir, args));
        assert_eq!(
            snapshot(dir),
            before,
            "`telestore {}` changed the store",
            args.join(" ")
        );
    }
    let export = telestore(
        dir,
        &[
            "export",
            "--table",
            t,
            "--from",
            "0s",
            "--to",
            "now",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    ok(&export);
    let _ = std::fs::remove_file(&out);
    assert_eq!(
        snapshot(dir),
        before,
        "`telestore export` changed the store"
    );
    // The rows in the WAL (before its torn tail) are read, not lost.
    let csv = ok(&telestore(dir, &commands[0]));
    let m = {
        let copy = tempfile::tempdir().unwrap();
        let s = Store::open(copy.path(), Options::default()).unwrap();
        mixed::fill(&s)
    };
    assert_eq!(csv.lines().count() - 1, m.rows.len(), "rows read read-only");
}

#[test]
fn readers_share_the_lock_writers_do_not_and_read_only_refuses_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    crashed_store(dir);
    let ro = || {
        Store::open(
            dir,
            Options {
                read_only: true,
                ..Options::default()
            },
        )
    };
    let a = ro().unwrap();
    let b = ro().expect("a second reader at once");
    assert!(matches!(
        Store::open(dir, Options::default()),
        Err(Error::Locked { .. })
    ));
    let rows = common::small_rows(&[(1, 1_700_000_000_000, 1)]);
    for e in [
        a.write(mixed::TABLE, &rows, Durability::Sync).unwrap_err(),
        a.flush_tables(None).unwrap_err(),
        a.compact(mixed::TABLE, true).unwrap_err(),
        a.create_table(common::small_schema("x", Default::default()))
            .unwrap_err(),
        a.register_devices(&[("new".into(), vec![])]).unwrap_err(),
    ] {
        assert!(matches!(e, Error::ReadOnly { .. }), "{e}");
    }
    b.close().unwrap();
    a.close().unwrap();
    // With the readers gone a writer opens it, and repairs the tails.
    Store::open(dir, Options::default())
        .unwrap()
        .close()
        .unwrap();
    let missing = tempfile::tempdir().unwrap();
    let e = Store::open(
        missing.path().join("none"),
        Options {
            read_only: true,
            ..Options::default()
        },
    );
    assert!(e.is_err(), "a read-only open created a store");
    assert!(!missing.path().join("none").exists());
}

#[test]
fn verify_names_damage_and_repair_fixes_what_a_crash_leaves() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    crashed_store(dir);
    // Torn tails are notes, not damage.
    let text = ok(&telestore(dir, &["verify"]));
    assert!(
        text.contains("is torn or damaged") && text.contains("0 damaged"),
        "{text}"
    );
    // Repair cuts them; then nothing is left to say.
    let text = ok(&telestore(dir, &["repair"]));
    assert!(text.contains("0 with notes, 0 damaged"), "{text}");
    // -v lists every file; an HFile line says its block encoding.
    let text = ok(&telestore(dir, &["verify", "-v"]));
    assert!(
        text.contains(", rows, ") && text.contains(" blocks)"),
        "{text}"
    );
    // A flipped byte in an HFile block is damage, named with its offset.
    let hfile = snapshot(dir)
        .keys()
        .find(|k| k.ends_with(".hfile"))
        .cloned()
        .expect("an HFile");
    let path = dir.join(&hfile);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[40] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let before = snapshot(dir);
    let o = telestore(dir, &["verify"]);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("DAMAGED"))
        .unwrap_or_default();
    assert!(line.contains(&hfile) && line.contains("offset"), "{text}");
    assert_eq!(snapshot(dir), before, "verify changed the store");
}

/// A store whose last WAL entry (1,000 acknowledged rows) was damaged
/// after it was written: a read drops those rows, as it must (they cannot
/// be told from a torn write), but says so on stderr with the count;
/// `verify` names the count too, and the engine keeps the warning (for
/// `/health`). Before, a query exited 0 with 1,000 rows fewer, silently.
#[test]
fn a_damaged_last_wal_entry_is_dropped_with_a_warning_naming_its_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    {
        let s = Store::open(dir, Options::default()).unwrap();
        mixed::fill(&s);
        let id = s.device_id("dev-1").unwrap();
        let width = s.schema(mixed::TABLE).unwrap().fields_width();
        let mut rows = Vec::new();
        for k in 0..1000 {
            telestore::schema::batch::push_row(
                &mut rows,
                id,
                1_900_000_000_000 + k,
                &vec![0u8; width],
            );
        }
        s.write(mixed::TABLE, &rows, Durability::Sync).unwrap();
        s.close().unwrap();
    }
    // Rot in the last entry's payload (its last non-zero byte: the
    // segment's preallocated zeros follow).
    let wal = last_wal_segment(dir);
    let mut bytes = std::fs::read(&wal).unwrap();
    let i = bytes.iter().rposition(|b| *b != 0).unwrap();
    bytes[i] ^= 0x01;
    std::fs::write(&wal, &bytes).unwrap();

    let t = mixed::TABLE;
    let o = telestore(dir, &["query", "scan", "--table", t, "--format", "csv"]);
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("is torn or damaged") && err.contains("it held 1000 rows"),
        "{err}"
    );
    let text = ok(&telestore(dir, &["verify"]));
    assert!(text.contains("it held 1000 rows"), "{text}");
    let s = Store::open(dir, Options::default()).unwrap();
    let w = s.warnings();
    assert!(w.len() == 1 && w[0].contains("it held 1000 rows"), "{w:?}");
}
