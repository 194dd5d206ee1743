//! Guards table-level behaviour: catalog persistence and schema conflicts,
//! input validation with nothing partially applied, the directory lock,
//! TTL against an injected clock, version limits, durability `skip`, and
//! HFile corruption surfacing as a typed checksum error.

use crate::common;

use common::*;
use std::sync::Arc;
use telestore::clock::ManualClock;
use telestore::schema::{Field, FieldType, TableOptions, TableSchema};
use telestore::{Durability, Error, Options, Order};

#[test]
fn catalog_persists_and_conflicting_schema_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let opts = TableOptions {
        ttl_ms: Some(86_400_000),
        max_versions: 2,
        compression: telestore::Compression::Snappy,
        block_size_bytes: 4096,
        bloom: false,
        regions: 8,
        encoding: telestore::schema::BlockEncoding::Columnar,
    };
    let schema = small_schema("readings", opts);
    let store = open(dir.path(), Options::default());
    let id = store.create_table(schema.clone()).unwrap();
    drop(store);
    let store = open(dir.path(), Options::default());
    assert_eq!(store.schema("readings").unwrap(), schema);
    assert_eq!(
        store.create_table(schema.clone()).unwrap(),
        id,
        "idempotent"
    );
    // The encoding is the one option that changes after creation: a
    // create that names another one still finds the same table, unchanged.
    let mut rows_again = schema.clone();
    rows_again.options.encoding = telestore::schema::BlockEncoding::Rows;
    assert_eq!(store.create_table(rows_again).unwrap(), id);
    assert_eq!(store.schema("readings").unwrap(), schema);
    let other = TableSchema::new(
        "readings",
        vec![Field::new("v", FieldType::F64)],
        TableOptions::default(),
    )
    .unwrap();
    assert!(matches!(
        store.create_table(other),
        Err(Error::SchemaConflict { .. })
    ));
    assert!(matches!(store.schema("nope"), Err(Error::UnknownTable(_))));
    assert!(TableSchema::new("Bad-Name", vec![], TableOptions::default()).is_err());
}

#[test]
fn bad_batches_are_rejected_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Options::default());
    store
        .create_table(small_schema("t", TableOptions::default()))
        .unwrap();
    let mut rows = small_rows(&[(1, 1, 1), (1, 2, 2)]);
    rows.pop();
    let e = store.write("t", &rows, Durability::Sync).unwrap_err();
    assert!(
        matches!(e, Error::InvalidInput { what: "batch", .. }),
        "{e}"
    );
    assert!(
        e.to_string().contains("not a multiple of the row width 29"),
        "{e}"
    );
    assert!(store
        .scan("t", 1, 0, 10, Order::NewestFirst)
        .unwrap()
        .is_empty());
    assert!(matches!(
        store.write("x", &small_rows(&[(1, 1, 1)]), Durability::Sync),
        Err(Error::UnknownTable(_))
    ));
    assert!(store.write("t", &[], Durability::Sync).is_err());
    // Timestamps outside 1970..9999 are refused by the engine itself,
    // whatever protocol brought them (the agg buckets stay exact).
    for ts in [-5i64, i64::MIN, i64::MAX, 253_402_300_800_000] {
        let e = store
            .write(
                "t",
                &small_rows(&[(1, 10, 1), (1, ts, 2)]),
                Durability::Sync,
            )
            .unwrap_err();
        assert!(e.to_string().contains("row 1: timestamp"), "{ts}: {e}");
    }
    assert!(store
        .scan("t", 1, i64::MIN, i64::MAX, Order::NewestFirst)
        .unwrap()
        .is_empty());
    assert!(
        store.scan("t", 1, 5, 1, Order::NewestFirst).is_err(),
        "from > to"
    );
    assert!(store.delete_range("t", 1, 5, 1, Durability::Sync).is_err());
}

#[test]
fn second_open_of_a_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _store = open(dir.path(), Options::default());
    assert!(matches!(
        telestore::Store::open(dir.path(), Options::default()),
        Err(Error::Locked { .. })
    ));
}

#[test]
fn ttl_hides_expired_cells_immediately() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(10_000_000));
    let opts = Options {
        clock: clock.clone(),
        ..Options::default()
    };
    let store = open(dir.path(), opts);
    let t = TableOptions {
        ttl_ms: Some(3_600_000),
        ..TableOptions::default()
    };
    store.create_table(small_schema("t", t)).unwrap();
    let now = 10_000_000i64;
    store
        .write(
            "t",
            &small_rows(&[(1, now - 7_200_000, 1), (1, now - 60_000, 2), (1, now, 3)]),
            Durability::Sync,
        )
        .unwrap();
    let ts = |s: &telestore::Store| {
        s.scan("t", 1, i64::MIN, i64::MAX, Order::OldestFirst)
            .unwrap()
            .iter()
            .map(|r| r.ts)
            .collect::<Vec<_>>()
    };
    assert_eq!(ts(&store), vec![now - 60_000, now]);
    store.flush().unwrap();
    assert_eq!(ts(&store), vec![now - 60_000, now]);
    clock.advance(3_600_000 - 30_000);
    assert_eq!(ts(&store), vec![now]);
    assert!(store.get("t", 1, now - 60_000).unwrap().is_none());
    clock.advance(3_600_000);
    assert!(ts(&store).is_empty());
}

#[test]
fn versions_are_capped_by_max_versions() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Options::default());
    let t = TableOptions {
        max_versions: 3,
        ..TableOptions::default()
    };
    store.create_table(small_schema("t", t)).unwrap();
    for v in 1..=5u64 {
        store
            .write("t", &small_rows(&[(9, 100, v)]), Durability::Sync)
            .unwrap();
        if v == 2 {
            store.flush().unwrap();
        }
    }
    let vals = |n| -> Vec<u64> {
        store
            .get_versions("t", 9, 100, n)
            .unwrap()
            .iter()
            .map(|r| u64::from_le_bytes(r.fields[..8].try_into().unwrap()))
            .collect()
    };
    assert_eq!(vals(10), vec![5, 4, 3]);
    assert_eq!(vals(2), vec![5, 4]);
    assert_eq!(
        store.get("t", 9, 100).unwrap().unwrap().fields,
        small_fields(5)
    );
    assert_eq!(
        store
            .scan("t", 9, 0, 200, Order::NewestFirst)
            .unwrap()
            .len(),
        1,
        "scans return the newest version"
    );
}

#[test]
fn skip_durability_is_lost_on_crash_but_kept_after_flush() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Options::default());
    store
        .create_table(small_schema("t", TableOptions::default()))
        .unwrap();
    store
        .write("t", &small_rows(&[(1, 1, 1)]), Durability::Skip)
        .unwrap();
    store.flush().unwrap();
    store
        .write("t", &small_rows(&[(1, 2, 2)]), Durability::Skip)
        .unwrap();
    assert!(
        store.get("t", 1, 2).unwrap().is_some(),
        "visible before the crash"
    );
    std::mem::forget(store); // no clean shutdown; the lock dies with the fd below
                             // Simulate a crash: a fresh process would not see the memstore. We
                             // cannot drop the forgotten store's lock here, so copy the directory.
    let copy = tempfile::tempdir().unwrap();
    for sub in ["", "wal", "tables", "tables/1"] {
        std::fs::create_dir_all(copy.path().join(sub)).unwrap();
        for e in std::fs::read_dir(dir.path().join(sub)).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() && e.file_name() != "LOCK" {
                std::fs::copy(e.path(), copy.path().join(sub).join(e.file_name())).unwrap();
            }
        }
    }
    let store = open(copy.path(), Options::default());
    assert!(
        store.get("t", 1, 1).unwrap().is_some(),
        "flushed skip row kept"
    );
    assert!(
        store.get("t", 1, 2).unwrap().is_none(),
        "unflushed skip row lost, as documented"
    );
}

#[test]
fn corrupt_hfile_block_is_a_typed_checksum_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Options::default());
    store
        .create_table(small_schema("t", TableOptions::default()))
        .unwrap();
    let rows: Vec<(u64, i64, u64)> = (0..500).map(|i| (3, i, i as u64)).collect();
    store
        .write("t", &small_rows(&rows), Durability::Sync)
        .unwrap();
    store.flush().unwrap();
    drop(store);
    let tdir = dir.path().join("tables").join("1");
    let file = std::fs::read_dir(&tdir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[telestore_engine::hfile::block::BLOCK_HEADER_LEN + 5] ^= 0x20;
    std::fs::write(&file, &bytes).unwrap();
    let store = open(dir.path(), Options::default());
    match store.scan("t", 3, 0, 1000, Order::NewestFirst) {
        Err(Error::ChecksumMismatch {
            file: f, offset, ..
        }) => {
            assert_eq!(f, file);
            assert_eq!(offset, 0);
        }
        other => panic!("expected a checksum error, got {other:?}"),
    }
    drop(store);
    let n = bytes.len();
    bytes[n - 10] ^= 0x01; // the trailer
    std::fs::write(&file, &bytes).unwrap();
    match telestore::Store::open(dir.path(), Options::default()) {
        Err(Error::ChecksumMismatch {
            file: f, offset, ..
        }) => {
            assert_eq!(f, file);
            assert_eq!(
                offset,
                (n - telestore_engine::hfile::sections::TRAILER_LEN) as u64
            );
        }
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("opened a store with a corrupt HFile trailer"),
    }
}

#[test]
fn writers_wait_for_flushes_instead_of_growing_memory() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        flush_threshold_bytes: 8 << 10,
        frozen_memstores_max: 1,
        ..Options::default()
    };
    let store = Arc::new(open(dir.path(), opts));
    store
        .create_table(small_schema("t", TableOptions::default()))
        .unwrap();
    let hs: Vec<_> = (0..4u64)
        .map(|w| {
            let store = store.clone();
            std::thread::spawn(move || {
                for b in 0..100u64 {
                    let rows: Vec<(u64, i64, u64)> =
                        (0..20).map(|i| (w, (b * 20 + i) as i64, b)).collect();
                    store
                        .write("t", &small_rows(&rows), Durability::Async)
                        .unwrap();
                    assert!(
                        store.stats().memstore_bytes < 64 << 10,
                        "memstores grew unbounded"
                    );
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    for w in 0..4 {
        assert_eq!(
            store
                .scan("t", w, i64::MIN, i64::MAX, Order::NewestFirst)
                .unwrap()
                .len(),
            2000
        );
    }
    // Many flushes happened (background compaction may have merged
    // their files since, so count flushes, not files).
    let flushes: u64 = store.regions("t").unwrap().iter().map(|r| r.flushes).sum();
    assert!(flushes > 10, "{flushes} flushes");
}

#[test]
fn exhausted_sequence_numbers_are_a_typed_error_not_a_wrap() {
    use telestore_engine::manifest::{Manifest, Record};
    let dir = tempfile::tempdir().unwrap();
    {
        let mut m = Manifest::open(dir.path(), Arc::new(telestore::io::StdBackend)).unwrap();
        m.append(&[Record::CreateTable {
            table_id: 1,
            schema: small_schema("t", TableOptions::default()),
            regions: vec![telestore_engine::manifest::RegionDef {
                id: 0,
                start: telestore::region::KEY_MIN,
            }],
            next_region_id: 1,
        }])
        .unwrap();
        m.append(&[Record::Files {
            table_id: 1,
            region_id: 0,
            added: vec![],
            removed: vec![],
            flushed_seq: Some(u64::MAX),
        }])
        .unwrap();
    }
    match telestore::Store::open(dir.path(), Options::default()) {
        Err(Error::Corrupt { what, .. }) => assert!(what.contains("sequence"), "{what}"),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("opened with exhausted sequence numbers"),
    }
}

/// Writes are acknowledged once logged and applied to the memstores just
/// after; a read that starts after an acknowledgement must still see the
/// write. Writers on every durability read their own last row back at
/// once, with tiny memstores so freezes and flushes run in between.
#[test]
fn every_acknowledged_write_is_visible_to_the_next_read() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        flush_threshold_bytes: 16 << 10,
        ..Options::default()
    };
    let store = Arc::new(open(dir.path(), opts));
    store
        .create_table(small_schema("t", TableOptions::default()))
        .unwrap();
    let durabilities = [
        Durability::Sync,
        Durability::Async,
        Durability::Skip,
        Durability::Async,
    ];
    let hs: Vec<_> = durabilities
        .into_iter()
        .enumerate()
        .map(|(w, d)| {
            let store = store.clone();
            std::thread::spawn(move || {
                let dev = w as u64;
                for b in 0..150i64 {
                    let rows: Vec<(u64, i64, u64)> = (0..30)
                        .map(|i| (dev, b * 30 + i, (b * 30 + i) as u64))
                        .collect();
                    store.write("t", &small_rows(&rows), d).unwrap();
                    let last = b * 30 + 29;
                    let got = store.get("t", dev, last).unwrap();
                    let row =
                        got.unwrap_or_else(|| panic!("{d:?}: acked row {dev}/{last} not visible"));
                    assert_eq!(row.fields, small_fields(last as u64));
                    let newest = store.latest("t", dev, 1).unwrap();
                    assert_eq!(newest.first().map(|r| r.ts), Some(last));
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    for w in 0..4u64 {
        let n = store
            .scan("t", w, i64::MIN, i64::MAX, Order::NewestFirst)
            .unwrap()
            .len();
        assert_eq!(n, 150 * 30);
    }
}

/// Recovery can leave the memstores over the global limit (the crash came
/// during a write stall, or the limit is lower now). Writers then stall,
/// and must ask the apply thread to freeze memstores for the flusher: no
/// write gets through to do it, so without that ask every write would end
/// `Busy`.
#[test]
fn writes_go_through_after_recovery_leaves_memstores_over_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Options::default());
    store
        .create_table(small_schema(
            "t",
            TableOptions {
                regions: 4,
                ..TableOptions::default()
            },
        ))
        .unwrap();
    for b in 0..40i64 {
        let rows: Vec<(u64, i64, u64)> = (0..1000).map(|d| (d, b, 1)).collect();
        store
            .write("t", &small_rows(&rows), Durability::Sync)
            .unwrap();
    }
    let before = store.stats().memstore_bytes;
    std::mem::forget(store); // a crash: nothing flushed
    let crashed = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), crashed.path());
    // Each of the 4 regions holds about a quarter: under its own flush
    // threshold, so replay freezes nothing, while all four are over the
    // global limit.
    let limit = before / 10 * 6;
    let opts = Options {
        flush_threshold_bytes: limit,
        memstore_global_bytes: limit,
        write_stall_max_ms: 60_000,
        ..Options::default()
    };
    let store = open(crashed.path(), opts);
    let replayed = store.stats().memstore_bytes;
    assert!(
        replayed > limit,
        "replay refilled the memstores: {replayed}"
    );
    store
        .write("t", &small_rows(&[(7, 1000, 7)]), Durability::Sync)
        .unwrap();
    assert_eq!(row_count(&store, "t"), 40 * 1000 + 1);
}

/// `telestore table create --encoding`, `table alter` and `table list`.
#[test]
fn table_encoding_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run = |args: &[&str]| common::telestore_cli(d, args);
    let create = |encoding: &str| {
        run(&[
            "table",
            "create",
            "t",
            "--field",
            "v:f64",
            "--encoding",
            encoding,
        ])
    };
    let o = create("zigzag");
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("rows or columnar"),
        "{o:?}"
    );
    let o = create("columnar");
    assert!(o.status.success(), "{o:?}");
    let list = |want: &str| {
        let o = run(&["table", "list"]);
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(out.contains(&format!("encoding {want}")), "{out}");
    };
    list("columnar");
    let o = run(&["table", "alter", "t", "--encoding", "rows"]);
    assert!(o.status.success(), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("compactions now write rows blocks"),
        "{o:?}"
    );
    list("rows");
    let o = run(&["table", "alter", "nope", "--encoding", "rows"]);
    assert!(!o.status.success(), "{o:?}");
}
