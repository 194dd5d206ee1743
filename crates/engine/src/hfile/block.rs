//! Data blocks. Spec: `formats/hfile.md` § Data block.
//!
//! ```text
//! 0  magic      "TSBK"
//! 4  kind       u8   1 = data (row-major), 2 = columnar
//! 5  codec      u8   0 none, 1 snappy, 2 zstd
//! 6  reserved   u16  zero
//! 8  cells      u32  cell count
//! 12 raw_len    u32  uncompressed body length (= cells × cell width)
//! 16 body_len   u32  stored body length
//! 20 crc        u32  CRC32C of bytes 0..20 and the stored body
//! 24 body
//! ```

pub use super::columnar::BLOCK_KIND_COLUMNAR;
use super::columnar::{self, ColumnarConfig};
use super::columns::{self, BlockParts, Want};
use crate::cell::{CellKind, CELL_HEAD_LEN};
use crate::error::{Error, Result};
use crate::schema::{Compression, FieldType};
use crate::util::bin::{crc, le_u32};
use std::cell::RefCell;

pub const BLOCK_MAGIC: [u8; 4] = *b"TSBK";
pub const BLOCK_HEADER_LEN: usize = 24;
pub const BLOCK_KIND_DATA: u8 = 1;
/// Largest uncompressed body a reader accepts.
pub const BLOCK_RAW_MAX: usize = 32 << 20;

/// Parsed block header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockHeader {
    /// [`BLOCK_KIND_DATA`] (row-major) or [`BLOCK_KIND_COLUMNAR`].
    pub kind: u8,
    pub codec: u8,
    pub cells: u32,
    pub raw_len: u32,
    pub body_len: u32,
    pub crc: u32,
}

thread_local! {
    static ZSTD_C: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static ZSTD_D: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// Compress `raw` (whole cells) into a complete block appended to `out`.
pub fn encode(raw: &[u8], cells: u32, codec: Compression, out: &mut Vec<u8>) -> Result<()> {
    let start = out.len();
    out.extend_from_slice(&[0u8; BLOCK_HEADER_LEN]);
    compress(raw, codec, out)?;
    seal(out, start, BLOCK_KIND_DATA, codec.code(), cells, raw.len());
    Ok(())
}

/// Encode `raw` (whole cells of `cell_width`, fields of `types`) into a
/// complete columnar block appended to `out` ([`columnar`]).
pub fn encode_columnar(
    raw: &[u8],
    cells: u32,
    cell_width: usize,
    types: &[FieldType],
    cfg: ColumnarConfig,
    out: &mut Vec<u8>,
) -> Result<()> {
    let start = out.len();
    out.extend_from_slice(&[0u8; BLOCK_HEADER_LEN]);
    columnar::encode(raw, cell_width, types, cfg, out)?;
    seal(out, start, BLOCK_KIND_COLUMNAR, 0, cells, raw.len());
    Ok(())
}

/// Append `raw` compressed with `codec` to `out`.
pub(crate) fn compress(raw: &[u8], codec: Compression, out: &mut Vec<u8>) -> Result<()> {
    match codec {
        Compression::None => out.extend_from_slice(raw),
        Compression::Snappy => {
            let mut buf = vec![0u8; snap::raw::max_compress_len(raw.len())];
            let n = snap::raw::Encoder::new()
                .compress(raw, &mut buf)
                .map_err(|e| Error::invalid("block", format!("snappy: {e}")))?;
            out.extend_from_slice(&buf[..n]);
        }
        Compression::Zstd(level) => ZSTD_C.with(|c| -> Result<()> {
            let mut c = c.borrow_mut();
            if c.is_none() {
                *c = Some(zstd::bulk::Compressor::new(level).map_err(zstd_err)?);
            }
            let comp = c.as_mut().expect("initialised above");
            comp.set_compression_level(level).map_err(zstd_err)?;
            let v = comp.compress(raw).map_err(zstd_err)?;
            out.extend_from_slice(&v);
            Ok(())
        })?,
    }
    Ok(())
}

/// Fill in the header of the block that starts at `out[start]` and whose
/// body is the rest of `out`: kind, codec, counts and the CRC.
pub(crate) fn seal(out: &mut [u8], start: usize, kind: u8, codec: u8, cells: u32, raw_len: usize) {
    let body_len = (out.len() - start - BLOCK_HEADER_LEN) as u32;
    let h = &mut out[start..start + BLOCK_HEADER_LEN];
    h[0..4].copy_from_slice(&BLOCK_MAGIC);
    h[4] = kind;
    h[5] = codec;
    h[8..12].copy_from_slice(&cells.to_le_bytes());
    h[12..16].copy_from_slice(&(raw_len as u32).to_le_bytes());
    h[16..20].copy_from_slice(&body_len.to_le_bytes());
    let c = crc32c::crc32c_append(
        crc(&out[start..start + 20]),
        &out[start + BLOCK_HEADER_LEN..],
    );
    out[start + 20..start + 24].copy_from_slice(&c.to_le_bytes());
}

fn zstd_err(e: std::io::Error) -> Error {
    Error::invalid("block", format!("zstd: {e}"))
}

/// Parse and check a block header (not the body checksum).
pub fn decode_header(b: &[u8]) -> Result<BlockHeader> {
    if b.len() < BLOCK_HEADER_LEN {
        return Err(Error::decode("block header", format!("{} bytes", b.len())));
    }
    if b[0..4] != BLOCK_MAGIC {
        return Err(Error::decode("block header", "bad magic"));
    }
    if b[4] != BLOCK_KIND_DATA && b[4] != BLOCK_KIND_COLUMNAR {
        return Err(Error::decode("block header", format!("kind {}", b[4])));
    }
    let h = BlockHeader {
        kind: b[4],
        codec: b[5],
        cells: le_u32(b, 8),
        raw_len: le_u32(b, 12),
        body_len: le_u32(b, 16),
        crc: le_u32(b, 20),
    };
    if h.raw_len as usize > BLOCK_RAW_MAX {
        return Err(Error::decode(
            "block header",
            format!("raw length {}", h.raw_len),
        ));
    }
    Ok(h)
}

/// Outcome of [`decode`] for checksum failures (so callers can report
/// expected vs actual).
#[derive(Debug)]
pub enum BlockError {
    Checksum { expected: u32, actual: u32 },
    Other(Error),
}

/// Check a block's header, length and CRC; its header and body.
fn verified(b: &[u8]) -> std::result::Result<(BlockHeader, &[u8]), BlockError> {
    let h = decode_header(b).map_err(BlockError::Other)?;
    let body_end = BLOCK_HEADER_LEN + h.body_len as usize;
    if body_end != b.len() {
        return Err(BlockError::Other(Error::decode(
            "block",
            format!("body of {} bytes in a {} byte block", h.body_len, b.len()),
        )));
    }
    let body = &b[BLOCK_HEADER_LEN..body_end];
    let actual = crc32c::crc32c_append(crc(&b[..20]), body);
    if actual != h.crc {
        return Err(BlockError::Checksum {
            expected: h.crc,
            actual,
        });
    }
    Ok((h, body))
}

/// Verify a block and, when it is columnar and stores run heads, return
/// the first cell of each run (whole cells, in cell order) without
/// decoding a column; `None` otherwise. Never panics on any input.
pub fn decode_heads(
    b: &[u8],
    cell_width: usize,
) -> std::result::Result<Option<Vec<u8>>, BlockError> {
    let (h, body) = verified(b)?;
    if h.kind != BLOCK_KIND_COLUMNAR {
        return Ok(None);
    }
    let heads =
        columnar::run_head_cells(body, h.cells as usize, cell_width).map_err(BlockError::Other)?;
    if let Some(c) = &heads {
        let n = (c.len() / cell_width) as u32;
        check_cells(c, n, cell_width).map_err(BlockError::Other)?;
    }
    Ok(heads)
}

/// Verify a block and decode the parts `want` names as columns ([`columns::decode_parts`]); a row-major block is
/// decompressed and its columns gathered. Never panics on any input.
pub fn decode_parts(
    b: &[u8],
    cell_width: usize,
    want: Want<'_>,
) -> std::result::Result<BlockParts, BlockError> {
    let (h, body) = verified(b)?;
    if h.kind != BLOCK_KIND_COLUMNAR {
        let cells = cells_of(&h, body, cell_width).map_err(BlockError::Other)?;
        return columns::parts_of_cells(&cells, cell_width, want).map_err(BlockError::Other);
    }
    let n = h.cells as usize;
    if h.codec != 0 || h.raw_len as usize != n * cell_width {
        return Err(BlockError::Other(Error::decode(
            "block",
            "columnar block header disagrees with its cells",
        )));
    }
    columns::decode_parts(body, n, cell_width, want).map_err(BlockError::Other)
}

/// Verify and decompress a whole block (`b` = header + body) into cells of
/// `cell_width` bytes. Never panics on any input.
pub fn decode(b: &[u8], cell_width: usize) -> std::result::Result<Vec<u8>, BlockError> {
    let (h, body) = verified(b)?;
    cells_of(&h, body, cell_width).map_err(BlockError::Other)
}

/// The cells of a verified block.
fn cells_of(h: &BlockHeader, body: &[u8], cell_width: usize) -> Result<Vec<u8>> {
    if cell_width < CELL_HEAD_LEN || h.raw_len as usize != h.cells as usize * cell_width {
        return Err(Error::decode(
            "block",
            format!(
                "raw length {} for {} cells of {cell_width}",
                h.raw_len, h.cells
            ),
        ));
    }
    let raw = match h.kind {
        BLOCK_KIND_COLUMNAR if h.codec != 0 => Err(Error::decode(
            "block",
            format!("codec {} on a columnar block", h.codec),
        )),
        BLOCK_KIND_COLUMNAR => columnar::decode(body, h.cells as usize, cell_width),
        _ => decompress(h.codec, body, h.raw_len as usize),
    }?;
    check_cells(&raw, h.cells, cell_width)?;
    Ok(raw)
}

pub(crate) fn decompress(codec: u8, body: &[u8], raw_len: usize) -> Result<Vec<u8>> {
    let raw = match codec {
        0 => body.to_vec(),
        1 => {
            let n = snap::raw::decompress_len(body)
                .map_err(|e| Error::decode("block", format!("snappy: {e}")))?;
            if n != raw_len {
                return Err(Error::decode(
                    "block",
                    format!("snappy length {n} != {raw_len}"),
                ));
            }
            snap::raw::Decoder::new()
                .decompress_vec(body)
                .map_err(|e| Error::decode("block", format!("snappy: {e}")))?
        }
        2 => ZSTD_D.with(|d| -> Result<Vec<u8>> {
            let mut d = d.borrow_mut();
            if d.is_none() {
                *d = Some(
                    zstd::bulk::Decompressor::new()
                        .map_err(|e| Error::decode("block", format!("zstd: {e}")))?,
                );
            }
            d.as_mut()
                .expect("initialised above")
                .decompress(body, raw_len)
                .map_err(|e| Error::decode("block", format!("zstd: {e}")))
        })?,
        c => return Err(Error::decode("block", format!("unknown codec {c}"))),
    };
    if raw.len() != raw_len {
        return Err(Error::decode(
            "block",
            format!(
                "body decompressed to {} bytes, header says {raw_len}",
                raw.len()
            ),
        ));
    }
    Ok(raw)
}

fn check_cells(raw: &[u8], cells: u32, cell_width: usize) -> Result<()> {
    if cell_width < CELL_HEAD_LEN || raw.len() != cells as usize * cell_width {
        return Err(Error::decode(
            "block",
            format!("{} bytes for {cells} cells of {cell_width}", raw.len()),
        ));
    }
    for c in raw.chunks_exact(cell_width) {
        if CellKind::from_code(c[CELL_HEAD_LEN - 1]).is_none() {
            return Err(Error::decode("block", "unknown cell kind"));
        }
    }
    let n = cells as usize;
    for i in 1..n {
        let (a, b) = (&raw[(i - 1) * cell_width..], &raw[i * cell_width..]);
        if crate::cell::cmp(a, b) != std::cmp::Ordering::Less {
            return Err(Error::decode("block", "cells out of order"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::{push, CellKind};

    fn raw(n: usize) -> Vec<u8> {
        let mut v = Vec::new();
        for i in 0..n {
            let k = crate::key::encode(crate::key::DeviceId(1), -(i as i64));
            push(&mut v, &k, 1, CellKind::Put, &(i as u64).to_le_bytes());
        }
        v
    }

    #[test]
    fn round_trip_every_codec_and_detect_flips() {
        let r = raw(50);
        for codec in [Compression::None, Compression::Snappy, Compression::Zstd(3)] {
            let mut b = Vec::new();
            encode(&r, 50, codec, &mut b).unwrap();
            assert_eq!(decode(&b, 35).unwrap(), r);
            for i in 0..b.len() {
                let mut c = b.clone();
                c[i] ^= 0x10;
                assert!(decode(&c, 35).is_err(), "{codec} flip {i}");
            }
            for cut in 0..b.len() {
                assert!(decode(&b[..cut], 35).is_err());
            }
        }
    }
}
