//! Reads of columnar tables through run heads: `latest` and point gets
//! take a device's newest row from a block's run heads without decoding
//! its columns, and fall back to the whole block whenever the head is not
//! the answer (a newer tombstone, a range delete, a get inside a run) —
//! with the same results as a rows table.

use crate::common;

use common::{open, small_rows, small_schema, tiny_options};
use telestore_engine::schema::BlockEncoding;
use telestore_engine::{Durability, Store, TableOptions};

const DEVICES: u64 = 4;
const READINGS: i64 = 200;
/// Cell bytes of the small schema: key, seq, kind and 13 field bytes.
const CELL: u64 = 27 + 13;

fn store_with(dir: &std::path::Path, encoding: BlockEncoding) -> Store {
    fleet_store(dir, encoding, DEVICES, READINGS)
}

/// A table of `devices` × `readings` (one every 10 ms), flushed and
/// major-compacted (so its files are in `encoding`).
fn fleet_store(
    dir: &std::path::Path,
    encoding: BlockEncoding,
    devices: u64,
    readings: i64,
) -> Store {
    let store = open(dir, tiny_options());
    let opts = TableOptions {
        encoding,
        regions: 2,
        ..TableOptions::default()
    };
    store.create_table(small_schema("t", opts)).unwrap();
    let rows: Vec<(u64, i64, u64)> = (0..devices)
        .flat_map(|d| (0..readings).map(move |ts| (d, ts * 10, d * 1000 + ts as u64)))
        .collect();
    store
        .write("t", &small_rows(&rows), Durability::Sync)
        .unwrap();
    store.flush().unwrap();
    store.compact("t", true).unwrap();
    store
}

/// Reopen: an empty block cache, as after a restart.
fn reopen(store: Store, dir: &std::path::Path) -> Store {
    store.close().unwrap();
    open(dir, tiny_options())
}

fn latest_ts(store: &Store, d: u64) -> Option<i64> {
    store.latest("t", d, 1).unwrap().first().map(|r| r.ts)
}

#[test]
fn latest_reads_run_heads_without_decoding_the_block() {
    let dir = tempfile::tempdir().unwrap();
    let store = reopen(store_with(dir.path(), BlockEncoding::Columnar), dir.path());
    let before = store.stats().cache;
    for d in 0..DEVICES {
        assert_eq!(latest_ts(&store, d), Some((READINGS - 1) * 10));
    }
    let heads_only = store.stats().cache;
    // Each cached entry holds the heads of one block: a few cells, where
    // a decoded block of a device's 200 readings holds 200 × 40 bytes.
    assert!(
        heads_only.bytes - before.bytes < DEVICES * 4 * CELL,
        "{before:?} -> {heads_only:?}"
    );
    // A range read decodes the block.
    assert_eq!(
        store
            .scan("t", 1, 0, i64::MAX, Default::default())
            .unwrap()
            .len(),
        200
    );
    assert!(store.stats().cache.bytes - heads_only.bytes >= 200 * CELL);
    assert_eq!(latest_ts(&store, 99), None, "a device with no rows");
    store.close().unwrap();
}

/// The same edits on a rows table and a columnar one give the same reads.
#[test]
fn heads_fall_back_to_the_block_when_the_head_is_not_the_answer() {
    let mut seen = Vec::new();
    for encoding in [BlockEncoding::Rows, BlockEncoding::Columnar] {
        let dir = tempfile::tempdir().unwrap();
        let mut store = store_with(dir.path(), encoding);
        let mut got = Vec::new();
        // Device 0: its newest reading deleted in a newer file.
        store
            .delete("t", &[(0, (READINGS - 1) * 10)], Durability::Sync)
            .unwrap();
        // Device 1: a range delete over its five newest readings.
        let from = (READINGS - 5) * 10;
        store
            .delete_range("t", 1, from, i64::MAX, Durability::Sync)
            .unwrap();
        // Device 2: a newer value of its newest reading, still in memory.
        store
            .write(
                "t",
                &small_rows(&[(2, (READINGS - 1) * 10, 77)]),
                Durability::Sync,
            )
            .unwrap();
        store.flush().unwrap();
        for round in 0..2 {
            if round == 1 {
                store = reopen(store, dir.path());
            }
            for d in 0..DEVICES {
                let r = store.latest("t", d, 1).unwrap();
                got.push(r.first().map(|r| (r.ts, r.fields.clone())));
                let g = store.get("t", d, (READINGS - 1) * 10).unwrap();
                got.push(g.map(|r| (r.ts, r.fields)));
                let mid = store.get("t", d, 500).unwrap();
                got.push(mid.map(|r| (r.ts, r.fields)));
            }
        }
        assert_eq!(latest_ts(&store, 0), Some((READINGS - 2) * 10));
        assert_eq!(latest_ts(&store, 1), Some((READINGS - 6) * 10));
        assert_eq!(latest_ts(&store, 2), Some((READINGS - 1) * 10));
        assert_eq!(
            store
                .get("t", 2, (READINGS - 1) * 10)
                .unwrap()
                .unwrap()
                .fields,
            small_rows(&[(2, 0, 77)])[16..]
        );
        seen.push(got);
        store.close().unwrap();
    }
    assert_eq!(seen[0], seen[1], "rows and columnar tables read the same");
}

/// A rows table's `latest` reads each block once: no run-heads lookup
/// (which would read the block a second time) for files without them.
#[test]
fn rows_files_skip_the_heads_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let store = reopen(store_with(dir.path(), BlockEncoding::Rows), dir.path());
    let before = store.stats().cache;
    assert_eq!(latest_ts(&store, 1), Some((READINGS - 1) * 10));
    let after = store.stats().cache;
    assert_eq!(
        after.misses - before.misses,
        1,
        "one miss: the block, not heads and then the block"
    );
    store.close().unwrap();
}

/// A columnar block without run heads (runs too short to pay for them) is
/// read from disk once by a cold `latest`: the heads lookup decodes it
/// into the cache for the read that follows.
#[test]
fn blocks_without_heads_are_read_once() {
    let dir = tempfile::tempdir().unwrap();
    // Runs of 3 readings: shorter than the 8 that heads need.
    let store = fleet_store(dir.path(), BlockEncoding::Columnar, 40, 3);
    let store = reopen(store, dir.path());
    let before = store.stats().cache;
    assert_eq!(latest_ts(&store, 7), Some(20));
    let after = store.stats().cache;
    assert_eq!(
        (after.misses - before.misses, after.hits - before.hits),
        (1, 1),
        "a miss for the heads (none), a hit for the block they cached"
    );
    store.close().unwrap();
}
