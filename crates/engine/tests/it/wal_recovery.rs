//! Guards WAL recovery: a torn last entry (the WAL cut at every byte of
//! it) is truncated and the store holds exactly the entries before it;
//! corruption before the tail is a typed checksum error naming the file and
//! offset, unless the store is opened with `salvage_wal`.

use crate::common;

use common::*;
use std::path::{Path, PathBuf};
use telestore_engine::schema::TableOptions;
use telestore_engine::wal::frame::{decode, Decoded};
use telestore_engine::wal::segment::SEGMENT_HEADER_LEN;
use telestore_engine::{Durability, Error, Options, Order};

const BATCHES: u64 = 5;

fn batch(b: u64) -> Vec<u8> {
    small_rows(&[(1, b as i64 * 10, b), (2, b as i64 * 10 + 1, b + 100)])
}

/// A store with BATCHES sync writes in WAL segment 1 and nothing flushed.
fn build() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Options::default());
    store
        .create_table(small_schema("w", TableOptions::default()))
        .unwrap();
    for b in 0..BATCHES {
        store.write("w", &batch(b), Durability::Sync).unwrap();
    }
    drop(store);
    let seg = dir
        .path()
        .join("wal")
        .join(telestore_engine::wal::segment::file_name(1));
    assert!(seg.exists());
    (dir, seg)
}

/// Offsets of each entry in a segment.
fn entry_offsets(data: &[u8]) -> Vec<usize> {
    let mut pos = SEGMENT_HEADER_LEN;
    let mut out = Vec::new();
    while let Decoded::Entry(_, n) = decode(&data[pos..]) {
        out.push(pos);
        pos += n;
    }
    assert_eq!(pos, data.len());
    out
}

fn batches_present(dir: &Path, opts: Options) -> Vec<u64> {
    let store = open(dir, opts);
    let rows = store
        .scan("w", 1, i64::MIN, i64::MAX, Order::OldestFirst)
        .unwrap();
    let out: Vec<u64> = rows.iter().map(|r| r.ts as u64 / 10).collect();
    for b in &out {
        assert!(
            store.get("w", 2, *b as i64 * 10 + 1).unwrap().is_some(),
            "batch {b} half applied"
        );
    }
    out
}

#[test]
fn torn_last_entry_is_truncated_at_every_byte() {
    let (dir, seg) = build();
    let data = std::fs::read(&seg).unwrap();
    let offs = entry_offsets(&data);
    assert_eq!(offs.len() as u64, BATCHES);
    let last = *offs.last().unwrap();
    let work = tempfile::tempdir().unwrap();
    for cut in last..data.len() {
        let d = work.path().join(format!("cut{cut}"));
        copy_dir(dir.path(), &d);
        let s = d.join("wal").join(seg.file_name().unwrap());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&s)
            .unwrap()
            .set_len(cut as u64)
            .unwrap();
        assert_eq!(
            batches_present(&d, Options::default()),
            (0..BATCHES - 1).collect::<Vec<_>>(),
            "cut at {cut}"
        );
        // Recovery truncated the tail: a second open sees the same.
        assert_eq!(
            batches_present(&d, Options::default()),
            (0..BATCHES - 1).collect::<Vec<_>>()
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
    // Garbage (not zeros) in a torn tail is truncated too.
    let d = work.path().join("garbage");
    copy_dir(dir.path(), &d);
    let s = d.join("wal").join(seg.file_name().unwrap());
    let mut bytes = data.clone();
    for b in &mut bytes[last + 30..] {
        *b ^= 0x5a;
    }
    std::fs::write(&s, &bytes).unwrap();
    assert_eq!(
        batches_present(&d, Options::default()),
        (0..BATCHES - 1).collect::<Vec<_>>()
    );
}

#[test]
fn corruption_before_the_tail_is_a_typed_error_unless_salvaged() {
    let (dir, seg) = build();
    let data = std::fs::read(&seg).unwrap();
    let offs = entry_offsets(&data);
    let mut bad = data.clone();
    bad[offs[1] + 30] ^= 0x01; // a payload byte of the second entry
    std::fs::write(&seg, &bad).unwrap();
    match telestore_engine::Store::open(dir.path(), Options::default()) {
        Err(Error::ChecksumMismatch { file, offset, .. }) => {
            assert_eq!(file, seg);
            assert_eq!(offset, offs[1] as u64);
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("opened a store with a corrupt WAL"),
    }
    let salvaged = batches_present(
        dir.path(),
        Options {
            salvage_wal: true,
            ..Options::default()
        },
    );
    assert_eq!(salvaged, vec![0]);
}

#[test]
fn unflushed_segments_survive_reopen_and_flushed_ones_retire() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), tiny_options());
    store
        .create_table(small_schema("w", TableOptions::default()))
        .unwrap();
    for b in 0..400u64 {
        store.write("w", &batch(b), Durability::Async).unwrap();
    }
    let before = store.stats().wal_segments;
    store.flush().unwrap();
    let after = store.stats().wal_segments;
    assert!(
        after <= 2 && after < before.max(3),
        "segments before flush {before}, after {after}"
    );
    drop(store);
    assert_eq!(batches_present(dir.path(), tiny_options()).len(), 400);
}

#[test]
fn corrupted_length_of_an_acknowledged_entry_is_not_mistaken_for_a_torn_tail() {
    let (dir, seg) = build();
    let data = std::fs::read(&seg).unwrap();
    let offs = entry_offsets(&data);
    let mut bad = data.clone();
    bad[offs[0] + 2] ^= 0x10; // the length of the first entry now points past the end
    std::fs::write(&seg, &bad).unwrap();
    match telestore_engine::Store::open(dir.path(), Options::default()) {
        Err(Error::ChecksumMismatch { file, offset, .. }) => {
            assert_eq!((file, offset), (seg.clone(), offs[0] as u64));
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("acknowledged entries silently dropped"),
    }
}

#[test]
fn segment_cut_short_at_creation_is_removed() {
    let (dir, _seg) = build();
    let wal = dir.path().join("wal");
    // A crash right after creating the next segment, before its header.
    let short = wal.join(telestore_engine::wal::segment::file_name(9));
    std::fs::write(&short, [b'T', b'S']).unwrap();
    assert_eq!(
        batches_present(dir.path(), Options::default()),
        (0..BATCHES).collect::<Vec<_>>()
    );
    assert!(!short.exists());
    assert_eq!(
        batches_present(dir.path(), Options::default()),
        (0..BATCHES).collect::<Vec<_>>()
    );
    // The file grew but its header never reached the disk: zeros.
    let zeros = wal.join(telestore_engine::wal::segment::file_name(30));
    std::fs::write(&zeros, [0u8; 64]).unwrap();
    assert_eq!(
        batches_present(dir.path(), Options::default()),
        (0..BATCHES).collect::<Vec<_>>()
    );
    assert!(!zeros.exists());
}

/// Preallocated segments (format v2): with small segments the writer
/// rolls over many times onto zero-filled files; the sealed segments end
/// in zeros, and every acknowledged batch is there after a copy taken
/// while the store is open (as after `kill -9`: nothing closed) and after
/// a clean close. Torn writes inside a preallocated segment are cut like
/// any torn tail.
#[test]
fn preallocated_segments_replay_with_their_zero_tails() {
    const SEGMENT: u64 = 16 << 10;
    let opts = || Options {
        wal_segment_bytes: SEGMENT,
        wal_segments_max: 1000,
        ..Options::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), opts());
    store
        .create_table(small_schema("w", TableOptions::default()))
        .unwrap();
    let wal = dir.path().join("wal");
    // A roll takes a preallocated file only when its zero-fill finished;
    // write until some segment file came from one (bounded by batches,
    // not by time).
    let preallocated = |wal: &Path| {
        telestore_engine::wal::segment::list(wal)
            .unwrap()
            .iter()
            .filter(|(_, p)| preallocated_file(p, SEGMENT))
            .count()
    };
    let mut b = 0;
    while preallocated(&wal) < 3 {
        assert!(b < 20_000, "no preallocated segment after {b} batches");
        store.write("w", &batch(b), Durability::Sync).unwrap();
        b += 1;
    }
    let crashed = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), crashed.path());
    std::fs::remove_file(crashed.path().join("LOCK")).ok();
    assert_eq!(
        batches_present(crashed.path(), opts()),
        (0..b).collect::<Vec<_>>()
    );
    drop(store);
    assert_eq!(
        batches_present(dir.path(), opts()),
        (0..b).collect::<Vec<_>>()
    );
    // A preallocation running at close was waited for; its file, if any,
    // was deleted by that open (which wrote nothing, so started none).
    assert!(!wal
        .join(telestore_engine::wal::segment::PREALLOC_NAME)
        .exists());

    // Tear the last frame of a preallocated segment that is the last one.
    let (no, path) = telestore_engine::wal::segment::list(&wal)
        .unwrap()
        .into_iter()
        .rev()
        .find(|(_, p)| preallocated_file(p, SEGMENT))
        .expect("a preallocated segment");
    let torn = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), torn.path());
    let twal = torn.path().join("wal");
    let mut kept = 0;
    for (n, p) in telestore_engine::wal::segment::list(&twal).unwrap() {
        if n > no {
            std::fs::remove_file(p).unwrap();
        } else {
            kept += entry_offsets_until_zeros(&std::fs::read(&p).unwrap()).len() as u64;
        }
    }
    let seg = twal.join(path.file_name().unwrap());
    let mut data = std::fs::read(&seg).unwrap();
    let last = *entry_offsets_until_zeros(&data).last().unwrap();
    data[last + 40] ^= 0xff;
    std::fs::write(&seg, &data).unwrap();
    // Every batch before the torn one (each batch is one WAL entry).
    let got = batches_present(torn.path(), opts());
    assert_eq!(got, (0..kept - 1).collect::<Vec<_>>());
}

fn preallocated_file(p: &Path, size: u64) -> bool {
    let d = std::fs::read(p).unwrap();
    d.len() as u64 == size && *d.last().unwrap() == 0
}

/// Frame offsets of a segment whose frames end in zeros.
fn entry_offsets_until_zeros(data: &[u8]) -> Vec<usize> {
    let mut pos = SEGMENT_HEADER_LEN;
    let mut out = Vec::new();
    while let Decoded::Entry(_, n) = decode(&data[pos..]) {
        out.push(pos);
        pos += n;
    }
    assert!(data[pos..].iter().all(|b| *b == 0));
    out
}
