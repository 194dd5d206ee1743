//! Columnar data blocks (block kind 2): the same cells as a row-major
//! block, stored column by column. Spec: `formats/hfile.md` § Columnar
//! block body.
//!
//! ```text
//! body:  fields u16 | runs u32 | chunk(runs) | chunk(heads) | chunk(ts deltas)
//!        | chunk(seq) | chunk(kind) | fields × (type u8 | chunk(field))
//! chunk: codec u8 | outer u8 | inner_len u32 | stored_len u32 | stored bytes
//! ```
//!
//! Keys are stored as runs of one 10-byte key prefix (hash prefix and
//! device), each with its length and first reversed timestamp; the other
//! timestamps as differences from the previous row of the run. The first
//! cell of each run is also kept whole ("heads"), so `latest` reads a
//! device's newest row without decoding any column. f64 columns of
//! decimals take the decimal codec ([`super::decimal`]) where it is about
//! as small as pco; other numeric columns go through `pco`; a column of one
//! repeated value is stored once;
//! bytes that are all 0 or 1 are stored as bits. The table's compression
//! goes on top of a chunk only where it makes the chunk smaller. Decoding
//! gives back the row-major cells bit for bit.

use super::block::{compress, decompress};
use super::decimal;
use crate::cell::CELL_HEAD_LEN;
use crate::error::{Error, Result};
use crate::key::KEY_LEN;
use crate::schema::{Compression, FieldType};
use crate::util::bin::{BinReader, BinWriter};

/// Block kind of a columnar block (a row-major block is kind 1).
pub const BLOCK_KIND_COLUMNAR: u8 = 2;
/// Cells per columnar block for every byte of the table's
/// `block_size_bytes`: a columnar block closes at `block_size_bytes /
/// 16` cells (4,096 at the default 64 KiB), so the one block-size knob
/// moves both layouts the same way (numeric codecs need a few thousand
/// values per column to find its structure; see `benches/RESULTS.md`).
pub const COLUMNAR_BYTES_PER_ROW: usize = 16;

/// Cells at which the writer closes a columnar block of a table whose
/// blocks are `block_size_bytes`.
pub fn columnar_block_rows(block_size_bytes: usize) -> usize {
    (block_size_bytes / COLUMNAR_BYTES_PER_ROW).max(1)
}
/// Bytes of a chunk header.
#[cfg(any(test, feature = "testing"))]
pub const CHUNK_HEADER_LEN: usize = 10;
/// Key bytes that define a run: hash prefix and device id.
pub const RUN_KEY_LEN: usize = 10;
/// Bytes per run in the runs chunk: key prefix, length u32, first reversed ts u64.
pub const RUN_LEN: usize = RUN_KEY_LEN + 4 + 8;
/// The writer stores run heads when runs are at least this long on
/// average (`runs × 8 <= cells`).
pub const HEADS_MIN_RUN_ROWS: usize = 8;

/// Chunk codecs (what the stored bytes are, under the outer compression).
pub const CODEC_RAW: u8 = 0;
pub const CODEC_CONST: u8 = 1;
pub const CODEC_PCO: u8 = 2;
pub const CODEC_BITS: u8 = 3;
/// f64 fields only: decimal scaling + run-restarted differences +
/// bit-packing ([`super::decimal`]).
pub const CODEC_DECIMAL: u8 = 4;
/// The writer takes the decimal codec over pco while it is at most 9/8 of
/// pco's size: it decodes about 2.5× faster (`benches/RESULTS.md`).
pub const DECIMAL_OVER_PCO_MAX: (usize, usize) = (9, 8);

pub(super) const SEQ_OFFSET: usize = KEY_LEN;
pub(super) const KIND_OFFSET: usize = KEY_LEN + 8;

/// How a columnar block is encoded.
#[derive(Clone, Copy, Debug)]
pub struct ColumnarConfig {
    /// How hard `pco` works (0..=12): minor compactions use a lower level
    /// than major ones.
    pub pco_level: usize,
    /// Applied on top of each chunk where it pays.
    pub compression: Compression,
}

/// What one chunk of a block holds (for `describe` and the benchmarks).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg(any(test, feature = "testing"))]
pub struct ChunkStat {
    /// `runs`, `heads`, `ts`, `seq`, `kind` or `field i`.
    pub column: String,
    pub codec: u8,
    pub outer: u8,
    /// Bytes in the block, chunk header included.
    pub bytes: usize,
}

/// Encode `cells` (row-major, `cell_width` each, in cell order) of a table
/// whose fields have `types` into a columnar body appended to `out`.
pub fn encode(
    cells: &[u8],
    cell_width: usize,
    types: &[FieldType],
    cfg: ColumnarConfig,
    out: &mut Vec<u8>,
) -> Result<()> {
    assert_eq!(
        CELL_HEAD_LEN + types.iter().map(|t| t.width()).sum::<usize>(),
        cell_width,
        "field types do not add up to the cell width"
    );
    assert!(!cells.is_empty() && cells.len().is_multiple_of(cell_width));
    let (runs, deltas) = key_runs(cells, cell_width);
    let mut w = BinWriter::new();
    w.u16(types.len() as u16).u32((runs.len() / RUN_LEN) as u32);
    out.extend_from_slice(&w.into_inner());
    put_chunk(out, CODEC_RAW, &runs, cfg.compression)?;
    put_chunk(
        out,
        CODEC_RAW,
        &run_heads(cells, cell_width, &runs),
        cfg.compression,
    )?;
    let (codec, b) = numeric::<i64>(&deltas, 8, cfg.pco_level)?;
    put_chunk(out, codec, &b, cfg.compression)?;
    let seq = gather(cells, cell_width, SEQ_OFFSET, 8);
    put_typed(out, FieldType::U64, &seq, &runs, cfg)?;
    let kind = gather(cells, cell_width, KIND_OFFSET, 1);
    put_typed(out, FieldType::Bool, &kind, &runs, cfg)?;
    let mut offset = CELL_HEAD_LEN;
    for &t in types {
        out.push(t as u8);
        let col = gather(cells, cell_width, offset, t.width());
        put_typed(out, t, &col, &runs, cfg)?;
        offset += t.width();
    }
    Ok(())
}

/// The runs chunk's bytes and the in-run timestamp differences.
fn key_runs(cells: &[u8], width: usize) -> (Vec<u8>, Vec<u8>) {
    let mut runs: Vec<u8> = Vec::new();
    let mut deltas = Vec::with_capacity(cells.len() / width * 8);
    let mut run_start = 0usize;
    let mut count = 0u32;
    let mut prev_ts = 0u64;
    for c in cells.chunks_exact(width) {
        let ts = u64::from_be_bytes(c[RUN_KEY_LEN..KEY_LEN].try_into().expect("8 bytes"));
        let prefix: &[u8; RUN_KEY_LEN] = c[..RUN_KEY_LEN].try_into().expect("key prefix");
        if count > 0 && prefix[..] == runs[run_start..run_start + RUN_KEY_LEN] {
            count += 1;
            deltas.extend_from_slice(&ts.wrapping_sub(prev_ts).to_le_bytes());
        } else {
            if count > 0 {
                runs[run_start + RUN_KEY_LEN..run_start + RUN_KEY_LEN + 4]
                    .copy_from_slice(&count.to_le_bytes());
            }
            run_start = runs.len();
            runs.extend_from_slice(&c[..RUN_KEY_LEN]);
            runs.extend_from_slice(&[0; 4]);
            runs.extend_from_slice(&ts.to_le_bytes());
            count = 1;
        }
        prev_ts = ts;
    }
    runs[run_start + RUN_KEY_LEN..run_start + RUN_KEY_LEN + 4]
        .copy_from_slice(&count.to_le_bytes());
    (runs, deltas)
}

/// The heads chunk's inner bytes: for each run, its first cell without
/// the key (seq, kind, fields), so that the newest row of a device is
/// read without decoding a column; empty when runs are shorter than
/// [`HEADS_MIN_RUN_ROWS`] on average (the heads would cost too much).
fn run_heads(cells: &[u8], width: usize, runs: &[u8]) -> Vec<u8> {
    if runs.len() / RUN_LEN * HEADS_MIN_RUN_ROWS > cells.len() / width {
        return Vec::new();
    }
    heads_of(cells, width, runs)
}

/// Every run's first cell without its key.
fn heads_of(cells: &[u8], width: usize, runs: &[u8]) -> Vec<u8> {
    let n_runs = runs.len() / RUN_LEN;
    let mut out = Vec::with_capacity(n_runs * (width - KEY_LEN));
    let mut row = 0usize;
    for run in runs.chunks_exact(RUN_LEN) {
        out.extend_from_slice(&cells[row * width + KEY_LEN..(row + 1) * width]);
        row += run_count(run);
    }
    out
}

/// A run's cell count (the caller checked the run's length).
pub(super) fn run_count(run: &[u8]) -> usize {
    u32::from_le_bytes(
        run[RUN_KEY_LEN..RUN_KEY_LEN + 4]
            .try_into()
            .expect("4 bytes"),
    ) as usize
}

/// Encode one column of type `t` (`raw`: its values, little-endian, one
/// after the other) of a block whose runs chunk is `runs` and append it
/// as a chunk.
fn put_typed(
    out: &mut Vec<u8>,
    t: FieldType,
    raw: &[u8],
    runs: &[u8],
    cfg: ColumnarConfig,
) -> Result<()> {
    let (codec, b) = match t {
        FieldType::F64 => float64(raw, runs, cfg.pco_level)?,
        FieldType::F32 => numeric::<f32>(raw, 4, cfg.pco_level)?,
        FieldType::I64 => numeric::<i64>(raw, 8, cfg.pco_level)?,
        FieldType::I32 => numeric::<i32>(raw, 4, cfg.pco_level)?,
        FieldType::U64 => numeric::<u64>(raw, 8, cfg.pco_level)?,
        FieldType::U32 => numeric::<u32>(raw, 4, cfg.pco_level)?,
        FieldType::Bool => bytes(raw),
    };
    put_chunk(out, codec, &b, cfg.compression)
}

/// Fixed-width little-endian numbers `pco` can take.
trait Lane: pco::data_types::Number + bytemuck::Pod + Default {
    fn read(b: &[u8]) -> Self;
    fn write(self, b: &mut [u8]);
}

macro_rules! lane {
    ($($t:ty),*) => {$(
        impl Lane for $t {
            fn read(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().expect("lane width"))
            }
            fn write(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
lane!(f64, f32, i64, i32, u64, u32);

/// A numeric column (`raw`: values of `width` bytes): empty, one repeated
/// value, or pco — raw when pco would be bigger.
fn numeric<T: Lane>(raw: &[u8], width: usize, level: usize) -> Result<(u8, Vec<u8>)> {
    if let Some(c) = constant(raw, width) {
        return Ok(c);
    }
    let xs: Vec<T> = raw.chunks_exact(width).map(T::read).collect();
    let cfg = pco::ChunkConfig::default().with_compression_level(level);
    let b = pco::standalone::simple_compress(&xs, &cfg)
        .map_err(|e| Error::invalid("columnar block", format!("pco: {e}")))?;
    Ok(match b.len() < raw.len() {
        true => (CODEC_PCO, b),
        false => (CODEC_RAW, raw.to_vec()),
    })
}

/// An f64 column: as [`numeric`], but decimal when every value is a
/// decimal the codec keeps bit for bit and it is at most
/// [`DECIMAL_OVER_PCO_MAX`] of pco's size (and of the raw size).
fn float64(raw: &[u8], runs: &[u8], level: usize) -> Result<(u8, Vec<u8>)> {
    if let Some(c) = constant(raw, 8) {
        return Ok(c);
    }
    let (codec, other) = numeric::<f64>(raw, 8, level)?;
    let (num, den) = DECIMAL_OVER_PCO_MAX;
    Ok(match decimal::encode(raw, runs) {
        Some(d) if d.len() * den <= other.len() * num && d.len() <= raw.len() => (CODEC_DECIMAL, d),
        _ => (codec, other),
    })
}

/// A byte column: one repeated byte, bits when every byte is 0 or 1, raw.
fn bytes(raw: &[u8]) -> (u8, Vec<u8>) {
    if let Some(c) = constant(raw, 1) {
        return c;
    }
    if raw.iter().all(|&b| b <= 1) {
        let mut bits = vec![0u8; raw.len().div_ceil(8)];
        for (i, &b) in raw.iter().enumerate() {
            bits[i / 8] |= b << (i % 8);
        }
        return (CODEC_BITS, bits);
    }
    (CODEC_RAW, raw.to_vec())
}

/// `(CODEC_CONST, value)` when every value of `raw` is the same (or there
/// are none: `(CODEC_RAW, [])`).
fn constant(raw: &[u8], width: usize) -> Option<(u8, Vec<u8>)> {
    if raw.is_empty() {
        return Some((CODEC_RAW, Vec::new()));
    }
    let first = &raw[..width];
    raw.chunks_exact(width)
        .all(|v| v == first)
        .then(|| (CODEC_CONST, first.to_vec()))
}

/// Append a chunk: the table's compression on top only where smaller.
fn put_chunk(out: &mut Vec<u8>, codec: u8, inner: &[u8], outer: Compression) -> Result<()> {
    let mut packed = Vec::new();
    if outer != Compression::None && inner.len() > 16 {
        compress(inner, outer, &mut packed)?;
    }
    let (outer_code, stored) = match !packed.is_empty() && packed.len() < inner.len() {
        true => (outer.code(), &packed[..]),
        false => (0, inner),
    };
    let mut w = BinWriter::new();
    w.u8(codec)
        .u8(outer_code)
        .u32(inner.len() as u32)
        .u32(stored.len() as u32);
    out.extend_from_slice(&w.into_inner());
    out.extend_from_slice(stored);
    Ok(())
}

// ---- decoding ------------------------------------------------------------

/// One chunk as read: its codec and inner (decompressed) bytes.
pub(super) struct Chunk {
    pub(super) codec: u8,
    pub(super) inner: Vec<u8>,
}

pub(super) fn take_chunk(r: &mut BinReader<'_>, inner_max: usize) -> Result<Chunk> {
    let codec = r.u8()?;
    let outer = r.u8()?;
    let inner_len = r.u32()? as usize;
    let stored_len = r.u32()? as usize;
    if inner_len > inner_max {
        return Err(Error::decode(
            "columnar block",
            format!("chunk of {inner_len} bytes (at most {inner_max} expected)"),
        ));
    }
    let stored = r.take(stored_len)?;
    let inner = match outer {
        0 if stored_len == inner_len => stored.to_vec(),
        0 => {
            return Err(Error::decode(
                "columnar block",
                "stored length differs from inner",
            ))
        }
        c => decompress(c, stored, inner_len)?,
    };
    Ok(Chunk { codec, inner })
}

/// Decode a columnar body of `cells` cells of `cell_width` bytes into
/// row-major cells. Never panics on any input.
pub fn decode(body: &[u8], cells: usize, cell_width: usize) -> Result<Vec<u8>> {
    let mut out = vec![0u8; cells * cell_width];
    decode_into(body, cells, cell_width, &mut out)?;
    Ok(out)
}

/// Per-chunk statistics of a columnar body (for `bench ingest`'s column
/// table): decodes nothing but the chunk headers.
#[cfg(any(test, feature = "testing"))]
pub fn describe(body: &[u8]) -> Result<Vec<ChunkStat>> {
    let mut r = BinReader::new(body, "columnar block");
    let fields = r.u16()? as usize;
    r.u32()?;
    let mut stats = Vec::new();
    for i in 0..5 + fields {
        let mut column = match i {
            0 => "runs".to_string(),
            1 => "heads".to_string(),
            2 => "ts".to_string(),
            3 => "seq".to_string(),
            4 => "kind".to_string(),
            _ => format!("field {}", i - 5),
        };
        let at = r.remaining();
        if i >= 5 {
            let t = FieldType::from_code(r.u8()?)?;
            column.push_str(&format!(" ({})", t.name()));
        }
        let codec = r.u8()?;
        let outer = r.u8()?;
        r.u32()?;
        let stored = r.u32()? as usize;
        r.take(stored)?;
        stats.push(ChunkStat {
            column,
            codec,
            outer,
            bytes: at - r.remaining(),
        });
    }
    Ok(stats)
}

/// What precedes the columns: the field count, the runs (checked: at
/// least one, none empty, their counts adding up to the cell count) and
/// the heads (empty or one per run).
pub(super) struct Prologue {
    pub(super) fields: usize,
    pub(super) runs: Vec<u8>,
    pub(super) heads: Vec<u8>,
}

pub(super) fn take_prologue(r: &mut BinReader<'_>, cells: usize, width: usize) -> Result<Prologue> {
    let bad = |what: String| Error::decode("columnar block", what);
    if cells == 0 || width < CELL_HEAD_LEN {
        return Err(bad("no cells".into()));
    }
    let fields = r.u16()? as usize;
    let n = r.u32()? as usize;
    if n == 0 || n > cells {
        return Err(bad(format!("{n} runs for {cells} cells")));
    }
    let runs = take_chunk(r, n * RUN_LEN)?;
    if runs.codec != CODEC_RAW || runs.inner.len() != n * RUN_LEN {
        return Err(bad("runs chunk".into()));
    }
    let counts = runs.inner.chunks_exact(RUN_LEN).map(run_count);
    if counts.clone().any(|c| c == 0) || counts.sum::<usize>() != cells {
        return Err(bad("run lengths disagree with the cell count".into()));
    }
    let want = n * (width - KEY_LEN);
    let heads = take_chunk(r, want)?;
    if heads.codec != CODEC_RAW || !(heads.inner.is_empty() || heads.inner.len() == want) {
        return Err(bad("heads chunk".into()));
    }
    Ok(Prologue {
        fields,
        runs: runs.inner,
        heads: heads.inner,
    })
}

fn decode_into(body: &[u8], cells: usize, width: usize, out: &mut [u8]) -> Result<()> {
    let mut r = BinReader::new(body, "columnar block");
    let Prologue {
        fields,
        runs: runs_chunk,
        heads,
    } = take_prologue(&mut r, cells, width)?;
    let runs = runs_chunk.len() / RUN_LEN;
    let deltas = take_chunk(&mut r, (cells - runs) * 8)?;
    let deltas = values(deltas, FieldType::I64, cells - runs)?;
    put_keys(&runs_chunk, &deltas, width, out)?;
    let seq = take_chunk(&mut r, cells * 8)?;
    scatter(
        &values(seq, FieldType::U64, cells)?,
        8,
        SEQ_OFFSET,
        width,
        out,
    );
    let kind = take_chunk(&mut r, cells)?;
    scatter(
        &values(kind, FieldType::Bool, cells)?,
        1,
        KIND_OFFSET,
        width,
        out,
    );
    let mut offset = CELL_HEAD_LEN;
    for _ in 0..fields {
        let t = FieldType::from_code(r.u8()?)?;
        if offset + t.width() > width {
            return Err(Error::decode(
                "columnar block",
                "fields wider than the cell",
            ));
        }
        let c = take_chunk(&mut r, cells * t.width())?;
        scatter(
            &field_values(c, t, cells, &runs_chunk)?,
            t.width(),
            offset,
            width,
            out,
        );
        offset += t.width();
    }
    if offset != width {
        return Err(Error::decode(
            "columnar block",
            format!(
                "fields take {} bytes, cells have {}",
                offset - CELL_HEAD_LEN,
                width - CELL_HEAD_LEN
            ),
        ));
    }
    r.finish()?;
    if !heads.is_empty() && heads != heads_of(out, width, &runs_chunk) {
        return Err(Error::decode(
            "columnar block",
            "run heads disagree with the columns",
        ));
    }
    Ok(())
}

/// The first cell of every run of a columnar body, row-major and in cell
/// order (whole cells: the key rebuilt from the run), read from the runs
/// and heads chunks alone; `None` when the block stores no heads. Never
/// panics on any input.
pub fn run_head_cells(body: &[u8], cells: usize, width: usize) -> Result<Option<Vec<u8>>> {
    let mut r = BinReader::new(body, "columnar block");
    let p = take_prologue(&mut r, cells, width)?;
    if p.heads.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(p.heads.len() / (width - KEY_LEN) * width);
    for (run, head) in p
        .runs
        .chunks_exact(RUN_LEN)
        .zip(p.heads.chunks_exact(width - KEY_LEN))
    {
        out.extend_from_slice(&run[..RUN_KEY_LEN]);
        let first = u64::from_le_bytes(run[RUN_KEY_LEN + 4..].try_into().expect("8 bytes"));
        out.extend_from_slice(&first.to_be_bytes());
        out.extend_from_slice(head);
    }
    Ok(Some(out))
}

/// Write every cell's key from the runs (checked by [`take_prologue`])
/// and the timestamp differences.
fn put_keys(runs: &[u8], deltas: &[u8], width: usize, out: &mut [u8]) -> Result<()> {
    let mut cells = out.chunks_exact_mut(width);
    let mut d = deltas.chunks_exact(8);
    for run in runs.chunks_exact(RUN_LEN) {
        let mut ts = u64::from_le_bytes(run[RUN_KEY_LEN + 4..].try_into().expect("8 bytes"));
        for i in 0..run_count(run) {
            if i > 0 {
                let step = d
                    .next()
                    .ok_or_else(|| Error::decode("columnar block", "too few deltas"))?;
                ts = ts.wrapping_add(u64::from_le_bytes(step.try_into().expect("8 bytes")));
            }
            let c = cells.next().expect("run counts add up to the cells");
            c[..RUN_KEY_LEN].copy_from_slice(&run[..RUN_KEY_LEN]);
            c[RUN_KEY_LEN..KEY_LEN].copy_from_slice(&ts.to_be_bytes());
        }
    }
    Ok(())
}

/// Copy `n`-byte values into each cell at `offset` (widths 1, 4 and 8
/// get a loop of fixed-size copies, not a `memmove` call per value).
fn scatter(vals: &[u8], n: usize, offset: usize, width: usize, out: &mut [u8]) {
    match n {
        1 => scatter_n::<1>(vals, offset, width, out),
        4 => scatter_n::<4>(vals, offset, width, out),
        8 => scatter_n::<8>(vals, offset, width, out),
        _ => {
            for (v, c) in vals.chunks_exact(n).zip(out.chunks_exact_mut(width)) {
                c[offset..offset + n].copy_from_slice(v);
            }
        }
    }
}

fn scatter_n<const N: usize>(vals: &[u8], offset: usize, width: usize, out: &mut [u8]) {
    for (v, c) in vals.chunks_exact(N).zip(out.chunks_exact_mut(width)) {
        let v: &[u8; N] = v.try_into().expect("chunks of N");
        let dst: &mut [u8; N] = (&mut c[offset..offset + N]).try_into().expect("N bytes");
        *dst = *v;
    }
}

/// The `len`-byte values at `offset` of every cell, one after the other.
pub(super) fn gather(cells: &[u8], width: usize, offset: usize, len: usize) -> Vec<u8> {
    fn gather_n<const N: usize>(cells: &[u8], width: usize, offset: usize, out: &mut Vec<u8>) {
        for c in cells.chunks_exact(width) {
            let v: &[u8; N] = c[offset..offset + N].try_into().expect("N bytes");
            out.extend_from_slice(v);
        }
    }
    let mut out = Vec::with_capacity(len * (cells.len() / width));
    match len {
        1 => gather_n::<1>(cells, width, offset, &mut out),
        4 => gather_n::<4>(cells, width, offset, &mut out),
        8 => gather_n::<8>(cells, width, offset, &mut out),
        _ => {
            for c in cells.chunks_exact(width) {
                out.extend_from_slice(&c[offset..offset + len]);
            }
        }
    }
    out
}

/// The `cells` little-endian values of type `t` a chunk holds.
pub(super) fn values(c: Chunk, t: FieldType, cells: usize) -> Result<Vec<u8>> {
    let w = t.width();
    let bad = |what: &str| {
        Error::decode(
            "columnar block",
            format!("{what} chunk of a {} column", t.name()),
        )
    };
    match c.codec {
        CODEC_RAW if c.inner.len() == cells * w => Ok(c.inner),
        CODEC_CONST if c.inner.len() == w => Ok(c.inner.repeat(cells)),
        CODEC_BITS if t == FieldType::Bool && c.inner.len() == cells.div_ceil(8) => Ok((0..cells)
            .map(|i| (c.inner[i / 8] >> (i % 8)) & 1)
            .collect()),
        CODEC_PCO => match t {
            FieldType::F64 => unpco::<f64>(&c.inner, cells),
            FieldType::F32 => unpco::<f32>(&c.inner, cells),
            FieldType::I64 => unpco::<i64>(&c.inner, cells),
            FieldType::I32 => unpco::<i32>(&c.inner, cells),
            FieldType::U64 => unpco::<u64>(&c.inner, cells),
            FieldType::U32 => unpco::<u32>(&c.inner, cells),
            FieldType::Bool => Err(bad("pco")),
        },
        CODEC_RAW | CODEC_CONST | CODEC_BITS => Err(bad("mis-sized")),
        CODEC_DECIMAL => Err(bad("decimal")),
        other => Err(Error::decode(
            "columnar block",
            format!("unknown chunk codec {other}"),
        )),
    }
}

/// The `cells` values of a field chunk of type `t` in a block whose runs
/// chunk is `runs` (checked by [`take_prologue`]): [`values`], and the
/// decimal codec of f64 fields.
pub(super) fn field_values(c: Chunk, t: FieldType, cells: usize, runs: &[u8]) -> Result<Vec<u8>> {
    if c.codec != CODEC_DECIMAL || t != FieldType::F64 {
        return values(c, t, cells);
    }
    decode_lanes::<f64>(cells, |xs| decimal::decode(&c.inner, runs, xs))
}

fn unpco<T: Lane>(src: &[u8], n: usize) -> Result<Vec<u8>> {
    decode_lanes::<T>(n, |xs| pco_into(src, xs))
}

/// `n` values of `T` written by `decode` into a slice, as little-endian
/// bytes. A little-endian machine holds values as their little-endian
/// bytes: decode straight into the output when it is aligned for `T` (the
/// allocator's blocks are), else through a vector of `T`.
fn decode_lanes<T: Lane>(n: usize, decode: impl FnOnce(&mut [T]) -> Result<()>) -> Result<Vec<u8>> {
    let w = std::mem::size_of::<T>();
    let mut out = vec![0u8; n * w];
    if cfg!(target_endian = "little") {
        if let Ok(xs) = bytemuck::try_cast_slice_mut::<u8, T>(&mut out) {
            decode(xs)?;
            return Ok(out);
        }
    }
    let mut xs = vec![T::default(); n];
    decode(&mut xs)?;
    for (x, b) in xs.into_iter().zip(out.chunks_exact_mut(w)) {
        x.write(b);
    }
    Ok(out)
}

/// Decode a pco chunk of exactly `xs.len()` values into `xs`.
fn pco_into<T: Lane>(src: &[u8], xs: &mut [T]) -> Result<()> {
    let n = xs.len();
    let p = pco::standalone::simple_decompress_into(src, xs)
        .map_err(|e| Error::decode("columnar block", format!("pco: {e}")))?;
    if p.n_processed != n || !p.finished {
        return Err(Error::decode(
            "columnar block",
            format!("pco chunk of {} values, {n} expected", p.n_processed),
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "columnar_tests.rs"]
mod tests;
