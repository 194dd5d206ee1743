//! A flush puts the blocks it writes into the block cache (on by default,
//! `Options::cache_flushed_blocks`): the first reads after a flush are
//! cache hits, they return exactly what a cold read of the file returns,
//! and compaction output is not cached that way.

mod common;

use common::{small_rows, small_schema};
use telestore::{Durability, Options, Order, Row, Store};

const DEVICES: u64 = 50;

fn fill(s: &Store, from_ts: i64) {
    s.create_table(small_schema("t", Default::default()))
        .unwrap();
    let rows: Vec<(u64, i64, u64)> = (0..DEVICES)
        .flat_map(|d| (0..200).map(move |i| (d, from_ts + i, d * 1000 + i as u64)))
        .collect();
    for chunk in rows.chunks(1000) {
        s.write("t", &small_rows(chunk), Durability::Sync).unwrap();
    }
    s.flush().unwrap();
}

fn read_all(s: &Store) -> Vec<Vec<Row>> {
    (0..DEVICES)
        .map(|d| {
            s.scan("t", d, i64::MIN, i64::MAX, Order::NewestFirst)
                .unwrap()
        })
        .collect()
}

fn opts(warm: bool) -> Options {
    Options {
        cache_flushed_blocks: warm,
        ..Options::default()
    }
}

#[test]
fn reads_right_after_a_flush_hit_the_cache_and_equal_a_cold_read() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), opts(true)).unwrap();
    fill(&s, 1_700_000_000_000);
    let before = s.stats().cache;
    let warm = read_all(&s);
    let after = s.stats().cache;
    assert_eq!(
        after.misses, before.misses,
        "a read after the flush went to disk"
    );
    assert!(after.hits > before.hits);
    assert_eq!(warm.iter().map(Vec::len).sum::<usize>(), 50 * 200);
    s.close().unwrap();
    // A cold read of the same files gives the same rows, bit for bit.
    let s = Store::open(dir.path(), opts(true)).unwrap();
    let before = s.stats().cache;
    assert_eq!(read_all(&s), warm);
    assert!(
        s.stats().cache.misses > before.misses,
        "the reopened cache was warm?"
    );
}

#[test]
fn without_the_option_and_after_a_compaction_the_first_reads_miss() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), opts(false)).unwrap();
    fill(&s, 1_700_000_000_000);
    let before = s.stats().cache;
    read_all(&s);
    assert!(s.stats().cache.misses > before.misses);
    s.close().unwrap();
    let s = Store::open(dir.path(), opts(true)).unwrap();
    s.compact("t", true).unwrap();
    let before = s.stats().cache;
    read_all(&s);
    assert!(
        s.stats().cache.misses > before.misses,
        "compaction output was put in the cache"
    );
}
