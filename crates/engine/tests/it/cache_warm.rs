//! A flush puts the blocks it writes into the block cache (on by default,
//! `Options::cache_flushed_blocks`): the first reads after a flush are
//! cache hits, they return exactly what a cold read of the file returns,
//! and compaction output is not cached that way.

use crate::common;

use common::{small_rows, small_schema};
use telestore_engine::{Durability, Options, Order, Row, Store};

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

/// Compaction output is handed to the kernel's read-ahead (it is in no
/// cache after `O_DIRECT` writes), unless turned off; the blocks of the
/// files it replaced leave the block cache when those files are deleted.
#[test]
fn compaction_output_is_read_ahead_and_replaced_files_leave_the_cache() {
    for ahead in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let o = Options {
            readahead_new_files_bytes: if ahead { 1 << 30 } else { 0 },
            ..opts(true)
        };
        let s = Store::open(dir.path(), o).unwrap();
        fill(&s, 1_700_000_000_000);
        let flushed = s.stats();
        assert!(flushed.cache.bytes > 0, "the flush warmed nothing");
        assert_eq!(flushed.files_read_ahead, 0, "a cached flush was read ahead");
        let rows = read_all(&s);
        s.compact("t", true).unwrap();
        let st = s.stats();
        assert!(st.hfiles >= 1);
        assert_eq!(
            st.cache.bytes, 0,
            "blocks of the replaced file stayed in the cache"
        );
        // One output file per region.
        let want = if ahead { st.hfiles as u64 } else { 0 };
        assert_eq!(st.files_read_ahead, want);
        assert_eq!(read_all(&s), rows);
    }
}
