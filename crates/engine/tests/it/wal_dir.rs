//! A WAL directory of its own (`Options::wal_dir`, `serve --wal-dir`):
//! chosen when a store is created, recorded in its manifest, used by
//! every later open (with or without the option), refused when another is
//! asked for, locked against a second store, and checked by `verify`.

use crate::common;

use common::{small_rows, small_schema};
use std::path::{Path, PathBuf};
use telestore_engine::{Durability, Error, Options, Order, Store};

fn opts(wal: Option<&Path>) -> Options {
    Options {
        wal_dir: wal.map(Path::to_path_buf),
        ..Options::default()
    }
}

fn segments(d: &Path) -> usize {
    std::fs::read_dir(d).map_or(0, |rd| {
        rd.filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".wal"))
            .count()
    })
}

fn assert_wal_dir_refused(r: telestore_engine::Result<Store>, names: &[&Path]) {
    match r {
        Err(Error::InvalidInput {
            what: "wal_dir",
            message,
        }) => {
            for n in names {
                assert!(
                    message.contains(&n.display().to_string()),
                    "{message} does not name {}",
                    n.display()
                );
            }
        }
        Err(e) => panic!("refused with {e:?}"),
        Ok(_) => panic!("opened"),
    }
}

#[test]
fn a_new_store_keeps_its_wal_where_asked_and_every_open_uses_it() {
    let root = tempfile::tempdir().unwrap();
    let (dir, wal) = (root.path().join("data"), root.path().join("fast-disk/wal"));
    let s = Store::open(&dir, opts(Some(&wal))).unwrap();
    s.create_table(small_schema("t", Default::default()))
        .unwrap();
    s.write(
        "t",
        &small_rows(&[(1, 10, 7), (2, 20, 8)]),
        Durability::Sync,
    )
    .unwrap();
    assert!(segments(&wal) > 0, "no segment in {}", wal.display());
    assert_eq!(segments(&dir.join("wal")), 0);
    // No flush: the rows are only in the WAL when it is dropped.
    drop(s);
    // Opened without the option: the manifest says where the WAL is.
    let s = Store::open(&dir, opts(None)).unwrap();
    let rows = s
        .scan("t", 1, i64::MIN, i64::MAX, Order::NewestFirst)
        .unwrap();
    assert_eq!(
        rows.len(),
        1,
        "the WAL in {} was not replayed",
        wal.display()
    );
    s.close().unwrap();
    // With the same directory, written differently: fine.
    let same = root.path().join("fast-disk/../fast-disk/wal");
    Store::open(&dir, opts(Some(&same)))
        .unwrap()
        .close()
        .unwrap();
    // With another: refused, naming both.
    let other = root.path().join("elsewhere");
    assert_wal_dir_refused(Store::open(&dir, opts(Some(&other))), &[&wal, &other]);
    // `verify` reads the recorded WAL directory.
    let report = telestore_engine::engine::verify::verify(&dir).unwrap();
    assert_eq!(report.damaged(), 0, "{report:?}");
    assert!(
        report.files.iter().any(|c| c.path.starts_with(&wal)),
        "verify did not look at {}",
        wal.display()
    );
}

#[test]
fn a_store_created_without_one_refuses_a_wal_dir() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    let s = Store::open(&dir, opts(None)).unwrap();
    s.create_table(small_schema("t", Default::default()))
        .unwrap();
    s.close().unwrap();
    let wal = root.path().join("wal2");
    assert_wal_dir_refused(
        Store::open(&dir, opts(Some(&wal))),
        &[&dir.join("wal"), &wal],
    );
    // Its own `wal/`, named explicitly, is accepted.
    Store::open(&dir, opts(Some(&dir.join("wal"))))
        .unwrap()
        .close()
        .unwrap();
}

#[test]
fn two_stores_cannot_share_a_wal_dir_and_a_relative_one_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let wal = root.path().join("shared-wal");
    let a = Store::open(root.path().join("a"), opts(Some(&wal))).unwrap();
    let b = Store::open(root.path().join("b"), opts(Some(&wal)));
    match b {
        Err(Error::InvalidInput {
            what: "wal_dir",
            message,
        }) => {
            assert!(message.contains("in use by another store"), "{message}")
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    a.close().unwrap();
    let rel = PathBuf::from("relative/wal");
    match Store::open(root.path().join("c"), opts(Some(&rel))) {
        Err(Error::InvalidInput {
            what: "wal_dir", ..
        }) => {}
        other => panic!("{:?}", other.map(|_| ())),
    }
}
