//! Guards the columnar block format (HFile versions 2 and 3, block kind 2,
//! `formats/hfile.md` § Columnar block body) against drift: the fixtures in
//! `formats/fixtures/hfile_v2/` (written before decimal chunks, kept to
//! prove they still read) and `hfile_v3/` are decoded here by hand at the
//! documented offsets — trailer, info, index, block header, chunk framing,
//! runs, timestamp differences, constant / bit / raw / decimal chunks —
//! using `pco`, `zstd` and `crc32c` directly, never the telestore
//! decoders, and the
//! cells must equal what the generator wrote. A second set of checks makes
//! sure the crate reads the same bytes, mixed files and version 1 files
//! included, and that damage gives typed errors naming file and offset.
//!
//! Regenerate (only after a deliberate format change):
//! `cargo test -p telestore-engine --test it -- --ignored format_columnar::regenerate_columnar_fixtures`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use telestore_engine::cache::BlockCache;
use telestore_engine::cell::{self, CellKind, RangeTombstone};
use telestore_engine::error::Error;
use telestore_engine::hfile::writer::PCO_LEVEL_DEFAULT;
use telestore_engine::hfile::{HFileReader, HFileWriter, WriterOptions};
use telestore_engine::io::StdBackend;
use telestore_engine::key::{self, DeviceId};
use telestore_engine::schema::BlockEncoding;
use telestore_engine::{Compression, Field, FieldType, TableOptions, TableSchema};

const T0_MS: i64 = 1_796_083_200_000;
const CREATED_MS: i64 = T0_MS + 60_000;

/// The version the writer writes columnar files as.
const VERSION: u32 = 3;

fn fixtures(version: u32) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../formats/fixtures/hfile_v{version}"))
}

/// Every fixture file: version 2 (the first columnar files) and 3.
fn all() -> Vec<(u32, Fixture)> {
    vec![
        (2, small()),
        (2, fleet()),
        (3, small()),
        (3, fleet()),
        (3, sensor()),
    ]
}

/// One cell: `(device, ts, seq, kind, field bytes)`.
type Cell = (u64, i64, u64, u8, Vec<u8>);

/// A fixture: its file name, table, compression and cells in cell order.
struct Fixture {
    name: &'static str,
    schema: TableSchema,
    compression: Compression,
    cells: Vec<Cell>,
    tombstones: Vec<RangeTombstone>,
}

/// The cells of the version 1 fixture (`store_v1`, table `value: u64`),
/// columnar: device 42's put at T0+1s (seq 2), point delete at T0 (seq 3)
/// and the put it hides (seq 1), and one range tombstone.
fn small() -> Fixture {
    let schema = TableSchema::new(
        "readings",
        vec![Field::new("value", FieldType::U64)],
        TableOptions::default(),
    )
    .unwrap();
    let cells = vec![
        (42, T0_MS + 1_000, 2, 1, 8u64.to_le_bytes().to_vec()),
        (42, T0_MS, 3, 2, vec![0; 8]),
        (42, T0_MS, 1, 1, 7u64.to_le_bytes().to_vec()),
    ];
    let tombstones = vec![RangeTombstone {
        device: DeviceId(42),
        from: T0_MS - 10_000,
        to: T0_MS - 1,
        seq: 4,
    }];
    Fixture {
        name: "small.hfile",
        schema,
        compression: Compression::None,
        cells,
        tombstones,
    }
}

/// Three trucks × 300 readings every 10 s: a temperature at one decimal
/// (pco), a counter (pco), a flag (bits), under zstd where it pays.
fn fleet() -> Fixture {
    let schema = TableSchema::new(
        "fleet",
        vec![
            Field::new("temp", FieldType::F64),
            Field::new("count", FieldType::U32),
            Field::new("ok", FieldType::Bool),
        ],
        TableOptions::default(),
    )
    .unwrap();
    let mut cells = Vec::new();
    let mut seq = 0;
    for i in 0..300i64 {
        for d in [7u64, 8, 9] {
            seq += 1;
            let temp = ((200 + (i * 7 + d as i64 * 13) % 50) as f64) / 10.0;
            let mut f = temp.to_le_bytes().to_vec();
            f.extend_from_slice(&((i as u32) * 3 + d as u32).to_le_bytes());
            f.push(((i + d as i64) % 3 == 0) as u8);
            cells.push((d, T0_MS + i * 10_000, seq, 1, f));
        }
    }
    cells.sort_by_key(|c| (key::encode(DeviceId(c.0), c.1), std::cmp::Reverse(c.2)));
    Fixture {
        name: "fleet.hfile",
        schema,
        compression: Compression::Zstd(3),
        cells,
        tombstones: vec![],
    }
}

/// Two trucks × 400 readings every 10 s as sensors report them: a
/// latitude at 5 decimals and an elevation in whole metres (decimal
/// chunks), and a reading at full precision (pco or raw).
fn sensor() -> Fixture {
    let schema = TableSchema::new(
        "sensor",
        vec![
            Field::new("latitude", FieldType::F64),
            Field::new("elevation", FieldType::F64),
            Field::new("raw", FieldType::F64),
        ],
        TableOptions::default(),
    )
    .unwrap();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut cells = Vec::new();
    let mut seq = 0;
    for d in [11u64, 12] {
        let (mut lat, mut elev) = (4_512_345i64 + d as i64 * 100_000, 300i64);
        for i in 0..400i64 {
            seq += 1;
            lat += (next() % 201) as i64 - 100;
            elev += (next() % 11) as i64 - 5;
            let mut f = (lat as f64 / 1e5).to_le_bytes().to_vec();
            f.extend_from_slice(&(elev as f64).to_le_bytes());
            f.extend_from_slice(&((next() >> 11) as f64 / (1u64 << 53) as f64).to_le_bytes());
            cells.push((d, T0_MS + i * 10_000, seq, 1, f));
        }
    }
    cells.sort_by_key(|c| (key::encode(DeviceId(c.0), c.1), std::cmp::Reverse(c.2)));
    Fixture {
        name: "sensor.hfile",
        schema,
        compression: Compression::Zstd(3),
        cells,
        tombstones: vec![],
    }
}

fn raw_cell(c: &Cell) -> Vec<u8> {
    let mut out = Vec::new();
    let kind = CellKind::from_code(c.3).unwrap();
    cell::push(&mut out, &key::encode(DeviceId(c.0), c.1), c.2, kind, &c.4);
    out
}

/// Write `f` with the crate's writer; `mixed` makes every other block
/// row-major (blocks of 100 cells).
fn write(f: &Fixture, path: &Path, encoding: BlockEncoding, mixed: bool) {
    let mut o = WriterOptions::for_table(1, &f.schema, f.cells.len(), CREATED_MS);
    o.compression = f.compression;
    o.encoding = encoding;
    o.pco_level = PCO_LEVEL_DEFAULT;
    let mut w = HFileWriter::create(&StdBackend, path, o).unwrap();
    for (i, c) in f.cells.iter().enumerate() {
        if mixed && i % 100 == 0 {
            let e = [BlockEncoding::Columnar, BlockEncoding::Rows][(i / 100) % 2];
            w.set_block_encoding(e).unwrap();
        }
        w.add(&raw_cell(c)).unwrap();
    }
    w.finish(&f.tombstones).unwrap();
}

#[test]
#[ignore = "writes formats/fixtures/hfile_v3/; run on purpose after a format change"]
fn regenerate_columnar_fixtures() {
    let dir = fixtures(VERSION);
    std::fs::create_dir_all(&dir).unwrap();
    for f in [small(), fleet(), sensor()] {
        std::fs::remove_file(dir.join(f.name)).ok();
        write(&f, &dir.join(f.name), BlockEncoding::Columnar, false);
    }
}

// ------------------------------------------------------- hand decoder

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// A chunk: `codec u8 | outer u8 | inner_len u32 | stored_len u32 | bytes`.
/// Returns the codec, the inner bytes and the offset after it.
fn hand_chunk(b: &[u8], at: usize) -> (u8, Vec<u8>, usize) {
    let (codec, outer) = (b[at], b[at + 1]);
    let (inner_len, stored_len) = (u32_at(b, at + 2) as usize, u32_at(b, at + 6) as usize);
    let stored = &b[at + 10..at + 10 + stored_len];
    let inner = match outer {
        0 => stored.to_vec(),
        1 => snap::raw::Decoder::new().decompress_vec(stored).unwrap(),
        2 => zstd::bulk::decompress(stored, inner_len).unwrap(),
        o => panic!("outer {o}"),
    };
    assert_eq!(inner.len(), inner_len);
    (codec, inner, at + 10 + stored_len)
}

/// `n` little-endian values of `width` bytes from a chunk of a block whose
/// runs have `runs` cells (pco through the pco crate itself).
fn hand_values(
    codec: u8,
    inner: &[u8],
    n: usize,
    width: usize,
    ty: u8,
    runs: &[usize],
) -> Vec<Vec<u8>> {
    let flat: Vec<u8> = match codec {
        0 => inner.to_vec(),
        4 => {
            assert_eq!(ty, 1, "decimal chunks hold f64 fields");
            le(hand_decimal(inner, runs), |x| x.to_le_bytes().to_vec())
        }
        1 => inner.repeat(n),
        3 => (0..n).map(|i| (inner[i / 8] >> (i % 8)) & 1).collect(),
        2 => match ty {
            1 => le(
                pco::standalone::simple_decompress::<f64>(inner).unwrap(),
                |x| x.to_le_bytes().to_vec(),
            ),
            3 => le(
                pco::standalone::simple_decompress::<i64>(inner).unwrap(),
                |x| x.to_le_bytes().to_vec(),
            ),
            5 => le(
                pco::standalone::simple_decompress::<u64>(inner).unwrap(),
                |x| x.to_le_bytes().to_vec(),
            ),
            6 => le(
                pco::standalone::simple_decompress::<u32>(inner).unwrap(),
                |x| x.to_le_bytes().to_vec(),
            ),
            t => panic!("type {t} not in the fixtures"),
        },
        c => panic!("codec {c}"),
    };
    assert_eq!(flat.len(), n * width);
    flat.chunks(width).map(<[u8]>::to_vec).collect()
}

/// A decimal chunk, bit by bit: `e | fw | dw | first i64 | firsts | deltas`.
fn hand_decimal(b: &[u8], runs: &[usize]) -> Vec<f64> {
    let (e, fw, dw) = (b[0] as usize, b[1] as usize, b[2] as usize);
    let firsts_len = ((runs.len() - 1) * fw).div_ceil(8);
    let n: usize = runs.iter().sum();
    assert_eq!(
        b.len(),
        11 + firsts_len + ((n - runs.len()) * dw).div_ceil(8)
    );
    // Value k of a stream: bits k*w .. (k+1)*w, bit j is bit j%8 of byte j/8.
    let take = |stream: &[u8], k: usize, w: usize| -> i64 {
        let z = (0..w).fold(0u64, |z, j| {
            let bit = k * w + j;
            z | (u64::from(stream[bit / 8] >> (bit % 8) & 1) << j)
        });
        (z >> 1) as i64 ^ -((z & 1) as i64)
    };
    let (firsts, deltas) = b[11..].split_at(firsts_len);
    let mut first = i64::from_le_bytes(b[3..11].try_into().unwrap());
    let (mut out, mut k) = (Vec::new(), 0);
    for (r, &count) in runs.iter().enumerate() {
        if r > 0 {
            first += take(firsts, r - 1, fw);
        }
        let mut i = first;
        out.push(i as f64 / 10f64.powi(e as i32));
        for _ in 1..count {
            i += take(deltas, k, dw);
            k += 1;
            out.push(i as f64 / 10f64.powi(e as i32));
        }
    }
    out
}

fn le<T>(xs: Vec<T>, f: impl Fn(T) -> Vec<u8>) -> Vec<u8> {
    xs.into_iter().flat_map(f).collect()
}

/// Decode a whole version 2 or 3 file by hand: the cells of every block,
/// and the codec of every chunk.
fn hand_decode_codecs(b: &[u8], version: u32) -> (Vec<Cell>, Vec<u8>) {
    let t = b.len() - 76;
    assert_eq!(&b[t..t + 4], b"TSHF");
    assert_eq!(u32_at(b, t + 4), version);
    assert_eq!(u32_at(b, t + 72), crc32c::crc32c(&b[t..t + 72]));
    let (index_at, info_at, info_len) = (
        u64_at(b, t + 8) as usize,
        u64_at(b, t + 40) as usize,
        u32_at(b, t + 48),
    );
    assert_eq!(info_len, 110, "info section of versions 2 and 3");
    let info = &b[info_at..info_at + 110];
    assert_eq!(info[109], 1, "encoding columnar");
    let fields_width = u32_at(info, 8) as usize;
    let mut out = Vec::new();
    let mut codecs = Vec::new();
    for i in 0..u32_at(b, index_at) as usize {
        let e = &b[index_at + 4 + 56 * i..index_at + 4 + 56 * (i + 1)];
        let (off, len, cells) = (
            u64_at(e, 36) as usize,
            u32_at(e, 44) as usize,
            u32_at(e, 52) as usize,
        );
        let blk = &b[off..off + len];
        assert_eq!(&blk[0..4], b"TSBK");
        assert_eq!((blk[4], blk[5]), (2, 0), "kind 2 (columnar), codec 0");
        assert_eq!(u32_at(blk, 8) as usize, cells);
        assert_eq!(
            u32_at(blk, 12) as usize,
            cells * (27 + fields_width),
            "raw_len"
        );
        assert_eq!(u32_at(blk, 16) as usize, len - 24, "body_len");
        let crc = crc32c::crc32c_append(crc32c::crc32c(&blk[..20]), &blk[24..]);
        assert_eq!(u32_at(blk, 20), crc);
        out.extend(hand_block(&blk[24..], cells, &mut codecs));
    }
    (out, codecs)
}

fn hand_block(body: &[u8], n: usize, codecs: &mut Vec<u8>) -> Vec<Cell> {
    let (fields, runs) = (u16_at(body, 0) as usize, u32_at(body, 2) as usize);
    let (codec, run_bytes, at) = hand_chunk(body, 6);
    assert_eq!(
        (codec, run_bytes.len()),
        (0, runs * 22),
        "runs: raw, 22 bytes each"
    );
    codecs.push(codec);
    let lens: Vec<usize> = run_bytes
        .chunks(22)
        .map(|r| u32_at(r, 10) as usize)
        .collect();
    let (codec, heads, at) = hand_chunk(body, at);
    assert_eq!(codec, 0, "heads: raw");
    codecs.push(codec);
    let (codec, deltas, at) = hand_chunk(body, at);
    let deltas = hand_values(codec, &deltas, n - runs, 8, 3, &lens);
    codecs.push(codec);
    let (codec, seqs, at) = hand_chunk(body, at);
    let seqs = hand_values(codec, &seqs, n, 8, 5, &lens);
    codecs.push(codec);
    let (codec, kinds, mut at) = hand_chunk(body, at);
    let kinds = hand_values(codec, &kinds, n, 1, 7, &lens);
    codecs.push(codec);
    let mut cols = Vec::new();
    for _ in 0..fields {
        let ty = body[at];
        let width = match ty {
            1 | 3 | 5 => 8,
            2 | 4 | 6 => 4,
            _ => 1,
        };
        let (codec, inner, next) = hand_chunk(body, at + 1);
        cols.push(hand_values(codec, &inner, n, width, ty, &lens));
        codecs.push(codec);
        at = next;
    }
    assert_eq!(at, body.len(), "chunks fill the body");
    let mut out: Vec<Cell> = Vec::new();
    let mut d = deltas.iter();
    let head_len = 9 + cols.iter().map(|c| c[0].len()).sum::<usize>();
    assert!(
        heads.is_empty() || heads.len() == runs * head_len,
        "heads: none or one per run"
    );
    for (j, r) in run_bytes.chunks(22).enumerate() {
        let device = u64::from_be_bytes(r[2..10].try_into().unwrap());
        assert_eq!(
            u16::from_be_bytes([r[0], r[1]]),
            key::prefix(DeviceId(device))
        );
        let count = u32_at(r, 10) as usize;
        let mut rev = u64_at(r, 14);
        for j in 0..count {
            if j > 0 {
                rev = rev.wrapping_add(u64_at(d.next().unwrap(), 0));
            }
            let i = out.len();
            let f: Vec<u8> = cols.iter().flat_map(|c| c[i].clone()).collect();
            let ts = key::unreverse_ts(rev);
            out.push((device, ts, u64_at(&seqs[i], 0), kinds[i][0], f));
        }
        if !heads.is_empty() {
            // The run's first cell without its key: seq | kind | fields.
            let h = &heads[j * head_len..(j + 1) * head_len];
            let first = &out[out.len() - count];
            assert_eq!(
                (u64_at(h, 0), h[8], &h[9..]),
                (first.2, first.3, &first.4[..])
            );
        }
    }
    assert_eq!(out.len(), n);
    out
}

// ------------------------------------------------------------- checks

#[test]
fn columnar_fixtures_follow_the_spec() {
    // Codecs: 0 raw, 1 const, 2 pco, 3 bits, 4 decimal; runs, heads, ts,
    // seq, kind, fields.
    let small: &[u8] = &[0, 0, 0, 0, 0, 0];
    let want: [&[u8]; 5] = [
        small,
        &[0, 0, 1, 2, 1, 2, 2, 3],
        small,
        // temp's period of 50 values is pco's: decimal would be bigger.
        &[0, 0, 1, 2, 1, 2, 2, 3],
        &[0, 0, 1, 2, 1, 4, 4, 2],
    ];
    for ((version, f), want) in all().into_iter().zip(want) {
        let b = std::fs::read(fixtures(version).join(f.name)).unwrap();
        let (cells, codecs) = hand_decode_codecs(&b, version);
        assert_eq!(cells, f.cells, "v{version} {}", f.name);
        assert_eq!(codecs, want, "v{version} {}", f.name);
    }
}

#[test]
fn the_writer_reproduces_the_small_fixture() {
    // Every chunk of the small fixture is raw or constant (pco would be
    // bigger), so its bytes depend on no codec's version; the version 2
    // file differs from it in the trailer's version and CRC alone.
    let f = small();
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("f.hfile");
    write(&f, &p, BlockEncoding::Columnar, false);
    let now = std::fs::read(&p).unwrap();
    assert!(now == std::fs::read(fixtures(VERSION).join(f.name)).unwrap());
    let v2 = std::fs::read(fixtures(2).join(f.name)).unwrap();
    let differ: Vec<usize> = (0..now.len()).filter(|&i| now[i] != v2[i]).collect();
    let t = now.len() - 76;
    assert!(
        differ.iter().all(|&i| i == t + 4 || i >= t + 72),
        "{differ:?}"
    );
}

fn open(p: &Path, f: &Fixture) -> telestore_engine::Result<HFileReader> {
    let cache = Arc::new(BlockCache::new(1 << 20));
    let (w, l) = (f.schema.fields_width(), f.schema.layout_id());
    HFileReader::open_checked(p, 1, w, Some(l), cache)
}

fn crate_cells(r: &HFileReader) -> telestore_engine::Result<Vec<Cell>> {
    let mut out = Vec::new();
    for i in 0..r.block_count() {
        for c in r.block(i)?.chunks_exact(r.cell_width()) {
            let c = cell::CellRef(c);
            out.push((
                c.device().0,
                c.ts(),
                c.seq(),
                c.kind() as u8,
                c.fields().to_vec(),
            ));
        }
    }
    Ok(out)
}

#[test]
fn columnar_fixtures_are_accepted_by_the_crate() {
    for (version, f) in all() {
        let p = fixtures(version).join(f.name);
        let r = open(&p, &f).unwrap();
        assert_eq!(r.info().encoding, BlockEncoding::Columnar);
        assert_eq!(crate_cells(&r).unwrap(), f.cells, "{}", f.name);
        assert_eq!(r.range_tombstones(), &f.tombstones[..]);
        // The filter of a columnar file holds devices, not keys: a key of
        // a device in the file may be present, one of another may not.
        let k = key::encode(DeviceId(f.cells[0].0), 12345);
        assert!(r.may_contain_key(&k));
        assert!(r.may_contain_device(DeviceId(f.cells[0].0)));
    }
}

#[test]
fn mixed_files_read_like_one_encoding() {
    let f = fleet();
    let tmp = tempfile::tempdir().unwrap();
    for (encoding, mixed) in [
        (BlockEncoding::Rows, false),
        (BlockEncoding::Columnar, true),
        (BlockEncoding::Rows, true),
    ] {
        let p = tmp.path().join(format!("{encoding}-{mixed}.hfile"));
        write(&f, &p, encoding, mixed);
        let r = open(&p, &f).unwrap();
        assert_eq!(
            crate_cells(&r).unwrap(),
            f.cells,
            "{encoding} mixed {mixed}"
        );
        let b = std::fs::read(&p).unwrap();
        let version = u32_at(&b, b.len() - 72);
        assert_eq!(
            version,
            if mixed { VERSION } else { 1 },
            "{encoding} mixed {mixed}"
        );
        if mixed {
            let kinds: Vec<u8> = r.index().iter().map(|e| b[e.offset as usize + 4]).collect();
            assert!(kinds.contains(&1) && kinds.contains(&2), "{kinds:?}");
        }
    }
}

#[test]
fn damaged_columnar_blocks_are_typed_errors() {
    let f = fleet();
    let src = std::fs::read(fixtures(VERSION).join(f.name)).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("0000000000000009.hfile");
    let first = {
        std::fs::write(&p, &src).unwrap();
        open(&p, &f).unwrap().index()[0]
    };
    // A flipped bit in the body of the block: checksum error at the block.
    let mut b = src.clone();
    b[first.offset as usize + 60] ^= 0x04;
    std::fs::write(&p, &b).unwrap();
    let r = open(&p, &f).unwrap();
    assert!(crate_cells(&r).is_err());
    match r.block(0) {
        Err(Error::ChecksumMismatch { file, offset, .. }) => {
            assert_eq!((file, offset), (p.clone(), first.offset))
        }
        other => panic!("{other:?}"),
    }
    // The body changed and its CRCs fixed (block and index copy): a body
    // the decoder refuses is Corrupt at the block, never a panic.
    for at in [24usize, 26, 30, 36, 40] {
        let mut b = src.clone();
        let o = first.offset as usize;
        b[o + at] ^= 0xff;
        let crc = crc32c::crc32c_append(
            crc32c::crc32c(&b[o..o + 20]),
            &b[o + 24..o + first.len as usize],
        );
        b[o + 20..o + 24].copy_from_slice(&crc.to_le_bytes());
        fix_index_crc(&mut b, 0, crc);
        std::fs::write(&p, &b).unwrap();
        let r = open(&p, &f).unwrap();
        match r.block(0) {
            Err(Error::Corrupt { file, offset, .. }) => {
                assert_eq!((file, offset), (p.clone(), first.offset), "byte {at}")
            }
            other => panic!("byte {at}: {other:?}"),
        }
    }
}

/// Set index entry `i`'s crc and recompute the index and trailer CRCs.
fn fix_index_crc(b: &mut [u8], i: usize, crc: u32) {
    let t = b.len() - 76;
    let (index_at, index_len) = (u64_at(b, t + 8) as usize, u32_at(b, t + 16) as usize);
    let e = index_at + 4 + 56 * i;
    b[e + 48..e + 52].copy_from_slice(&crc.to_le_bytes());
    let c = crc32c::crc32c(&b[index_at..index_at + index_len]);
    b[t + 20..t + 24].copy_from_slice(&c.to_le_bytes());
    let c = crc32c::crc32c(&b[t..t + 72]);
    b[t + 72..t + 76].copy_from_slice(&c.to_le_bytes());
}

/// A block's columns are decoded once even when several readers (a scan
/// and the read-ahead workers) ask for them at the same moment: every
/// reader gets the one decoded copy, the one the cache holds.
#[test]
fn concurrent_readers_of_a_block_share_one_decode() {
    let f = fleet();
    let p = fixtures(VERSION).join(f.name);
    let slots = telestore_engine::hfile::columns::slots_of(&f.schema, &[0, 1, 2]).unwrap();
    for round in 0..20 {
        let r = Arc::new(open(&p, &f).unwrap());
        for block in 0..r.block_count() {
            let go = Arc::new(std::sync::Barrier::new(8));
            let got: Vec<_> = (0..8)
                .map(|_| {
                    let (r, go, slots) = (r.clone(), go.clone(), slots.clone());
                    std::thread::spawn(move || {
                        go.wait();
                        r.block_columns(block, &slots, true).unwrap()
                    })
                })
                .collect::<Vec<_>>()
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect();
            for c in &got[1..] {
                for (a, b) in c.fields.iter().zip(&got[0].fields) {
                    assert!(
                        Arc::ptr_eq(a, b),
                        "round {round} block {block}: decoded twice"
                    );
                }
                let (a, b) = (c.seq.as_ref().unwrap(), got[0].seq.as_ref().unwrap());
                assert!(
                    Arc::ptr_eq(a, b),
                    "round {round} block {block}: seq decoded twice"
                );
            }
        }
    }
}
