//! The group commit's threads (the commit thread, the sync workers) serve
//! their WAL writes and fdatasyncs on io_uring rings of their own under
//! TELESTORE_IO=uring, and touch no ring under std. Alone in its test
//! binary: the process-wide op counter it reads moves for this test only.

use crate::common;

use common::*;
use telestore_engine::io::{self, IoKind};
use telestore_engine::schema::TableOptions;
use telestore_engine::{Durability, Options};

#[test]
fn the_group_commit_runs_on_rings_of_its_own_threads() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Options::default());
    store
        .create_table(small_schema("t", TableOptions::default()))
        .unwrap();
    let before = io::local_ring_ops_completed();
    const WRITES: u64 = 10;
    for i in 0..WRITES {
        // Each is acknowledged after its own WAL write and fdatasync.
        store
            .write("t", &small_rows(&[(1, i as i64, i)]), Durability::Sync)
            .unwrap();
    }
    let local = io::local_ring_ops_completed() - before;
    match store.io_kind() {
        IoKind::Uring => assert!(
            local >= WRITES,
            "{WRITES} synced writes, only {local} ops on the committing threads' own rings"
        ),
        IoKind::Std => assert_eq!(local, 0, "the std backend used a ring"),
    }
    drop(store);
    let store = open(dir.path(), Options::default());
    assert_eq!(row_count(&store, "t"), WRITES);
}
