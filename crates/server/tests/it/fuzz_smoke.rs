//! Guards the decoders against panics on hostile bytes: a seeded smoke run
//! of every fuzz entry point in `telestore_engine::fuzzing::TARGETS` and
//! `telestore_server::fuzzing::TARGETS` (the same
//! functions the cargo-fuzz targets in `fuzz/` call) on random byte strings
//! and on bit flips, truncations and insertions of valid WAL frames, segment
//! headers, blocks, HFiles and manifests written by the crate itself. Half of
//! the mutants get their checksums recomputed so that they reach the
//! structural checks behind the CRCs. It also checks that the unmutated
//! inputs are accepted, so a decoder that rejects everything fails here
//! instead of passing vacuously.
//!
//! The seed is printed; rerun a failure with `SEED=<n> cargo test --test
//! fuzz_smoke`. A panic reports the target and the input in hex: make it a
//! named regression test next to the decoder. `FUZZ_CORPUS_DIR=fuzz/corpus`
//! also writes the valid inputs as a cargo-fuzz seed corpus.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use telestore_engine::cell::{self, CellKind, RangeTombstone};
use telestore_engine::hfile::columnar::{self, ColumnarConfig};
use telestore_engine::hfile::{block, sections, HFileWriter, WriterOptions};
use telestore_engine::io::StdBackend;
use telestore_engine::key::{self, DeviceId};
use telestore_engine::manifest::record::{self as mrec, FileMeta, Record};
use telestore_engine::schema::{BlockEncoding, FieldType};
use telestore_engine::wal::{frame, segment};
use telestore_engine::{testkit, Compression};

/// Random byte strings per target.
const RANDOM_INPUTS: usize = 4_000;
/// Longest random byte string (exclusive).
const RANDOM_LEN_MAX: usize = 4_096;
/// Mutants per valid input (half of them with their checksums recomputed).
const MUTANTS_PER_SEED: usize = 8_000;
/// Bytes that tend to sit on a decoder's boundaries.
const INTERESTING_BYTES: [u8; 6] = [0x00, 0x01, 0x02, 0x7f, 0x80, 0xff];
/// Field width of the readings table (seven f64 fields).
const READINGS_FIELDS_WIDTH: usize = 56;

fn seed() -> u64 {
    let seed = match std::env::var("SEED") {
        Ok(s) => s.parse().expect("SEED must be a u64"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    };
    println!("fuzz_smoke seed: {seed} (rerun with SEED={seed})");
    seed
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Run one entry point; on a panic, fail with the target, seed and input.
fn run(name: &str, f: fn(&[u8]), input: &[u8], seed: u64) {
    if catch_unwind(AssertUnwindSafe(|| f(input))).is_err() {
        panic!(
            "fuzz target {name} panicked (SEED={seed}) on {} bytes: {}",
            input.len(),
            hex(input)
        );
    }
}

/// One random mutation of `valid`: bit flips, a truncation, inserted
/// bytes, overwritten bytes or a removed range.
fn mutate(rng: &mut SmallRng, valid: &[u8]) -> Vec<u8> {
    let mut m = valid.to_vec();
    let steps = rng.gen_range(1..=3);
    for _ in 0..steps {
        match rng.gen_range(0..5) {
            0 if !m.is_empty() => {
                for _ in 0..rng.gen_range(1..=4) {
                    let i = rng.gen_range(0..m.len());
                    m[i] ^= 1 << rng.gen_range(0..8);
                }
            }
            1 => {
                let cut = rng.gen_range(0..=m.len());
                m.truncate(cut);
            }
            2 => {
                let at = rng.gen_range(0..=m.len());
                let n = rng.gen_range(1..=8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
                m.splice(at..at, bytes);
            }
            3 if !m.is_empty() => {
                let i = rng.gen_range(0..m.len());
                m[i] = INTERESTING_BYTES[rng.gen_range(0..INTERESTING_BYTES.len())];
            }
            4 if !m.is_empty() => {
                let start = rng.gen_range(0..m.len());
                let end = rng.gen_range(start..=m.len().min(start + 64));
                m.drain(start..end);
            }
            _ => {}
        }
    }
    m
}

fn le32(b: &[u8], at: usize) -> Option<usize> {
    let a: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
    usize::try_from(u32::from_le_bytes(a)).ok()
}

fn le64(b: &[u8], at: usize) -> Option<usize> {
    let a: [u8; 8] = b.get(at..at.checked_add(8)?)?.try_into().ok()?;
    usize::try_from(u64::from_le_bytes(a)).ok()
}

fn put_crc(b: &mut [u8], at: usize, crc: u32) {
    if let Some(s) = b.get_mut(at..at + 4) {
        s.copy_from_slice(&crc.to_le_bytes());
    }
}

/// Recompute the checksum of the block at the start of `b`.
fn reseal_block(b: &mut [u8]) {
    let Some(body_len) = le32(b, 16) else { return };
    let Some(body) = b.get(block::BLOCK_HEADER_LEN..block::BLOCK_HEADER_LEN + body_len) else {
        return;
    };
    let c = crc32c::crc32c_append(crc32c::crc32c(&b[..20]), body);
    put_crc(b, 20, c);
}

/// Recompute the checksums of a run of CRC-framed records that start at
/// `pos`: `len u32` at 0, the payload CRC at `payload_crc_at`, the header CRC
/// (over the header bytes before it) at `header_len - 4`. WAL frames and
/// manifest records share this shape.
fn reseal_framed(b: &mut [u8], mut pos: usize, header_len: usize, payload_crc_at: usize) {
    while let Some(len) = le32(b, pos) {
        let end = pos + header_len + len;
        if end > b.len() {
            return;
        }
        let c = crc32c::crc32c(&b[pos + header_len..end]);
        put_crc(b, pos + payload_crc_at, c);
        let h = crc32c::crc32c(&b[pos..pos + header_len - 4]);
        put_crc(b, pos + header_len - 4, h);
        pos = end;
    }
}

/// Recompute every frame checksum of a WAL frame run.
fn reseal_frames(b: &mut [u8]) {
    reseal_framed(b, 0, frame::FRAME_HEADER_LEN, 24);
}

/// Recompute the header and record checksums of a manifest image.
fn reseal_manifest(b: &mut [u8]) {
    if b.len() < mrec::MANIFEST_HEADER_LEN {
        return;
    }
    let c = crc32c::crc32c(&b[..8]);
    put_crc(b, 8, c);
    reseal_framed(b, mrec::MANIFEST_HEADER_LEN, mrec::RECORD_HEADER_LEN, 4);
}

/// Recompute the checksums of an HFile image: the blocks its index names,
/// the four sections its trailer names, then the trailer.
fn reseal_hfile(data: &mut [u8]) {
    let Some(toff) = data.len().checked_sub(sections::TRAILER_LEN) else {
        return;
    };
    let section = |d: &[u8], i: usize| -> Option<(usize, usize)> {
        let off = le64(d, toff + 8 + 16 * i)?;
        let end = off.checked_add(le32(d, toff + 16 + 16 * i)?)?;
        (end <= toff).then_some((off, end))
    };
    if let Some((off, end)) = section(data, 0) {
        let entries: Vec<(usize, usize)> = data[off..end]
            .get(4..)
            .unwrap_or_default()
            .chunks_exact(sections::INDEX_ENTRY_LEN)
            .filter_map(|e| Some((le64(e, 2 * key::KEY_LEN)?, le32(e, 2 * key::KEY_LEN + 8)?)))
            .collect();
        for (o, l) in entries {
            if let Some(b) = o
                .checked_add(l)
                .filter(|e| *e <= toff)
                .map(|e| &mut data[o..e])
            {
                reseal_block(b);
            }
        }
    }
    for i in 0..4 {
        if let Some((off, end)) = section(data, i) {
            let c = crc32c::crc32c(&data[off..end]);
            put_crc(data, toff + 20 + 16 * i, c);
        }
    }
    let c = crc32c::crc32c(&data[toff..toff + sections::TRAILER_LEN - 4]);
    put_crc(data, toff + sections::TRAILER_LEN - 4, c);
}

/// Recompute the checksums a target's decoder checks, so that mutants get
/// past them and reach the structural checks behind.
fn reseal(target: &str, b: &mut [u8]) {
    match target {
        "wal_frames" => reseal_frames(b),
        "wal_segment" if b.len() >= segment::SEGMENT_HEADER_LEN => {
            let c = crc32c::crc32c(&b[..16]);
            put_crc(b, 16, c);
            reseal_frames(&mut b[segment::SEGMENT_HEADER_LEN..]);
        }
        "wal_segment_header" if b.len() >= segment::SEGMENT_HEADER_LEN => {
            let c = crc32c::crc32c(&b[..16]);
            put_crc(b, 16, c);
        }
        "hfile_block" => reseal_block(b.get_mut(1..).unwrap_or_default()),
        "hfile_trailer" if b.len() >= sections::TRAILER_LEN => {
            let c = crc32c::crc32c(&b[..sections::TRAILER_LEN - 4]);
            put_crc(b, sections::TRAILER_LEN - 4, c);
        }
        "hfile_file" => reseal_hfile(b.get_mut(1..).unwrap_or_default()),
        "manifest_log" => reseal_manifest(b),
        _ => {}
    }
}

fn fleet_cells(devices: u64, rounds: u64, with_deletes: bool) -> (Vec<u8>, u32) {
    let mut keyed = Vec::new();
    for d in 0..devices {
        for r in 0..rounds {
            let mut row = Vec::new();
            testkit::push_fleet_row(&mut row, d, r, 1_000);
            let ts = i64::from_le_bytes(row[8..16].try_into().expect("8 bytes"));
            let kind = if with_deletes && r % 7 == 3 {
                CellKind::Delete
            } else {
                CellKind::Put
            };
            let fields = match kind {
                CellKind::Put => row[16..].to_vec(),
                CellKind::Delete => vec![0; READINGS_FIELDS_WIDTH],
            };
            keyed.push((
                key::encode(DeviceId(d), ts),
                d * rounds + r + 1,
                kind,
                fields,
            ));
        }
    }
    keyed.sort_by_key(|a| a.0);
    let mut raw = Vec::new();
    for (k, seq, kind, fields) in &keyed {
        cell::push(&mut raw, k, *seq, *kind, fields);
    }
    (raw, keyed.len() as u32)
}

fn wal_frames() -> Vec<u8> {
    let mut rows = Vec::new();
    for d in 0..4 {
        testkit::push_fleet_row(&mut rows, d, 9, 1_000);
    }
    let mut deletes = Vec::new();
    for (d, ts) in [(1u64, 5i64), (2, -7)] {
        deletes.extend_from_slice(&d.to_le_bytes());
        deletes.extend_from_slice(&ts.to_le_bytes());
    }
    let mut range = Vec::new();
    for v in [3u64, 10, 20] {
        range.extend_from_slice(&v.to_le_bytes());
    }
    let entries = [
        (frame::EntryKind::Put, 1, 4, &rows[..]),
        (frame::EntryKind::DeletePoints, 5, 2, &deletes[..]),
        (frame::EntryKind::DeleteRange, 7, 1, &range[..]),
    ];
    let mut out = Vec::new();
    for (kind, first_seq, count, payload) in entries {
        let e = frame::Entry {
            kind,
            table_id: 2,
            first_seq,
            count,
            payload,
        };
        frame::encode(&e, &mut out);
    }
    assert_eq!(
        telestore_engine::fuzzing::fuzz_decode_frames(&out).expect("valid frames"),
        3
    );
    out
}

fn blocks() -> Vec<Vec<u8>> {
    let (raw, cells) = fleet_cells(3, 20, true);
    let width = cell::cell_width(READINGS_FIELDS_WIDTH);
    let mut out = Vec::new();
    for codec in [Compression::None, Compression::Snappy, Compression::Zstd(3)] {
        let mut b = vec![READINGS_FIELDS_WIDTH as u8];
        block::encode(&raw, cells, codec, &mut b).expect("encode block");
        let back = block::decode(&b[1..], width).expect("valid block");
        assert_eq!(back, raw, "{codec}");
        out.push(b);
        let mut b = vec![READINGS_FIELDS_WIDTH as u8];
        let cfg = ColumnarConfig {
            pco_level: 4,
            compression: codec,
        };
        let types = [FieldType::F64; READINGS_FIELDS_WIDTH / 8];
        block::encode_columnar(&raw, cells, width, &types, cfg, &mut b).expect("columnar");
        assert_eq!(block::decode(&b[1..], width).expect("valid block"), raw);
        out.push(b);
    }
    out
}

/// Columnar bodies as the `columnar_block` target takes them: cell count
/// − 1, fields width, body.
fn columnar_bodies() -> Vec<Vec<u8>> {
    let width = cell::cell_width(READINGS_FIELDS_WIDTH);
    let types = [FieldType::F64; READINGS_FIELDS_WIDTH / 8];
    let mut out = Vec::new();
    for (devices, rounds) in [(1, 1), (3, 20), (16, 16)] {
        let (raw, cells) = fleet_cells(devices, rounds, devices == 3);
        let cfg = ColumnarConfig {
            pco_level: 8,
            compression: Compression::Zstd(1),
        };
        let mut b = vec![(cells - 1) as u8, READINGS_FIELDS_WIDTH as u8];
        columnar::encode(&raw, width, &types, cfg, &mut b).expect("columnar");
        assert_eq!(
            columnar::decode(&b[2..], cells as usize, width).expect("valid"),
            raw
        );
        out.push(b);
    }
    let decimal = |b: &Vec<u8>| {
        let stats = columnar::describe(&b[2..]).expect("valid");
        stats.iter().any(|c| c.codec == columnar::CODEC_DECIMAL)
    };
    assert!(out.iter().any(decimal), "a seed with a decimal chunk");
    out
}

/// Write a small HFile and return its bytes (without the width byte).
fn hfile_image(
    compression: Compression,
    bloom: bool,
    tombstones: &[RangeTombstone],
    encoding: BlockEncoding,
) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("seed.hfile");
    let (raw, cells) = fleet_cells(6, 40, !tombstones.is_empty());
    let opts = WriterOptions {
        table_id: 1,
        layout_id: 0x1234_5678,
        fields_width: READINGS_FIELDS_WIDTH,
        compression,
        block_size_bytes: 2_048,
        bloom,
        expected_cells: cells as usize,
        created_ms: testkit::FLEET_T0_MS,
        direct: true,
        encoding,
        field_types: vec![FieldType::F64; READINGS_FIELDS_WIDTH / 8],
        pco_level: 4,
        limiter: None,
    };
    let mut w = HFileWriter::create(&StdBackend, &path, opts).expect("create hfile");
    for c in raw.chunks_exact(cell::cell_width(READINGS_FIELDS_WIDTH)) {
        w.add(c).expect("add cell");
    }
    let (info, len) = w.finish(tombstones).expect("finish hfile");
    let image = std::fs::read(&path).expect("read hfile");
    assert_eq!(image.len() as u64, len);
    let decoded = telestore_engine::fuzzing::fuzz_decode_file(&image, READINGS_FIELDS_WIDTH)
        .expect("valid hfile");
    assert_eq!(decoded, u64::from(cells));
    assert_eq!(info.cells, u64::from(cells));
    image
}

fn manifest() -> Vec<u8> {
    let mut out = mrec::encode_header();
    let records = [
        Record::CreateTable {
            table_id: 1,
            schema: testkit::readings_schema("readings"),
            regions: telestore_engine::region::pre_split_starts(4)
                .into_iter()
                .enumerate()
                .map(|(i, start)| mrec::RegionDef {
                    id: i as u32,
                    start,
                })
                .collect(),
            next_region_id: 4,
        },
        Record::Files {
            table_id: 1,
            region_id: 2,
            added: vec![FileMeta {
                file_id: 7,
                len_bytes: 65_536,
                cells: 1_000,
                min_seq: 1,
                max_seq: 1_000,
                min_ts: testkit::FLEET_T0_MS,
                max_ts: testkit::FLEET_T0_MS + 99_000,
            }],
            removed: vec![3, 4],
            flushed_seq: Some(1_000),
        },
        Record::Files {
            table_id: 1,
            region_id: 2,
            added: vec![],
            removed: vec![7],
            flushed_seq: None,
        },
        Record::FileIdFloor { max_file_id: 7 },
        Record::Split {
            table_id: 1,
            parent: 2,
            at: telestore_engine::region::prefix_start(0x9000),
            left: 4,
            right: 5,
        },
        Record::Merge {
            table_id: 1,
            left: 4,
            right: 5,
            merged: 6,
        },
    ];
    for r in &records {
        r.encode(&mut out);
    }
    let n = telestore_engine::fuzzing::fuzz_decode_manifest(&out).expect("valid manifest");
    assert_eq!(n, records.len());
    out
}

/// Valid inputs per target, checked against the underlying decoders.
fn valid_inputs() -> BTreeMap<&'static str, Vec<Vec<u8>>> {
    let schema = testkit::readings_schema("readings");
    assert_eq!(schema.fields_width(), READINGS_FIELDS_WIDTH);
    let mut m: BTreeMap<&'static str, Vec<Vec<u8>>> = BTreeMap::new();
    let keys: Vec<Vec<u8>> = [(0u64, 0i64), (42, testkit::FLEET_T0_MS), (u64::MAX, -1)]
        .iter()
        .map(|(d, ts)| key::encode(DeviceId(*d), *ts).to_vec())
        .collect();
    for k in &keys {
        let back = key::decode(k).expect("valid key");
        assert_eq!(&key::encode(back.device, back.ts)[..], &k[..]);
    }
    m.insert("key_decode", keys);
    m.insert("wal_frames", vec![wal_frames()]);
    let headers: Vec<Vec<u8>> = [1u64, 1 << 40]
        .iter()
        .map(|n| segment::encode_header(*n))
        .collect();
    for (h, n) in headers.iter().zip([1u64, 1 << 40]) {
        let got = segment::decode_header(h, std::path::Path::new("seed.wal"));
        assert_eq!(got.expect("valid segment header"), n);
    }
    m.insert("wal_segment_header", headers);
    // A whole segment: header then frames, as the WAL writer lays it out.
    let mut seg = segment::encode_header(3);
    seg.extend_from_slice(&wal_frames());
    let scan =
        telestore_engine::wal::scan_segment(&seg, std::path::Path::new("seed.wal"), 3, true, 0)
            .expect("valid segment");
    assert!(matches!(
        scan.verdict,
        telestore_engine::wal::Verdict::Clean
    ));
    assert_eq!(scan.entries.len(), 3);
    m.insert("wal_segment", vec![seg]);
    m.insert("hfile_block", blocks());
    m.insert("columnar_block", columnar_bodies());
    let tomb = RangeTombstone {
        device: DeviceId(2),
        from: testkit::FLEET_T0_MS,
        to: testkit::FLEET_T0_MS + 5_000,
        seq: 10_000,
    };
    let images = [
        hfile_image(Compression::Zstd(3), true, &[tomb], BlockEncoding::Rows),
        hfile_image(Compression::None, false, &[], BlockEncoding::Rows),
        hfile_image(Compression::Snappy, true, &[], BlockEncoding::Rows),
        hfile_image(Compression::Zstd(1), true, &[tomb], BlockEncoding::Columnar),
    ];
    let mut trailers = Vec::new();
    let mut files = Vec::new();
    for img in &images {
        let t = &img[img.len() - sections::TRAILER_LEN..];
        sections::Trailer::decode(t, img.len() as u64).expect("valid trailer");
        trailers.push(t.to_vec());
        let mut f = vec![READINGS_FIELDS_WIDTH as u8];
        f.extend_from_slice(img);
        files.push(f);
    }
    m.insert("hfile_trailer", trailers);
    m.insert("hfile_file", files);
    m.insert("manifest_log", vec![manifest()]);
    m.insert("ingest_stream", ingest_streams());
    m.insert(
        "line_protocol",
        vec![
            b"readings,device=truck-1,fleet=East latitude=1.5,n=-3i,c=7u,ok=t 1700000000000\n\
              m,device=a\\ b s=\"x\",f=1e-3 -5\n# comment\nm f=2"
                .to_vec(),
        ],
    );
    m.insert("flight_docs", flight_docs());
    m.insert(
        "mqtt_payload",
        vec![
            br#"{"ts":"1700000000s","a":1.5,"b":-2,"c":-9007199254740993,"d":7,"e":18446744073709551615,"f":4000000000,"g":true}"#.to_vec(),
            b"site/eu/meter-1/readings/x".to_vec(),
        ],
    );
    m
}

/// A scan and a SQL ticket, a request document, a Flight SQL command;
/// each accepted by its decoder.
fn flight_docs() -> Vec<Vec<u8>> {
    use arrow_flight::sql::{CommandStatementQuery, ProstMessageExt};
    use prost::Message;
    use telestore_server::flight::ticket::{Request, Ticket};
    let scan = br#"{"kind":"scan","v":1,"table":"readings","from":0,"to":10,"fields":["velocity"],"devices":"truck-1","where":null,"start":"000000000000000000000000000000000000","end":"800000000000000000000000000000000000"}"#.to_vec();
    let sql = br#"{"kind":"sql","v":1,"sql":"SELECT 1"}"#.to_vec();
    let req =
        br#"{"table":"readings","from":"-1h","fields":"velocity","where":"fleet=East"}"#.to_vec();
    let any = CommandStatementQuery {
        query: "SELECT count(*) FROM readings".into(),
        transaction_id: None,
    }
    .as_any()
    .encode_to_vec();
    Ticket::parse(&scan).expect("valid scan ticket");
    Ticket::parse(&sql).expect("valid sql ticket");
    Request::parse_cmd(&req).expect("valid request");
    let q = telestore_server::flight::sql::statement_of(&any).expect("valid Flight SQL command");
    assert!(q.is_some());
    vec![scan, sql, req, any]
}

/// A handshake and two frames of 24-byte rows; a response of each kind.
fn ingest_streams() -> Vec<Vec<u8>> {
    use telestore_server::ingest::proto::{ErrorCode, FrameHeader, Handshake, Response, WireError};
    let mut s = Handshake {
        version: 1,
        durability: telestore_engine::Durability::Sync,
        table: "readings".into(),
        token: String::new(),
    }
    .encode();
    for b in 0..2u64 {
        let mut rows = Vec::new();
        for i in 0..3i64 {
            telestore_engine::schema::batch::push_row(
                &mut rows,
                b,
                testkit::FLEET_T0_MS + i,
                &7u64.to_le_bytes(),
            );
        }
        s.extend_from_slice(&FrameHeader::for_payload(b, 3, &rows).encode());
        s.extend_from_slice(&rows);
    }
    assert_eq!(telestore_server::fuzzing::fuzz_ingest_stream(&s), 2);
    let mut out = vec![s];
    for r in [
        Response::Ack {
            batch_id: 1,
            durability: telestore_engine::Durability::Async,
            first_seq: 5,
            rows: 3,
        },
        Response::Error(WireError::frame(ErrorCode::Busy, "retry").batch(2)),
    ] {
        out.push(r.encode());
    }
    out
}

/// With `FUZZ_CORPUS_DIR` set, write the valid inputs as a seed corpus
/// (`<dir>/<target>/seed-<n>`), so cargo-fuzz starts past the checksums.
fn export_corpus(valid: &BTreeMap<&'static str, Vec<Vec<u8>>>) {
    let Some(dir) = std::env::var_os("FUZZ_CORPUS_DIR") else {
        return;
    };
    for (name, inputs) in valid {
        let d = std::path::Path::new(&dir).join(name);
        std::fs::create_dir_all(&d).expect("create corpus dir");
        for (i, input) in inputs.iter().enumerate() {
            std::fs::write(d.join(format!("seed-{i}")), input).expect("write corpus file");
        }
    }
    println!("seed corpus written to {}", dir.to_string_lossy());
}

/// The engine's and the frontends' entry points.
fn targets() -> impl Iterator<Item = &'static telestore_engine::fuzzing::Target> {
    telestore_engine::fuzzing::TARGETS
        .iter()
        .chain(telestore_server::fuzzing::TARGETS)
}

#[test]
fn fuzz_entry_points_survive_random_and_mutated_inputs() {
    let seed = seed();
    let mut rng = SmallRng::seed_from_u64(seed);
    let valid = valid_inputs();
    export_corpus(&valid);
    for (name, f) in targets() {
        let seeds = valid
            .get(name)
            .unwrap_or_else(|| panic!("fuzz target {name} has no valid inputs in this test"));
        for input in seeds {
            let mut same = input.clone();
            reseal(name, &mut same);
            assert_eq!(&same, input, "{name}: resealing a valid input changed it");
            run(name, *f, input, seed);
            for i in 0..MUTANTS_PER_SEED {
                let mut m = mutate(&mut rng, input);
                if i % 2 == 1 {
                    reseal(name, &mut m);
                }
                run(name, *f, &m, seed);
            }
        }
        for _ in 0..RANDOM_INPUTS {
            let len = rng.gen_range(0..RANDOM_LEN_MAX);
            let mut input = vec![0u8; len];
            rng.fill(&mut input[..]);
            run(name, *f, &input, seed);
        }
    }
    for name in valid.keys() {
        assert!(
            targets().any(|(n, _)| n == name),
            "valid inputs for unknown target {name}"
        );
    }
}
