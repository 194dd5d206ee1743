//! Where an HFile's bytes go, column by column (for `bench ingest` and
//! reports): every chunk of every
//! columnar block, summed per column, with the codecs that were chosen.

use super::block::{decode_header, BLOCK_HEADER_LEN, BLOCK_KIND_COLUMNAR};
use super::columnar::{describe, CODEC_BITS, CODEC_CONST, CODEC_DECIMAL, CODEC_PCO, CODEC_RAW};
use super::reader::parse_sections;
use super::sections::{Trailer, TRAILER_LEN};
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// One column's bytes over many blocks.
#[derive(Clone, Debug, Default)]
pub struct ColumnBytes {
    pub column: String,
    pub bytes: u64,
    /// How often each codec was chosen, e.g. `pco 120, pco+zstd 3`.
    pub codecs: String,
}

/// Bytes per column, and every other byte of the files.
#[derive(Clone, Debug, Default)]
pub struct DirStats {
    /// In block order: runs, ts, seq, kind, then the fields.
    pub columns: Vec<ColumnBytes>,
    pub other_bytes: u64,
}

fn codec_name(codec: u8, outer: u8) -> String {
    let c = match codec {
        CODEC_RAW => "raw",
        CODEC_CONST => "const",
        CODEC_PCO => "pco",
        CODEC_BITS => "bits",
        CODEC_DECIMAL => "decimal",
        _ => "?",
    };
    match outer {
        0 => c.to_string(),
        1 => format!("{c}+snappy"),
        _ => format!("{c}+zstd"),
    }
}

/// Sum the chunks of every columnar block in the `.hfile`s under `dir`.
pub fn dir_column_bytes(dir: &Path) -> Result<DirStats> {
    let mut order: Vec<String> = Vec::new();
    let mut per: BTreeMap<String, (u64, BTreeMap<String, u64>)> = BTreeMap::new();
    let mut total = 0u64;
    let mut chunks = 0u64;
    for path in hfiles(dir)? {
        let data = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        total += data.len() as u64;
        let at = |e: Error| e.at(&path, 0);
        let toff = data
            .len()
            .checked_sub(TRAILER_LEN)
            .ok_or_else(|| Error::corrupt("hfile shorter than its trailer", &path, 0))?;
        let t = Trailer::decode(&data[toff..], data.len() as u64).map_err(at)?;
        let p = parse_sections(&t, |s| {
            let r = s.offset as usize..(s.offset + u64::from(s.len)) as usize;
            data.get(r)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| Error::decode("hfile", "section outside"))
        })
        .map_err(at)?;
        for e in &p.index {
            let r = e.offset as usize..(e.offset + u64::from(e.len)) as usize;
            let b = data
                .get(r)
                .ok_or_else(|| Error::corrupt("hfile truncated", &path, e.offset))?;
            let h = decode_header(b).map_err(|err| err.at(&path, e.offset))?;
            if h.kind != BLOCK_KIND_COLUMNAR {
                continue;
            }
            for s in describe(&b[BLOCK_HEADER_LEN..]).map_err(|err| err.at(&path, e.offset))? {
                if !per.contains_key(&s.column) {
                    order.push(s.column.clone());
                }
                let (bytes, codecs) = per.entry(s.column.clone()).or_default();
                *bytes += s.bytes as u64;
                *codecs.entry(codec_name(s.codec, s.outer)).or_default() += 1;
                chunks += s.bytes as u64;
            }
        }
    }
    let columns = order
        .into_iter()
        .map(|c| {
            let (bytes, codecs) = &per[&c];
            let codecs = codecs
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ");
            ColumnBytes {
                column: c,
                bytes: *bytes,
                codecs,
            }
        })
        .collect();
    Ok(DirStats {
        columns,
        other_bytes: total - chunks,
    })
}

fn hfiles(dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| Error::io(&d, e))? {
            let p = e.map_err(|e| Error::io(&d, e))?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "hfile") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}
