//! Guards the on-disk formats against drift. The byte-level specs in
//! `formats/` (key.md, wal.md, hfile.md, manifest.md, row.md) are
//! re-implemented here by hand: the checks read the fixtures in
//! `formats/fixtures/` at the documented offsets and recompute every CRC32C
//! and row key from the documented rules (the `crc32c` and `xxhash-rust`
//! crates directly, never the telestore decoders). A second set of checks
//! makes sure the telestore decoders still accept the same bytes, and that
//! a reader reacts to corruption the way the specs say.
//!
//! The fixtures are written by the ignored `regenerate_fixtures` test:
//! `cargo test -p telestore-engine --test it -- --ignored format_fixtures::regenerate_fixtures`.
//! Regenerating must not change them unless a format changed on purpose
//! (which needs a new version number and a spec update).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use telestore_engine::cache::BlockCache;
use telestore_engine::cell::{self, CellKind, RangeTombstone};
use telestore_engine::error::Error;
use telestore_engine::fuzzing::{fuzz_decode_file, fuzz_decode_manifest};
use telestore_engine::hfile::{HFileReader, HFileWriter, WriterOptions};
use telestore_engine::io::{IoChoice, StdBackend};
use telestore_engine::key::{self, DeviceId};
use telestore_engine::manifest::record::{decode_framed, Framed};
use telestore_engine::manifest::{DeviceEntry, FileMeta, Manifest, Record, RegionDef};
use telestore_engine::region::{pre_split_starts, route};
use telestore_engine::schema::batch::push_row;
use telestore_engine::schema::BlockEncoding;
use telestore_engine::wal::frame::{self, Decoded, Entry, EntryKind};
use telestore_engine::wal::segment;
use telestore_engine::wal::Recovery;
use telestore_engine::{Compression, Field, FieldType, Options, Store, TableOptions, TableSchema};

/// 2026-12-01T00:00:00Z in milliseconds since the Unix epoch.
const T0_MS: i64 = 1_796_083_200_000;
/// Fixed "creation time" of the fixture HFile (no clock is read).
const CREATED_MS: i64 = T0_MS + 60_000;
const DEVICE: u64 = 42;
const TABLE_ID: u32 = 1;
const FILE_ID: u64 = 1;
const TABLE_NAME: &str = "readings";
/// Pre-split regions of the fixture table (`TableOptions::regions`): two
/// keep the manifest's region map short; the layout id, and so the WAL and
/// HFile fixtures, do not depend on it.
const REGIONS: u32 = 2;
/// Fields of the fixture table: one `value: u64`.
const FIELDS_WIDTH: usize = 8;
/// Cell: key 18 + seq 8 + kind 1 + fields.
const CELL_WIDTH: usize = 27 + FIELDS_WIDTH;
/// Ingest row: device 8 + ts 8 + fields.
const ROW_WIDTH: usize = 16 + FIELDS_WIDTH;
/// Tiny block size so that the fixture HFile has two data blocks.
const FIXTURE_BLOCK_BYTES: usize = 2 * CELL_WIDTH;
const RANGE_FROM: i64 = T0_MS - 10_000;
const RANGE_TO: i64 = T0_MS - 1;

/// The device the fixture manifest registers: the first id the engine's
/// device registry hands out (2^40), its name and its one tag.
const REG_ID: u64 = 1 << 40;
const REG_NAME: &str = "truck-42";
const REG_TAG: (&str, &str) = ("fleet", "east");
/// Offset of the fixture manifest's last record (the Device record) and the
/// fixture manifest's length.
const DEVICE_AT: usize = 243;
const MANIFEST_LEN: usize = 289;

const SEGMENT_NAME: &str = "0000000000000001.wal";
const HFILE_NAME: &str = "0000000000000001.hfile";

/// `(device, ts)` pairs of `key_vectors.txt`.
const KEY_VECTORS: &[(u64, i64)] = &[
    (0, 0),
    (1, 0),
    (1, 1),
    (DEVICE, T0_MS),
    (DEVICE, T0_MS + 1_000),
    (DEVICE, -1),
    (DEVICE, i64::MIN),
    (DEVICE, i64::MAX),
    (0, i64::MAX),
    (u64::MAX, 0),
    (u64::MAX, i64::MIN),
    (0x0123_4567_89ab_cdef, -1_000),
];

// ---------------------------------------------------------------- paths

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../formats/fixtures")
}
fn store_dir() -> PathBuf {
    fixtures().join("store_v1")
}
fn wal_path() -> PathBuf {
    store_dir().join("wal").join(SEGMENT_NAME)
}
fn hfile_path() -> PathBuf {
    store_dir()
        .join("tables")
        .join(TABLE_ID.to_string())
        .join(HFILE_NAME)
}
fn manifest_v3_path() -> PathBuf {
    fixtures().join("manifest_v3/MANIFEST")
}
fn manifest_v4_path() -> PathBuf {
    fixtures().join("manifest_v4/MANIFEST")
}

fn manifest_path() -> PathBuf {
    store_dir().join("MANIFEST")
}
fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e} (run the ignored generator)", p.display()))
}

// ------------------------------------------------ hand-written decoding

fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(b[off..off + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}
fn i64_at(b: &[u8], off: usize) -> i64 {
    i64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}
fn crc_of(parts: &[&[u8]]) -> u32 {
    parts.iter().fold(0, |c, p| crc32c::crc32c_append(c, p))
}
fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The row key as `formats/key.md` defines it, computed without the crate.
fn hand_key(device: u64, ts: i64) -> [u8; 18] {
    let hash = xxhash_rust::xxh3::xxh3_64_with_seed(&device.to_le_bytes(), 0);
    let prefix = (hash >> 48) as u16;
    let flipped = (ts as u64) ^ 0x8000_0000_0000_0000;
    let reversed = !flipped;
    let mut k = [0u8; 18];
    k[0..2].copy_from_slice(&prefix.to_be_bytes());
    k[2..10].copy_from_slice(&device.to_be_bytes());
    k[10..18].copy_from_slice(&reversed.to_be_bytes());
    k
}

/// Layout id as `formats/hfile.md` defines it: CRC32C over, per field,
/// `name_len u16 LE | name | type u8`.
fn hand_layout_id(fields: &[(&str, u8)]) -> u32 {
    let mut b = Vec::new();
    for (name, ty) in fields {
        b.extend_from_slice(&(name.len() as u16).to_le_bytes());
        b.extend_from_slice(name.as_bytes());
        b.push(*ty);
    }
    crc32c::crc32c(&b)
}

// ------------------------------------------------ what the fixtures hold

fn schema() -> TableSchema {
    TableSchema::new(
        TABLE_NAME,
        vec![Field::new("value", FieldType::U64)],
        TableOptions {
            compression: Compression::None,
            regions: REGIONS,
            // The fixture's table (and its HFile, version 1) is `rows`.
            encoding: telestore_engine::schema::BlockEncoding::Rows,
            ..TableOptions::default()
        },
    )
    .unwrap()
}

/// The region map a new store gives the fixture table: `REGIONS` ranges of
/// equal width over the hash prefix, ids `0..REGIONS`.
fn fixture_regions() -> Vec<RegionDef> {
    pre_split_starts(schema().options.regions)
        .into_iter()
        .enumerate()
        .map(|(i, start)| RegionDef {
            id: i as u32,
            start,
        })
        .collect()
}

/// Id of the region holding the fixture device (all its keys share one
/// hash prefix, and pre-split boundaries are prefix boundaries).
fn fixture_region() -> u32 {
    let starts: Vec<[u8; 18]> = fixture_regions().iter().map(|r| r.start).collect();
    let r = route(&starts, &key::encode(DeviceId(DEVICE), T0_MS));
    fixture_regions()[r].id
}

/// `(device, ts, value)` of the two rows of the put entry (seq 1 and 2).
const PUT_ROWS: [(u64, i64, u64); 2] = [(DEVICE, T0_MS, 7), (DEVICE, T0_MS + 1_000, 8)];

/// Cells of the HFile in cell order: `(ts, seq, kind, value)`, all device 42.
const HFILE_CELLS: [(i64, u64, u8, u64); 3] =
    [(T0_MS + 1_000, 2, 1, 8), (T0_MS, 3, 2, 0), (T0_MS, 1, 1, 7)];

fn range_tombstone() -> RangeTombstone {
    RangeTombstone {
        device: DeviceId(DEVICE),
        from: RANGE_FROM,
        to: RANGE_TO,
        seq: 4,
    }
}

// ------------------------------------------------------------ generator

/// Direct writes (whole aligned blocks, the last padded, then cut back)
/// and buffered writes give the committed fixture, byte for byte.
#[test]
fn the_writer_reproduces_the_hfile_fixture_direct_or_not() {
    let want = read(&hfile_path());
    for direct in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.hfile");
        let len = generate_hfile(&p, direct);
        assert_eq!(len, want.len() as u64, "direct {direct}: length");
        assert!(read(&p) == want, "direct {direct}: bytes differ");
    }
}

#[test]
#[ignore = "writes formats/fixtures/; run on purpose after a format change"]
fn regenerate_fixtures() {
    let dir = fixtures();
    std::fs::create_dir_all(&dir).unwrap();
    let mut vectors = String::new();
    for (d, ts) in KEY_VECTORS {
        let k = key::encode(DeviceId(*d), *ts);
        vectors.push_str(&format!("{d} {ts} {}\n", hex(&k)));
    }
    std::fs::write(dir.join("key_vectors.txt"), &vectors).unwrap();
    print!("{vectors}");

    let store = store_dir();
    if store.exists() {
        std::fs::remove_dir_all(&store).unwrap();
    }
    std::fs::create_dir_all(store.join("wal")).unwrap();
    std::fs::create_dir_all(hfile_path().parent().unwrap()).unwrap();
    std::fs::write(wal_path(), generate_wal()).unwrap();
    let hfile_len = generate_hfile(&hfile_path(), false);
    std::fs::write(manifest_path(), generate_manifest(hfile_len)).unwrap();
}

fn generate_wal() -> Vec<u8> {
    let mut out = segment::encode_header(1);
    let mut rows = Vec::new();
    for (d, ts, v) in PUT_ROWS {
        push_row(&mut rows, d, ts, &v.to_le_bytes());
    }
    let mut point = Vec::new();
    point.extend_from_slice(&DEVICE.to_le_bytes());
    point.extend_from_slice(&T0_MS.to_le_bytes());
    let mut range = Vec::new();
    range.extend_from_slice(&DEVICE.to_le_bytes());
    range.extend_from_slice(&RANGE_FROM.to_le_bytes());
    range.extend_from_slice(&RANGE_TO.to_le_bytes());
    let entries = [
        (EntryKind::Put, 1, 2, &rows[..]),
        (EntryKind::DeletePoints, 3, 1, &point[..]),
        (EntryKind::DeleteRange, 4, 1, &range[..]),
    ];
    for (kind, first_seq, count, payload) in entries {
        let e = Entry {
            kind,
            table_id: TABLE_ID,
            first_seq,
            count,
            payload,
        };
        frame::encode(&e, &mut out);
    }
    out
}

fn generate_hfile(path: &Path, direct: bool) -> u64 {
    let s = schema();
    let mut w = HFileWriter::create(
        &StdBackend,
        path,
        WriterOptions {
            table_id: TABLE_ID,
            layout_id: s.layout_id(),
            fields_width: FIELDS_WIDTH,
            compression: Compression::None,
            block_size_bytes: FIXTURE_BLOCK_BYTES,
            bloom: true,
            expected_cells: HFILE_CELLS.len(),
            created_ms: CREATED_MS,
            direct,
            encoding: telestore_engine::schema::BlockEncoding::Rows,
            field_types: Vec::new(),
            pco_level: 0,
            limiter: None,
        },
    )
    .unwrap();
    for (ts, seq, kind, value) in HFILE_CELLS {
        let mut c = Vec::new();
        let kind = CellKind::from_code(kind).unwrap();
        let k = key::encode(DeviceId(DEVICE), ts);
        cell::push(&mut c, &k, seq, kind, &value.to_le_bytes());
        w.add(&c).unwrap();
    }
    let (_, len) = w.finish(&[range_tombstone()]).unwrap();
    len
}

/// What a new store, one flush and one device registration write:
/// `Manifest::open` on an empty directory writes the initial snapshot
/// (header + `FileIdFloor { 0 }`), then the `CreateTable` (with the
/// pre-split region map, as `Store::create_table` writes it), the `Files`
/// record of the flush of the region holding the fixture device and the
/// `Device` record of a registration (as `Store::register_devices` writes
/// it for a first device) are appended.
fn generate_manifest(hfile_len: u64) -> Vec<u8> {
    let tmp = tempfile::tempdir().unwrap();
    let mut m = Manifest::open(tmp.path(), Arc::new(StdBackend)).unwrap();
    m.append(&[Record::CreateTable {
        table_id: TABLE_ID,
        schema: schema(),
        regions: fixture_regions(),
        next_region_id: REGIONS,
    }])
    .unwrap();
    m.append(&[Record::Files {
        table_id: TABLE_ID,
        region_id: fixture_region(),
        added: vec![file_meta(hfile_len)],
        removed: vec![],
        flushed_seq: Some(4),
    }])
    .unwrap();
    m.append(&[fixture_device()]).unwrap();
    drop(m);
    read(&tmp.path().join("MANIFEST"))
}

fn fixture_device() -> Record {
    Record::Device {
        id: REG_ID,
        name: REG_NAME.into(),
        tags: vec![(REG_TAG.0.into(), REG_TAG.1.into())],
    }
}

fn file_meta(len_bytes: u64) -> FileMeta {
    FileMeta {
        file_id: FILE_ID,
        len_bytes,
        cells: HFILE_CELLS.len() as u64,
        min_seq: 1,
        max_seq: 4,
        min_ts: T0_MS,
        max_ts: T0_MS + 1_000,
    }
}

// --------------------------------------------------------------- key.md

fn key_vectors() -> Vec<(u64, i64, String)> {
    let text = String::from_utf8(read(&fixtures().join("key_vectors.txt"))).unwrap();
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 3, "line {l:?}");
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].to_string(),
            )
        })
        .collect()
}

#[test]
fn key_vectors_follow_the_spec() {
    let v = key_vectors();
    let pairs: Vec<(u64, i64)> = v.iter().map(|(d, t, _)| (*d, *t)).collect();
    assert_eq!(pairs, KEY_VECTORS, "key_vectors.txt lists other inputs");
    for (d, ts, h) in &v {
        assert_eq!(h.len(), 36, "{h}");
        assert_eq!(hex(&hand_key(*d, *ts)), *h, "hand-computed key of {d} {ts}");
    }
    // Edge cases the spec promises.
    assert_eq!(&hand_key(0, i64::MAX)[10..], &[0u8; 8]);
    assert_eq!(&hand_key(0, i64::MIN)[10..], &[0xffu8; 8]);
    assert_eq!(
        &hand_key(0, 0)[10..],
        &[0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
    );
    assert_eq!(&hand_key(0, -1)[10..], &[0x80, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&hand_key(u64::MAX, 0)[2..10], &[0xffu8; 8]);
}

#[test]
fn key_vectors_are_in_the_spec_and_accepted_by_the_crate() {
    let spec = String::from_utf8(read(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../formats/key.md"),
    ))
    .unwrap();
    assert_eq!(key::PREFIX_HASH_VERSION, 1);
    for (d, ts, h) in key_vectors() {
        assert!(
            spec.contains(&h),
            "formats/key.md lacks the vector {d} {ts} {h}"
        );
        assert_eq!(hex(&key::encode(DeviceId(d), ts)), h);
        let bytes: Vec<u8> = (0..18)
            .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        let k = key::decode(&bytes).unwrap();
        assert_eq!((k.device, k.ts), (DeviceId(d), ts));
        assert_eq!(k.prefix, key::prefix(DeviceId(d)));
    }
}

#[test]
fn device_range_is_inclusive_and_newest_first() {
    let (from, to) = (T0_MS, T0_MS + 1_000);
    let (lo, hi) = key::device_range(DeviceId(DEVICE), from, to).unwrap();
    assert_eq!(lo, hand_key(DEVICE, to), "low bound is the newest key");
    assert_eq!(hi, hand_key(DEVICE, from), "high bound is the oldest key");
    for ts in [from, from + 1, to - 1, to] {
        let k = hand_key(DEVICE, ts);
        assert!(lo <= k && k <= hi, "{ts} must be inside");
    }
    for ts in [from - 1, to + 1, i64::MIN, i64::MAX] {
        let k = hand_key(DEVICE, ts);
        assert!(!(lo <= k && k <= hi), "{ts} must be outside");
    }
    assert_eq!(key::device_range(DeviceId(DEVICE), to, from), None);
    let (lo, hi) = key::device_range(DeviceId(DEVICE), from, from).unwrap();
    assert_eq!(lo, hi);
}

// --------------------------------------------------------------- row.md

#[test]
fn ingest_rows_follow_the_spec() {
    let s = schema();
    assert_eq!(s.row_width(), ROW_WIDTH);
    let wide = TableSchema::new(
        "t",
        vec![
            Field::new("a", FieldType::F64),
            Field::new("b", FieldType::Bool),
            Field::new("c", FieldType::I32),
        ],
        TableOptions::default(),
    )
    .unwrap();
    assert_eq!(wide.row_width(), 16 + 8 + 1 + 4);
    assert_eq!(wide.field_offset(2), 9, "fields are packed, no padding");
    let mut row = Vec::new();
    let mut fields = 1.5f64.to_le_bytes().to_vec();
    fields.push(1);
    fields.extend_from_slice(&(-2i32).to_le_bytes());
    push_row(&mut row, 0x0102_0304_0506_0708, -3, &fields);
    assert_eq!(&row[0..8], &[8, 7, 6, 5, 4, 3, 2, 1]);
    assert_eq!(i64_at(&row, 8), -3);
    assert_eq!(&row[16..24], &1.5f64.to_le_bytes());
    assert_eq!(row[24], 1);
    assert_eq!(&row[25..29], &(-2i32).to_le_bytes());
}

// --------------------------------------------------------------- wal.md

/// A WAL frame as read by hand: `(offset, kind, table, first_seq, count, payload)`.
type HandFrame = (usize, u8, u32, u64, u32, Vec<u8>);

/// Frame header length of wal.md (`FRAME_HEADER_LEN`).
const FRAME_HEADER: usize = 32;

fn hand_frames(b: &[u8]) -> Vec<HandFrame> {
    let mut out = Vec::new();
    let mut pos = 20;
    while pos < b.len() {
        let f = &b[pos..];
        assert_eq!(
            u32_at(f, 28),
            crc32c::crc32c(&f[0..28]),
            "header crc at {pos}"
        );
        let len = u32_at(f, 0) as usize;
        assert!(len <= 64 << 20, "FRAME_PAYLOAD_MAX");
        assert_eq!(&f[5..8], &[0, 0, 0], "reserved");
        let payload = &f[FRAME_HEADER..FRAME_HEADER + len];
        assert_eq!(
            u32_at(f, 24),
            crc32c::crc32c(payload),
            "payload crc at {pos}"
        );
        out.push((
            pos,
            f[4],
            u32_at(f, 8),
            u64_at(f, 16),
            u32_at(f, 12),
            payload.to_vec(),
        ));
        pos += FRAME_HEADER + len;
    }
    assert_eq!(pos, b.len(), "frames end exactly at the end of the segment");
    out
}

/// A frame encoded by hand as wal.md describes it.
fn hand_frame(kind: u8, table: u32, first_seq: u64, count: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    f.push(kind);
    f.extend_from_slice(&[0, 0, 0]);
    f.extend_from_slice(&table.to_le_bytes());
    f.extend_from_slice(&count.to_le_bytes());
    f.extend_from_slice(&first_seq.to_le_bytes());
    f.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    let h = crc32c::crc32c(&f);
    f.extend_from_slice(&h.to_le_bytes());
    f.extend_from_slice(payload);
    f
}

/// A segment header encoded by hand.
fn hand_segment_header(version: u32, no: u64) -> Vec<u8> {
    let mut h = b"TSWL".to_vec();
    h.extend_from_slice(&version.to_le_bytes());
    h.extend_from_slice(&no.to_le_bytes());
    let c = crc32c::crc32c(&h);
    h.extend_from_slice(&c.to_le_bytes());
    h
}

#[test]
fn wal_segment_follows_the_spec() {
    let b = read(&wal_path());
    assert_eq!(b.len(), 204);
    assert_eq!(&b[0..4], b"TSWL");
    assert_eq!(u32_at(&b, 4), 2, "segment version");
    assert_eq!(u64_at(&b, 8), 1, "segment number = file name");
    assert_eq!(u32_at(&b, 16), crc32c::crc32c(&b[0..16]));
    assert_eq!(&b[..20], &hand_segment_header(2, 1)[..]);

    let frames = hand_frames(&b);
    let offsets: Vec<usize> = frames.iter().map(|f| f.0).collect();
    assert_eq!(offsets, [20, 100, 148]);
    let mut last_seq = 0;
    let mut again = b[..20].to_vec();
    for (_, kind, table, first_seq, count, payload) in &frames {
        assert_eq!(*table, TABLE_ID);
        assert!(*first_seq > last_seq, "sequence numbers increase");
        last_seq = first_seq + u64::from(*count) - 1;
        again.extend(hand_frame(*kind, *table, *first_seq, *count, payload));
    }
    assert_eq!(last_seq, 4);
    assert_eq!(again, b, "hand-encoded frames reproduce the segment");

    let (_, kind, _, seq, count, put) = &frames[0];
    assert_eq!((*kind, *seq, *count), (1, 1, 2));
    assert_eq!(put.len(), 2 * ROW_WIDTH);
    for (i, (d, ts, v)) in PUT_ROWS.iter().enumerate() {
        let r = &put[i * ROW_WIDTH..];
        assert_eq!((u64_at(r, 0), i64_at(r, 8), u64_at(r, 16)), (*d, *ts, *v));
    }
    let (_, kind, _, seq, count, point) = &frames[1];
    assert_eq!((*kind, *seq, *count), (2, 3, 1));
    assert_eq!(point.len(), 16);
    assert_eq!((u64_at(point, 0), i64_at(point, 8)), (DEVICE, T0_MS));
    let (_, kind, _, seq, count, range) = &frames[2];
    assert_eq!((*kind, *seq, *count), (3, 4, 1));
    assert_eq!(range.len(), 24);
    let r = (u64_at(range, 0), i64_at(range, 8), i64_at(range, 16));
    assert_eq!(r, (DEVICE, RANGE_FROM, RANGE_TO));
}

#[test]
fn wal_segment_is_accepted_by_the_crate() {
    let b = read(&wal_path());
    assert_eq!(segment::decode_header(&b, &wal_path()).unwrap(), 1);
    assert_eq!(segment::parse_name(SEGMENT_NAME), Some(1));
    assert_eq!(frame::FRAME_HEADER_LEN, FRAME_HEADER);
    assert_eq!(
        telestore_engine::fuzzing::fuzz_decode_frames(&b[20..]).unwrap(),
        3
    );
    for (pos, kind, table, first_seq, count, payload) in hand_frames(&b) {
        match frame::decode(&b[pos..]) {
            Decoded::Entry(e, used) => {
                assert_eq!(used, FRAME_HEADER + payload.len());
                assert_eq!(e.kind as u8, kind);
                assert_eq!(
                    (e.table_id, e.first_seq, e.count),
                    (table, first_seq, count)
                );
                assert_eq!(e.payload, &payload[..]);
            }
            other => panic!("frame at {pos}: {other:?}"),
        }
    }
    // A valid frame header starts at the three frame offsets and nowhere else.
    let valid: Vec<usize> = (0..b.len())
        .filter(|p| frame::valid_header_at(&b[*p..]))
        .collect();
    assert_eq!(valid, [20, 100, 148]);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join(SEGMENT_NAME), &b).unwrap();
    let mut seen = Vec::new();
    let out = telestore_engine::wal::replay(tmp.path(), &StdBackend, Recovery::Repair, |e| {
        seen.push((e.kind, e.first_seq, e.count));
        Ok(())
    })
    .unwrap();
    let want = [
        (EntryKind::Put, 1, 2),
        (EntryKind::DeletePoints, 3, 1),
        (EntryKind::DeleteRange, 4, 1),
    ];
    assert_eq!(seen, want);
    assert_eq!((out.entries, out.last_seq, out.last_segment), (3, 4, 1));
    assert!(out.truncated.is_none());
}

/// Segment files left in a WAL directory: `(number, length)`.
type Left = Vec<(u64, u64)>;

/// Replay a WAL directory holding `segments` (`(number, bytes)`); returns
/// the outcome and the segment files left afterwards.
fn replay_segments(
    segments: &[(u64, Vec<u8>)],
    salvage: bool,
) -> (
    telestore_engine::Result<telestore_engine::wal::ReplayOutcome>,
    Left,
) {
    let tmp = tempfile::tempdir().unwrap();
    for (no, b) in segments {
        std::fs::write(tmp.path().join(segment::file_name(*no)), b).unwrap();
    }
    let recovery = if salvage {
        Recovery::Salvage
    } else {
        Recovery::Repair
    };
    let r = telestore_engine::wal::replay(tmp.path(), &StdBackend, recovery, |_| Ok(()));
    let mut left: Left = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let no = segment::parse_name(e.file_name().to_str().unwrap()).unwrap();
            (no, e.metadata().unwrap().len())
        })
        .collect();
    left.sort_unstable();
    (r, left)
}

/// Replay the fixture segment (as the only, hence last, segment) after `f`
/// changed it; returns the entries replayed and the segment's length after.
fn replay_changed(
    salvage: bool,
    f: impl FnOnce(&mut Vec<u8>),
) -> (telestore_engine::Result<u64>, u64) {
    let mut b = read(&wal_path());
    f(&mut b);
    let (r, left) = replay_segments(&[(1, b)], salvage);
    assert_eq!(left.len(), 1);
    (r.map(|o| o.entries), left[0].1)
}

fn replay_flipped(at: usize, salvage: bool) -> (telestore_engine::Result<u64>, u64) {
    replay_changed(salvage, |b| b[at] ^= 0x01)
}

/// Assert a `ChecksumMismatch` in the fixture segment at `offset`.
#[track_caller]
fn assert_wal_checksum_error(r: telestore_engine::Result<u64>, offset: u64) {
    match r {
        Err(Error::ChecksumMismatch {
            file,
            offset: o,
            expected,
            actual,
        }) => {
            assert!(file.ends_with(SEGMENT_NAME), "{}", file.display());
            assert_eq!(o, offset);
            assert_ne!(expected, actual);
        }
        other => panic!("expected ChecksumMismatch at {offset}, got {other:?}"),
    }
}

#[track_caller]
fn assert_corrupt_at(r: telestore_engine::Result<impl std::fmt::Debug>, name: &str, offset: u64) {
    match r {
        Err(Error::Corrupt {
            file, offset: o, ..
        }) => {
            assert!(file.ends_with(name), "{}", file.display());
            assert_eq!(o, offset);
        }
        other => panic!("expected Corrupt at {offset} in {name}, got {other:?}"),
    }
}

#[test]
fn wal_torn_tail_of_the_last_segment_is_cut() {
    // Cut anywhere: the incomplete frame (fewer than 32 bytes, or a valid
    // header whose payload runs past the end) is the torn tail.
    let ends = [20, 100, 148, 204];
    for cut in 20..=204 {
        let (r, len) = replay_changed(false, |b| b.truncate(cut));
        let complete = ends.iter().rposition(|e| *e <= cut).unwrap();
        assert_eq!(
            (r.unwrap(), len),
            (complete as u64, ends[complete] as u64),
            "cut at {cut}"
        );
    }
    // A damaged last frame (header or payload) with no valid frame header
    // after it is the torn (or corrupt) last entry.
    for at in [148, 148 + 2, 148 + 4, 148 + 28, 148 + 32, 203] {
        let (r, len) = replay_flipped(at, false);
        assert_eq!((r.unwrap(), len), (2, 148), "flip at {at}");
    }
    // Zeros after the last frame: a preallocated segment's free space
    // (version 2), left as it is.
    let (r, len) = replay_changed(false, |b| b.resize(204 + 4096, 0));
    assert_eq!((r.unwrap(), len), (3, 204 + 4096));
    // In a version 1 segment the same zeros are a torn tail (size
    // extended, data never written): cut.
    let (r, len) = replay_changed(false, |b| {
        b[..20].copy_from_slice(&hand_segment_header(1, 1));
        b.resize(204 + 4096, 0);
    });
    assert_eq!((r.unwrap(), len), (3, 204));
    // Zeros and then something: not free space; in the last segment a
    // torn tail (no valid frame header follows).
    let (r, len) = replay_changed(false, |b| {
        b.resize(204 + 4096, 0);
        b.push(7);
    });
    assert_eq!((r.unwrap(), len), (3, 204));
    // Valid checksums but impossible fields, as the last frame: cut too.
    let (r, len) = replay_changed(false, |b| {
        b.truncate(148);
        b.extend(hand_frame(9, TABLE_ID, 4, 1, &[0; 24]));
    });
    assert_eq!((r.unwrap(), len), (2, 148));
    // A last segment shorter than its header is removed.
    let full = read(&wal_path());
    let (r, left) = replay_segments(&[(1, full.clone()), (2, b"TSWL\x01".to_vec())], false);
    let out = r.unwrap();
    assert_eq!((out.entries, out.last_segment), (3, 2));
    assert_eq!(out.segments.len(), 1);
    assert_eq!(left, [(1, 204)]);
}

#[test]
fn wal_corruption_before_the_tail_is_an_error() {
    // A bit flip in the length of the first entry: the header checksum
    // fails, valid headers follow, so this is not a torn tail.
    let (r, len) = replay_flipped(20 + 2, false);
    assert_wal_checksum_error(r, 20);
    assert_eq!(len, 204, "nothing is cut without salvage");
    let mut b = read(&wal_path());
    b[20 + 2] ^= 0x01;
    match frame::decode(&b[20..]) {
        Decoded::BadHeader { expected, actual } => {
            assert_eq!(expected, u32_at(&b, 20 + 28), "expected = stored");
            assert_eq!(actual, crc32c::crc32c(&b[20..20 + 28]), "actual = computed");
        }
        other => panic!("{other:?}"),
    }
    // ... unless salvage is set: the log is cut at the first bad frame.
    let (r, len) = replay_flipped(20 + 2, true);
    assert_eq!((r.unwrap(), len), (0, 20));
    // Payload damage before the tail.
    let (r, _) = replay_flipped(20 + 32 + 5, false);
    assert_wal_checksum_error(r, 20);
    let (r, _) = replay_flipped(100 + 8, false);
    assert_wal_checksum_error(r, 100);
    // Garbage followed by a valid later frame (the documented limitation:
    // pages of an unsynced group persisted out of order) needs salvage.
    let zero_frame_1 = |b: &mut Vec<u8>| b[100..148].fill(0);
    let (r, _) = replay_changed(false, zero_frame_1);
    assert_wal_checksum_error(r, 100);
    let (r, len) = replay_changed(true, zero_frame_1);
    assert_eq!((r.unwrap(), len), (1, 100));
    // Valid checksums, impossible shape (2 point deletes in 16 bytes).
    let bad_shape = |b: &mut Vec<u8>| {
        let payload = b[132..148].to_vec();
        b[100..148].copy_from_slice(&hand_frame(2, TABLE_ID, 3, 2, &payload));
    };
    let (r, _) = replay_changed(false, bad_shape);
    assert_corrupt_at(r, SEGMENT_NAME, 100);
    // Sequence numbers must increase.
    let (r, _) = replay_changed(false, |b| {
        let payload = b[180..204].to_vec();
        b[148..204].copy_from_slice(&hand_frame(3, TABLE_ID, 2, 1, &payload));
    });
    assert_corrupt_at(r, SEGMENT_NAME, 148);
}

#[test]
fn wal_sealed_segments_and_headers_are_never_torn() {
    let full = read(&wal_path());
    let next = hand_segment_header(1, 2);
    // A frame cut short in a sealed (not last) segment.
    let segs = [(1, full[..120].to_vec()), (2, next.clone())];
    let (r, left) = replay_segments(&segs, false);
    assert_corrupt_at(r.map(|o| o.entries), SEGMENT_NAME, 100);
    assert_eq!(left, [(1, 120), (2, 20)]);
    // Salvage cuts there and deletes every later segment.
    let (r, left) = replay_segments(&segs, true);
    assert_eq!(r.unwrap().entries, 1);
    assert_eq!(left, [(1, 100)]);
    // A damaged last frame of a sealed segment is not a torn tail.
    let mut b = full.clone();
    b[148 + 32] ^= 0x01;
    let (r, _) = replay_segments(&[(1, b), (2, next.clone())], false);
    assert_wal_checksum_error(r.map(|o| o.entries), 148);
    // A sealed version 2 segment may end in preallocated zeros ...
    let mut zero_tail = full.clone();
    zero_tail.resize(204 + 4096, 0);
    let (r, left) = replay_segments(&[(1, zero_tail.clone()), (2, next.clone())], false);
    assert_eq!(r.unwrap().entries, 3);
    assert_eq!(left, [(1, 204 + 4096), (2, 20)]);
    // ... but not in zeros followed by anything else ...
    zero_tail.push(7);
    let (r, _) = replay_segments(&[(1, zero_tail), (2, next.clone())], false);
    assert_wal_checksum_error(r.map(|o| o.entries), 204);
    // ... and a version 1 segment never does.
    let mut v1 = full.clone();
    v1[..20].copy_from_slice(&hand_segment_header(1, 1));
    v1.resize(204 + 64, 0);
    let (r, _) = replay_segments(&[(1, v1), (2, next.clone())], false);
    assert_wal_checksum_error(r.map(|o| o.entries), 204);
    // A short segment that is not the last one.
    let (r, _) = replay_segments(&[(1, full[..10].to_vec()), (2, next)], false);
    assert_corrupt_at(r.map(|o| o.entries), SEGMENT_NAME, 0);
    // Segment header damage.
    let (r, _) = replay_flipped(9, false);
    assert!(
        matches!(r, Err(Error::ChecksumMismatch { offset: 0, .. })),
        "{r:?}"
    );
    let (r, _) = replay_flipped(0, false);
    assert_corrupt_at(r, SEGMENT_NAME, 0);
    let (r, _) = replay_changed(false, |b| {
        b[..20].copy_from_slice(&hand_segment_header(3, 1))
    });
    assert!(
        matches!(
            r,
            Err(Error::UnsupportedVersion {
                what: "wal segment",
                version: 3
            })
        ),
        "{r:?}"
    );
    let (r, _) = replay_changed(false, |b| {
        b[..20].copy_from_slice(&hand_segment_header(1, 7))
    });
    assert_corrupt_at(r, SEGMENT_NAME, 8);
}

// ------------------------------------------------------------- hfile.md

#[derive(Debug)]
struct HandSection {
    offset: usize,
    len: usize,
}

/// Check the trailer by hand; returns the four sections in trailer order.
fn hand_trailer(b: &[u8]) -> [HandSection; 4] {
    let t = &b[b.len() - 76..];
    assert_eq!(&t[0..4], b"TSHF");
    assert_eq!(u32_at(t, 4), 1, "hfile version");
    assert_eq!(u32_at(t, 72), crc32c::crc32c(&t[0..72]), "trailer crc");
    let mut end_prev = None;
    let s: Vec<HandSection> = (0..4)
        .map(|i| {
            let r = &t[8 + 16 * i..];
            let (offset, len) = (u64_at(r, 0) as usize, u32_at(r, 8) as usize);
            let body = &b[offset..offset + len];
            assert_eq!(u32_at(r, 12), crc32c::crc32c(body), "section {i} crc");
            if let Some(e) = end_prev {
                assert_eq!(offset, e, "sections are contiguous");
            }
            end_prev = Some(offset + len);
            HandSection { offset, len }
        })
        .collect();
    assert_eq!(end_prev, Some(b.len() - 76), "trailer follows the sections");
    s.try_into().unwrap()
}

#[test]
fn hfile_follows_the_spec() {
    let b = read(&hfile_path());
    assert_eq!(b.len(), 526);
    let [index, bloom, info, tombs] = hand_trailer(&b);
    assert_eq!(
        [index.offset, bloom.offset, info.offset, tombs.offset],
        [153, 269, 305, 414]
    );

    // Block index and the blocks it points to.
    let ix = &b[index.offset..index.offset + index.len];
    let n = u32_at(ix, 0) as usize;
    assert_eq!((n, ix.len()), (2, 4 + 56 * n));
    let mut cells = Vec::new();
    let mut next_block = 0;
    for i in 0..n {
        let e = &ix[4 + 56 * i..];
        let (first, last) = (&e[0..18], &e[18..36]);
        let (off, len) = (u64_at(e, 36) as usize, u32_at(e, 44) as usize);
        let (crc, count) = (u32_at(e, 48), u32_at(e, 52) as usize);
        assert_eq!(off, next_block, "blocks are contiguous from offset 0");
        next_block = off + len;
        let blk = &b[off..off + len];
        assert_eq!(&blk[0..4], b"TSBK");
        assert_eq!(
            (blk[4], blk[5], u16_at(blk, 6)),
            (1, 0, 0),
            "data, codec none"
        );
        assert_eq!(u32_at(blk, 8) as usize, count);
        assert_eq!(u32_at(blk, 12) as usize, count * CELL_WIDTH, "raw_len");
        assert_eq!(u32_at(blk, 16) as usize, len - 24, "body_len");
        assert_eq!(u32_at(blk, 20), crc_of(&[&blk[0..20], &blk[24..]]));
        assert_eq!(u32_at(blk, 20), crc, "index repeats the block crc");
        let body = &blk[24..];
        assert_eq!(first, &body[0..18]);
        assert_eq!(last, &body[body.len() - CELL_WIDTH..][..18]);
        cells.extend(body.chunks_exact(CELL_WIDTH).map(|c| c.to_vec()));
    }
    assert_eq!(next_block, index.offset, "the index follows the last block");
    assert_eq!(cells.len(), HFILE_CELLS.len());
    for (c, (ts, seq, kind, value)) in cells.iter().zip(HFILE_CELLS) {
        assert_eq!(&c[0..18], &hand_key(DEVICE, ts));
        assert_eq!((u64_at(c, 18), c[26], u64_at(c, 27)), (seq, kind, value));
    }

    // Bloom: every key and the device have all their probe bits set.
    let bl = &b[bloom.offset..bloom.offset + bloom.len];
    let (probes, bits) = (u32_at(bl, 0), u64_at(bl, 4));
    assert_eq!((probes, bits), (7, 192));
    assert_eq!(bl.len(), 12 + (bits / 8) as usize);
    let words = &bl[12..];
    let bit_set = |b: u64| words[(b / 8) as usize] & (1 << (b % 8)) != 0;
    let probe_all = |x: &[u8]| {
        let h = xxhash_rust::xxh3::xxh3_64_with_seed(x, 0x7e1e_5707_b100_0001);
        let (h1, h2) = (h & 0xffff_ffff, (h >> 32) | 1);
        (0..u64::from(probes)).all(|i| bit_set((h1 + i * h2) % bits))
    };
    for c in &cells {
        assert!(probe_all(&c[0..18]), "bloom misses a key");
    }
    assert!(probe_all(&DEVICE.to_le_bytes()), "bloom misses the device");

    // File info.
    let fi = &b[info.offset..info.offset + info.len];
    assert_eq!(fi.len(), 109);
    assert_eq!(u32_at(fi, 0), TABLE_ID);
    assert_eq!(u32_at(fi, 4), hand_layout_id(&[("value", 5)]));
    assert_eq!(u32_at(fi, 8) as usize, FIELDS_WIDTH);
    assert_eq!(fi[12], 0, "codec none");
    assert_eq!((u64_at(fi, 13), u64_at(fi, 21), u32_at(fi, 29)), (3, 1, 1));
    assert_eq!(&fi[33..51], &cells[0][0..18], "min_key");
    assert_eq!(&fi[51..69], &cells[2][0..18], "max_key");
    assert_eq!((i64_at(fi, 69), i64_at(fi, 77)), (T0_MS, T0_MS + 1_000));
    assert_eq!(
        (u64_at(fi, 85), u64_at(fi, 93)),
        (1, 4),
        "seq range incl. tombstones"
    );
    assert_eq!(i64_at(fi, 101), CREATED_MS);

    // Range tombstones.
    let tb = &b[tombs.offset..tombs.offset + tombs.len];
    assert_eq!((u32_at(tb, 0), tb.len()), (1, 4 + 32));
    let t = (
        u64_at(tb, 4),
        i64_at(tb, 12),
        i64_at(tb, 20),
        u64_at(tb, 28),
    );
    assert_eq!(t, (DEVICE, RANGE_FROM, RANGE_TO, 4));
}

fn open_hfile(p: &Path) -> telestore_engine::Result<HFileReader> {
    open_hfile_as(p, FIELDS_WIDTH, schema().layout_id())
}

/// Open as the engine does: fields width and layout id of the table checked.
fn open_hfile_as(
    p: &Path,
    fields_width: usize,
    layout_id: u32,
) -> telestore_engine::Result<HFileReader> {
    HFileReader::open_checked(
        p,
        FILE_ID,
        fields_width,
        Some(layout_id),
        Arc::new(BlockCache::new(1 << 20)),
    )
}

#[test]
fn hfile_is_accepted_by_the_crate() {
    let b = read(&hfile_path());
    assert_eq!(fuzz_decode_file(&b, FIELDS_WIDTH).unwrap(), 3);
    let r = open_hfile(&hfile_path()).unwrap();
    let i = r.info();
    assert_eq!(
        (i.table_id, i.cells, i.tombstones, i.range_tombstones),
        (1, 3, 1, 1)
    );
    assert_eq!(i.layout_id, schema().layout_id());
    assert_eq!(i.layout_id, hand_layout_id(&[("value", 5)]));
    assert_eq!(r.range_tombstones(), &[range_tombstone()]);
    assert!(r.may_contain_device(DeviceId(DEVICE)));
    let mut n = 0;
    for blk in 0..r.block_count() {
        n += r.block(blk).unwrap().len() / CELL_WIDTH;
    }
    assert_eq!(n, 3);
}

/// After editing metadata on purpose: recompute, by hand, every section
/// CRC named in the trailer and then the trailer CRC.
fn fix_hfile_checksums(b: &mut [u8]) {
    let t = b.len() - 76;
    for i in 0..4 {
        let r = t + 8 + 16 * i;
        let (off, len) = (u64_at(b, r) as usize, u32_at(b, r + 8) as usize);
        if let Some(body) = b.get(off..off + len) {
            let c = crc32c::crc32c(body);
            b[r + 12..r + 16].copy_from_slice(&c.to_le_bytes());
        }
    }
    let c = crc32c::crc32c(&b[t..t + 72]);
    b[t + 72..t + 76].copy_from_slice(&c.to_le_bytes());
}

/// Write the fixture HFile changed by `f` to `p` and open it.
fn open_changed(p: &Path, f: impl FnOnce(&mut Vec<u8>)) -> telestore_engine::Result<HFileReader> {
    let mut b = read(&hfile_path());
    f(&mut b);
    std::fs::write(p, &b).unwrap();
    open_hfile(p)
}

#[track_caller]
fn assert_checksum_at(r: telestore_engine::Result<impl std::fmt::Debug>, p: &Path, offset: u64) {
    match r {
        Err(Error::ChecksumMismatch {
            file,
            offset: o,
            expected,
            actual,
        }) => {
            assert_eq!((file.as_path(), o), (p, offset));
            assert_ne!(expected, actual);
        }
        other => panic!("expected ChecksumMismatch at {offset}, got {other:?}"),
    }
}

#[test]
fn hfile_corruption_is_handled_as_specified() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join(HFILE_NAME);
    // A flipped bit in a data block: the file opens (blocks are checked on
    // read), reading the block is a ChecksumMismatch naming file and offset.
    let r = open_changed(&p, |b| b[94 + 24 + 3] ^= 0x01).unwrap();
    r.block(0).unwrap();
    let b = read(&p);
    match r.block(1) {
        Err(Error::ChecksumMismatch {
            file,
            offset,
            expected,
            actual,
        }) => {
            assert_eq!((file, offset), (p.clone(), 94));
            assert_eq!(expected, u32_at(&b, 94 + 20), "expected = stored");
            assert_eq!(actual, crc_of(&[&b[94..94 + 20], &b[94 + 24..153]]));
        }
        other => panic!("expected ChecksumMismatch, got {other:?}"),
    }
    // A flipped bit in a section: ChecksumMismatch at the section's offset;
    // the file does not open.
    for (at, section) in [(200, 153), (300, 269), (400, 305), (420, 414)] {
        let r = open_changed(&p, |b| b[at] ^= 0x01);
        assert_checksum_at(r, &p, section);
    }
    // A flipped bit in the trailer after its magic (the CRC field included):
    // ChecksumMismatch at file_len - 76.
    for at in [450 + 4, 450 + 8, 450 + 20, 450 + 71, 525] {
        let r = open_changed(&p, |b| b[at] ^= 0x01);
        assert_checksum_at(r, &p, 450);
    }
    let r = open_changed(&p, |b| b[451] ^= 0x01);
    assert_corrupt_at(r, HFILE_NAME, 450);
    let r = open_changed(&p, |b| b.truncate(75));
    assert_corrupt_at(r, HFILE_NAME, 0);
    // Intact checksums, bad contents.
    let r = open_changed(&p, |b| {
        b[450 + 4] = 4;
        fix_hfile_checksums(b);
    });
    assert!(
        matches!(
            r,
            Err(Error::UnsupportedVersion {
                what: "hfile",
                version: 4
            })
        ),
        "{r:?}"
    );
    let r = open_changed(&p, |b| {
        b[450 + 8 + 16 * 3 + 8] += 1; // tombstones section runs into the trailer
        fix_hfile_checksums(b);
    });
    assert_corrupt_at(r, HFILE_NAME, 450);
    let r = open_changed(&p, |b| {
        b[305 + 13] = 4; // info cells = 4, the index holds 3
        fix_hfile_checksums(b);
    });
    assert_corrupt_at(r, HFILE_NAME, 305); // the info section
}

#[test]
fn hfile_blocks_must_agree_with_the_index() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join(HFILE_NAME);
    // Index entry 1 (at 153 + 4 + 56) says the block is 58 bytes, the block
    // header says 24 + 35: the length must match exactly.
    let entry1 = 153 + 4 + 56;
    let r = open_changed(&p, |b| {
        b[entry1 + 44] = 58;
        fix_hfile_checksums(b);
    })
    .unwrap();
    r.block(0).unwrap();
    assert_corrupt_at(r.block(1), HFILE_NAME, 94);
    // The block's CRC field must equal the index entry's crc.
    let r = open_changed(&p, |b| {
        b[entry1 + 48] ^= 0x01;
        fix_hfile_checksums(b);
    })
    .unwrap();
    assert_corrupt_at(r.block(1), HFILE_NAME, 94);
    let r = open_changed(&p, |b| b[94 + 20] ^= 0x01).unwrap();
    assert_corrupt_at(r.block(1), HFILE_NAME, 94);
}

#[test]
fn hfile_must_match_the_table_layout() {
    let p = hfile_path();
    let layout = schema().layout_id();
    open_hfile_as(&p, FIELDS_WIDTH, layout).unwrap();
    let r = open_hfile_as(&p, FIELDS_WIDTH, hand_layout_id(&[("other", 5)]));
    assert_corrupt_at(r, HFILE_NAME, 305);
    let r = open_hfile_as(&p, FIELDS_WIDTH + 8, layout);
    assert_corrupt_at(r, HFILE_NAME, 305);
}

#[test]
fn hfile_seq_range_without_cells() {
    // No cells, one range tombstone: the seq range is the tombstone's; ts
    // range and keys are zero. No cells and no tombstones: all zero.
    let tmp = tempfile::tempdir().unwrap();
    let s = schema();
    for (name, tombstones) in [("a.hfile", vec![range_tombstone()]), ("b.hfile", vec![])] {
        let p = tmp.path().join(name);
        let w = HFileWriter::create(
            &StdBackend,
            &p,
            WriterOptions {
                table_id: TABLE_ID,
                layout_id: s.layout_id(),
                fields_width: FIELDS_WIDTH,
                compression: Compression::None,
                block_size_bytes: FIXTURE_BLOCK_BYTES,
                bloom: true,
                expected_cells: 0,
                created_ms: CREATED_MS,
                direct: false,
                encoding: telestore_engine::schema::BlockEncoding::Rows,
                field_types: Vec::new(),
                pco_level: 0,
                limiter: None,
            },
        )
        .unwrap();
        w.finish(&tombstones).unwrap();
        let b = read(&p);
        let [index, _, info, _] = hand_trailer(&b);
        assert_eq!(
            (index.offset, u32_at(&b, index.offset)),
            (0, 0),
            "no blocks"
        );
        let fi = &b[info.offset..info.offset + info.len];
        let seq = if tombstones.is_empty() { 0 } else { 4 };
        assert_eq!(
            (u64_at(fi, 13), u32_at(fi, 29) as usize),
            (0, tombstones.len())
        );
        assert_eq!(&fi[33..69], &[0u8; 36], "min_key, max_key");
        assert_eq!((i64_at(fi, 69), i64_at(fi, 77)), (0, 0), "ts range");
        assert_eq!((u64_at(fi, 85), u64_at(fi, 93)), (seq, seq), "seq range");
        let r = open_hfile(&p).unwrap();
        assert_eq!(r.info().min_seq, seq);
    }
}

// ---------------------------------------------------------- manifest.md

/// Record header length of manifest.md (`RECORD_HEADER_LEN`).
const RECORD_HEADER: usize = 12;

/// Records read by hand: `(offset, payload)`.
fn hand_records(b: &[u8]) -> Vec<(usize, Vec<u8>)> {
    let mut out = Vec::new();
    let mut pos = 12;
    while pos < b.len() {
        let r = &b[pos..];
        assert_eq!(
            u32_at(r, 8),
            crc32c::crc32c(&r[0..8]),
            "header crc at {pos}"
        );
        let len = u32_at(r, 0) as usize;
        assert!(len <= 16 << 20, "RECORD_LEN_MAX");
        let p = &r[RECORD_HEADER..RECORD_HEADER + len];
        assert_eq!(u32_at(r, 4), crc32c::crc32c(p), "payload crc at {pos}");
        out.push((pos, p.to_vec()));
        pos += RECORD_HEADER + len;
    }
    assert_eq!(pos, b.len());
    out
}

/// A record framed by hand as manifest.md describes it.
fn hand_record(payload: &[u8]) -> Vec<u8> {
    let mut r = (payload.len() as u32).to_le_bytes().to_vec();
    r.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    let h = crc32c::crc32c(&r);
    r.extend_from_slice(&h.to_le_bytes());
    r.extend_from_slice(payload);
    r
}
/// A boundary key at hash prefix `p`: the prefix, big-endian, then 16 zero
/// bytes.
fn prefix_key(p: u16) -> [u8; 18] {
    let mut k = [0u8; 18];
    k[0..2].copy_from_slice(&p.to_be_bytes());
    k
}

/// Start keys of `n` pre-split regions as manifest.md defines them: region
/// `i` starts at hash prefix `floor(i * 65536 / n)`.
fn hand_pre_split(n: u32) -> Vec<[u8; 18]> {
    (0..n as u64)
        .map(|i| prefix_key((i * 65_536 / n as u64) as u16))
        .collect()
}

/// Payload of a `Split` record of table 1, by hand (manifest.md, tag 4).
fn split_payload(parent: u32, at: &[u8; 18], left: u32, right: u32) -> Vec<u8> {
    let mut p = vec![4];
    p.extend_from_slice(&TABLE_ID.to_le_bytes());
    p.extend_from_slice(&parent.to_le_bytes());
    p.extend_from_slice(at);
    p.extend_from_slice(&left.to_le_bytes());
    p.extend_from_slice(&right.to_le_bytes());
    assert_eq!(p.len(), 35);
    p
}

/// Payload of a `Merge` record of table 1, by hand (manifest.md, tag 5).
fn merge_payload(left: u32, right: u32, merged: u32) -> Vec<u8> {
    let mut p = vec![5];
    for x in [TABLE_ID, left, right, merged] {
        p.extend_from_slice(&x.to_le_bytes());
    }
    assert_eq!(p.len(), 17);
    p
}

/// Payload of a `Files` record of table 1 that adds and removes nothing and
/// raises `region`'s flushed_seq, by hand (manifest.md, tag 2).
fn flushed_payload(region: u32, flushed_seq: u64) -> Vec<u8> {
    let mut p = vec![2];
    p.extend_from_slice(&TABLE_ID.to_le_bytes());
    p.extend_from_slice(&region.to_le_bytes());
    p.push(1);
    p.extend_from_slice(&flushed_seq.to_le_bytes());
    p.extend_from_slice(&0u32.to_le_bytes());
    p.extend_from_slice(&0u32.to_le_bytes());
    assert_eq!(p.len(), 26);
    p
}

/// A *str* as manifest.md defines it: `len u16 | UTF-8 bytes`.
fn push_str(p: &mut Vec<u8>, s: &str) {
    p.extend_from_slice(&(s.len() as u16).to_le_bytes());
    p.extend_from_slice(s.as_bytes());
}

/// Payload of a `Device` record, by hand (manifest.md, tag 6).
fn device_payload(id: u64, name: &str, tags: &[(&str, &str)]) -> Vec<u8> {
    let mut p = vec![6];
    p.extend_from_slice(&id.to_le_bytes());
    push_str(&mut p, name);
    p.extend_from_slice(&(tags.len() as u16).to_le_bytes());
    for (k, v) in tags {
        push_str(&mut p, k);
        push_str(&mut p, v);
    }
    let texts: usize = tags.iter().map(|(k, v)| 4 + k.len() + v.len()).sum();
    assert_eq!(p.len(), 13 + name.len() + texts);
    p
}

#[test]
fn manifest_follows_the_spec() {
    let b = read(&manifest_path());
    assert_eq!(b.len(), MANIFEST_LEN);
    assert_eq!(&b[0..4], b"TSMF");
    assert_eq!(u32_at(&b, 4), 5, "manifest version");
    assert_eq!(u32_at(&b, 8), crc32c::crc32c(&b[0..8]));
    let recs = hand_records(&b);
    assert_eq!(recs.len(), 4);
    let mut again = b[..12].to_vec();
    for (_, p) in &recs {
        again.extend(hand_record(p));
    }
    assert_eq!(again, b, "hand-framed records reproduce the file");

    // FileIdFloor, first record of the snapshot a new store writes.
    let (pos, p) = &recs[0];
    assert_eq!((*pos, p.len()), (12, 9));
    assert_eq!((p[0], u64_at(p, 1)), (3, 0), "max_file_id = 0");

    // CreateTable: schema, then the region map.
    let (pos, p) = &recs[1];
    assert_eq!((*pos, p.len()), (33, 104));
    assert_eq!((p[0], u32_at(p, 1)), (1, TABLE_ID));
    assert_eq!(u16_at(p, 5), 8);
    assert_eq!(&p[7..15], TABLE_NAME.as_bytes());
    assert_eq!(u16_at(p, 15), 1, "field count");
    assert_eq!(u16_at(p, 17), 5);
    assert_eq!(&p[19..24], b"value");
    assert_eq!(p[24], 5, "u64");
    let o = &p[25..52];
    assert_eq!(i64_at(o, 0), 0, "no ttl");
    assert_eq!(u32_at(o, 8), 1, "max_versions");
    assert_eq!((o[12], u32_at(o, 13)), (0, 0), "codec none, level 0");
    assert_eq!(u32_at(o, 17), 64 * 1024, "block_size_bytes");
    assert_eq!((o[21], u32_at(o, 22)), (1, REGIONS), "bloom, regions");
    assert_eq!(o[26], 0, "encoding rows");
    assert_eq!(u32_at(p, 52), REGIONS, "next_region_id");
    assert_eq!(u32_at(p, 56), REGIONS, "region count");
    let starts = hand_pre_split(REGIONS);
    assert_eq!(starts, [[0u8; 18], prefix_key(0x8000)]);
    for (i, start) in starts.iter().enumerate() {
        let r = &p[60 + 22 * i..60 + 22 * (i + 1)];
        assert_eq!(u32_at(r, 0), i as u32, "region {i} id");
        assert_eq!(&r[4..22], start, "region {i} start");
    }
    assert_eq!(p.len(), 60 + 22 * REGIONS as usize);

    // Files, naming the region that holds the fixture device's keys.
    let key = hand_key(DEVICE, T0_MS);
    let region = starts.iter().rposition(|s| *s <= key).unwrap() as u32;
    assert_eq!(region, 1, "prefix d5a6 lies in the upper half");
    let (pos, p) = &recs[2];
    assert_eq!((*pos, p.len()), (149, 82));
    assert_eq!((p[0], u32_at(p, 1), u32_at(p, 5)), (2, TABLE_ID, region));
    assert_eq!((p[9], u64_at(p, 10)), (1, 4), "flushed_seq = Some(4)");
    assert_eq!(u32_at(p, 18), 1, "one added file");
    let f = &p[22..78];
    let hfile_len = read(&hfile_path()).len() as u64;
    assert_eq!(
        (u64_at(f, 0), u64_at(f, 8), u64_at(f, 16)),
        (FILE_ID, hfile_len, 3)
    );
    assert_eq!((u64_at(f, 24), u64_at(f, 32)), (1, 4));
    assert_eq!((i64_at(f, 40), i64_at(f, 48)), (T0_MS, T0_MS + 1_000));
    assert_eq!(u32_at(p, 78), 0, "no removed files");

    // Device: the first id the registry hands out (2^40), name, one tag.
    let (pos, p) = &recs[3];
    assert_eq!((*pos, p.len()), (DEVICE_AT, 34));
    assert_eq!(DEVICE_AT + RECORD_HEADER + 34, MANIFEST_LEN);
    assert_eq!(p[0], 6, "tag 6 (Device)");
    assert_eq!(&p[1..9], &[0, 0, 0, 0, 0, 1, 0, 0], "id = 2^40, LE");
    assert_eq!(u64_at(p, 1), REG_ID);
    assert_eq!(u16_at(p, 9), 8, "name len");
    assert_eq!(&p[11..19], b"truck-42");
    assert_eq!(u16_at(p, 19), 1, "tag count");
    assert_eq!(u16_at(p, 21), 5, "tag 0 key len");
    assert_eq!(&p[23..28], b"fleet");
    assert_eq!(u16_at(p, 28), 4, "tag 0 value len");
    assert_eq!(&p[30..34], b"east");
    assert_eq!(*p, device_payload(REG_ID, REG_NAME, &[REG_TAG]));
}

#[test]
fn manifest_is_accepted_by_the_crate() {
    let b = read(&manifest_path());
    assert_eq!(fuzz_decode_manifest(&b).unwrap(), 4);
    for (pos, p) in hand_records(&b) {
        match decode_framed(&b[pos..]) {
            Framed::Record(_, used) => assert_eq!(used, RECORD_HEADER + p.len()),
            other => panic!("record at {pos}: {other:?}"),
        }
    }
    assert!(matches!(
        decode_framed(&b[12..]),
        Framed::Record(Record::FileIdFloor { max_file_id: 0 }, 21)
    ));
    match decode_framed(&b[33..]) {
        Framed::Record(
            Record::CreateTable {
                table_id,
                regions,
                next_region_id,
                ..
            },
            116,
        ) => {
            assert_eq!((table_id, next_region_id), (TABLE_ID, REGIONS));
            assert_eq!(regions, fixture_regions());
        }
        other => panic!("CreateTable at 33: {other:?}"),
    }
    match decode_framed(&b[DEVICE_AT..]) {
        Framed::Record(r, 46) => assert_eq!(r, fixture_device()),
        other => panic!("Device at {DEVICE_AT}: {other:?}"),
    }
    let mut enc = Vec::new();
    fixture_device().encode(&mut enc);
    assert_eq!(enc, b[DEVICE_AT..], "Device encoding");
    assert_eq!(fixture_region(), 1);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("MANIFEST"), &b).unwrap();
    let m = Manifest::open(tmp.path(), Arc::new(StdBackend)).unwrap();
    let t = &m.state().tables[&TABLE_ID];
    assert_eq!(t.schema, schema());
    assert_eq!(t.next_region_id, REGIONS);
    assert_eq!(
        region_map(m.state()),
        [
            ([0; 18], 0, 0, vec![]),
            (prefix_key(0x8000), 1, 4, vec![FILE_ID])
        ]
    );
    let len = read(&hfile_path()).len() as u64;
    assert_eq!(
        t.all_files().values().copied().collect::<Vec<_>>(),
        [file_meta(len)]
    );
    assert_eq!(m.state().max_file_id, FILE_ID);
    let want = DeviceEntry {
        name: REG_NAME.into(),
        tags: vec![(REG_TAG.0.into(), REG_TAG.1.into())],
    };
    assert_eq!(devices(m.state()), [(REG_ID, want)]);
}

/// The device registry of a manifest state, by id.
fn devices(s: &telestore_engine::manifest::State) -> Vec<(u64, DeviceEntry)> {
    s.devices.iter().map(|(id, d)| (*id, d.clone())).collect()
}

#[test]
fn manifest_create_table_is_what_a_new_store_writes() {
    // `Store::create_table` of the fixture schema on a new store writes the
    // fixture's first 149 bytes: header, FileIdFloor, CreateTable with the
    // pre-split region map.
    let tmp = tempfile::tempdir().unwrap();
    let opts = Options {
        io: Some(IoChoice::Std),
        ..Options::default()
    };
    let store = Store::open(tmp.path(), opts).unwrap();
    assert_eq!(store.create_table(schema()).unwrap(), TABLE_ID);
    let b = read(&tmp.path().join("MANIFEST"));
    let ids: Vec<u32> = store
        .regions(TABLE_NAME)
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    store.close().unwrap();
    assert_eq!(b, read(&manifest_path())[..149]);
    assert_eq!(ids, [0, 1]);
}

/// Open a copy of the fixture manifest changed by `f`; returns the state
/// (or the error) and the file's length afterwards.
fn open_manifest_changed(
    f: impl FnOnce(&mut Vec<u8>),
) -> (
    telestore_engine::Result<telestore_engine::manifest::State>,
    u64,
) {
    let mut b = read(&manifest_path());
    f(&mut b);
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("MANIFEST");
    std::fs::write(&p, &b).unwrap();
    let r = Manifest::open(tmp.path(), Arc::new(StdBackend)).map(|m| m.state().clone());
    (r, std::fs::metadata(&p).unwrap().len())
}

/// `(tables, files of table 1 over all its regions, flushed_seq of the
/// region of table 1 holding the fixture device, max_file_id)`.
fn summary(s: &telestore_engine::manifest::State) -> (usize, usize, u64, u64) {
    let key = hand_key(DEVICE, T0_MS);
    let (files, flushed) = s.tables.get(&TABLE_ID).map_or((0, 0), |t| {
        let (_, r) = t.regions.range(..=key).next_back().unwrap();
        (t.all_files().len(), r.flushed_seq)
    });
    (s.tables.len(), files, flushed, s.max_file_id)
}

/// `(start, id, flushed_seq, file ids)` of each region of table 1, in key
/// order.
fn region_map(s: &telestore_engine::manifest::State) -> Vec<([u8; 18], u32, u64, Vec<u64>)> {
    s.tables[&TABLE_ID]
        .regions
        .iter()
        .map(|(start, r)| {
            let files = r.files.keys().copied().collect();
            (*start, r.id, r.flushed_seq, files)
        })
        .collect()
}

#[track_caller]
fn assert_manifest_checksum_at(
    r: telestore_engine::Result<telestore_engine::manifest::State>,
    offset: u64,
) {
    match r {
        Err(Error::ChecksumMismatch {
            file,
            offset: o,
            expected,
            actual,
        }) => {
            assert!(file.ends_with("MANIFEST"), "{}", file.display());
            assert_eq!(o, offset);
            assert_ne!(expected, actual);
        }
        other => panic!("expected ChecksumMismatch at {offset}, got {other:?}"),
    }
}

#[test]
fn manifest_torn_append_is_dropped() {
    // Cut anywhere: the incomplete record is dropped and the file truncated.
    for cut in 12..=MANIFEST_LEN {
        let (r, len) = open_manifest_changed(|b| b.truncate(cut));
        let s = r.unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        let want = match cut {
            0..=32 => ((0, 0, 0, 0), 0, 12),
            33..=148 => ((0, 0, 0, 0), 0, 33),
            149..=242 => ((1, 0, 0, 0), 0, 149),
            243..=288 => ((1, 1, 4, 1), 0, 243),
            _ => ((1, 1, 4, 1), 1, 289),
        };
        let got = (summary(&s), s.devices.len(), len);
        assert_eq!(got, want, "cut at {cut}");
    }
    // Zeros instead of the last record (size extended, data never written),
    // or instead of its payload only.
    for from in [DEVICE_AT, DEVICE_AT + 12] {
        let (r, len) = open_manifest_changed(|b| b[from..].fill(0));
        let s = r.unwrap();
        let got = (summary(&s), s.devices.len(), len);
        assert_eq!(
            got,
            ((1, 1, 4, 1), 0, DEVICE_AT as u64),
            "zeros from {from}"
        );
    }
    // Zeros after the last record.
    let (r, len) = open_manifest_changed(|b| b.resize(MANIFEST_LEN + 100, 0));
    let s = r.unwrap();
    let got = (summary(&s), s.devices.len(), len);
    assert_eq!(got, ((1, 1, 4, 1), 1, MANIFEST_LEN as u64));
    // A torn Split leaves the parent region in place.
    let split = hand_record(&split_payload(1, &prefix_key(0xc000), 2, 3));
    for keep in [1, 12, 46] {
        let (r, len) = open_manifest_changed(|b| b.extend(&split[..keep]));
        let s = r.unwrap();
        assert_eq!(len, MANIFEST_LEN as u64, "torn Split of {keep} bytes cut");
        assert_eq!(region_map(&s).len(), 2);
        assert_eq!(s.tables[&TABLE_ID].next_region_id, REGIONS);
    }
}

#[test]
fn manifest_corruption_is_handled_as_specified() {
    let flipped = |at: usize| open_manifest_changed(|b| b[at] ^= 0x01);
    // Rot in the last, complete record (the Device record): an error, never
    // dropped.
    let (r, len) = flipped(DEVICE_AT + 12 + 20);
    assert_manifest_checksum_at(r, 243);
    assert_eq!(len, 289, "nothing is cut");
    let (r, _) = flipped(DEVICE_AT + 1);
    assert_manifest_checksum_at(r, 243);
    let (r, _) = open_manifest_changed(|b| b[260..].fill(0));
    assert_manifest_checksum_at(r, 243);
    // Damage before the last record.
    let (r, len) = flipped(149 + 12 + 20);
    assert_manifest_checksum_at(r, 149);
    assert_eq!(len, 289, "nothing is cut");
    let (r, _) = flipped(149 + 1);
    assert_manifest_checksum_at(r, 149);
    let (r, _) = open_manifest_changed(|b| b[200..DEVICE_AT].fill(0));
    assert_manifest_checksum_at(r, 149);
    let (r, _) = flipped(33 + 12 + 10);
    assert_manifest_checksum_at(r, 33);
    let (r, _) = flipped(33 + 12 + 70); // in the region map
    assert_manifest_checksum_at(r, 33);
    let (r, _) = flipped(12 + 4); // payload_crc is covered by header_crc
    assert_manifest_checksum_at(r, 12);
    let (r, _) = open_manifest_changed(|b| b[33..149].fill(0));
    assert_manifest_checksum_at(r, 33);
    // Valid checksums, invalid contents: Corrupt, even as the last record.
    let (r, len) = open_manifest_changed(|b| b.extend(hand_record(&[9, 0, 0])));
    assert_corrupt_at(r, "MANIFEST", 289);
    assert_eq!(len, 289 + 15);
    let (r, _) = open_manifest_changed(|b| {
        let mut h = ((16u32 << 20) + 1).to_le_bytes().to_vec();
        h.extend_from_slice(&[0; 4]);
        let c = crc32c::crc32c(&h);
        h.extend_from_slice(&c.to_le_bytes());
        b.extend(h);
    });
    assert_corrupt_at(r, "MANIFEST", 289);
    let (r, _) = open_manifest_changed(|b| {
        let again = b[33..149].to_vec(); // CreateTable of table 1, again
        b.extend(again);
    });
    assert_corrupt_at(r, "MANIFEST", 289);
    // A Split payload one byte short, or with a byte too many.
    let p = split_payload(1, &prefix_key(0xc000), 2, 3);
    for bad in [p[..34].to_vec(), [&p[..], &[0]].concat()] {
        let (r, _) = open_manifest_changed(|b| b.extend(hand_record(&bad)));
        assert_corrupt_at(r, "MANIFEST", 289);
    }
    // A region map that does not start at the zero key, or is not sorted.
    for map in [
        vec![(0u32, prefix_key(0x0001))],
        vec![
            (0, [0; 18]),
            (1, prefix_key(0x9000)),
            (2, prefix_key(0x8000)),
        ],
        vec![(0, [0; 18]), (0, prefix_key(0x8000))],
    ] {
        let (r, _) = open_manifest_changed(|b| {
            let mut p = recs_payload(b, 1)[..52].to_vec();
            p[1] = 2; // table 2
            p[7] = b'x'; // "xeadings"
            p.extend_from_slice(&(map.len() as u32).to_le_bytes());
            p.extend_from_slice(&(map.len() as u32).to_le_bytes());
            for (id, start) in &map {
                p.extend_from_slice(&id.to_le_bytes());
                p.extend_from_slice(start);
            }
            b.extend(hand_record(&p));
        });
        assert_corrupt_at(r, "MANIFEST", 289);
    }
    // Header.
    let (r, _) = flipped(5);
    assert!(
        matches!(r, Err(Error::ChecksumMismatch { offset: 0, .. })),
        "manifest header CRC: {r:?}"
    );
    // Other versions are refused: v1 (tables without regions), v2 (no
    // device registry; a v5 reader does not read it) and later ones. (v3
    // and v4 are read: `older_manifests_are_read_and_upgraded`.)
    for v in [1u8, 2, 6] {
        let (r, _) = open_manifest_changed(|b| {
            b[4] = v;
            let c = crc32c::crc32c(&b[0..8]);
            b[8..12].copy_from_slice(&c.to_le_bytes());
        });
        assert!(
            matches!(
                r,
                Err(Error::UnsupportedVersion {
                    what: "manifest",
                    version
                }) if version == v as u32
            ),
            "{r:?}"
        );
    }
}

/// Payload of record `i` of a manifest image.
fn recs_payload(b: &[u8], i: usize) -> Vec<u8> {
    hand_records(b).swap_remove(i).1
}

#[test]
fn manifest_split_and_merge_records_are_applied() {
    let mid = prefix_key(0xc000);
    // The hand-built bytes are what the crate decodes and encodes.
    let split = hand_record(&split_payload(1, &mid, 2, 3));
    assert_eq!(split.len(), 47);
    let want = Record::Split {
        table_id: TABLE_ID,
        parent: 1,
        at: mid,
        left: 2,
        right: 3,
    };
    assert!(matches!(decode_framed(&split), Framed::Record(ref r, 47) if *r == want));
    let mut enc = Vec::new();
    want.encode(&mut enc);
    assert_eq!(enc, split, "Split encoding");
    let merge = hand_record(&merge_payload(2, 3, 4));
    assert_eq!(merge.len(), 29);
    let want = Record::Merge {
        table_id: TABLE_ID,
        left: 2,
        right: 3,
        merged: 4,
    };
    assert!(matches!(decode_framed(&merge), Framed::Record(ref r, 29) if *r == want));
    let mut enc = Vec::new();
    want.encode(&mut enc);
    assert_eq!(enc, merge, "Merge encoding");

    // Split region 1 = [8000, end) at c000: both daughters list the
    // parent's file and inherit its flushed_seq.
    let (r, len) = open_manifest_changed(|b| b.extend(&split));
    let s = r.unwrap();
    assert_eq!(len, 289 + 47);
    assert_eq!(
        region_map(&s),
        [
            ([0; 18], 0, 0, vec![]),
            (prefix_key(0x8000), 2, 4, vec![FILE_ID]),
            (mid, 3, 4, vec![FILE_ID]),
        ]
    );
    assert_eq!(s.tables[&TABLE_ID].next_region_id, 4);
    assert_eq!(summary(&s), (1, 1, 4, 1), "a shared file counts once");

    // The left daughter flushes up to 9, then the two merge: the merged
    // region starts where the left one did, lists the union of the files
    // and takes the higher flushed_seq.
    let flushed = hand_record(&flushed_payload(2, 9));
    let (r, _) = open_manifest_changed(|b| {
        b.extend(&split);
        b.extend(&flushed);
        b.extend(&merge);
    });
    let s = r.unwrap();
    assert_eq!(
        region_map(&s),
        [
            ([0; 18], 0, 0, vec![]),
            (prefix_key(0x8000), 4, 9, vec![FILE_ID]),
        ]
    );
    assert_eq!(s.tables[&TABLE_ID].next_region_id, 5);

    // A snapshot lists the current region map in its CreateTable and no
    // Split or Merge: floor, CreateTable, then per region in key order its
    // files (if any) and its flushed_seq.
    let tmp = tempfile::tempdir().unwrap();
    let mut b = read(&manifest_path());
    b.extend(&split);
    std::fs::write(tmp.path().join("MANIFEST"), &b).unwrap();
    let mut m = Manifest::open(tmp.path(), Arc::new(StdBackend)).unwrap();
    let want = m.state().clone();
    m.rewrite().unwrap();
    drop(m);
    let b = read(&tmp.path().join("MANIFEST"));
    let recs = hand_records(&b);
    let tags: Vec<(u8, Option<u32>)> = recs
        .iter()
        .map(|(_, p)| (p[0], (p[0] == 2).then(|| u32_at(p, 5))))
        .collect();
    assert_eq!(
        tags,
        [
            (3, None),
            (6, None),
            (1, None),
            (2, Some(0)),
            (2, Some(2)),
            (2, Some(2)),
            (2, Some(3)),
            (2, Some(3))
        ]
    );
    assert_eq!(recs[1].1, device_payload(REG_ID, REG_NAME, &[REG_TAG]));
    let p = &recs[2].1;
    assert_eq!((u32_at(p, 52), u32_at(p, 56)), (4, 3), "next id, count");
    let map: Vec<(u32, &[u8])> = (0..3)
        .map(|i| (u32_at(p, 60 + 22 * i), &p[64 + 22 * i..82 + 22 * i]))
        .collect();
    assert_eq!(
        map,
        [
            (0, &[0u8; 18][..]),
            (2, &prefix_key(0x8000)[..]),
            (3, &mid[..])
        ]
    );
    let m = Manifest::open(tmp.path(), Arc::new(StdBackend)).unwrap();
    assert_eq!(m.state(), &want);
}

/// Payload of a `TableEncoding` record, by hand (manifest.md, tag 7).
fn encoding_payload(table: u32, encoding: u8) -> Vec<u8> {
    let mut p = vec![7];
    p.extend_from_slice(&table.to_le_bytes());
    p.push(encoding);
    p
}

#[test]
fn manifest_table_encoding_record_is_applied() {
    let framed = hand_record(&encoding_payload(TABLE_ID, 1));
    let want = Record::TableEncoding {
        table_id: TABLE_ID,
        encoding: BlockEncoding::Columnar,
    };
    assert!(matches!(decode_framed(&framed), Framed::Record(ref r, 18) if *r == want));
    let mut enc = Vec::new();
    want.encode(&mut enc);
    assert_eq!(enc, framed, "the crate writes the documented bytes");
    let (r, len) = open_manifest_changed(|b| b.extend(&framed));
    let s = r.unwrap();
    assert_eq!(
        s.tables[&TABLE_ID].schema.options.encoding,
        BlockEncoding::Columnar
    );
    assert_eq!(len, MANIFEST_LEN as u64 + 18);
    let (r, _) = open_manifest_changed(|b| b.extend(hand_record(&encoding_payload(9, 1))));
    assert_corrupt_at(r, "MANIFEST", MANIFEST_LEN as u64);
    let (r, _) = open_manifest_changed(|b| b.extend(hand_record(&encoding_payload(TABLE_ID, 2))));
    assert_corrupt_at(r, "MANIFEST", MANIFEST_LEN as u64);
}

#[test]
fn older_manifests_are_read_and_upgraded() {
    // The fixture as version 3 wrote it (table options without the
    // encoding byte) and as version 4 wrote it (the same bytes as v5 but
    // the header's version and CRC).
    let v3 = read(&manifest_v3_path());
    assert_eq!((v3.len(), u32_at(&v3, 4)), (MANIFEST_LEN - 1, 3));
    let v4 = read(&manifest_v4_path());
    assert_eq!((v4.len(), u32_at(&v4, 4)), (MANIFEST_LEN, 4));
    assert_eq!(v4[12..], read(&manifest_path())[12..]);
    let want = Manifest::open_read_only(&store_dir(), Arc::new(StdBackend)).unwrap();
    for (v, old) in [(3, v3), (4, v4)] {
        assert_eq!(fuzz_decode_manifest(&old).unwrap(), 4, "v{v}");
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("MANIFEST");
        std::fs::write(&p, &old).unwrap();
        let m = Manifest::open_read_only(tmp.path(), Arc::new(StdBackend)).unwrap();
        assert_eq!(m.state(), want.state(), "v{v} reads as the v5 fixture");
        drop(m);
        assert_eq!(read(&p), old, "v{v}: a read-only open changes nothing");
        let m = Manifest::open(tmp.path(), Arc::new(StdBackend)).unwrap();
        assert_eq!(m.state(), want.state());
        drop(m);
        let b = read(&p);
        assert_eq!(
            u32_at(&b, 4),
            5,
            "v{v}: a read-write open rewrites it as v5"
        );
        assert!(
            fuzz_decode_manifest(&b).unwrap() >= 4,
            "a snapshot of the state"
        );
        let m = Manifest::open(tmp.path(), Arc::new(StdBackend)).unwrap();
        assert_eq!(m.state(), want.state(), "v{v}: and it reads back the same");
    }
}

/// Payload of a `WalDir` record (manifest.md, tag 8), by hand.
fn wal_dir_payload(path: &str) -> Vec<u8> {
    let mut p = vec![8u8];
    push_str(&mut p, path);
    p
}

#[test]
fn manifest_wal_dir_record_is_applied_kept_in_snapshots_and_checked() {
    let path = "/mnt/fast/wal";
    let rec = hand_record(&wal_dir_payload(path));
    assert_eq!(rec.len(), 12 + 1 + 2 + path.len());
    match decode_framed(&rec) {
        Framed::Record(r, n) => {
            assert_eq!(n, rec.len());
            assert_eq!(r, Record::WalDir { path: path.into() });
            let mut enc = Vec::new();
            r.encode(&mut enc);
            assert_eq!(enc, rec, "the crate encodes the hand-built bytes");
        }
        other => panic!("{other:?}"),
    }
    // A version-4 decoder refuses tag 8.
    assert!(matches!(
        telestore_engine::manifest::record::decode_framed_v(&rec, 4),
        Framed::Invalid(_)
    ));
    let (r, len) = open_manifest_changed(|b| b.extend(&rec));
    assert_eq!(r.unwrap().wal_dir.as_deref(), Some(path));
    assert_eq!(len, (MANIFEST_LEN + rec.len()) as u64);
    // A snapshot keeps it, right after the FileIdFloor.
    let tmp = tempfile::tempdir().unwrap();
    let mut b = read(&manifest_path());
    b.extend(&rec);
    std::fs::write(tmp.path().join("MANIFEST"), &b).unwrap();
    let mut m = Manifest::open(tmp.path(), Arc::new(StdBackend)).unwrap();
    m.rewrite().unwrap();
    drop(m);
    let snap = read(&tmp.path().join("MANIFEST"));
    let recs = hand_records(&snap);
    assert_eq!(recs[0].1[0], 3, "FileIdFloor first");
    assert_eq!(recs[1].1, wal_dir_payload(path));
    let m = Manifest::open_read_only(tmp.path(), Arc::new(StdBackend)).unwrap();
    assert_eq!(m.state().wal_dir.as_deref(), Some(path));
    // A relative or empty path is a corrupt edit.
    for bad in ["relative/wal", ""] {
        let (r, _) = open_manifest_changed(|b| b.extend(hand_record(&wal_dir_payload(bad))));
        assert_edit_corrupt_at(r, MANIFEST_LEN as u64, bad);
    }
}

#[test]
fn manifest_spec_example_is_current() {
    // The annotated hex dumps of manifest.md show the fixture (Device record
    // included) and the hand-built Split and Merge: every checksum they show
    // is current.
    let spec = String::from_utf8(read(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../formats/manifest.md"),
    ))
    .unwrap();
    let mut b = read(&manifest_path());
    let len = b.len();
    assert!(spec.contains(&format!("({len} bytes")), "fixture length");
    b.extend(hand_record(&split_payload(1, &prefix_key(0xc000), 2, 3)));
    b.extend(hand_record(&merge_payload(2, 3, 4)));
    b.extend(hand_record(&encoding_payload(TABLE_ID, 1)));
    let mut crcs = vec![u32_at(&b, 8)];
    for (pos, _) in hand_records(&b) {
        crcs.extend([u32_at(&b, pos + 4), u32_at(&b, pos + 8)]);
    }
    assert_eq!(crcs.len(), 15);
    for c in crcs {
        let shown = format!("= 0x{c:08x}");
        assert!(spec.contains(&shown), "formats/manifest.md lacks {shown}");
    }
}

#[test]
fn manifest_bad_splits_and_merges_are_corrupt() {
    let mid = prefix_key(0xc000);
    // Regions: 0 = [0, 8000), 1 = [8000, end); next_region_id = 2.
    for (what, p) in [
        (
            "at below the parent",
            split_payload(1, &prefix_key(0x4000), 2, 3),
        ),
        (
            "at the parent's start",
            split_payload(1, &prefix_key(0x8000), 2, 3),
        ),
        (
            "at the parent's end",
            split_payload(0, &prefix_key(0x8000), 2, 3),
        ),
        ("at past the parent", split_payload(0, &mid, 2, 3)),
        ("at the zero key", split_payload(0, &[0; 18], 2, 3)),
        ("unknown parent", split_payload(7, &mid, 2, 3)),
        ("left == right", split_payload(1, &mid, 2, 2)),
        ("left id below next", split_payload(1, &mid, 1, 2)),
        ("right id below next", split_payload(1, &mid, 2, 0)),
    ] {
        let (r, len) = open_manifest_changed(|b| b.extend(hand_record(&p)));
        assert_edit_corrupt_at(r, 289, what);
        assert_eq!(len, 289 + 47, "{what}: nothing is cut");
    }
    // After a split at c000: 0 = [0, 8000), 2 = [8000, c000), 3 = [c000,
    // end); next_region_id = 4.
    let split = hand_record(&split_payload(1, &mid, 2, 3));
    for (what, p) in [
        ("the parent is gone", flushed_payload(1, 5)),
        (
            "split of the parent again",
            split_payload(1, &prefix_key(0xe000), 4, 5),
        ),
        ("right before left", merge_payload(3, 2, 4)),
        ("not adjacent", merge_payload(0, 3, 4)),
        ("the last region", merge_payload(3, 0, 4)),
        ("unknown left", merge_payload(9, 3, 4)),
        ("merged id reused", merge_payload(2, 3, 3)),
        ("merged id of the parent", merge_payload(2, 3, 1)),
    ] {
        let (r, _) = open_manifest_changed(|b| {
            b.extend(&split);
            b.extend(hand_record(&p));
        });
        assert_edit_corrupt_at(r, 289 + 47, what);
    }
}

/// A valid record that cannot be applied: `Corrupt` naming the MANIFEST,
/// the record's offset and "manifest edit".
#[track_caller]
fn assert_edit_corrupt_at(
    r: telestore_engine::Result<telestore_engine::manifest::State>,
    offset: u64,
    what: &str,
) {
    match r {
        Err(Error::Corrupt {
            what: w,
            file,
            offset: o,
        }) => {
            assert!(file.ends_with("MANIFEST"), "{what}: {}", file.display());
            assert_eq!(o, offset, "{what}");
            assert!(w.starts_with("manifest edit"), "{what}: {w}");
        }
        other => panic!("{what}: expected Corrupt at {offset}, got {other:?}"),
    }
}

/// `n` tags `(key, value)` with keys `k0`, `k1`, … and `value` for each.
fn tags_of(n: usize, value: &str) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("k{i}"), value.to_string()))
        .collect()
}

fn tag_refs(tags: &[(String, String)]) -> Vec<(&str, &str)> {
    tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

#[test]
fn manifest_device_records_are_applied() {
    // A Device record for a known id with the same name replaces its tags;
    // another id gets another name. Limits are inclusive: a 256-byte name,
    // 64 tags with 256-byte keys and values.
    let other = REG_ID + 1;
    let long = "n".repeat(256);
    let big: Vec<(String, String)> = (0..64)
        .map(|i| (format!("{i:0>256}"), "v".repeat(256)))
        .collect();
    let big_p = device_payload(other, &long, &tag_refs(&big));
    assert_eq!(big_p.len(), 13 + 256 + 64 * (4 + 512));
    let want = Record::Device {
        id: other,
        name: long.clone(),
        tags: big.clone(),
    };
    let mut enc = Vec::new();
    want.encode(&mut enc);
    assert_eq!(enc, hand_record(&big_p), "Device encoding, 64 tags");
    let retag = device_payload(REG_ID, REG_NAME, &[("fleet", "west"), ("model", "x")]);
    let (r, len) = open_manifest_changed(|b| {
        b.extend(hand_record(&retag));
        b.extend(hand_record(&big_p));
    });
    let s = r.unwrap();
    assert_eq!(len as usize, MANIFEST_LEN + 24 + retag.len() + big_p.len());
    let entry = |name: &str, tags: &[(&str, &str)]| DeviceEntry {
        name: name.into(),
        tags: tags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    assert_eq!(
        devices(&s),
        [
            (
                REG_ID,
                entry(REG_NAME, &[("fleet", "west"), ("model", "x")])
            ),
            (other, entry(&long, &tag_refs(&big))),
        ]
    );
    // No tags at all: the tags are cleared.
    let (r, _) =
        open_manifest_changed(|b| b.extend(hand_record(&device_payload(REG_ID, REG_NAME, &[]))));
    assert_eq!(devices(&r.unwrap()), [(REG_ID, entry(REG_NAME, &[]))]);
    // A snapshot writes one Device record per device, in id order, right
    // after the floor and before the tables.
    let tmp = tempfile::tempdir().unwrap();
    let mut b = read(&manifest_path());
    b.extend(hand_record(&device_payload(other, "truck-7", &[])));
    b.extend(hand_record(&retag));
    std::fs::write(tmp.path().join("MANIFEST"), &b).unwrap();
    let mut m = Manifest::open(tmp.path(), Arc::new(StdBackend)).unwrap();
    let want = m.state().clone();
    m.rewrite().unwrap();
    drop(m);
    let b = read(&tmp.path().join("MANIFEST"));
    let recs: Vec<Vec<u8>> = hand_records(&b).into_iter().map(|(_, p)| p).collect();
    assert_eq!(recs[0], floor_payload(FILE_ID));
    assert_eq!(recs[1], retag);
    assert_eq!(recs[2], device_payload(other, "truck-7", &[]));
    assert_eq!(recs[3][0], 1, "then the tables");
    let m = Manifest::open(tmp.path(), Arc::new(StdBackend)).unwrap();
    assert_eq!(m.state(), &want);
}

#[test]
fn manifest_bad_device_records_are_refused() {
    let other = REG_ID + 1;
    let long = "x".repeat(257);
    let edits: [(&str, Vec<u8>); 8] = [
        ("empty name", device_payload(other, "", &[])),
        ("name of 257 bytes", device_payload(other, &long, &[])),
        (
            "empty tag key",
            device_payload(other, "truck-7", &[("", "east")]),
        ),
        (
            "empty tag value",
            device_payload(other, "truck-7", &[("fleet", "")]),
        ),
        (
            "tag key of 257 bytes",
            device_payload(other, "truck-7", &[(&long, "east")]),
        ),
        (
            "tag value of 257 bytes",
            device_payload(other, "truck-7", &[("fleet", &long)]),
        ),
        ("name of another id", device_payload(other, REG_NAME, &[])),
        (
            "rename of an id",
            device_payload(REG_ID, "truck-7", &[REG_TAG]),
        ),
    ];
    // Valid records that cannot be applied: Corrupt at the record, nothing
    // cut.
    for (what, p) in &edits {
        let (r, len) = open_manifest_changed(|b| b.extend(hand_record(p)));
        assert_edit_corrupt_at(r, MANIFEST_LEN as u64, what);
        let n = MANIFEST_LEN + RECORD_HEADER + p.len();
        assert_eq!(len, n as u64, "{what}: nothing is cut");
    }
    // 65 tags: the decoder refuses the record itself (Invalid).
    let tags = tags_of(65, "v");
    let p = device_payload(other, "truck-7", &tag_refs(&tags));
    let framed = hand_record(&p);
    assert!(
        matches!(decode_framed(&framed), Framed::Invalid(ref m) if m.contains("65 device tags")),
        "{:?}",
        decode_framed(&framed)
    );
    let (r, _) = open_manifest_changed(|b| b.extend(&framed));
    match r {
        Err(Error::Corrupt { what, file, offset }) => {
            assert!(file.ends_with("MANIFEST"), "{}", file.display());
            assert_eq!(offset, MANIFEST_LEN as u64);
            assert!(what.contains("manifest record: 65 device tags"), "{what}");
        }
        other => panic!("65 tags: expected Corrupt, got {other:?}"),
    }
    // 64 tags decode and apply.
    let tags = tags_of(64, "v");
    let p = device_payload(other, "truck-7", &tag_refs(&tags));
    let (r, _) = open_manifest_changed(|b| b.extend(hand_record(&p)));
    assert_eq!(r.unwrap().devices[&other].tags, tags);
    // `Manifest::append` refuses the same edits (InvalidInput), writing
    // nothing.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("MANIFEST"), read(&manifest_path())).unwrap();
    let mut m = Manifest::open(tmp.path(), Arc::new(StdBackend)).unwrap();
    let device = |id, name: &str, tags: Vec<(String, String)>| Record::Device {
        id,
        name: name.into(),
        tags,
    };
    for bad in [
        device(other, "", vec![]),
        device(other, REG_NAME, vec![]),
        device(REG_ID, "truck-7", vec![]),
        device(other, "truck-7", tags_of(65, "v")),
    ] {
        let r = m.append(std::slice::from_ref(&bad));
        assert!(
            matches!(r, Err(Error::InvalidInput { .. })),
            "{bad:?}: {r:?}"
        );
    }
    drop(m);
    assert_eq!(read(&tmp.path().join("MANIFEST")), read(&manifest_path()));
}

#[test]
fn manifest_file_id_floor_and_leftover_tmp() {
    // A FileIdFloor raises the highest file id (so ids are never reused).
    let (r, _) = open_manifest_changed(|b| b.extend(hand_record(&floor_payload(9))));
    assert_eq!(summary(&r.unwrap()), (1, 1, 4, 9));
    // It never lowers it.
    let (r, _) = open_manifest_changed(|b| b.extend(hand_record(&floor_payload(0))));
    assert_eq!(summary(&r.unwrap()), (1, 1, 4, 1));
    // A snapshot starts with the floor: FileIdFloor(max_file_id) first.
    let tmp = tempfile::tempdir().unwrap();
    let fixture = read(&manifest_path());
    std::fs::write(tmp.path().join("MANIFEST"), &fixture).unwrap();
    std::fs::write(tmp.path().join("MANIFEST.tmp"), b"half a snapshot").unwrap();
    let mut m = Manifest::open(tmp.path(), Arc::new(StdBackend)).unwrap();
    assert!(
        !tmp.path().join("MANIFEST.tmp").exists(),
        "leftover removed"
    );
    m.rewrite().unwrap();
    let b = read(&tmp.path().join("MANIFEST"));
    let recs = hand_records(&b);
    assert_eq!(recs[0], (12, floor_payload(FILE_ID)));
    assert_eq!(
        recs.len(),
        6,
        "floor, Device, CreateTable, Files (region 0: flushed_seq), \
         Files (region 1: the live files), Files (region 1: flushed_seq)"
    );
    // The devices come right after the floor, before the tables.
    assert_eq!(recs[1], (33, recs_payload(&fixture, 3)), "same device");
    assert_eq!(recs[2], (79, recs_payload(&fixture, 1)), "same region map");
    assert_eq!(recs[3].1, flushed_payload(0, 0));
    assert_eq!(recs[5].1, flushed_payload(1, 4));
}

fn floor_payload(max_file_id: u64) -> Vec<u8> {
    let mut p = vec![3];
    p.extend_from_slice(&max_file_id.to_le_bytes());
    p
}

// ------------------------------------------------------ whole directory

#[test]
fn fixture_store_directory_opens_and_reads() {
    let base = read(&manifest_path());
    let mid = hand_record(&split_payload(1, &prefix_key(0xc000), 2, 3));
    // Inside the device's run: its newer row (smaller key) goes left, the
    // older row, its point delete and the range tombstone go right.
    let inside = hand_record(&split_payload(1, &hand_key(DEVICE, T0_MS), 2, 3));
    let merge = hand_record(&merge_payload(2, 3, 4));
    let columnar = hand_record(&encoding_payload(TABLE_ID, 1));
    let variants: [(&str, Vec<u8>, &[u32]); 7] = [
        ("as written", base.clone(), &[0, 1]),
        ("version 3", read(&manifest_v3_path()), &[0, 1]),
        ("version 4", read(&manifest_v4_path()), &[0, 1]),
        ("now columnar", [&base[..], &columnar].concat(), &[0, 1]),
        ("split at c000", [&base[..], &mid].concat(), &[0, 2, 3]),
        (
            "split inside the device",
            [&base[..], &inside].concat(),
            &[0, 2, 3],
        ),
        (
            "split then merge",
            [&base[..], &mid, &merge].concat(),
            &[0, 4],
        ),
    ];
    for (what, manifest, ids) in variants {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("store");
        for p in [wal_path(), hfile_path()] {
            let rel = p.strip_prefix(store_dir()).unwrap();
            let dest = dir.join(rel);
            std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
            std::fs::copy(&p, &dest).unwrap();
        }
        std::fs::write(dir.join("MANIFEST"), &manifest).unwrap();
        let opts = Options {
            io: Some(IoChoice::Std),
            ..Options::default()
        };
        let store = Store::open(&dir, opts).unwrap();
        let regions = store.regions(TABLE_NAME).unwrap();
        let got: Vec<u32> = regions.iter().map(|r| r.id).collect();
        assert_eq!(got, ids, "{what}");
        let rows = store.latest(TABLE_NAME, DEVICE, 10).unwrap();
        assert_eq!(rows.len(), 1, "{what}: the older row is deleted");
        assert_eq!((rows[0].ts, rows[0].seq), (T0_MS + 1_000, 2), "{what}");
        assert_eq!(rows[0].fields, 8u64.to_le_bytes(), "{what}");
        assert!(
            store.get(TABLE_NAME, DEVICE, T0_MS).unwrap().is_none(),
            "{what}"
        );
        let encoding = store.schema(TABLE_NAME).unwrap().options.encoding;
        assert_eq!(encoding == BlockEncoding::Columnar, what == "now columnar");
        store.close().unwrap();
        let m = read(&dir.join("MANIFEST"));
        assert_eq!(
            u32_at(&m, 4),
            5,
            "{what}: a read-write open leaves version 5"
        );
    }
}
