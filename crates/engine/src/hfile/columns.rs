//! A block as columns, for batch scans: its keys (device runs, every
//! row's timestamp and kind) and only the fields a scan asks for, each as
//! a vector of little-endian values. A columnar block skips the chunks
//! of the fields it is not asked for without decompressing them; a
//! row-major block (which a columnar file may hold after a table changed
//! encoding) is decompressed and its columns gathered. Either way the
//! result is the same, and nothing is turned back into row-major cells.

use super::columnar::{
    field_values, gather, run_count, take_chunk, take_prologue, values, KIND_OFFSET, RUN_KEY_LEN,
    RUN_LEN, SEQ_OFFSET,
};
use crate::cell::{CellKind, CELL_HEAD_LEN};
use crate::error::{Error, Result};
use crate::key::{reverse_ts, ts_of, unreverse_ts, DeviceId, RowKey, KEY_LEN};
use crate::schema::{FieldType, TableSchema};
use crate::util::bin::BinReader;
use std::sync::Arc;

/// Where one field sits in a cell, and its index among the table's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldSlot {
    /// Index among the table's fields (the columnar block's field order).
    pub index: usize,
    /// Byte offset in the cell (after the cell head).
    pub offset: usize,
    pub width: usize,
}

/// Where each of `fields` (indexes into the table's fields) sits in a
/// cell of `schema`.
pub fn slots_of(schema: &TableSchema, fields: &[usize]) -> Result<Arc<[FieldSlot]>> {
    fields
        .iter()
        .map(|&index| {
            let f = schema.fields.get(index).ok_or_else(|| {
                Error::invalid("fields", format!("no field {index} in {}", schema.name))
            })?;
            Ok(FieldSlot {
                index,
                offset: CELL_HEAD_LEN + schema.field_offset(index),
                width: f.ty.width(),
            })
        })
        .collect()
}

/// Cells of one device in a block (a run of the same 10-byte key prefix).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyRun {
    pub device: DeviceId,
    /// Hash prefix and device id, as in the key.
    pub prefix: [u8; RUN_KEY_LEN],
    /// First row of the run in the block.
    pub start: u32,
    pub len: u32,
}

/// The keys of a block: what a scan needs to choose rows before it copies
/// any field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockKeys {
    pub runs: Vec<KeyRun>,
    /// Every row's timestamp (ms), in cell order (newest first in a run).
    pub ts: Vec<i64>,
    /// Every row's kind code, or `None` when every row is a put.
    pub kinds: Option<Vec<u8>>,
}

impl BlockKeys {
    /// Bytes held (for the block cache's weight).
    pub fn heap_bytes(&self) -> usize {
        self.runs.len() * std::mem::size_of::<KeyRun>()
            + self.ts.len() * 8
            + self.kinds.as_ref().map_or(0, Vec::len)
    }

    /// Is row `i` a put?
    pub fn is_put(&self, i: usize) -> bool {
        self.kinds
            .as_ref()
            .is_none_or(|k| k[i] == CellKind::Put as u8)
    }
}

/// A block as columns, as the block cache holds it
/// ([`crate::hfile::HFileReader::block_columns`]); cloning shares them.
#[derive(Clone)]
pub struct BlockColumns {
    pub keys: Arc<BlockKeys>,
    /// Sequence numbers, when asked for.
    pub seq: Option<Arc<Vec<u8>>>,
    /// The asked fields' little-endian values, in the order asked.
    pub fields: Vec<Arc<Vec<u8>>>,
}

impl BlockColumns {
    pub fn rows(&self) -> usize {
        self.keys.ts.len()
    }

    /// Bytes per value of asked field `i`.
    pub fn width(&self, i: usize) -> usize {
        self.fields[i].len() / self.rows().max(1)
    }

    /// Asked field `i`'s little-endian values of rows `rows`.
    pub fn field(&self, i: usize, rows: std::ops::Range<usize>) -> &[u8] {
        let w = self.width(i);
        &self.fields[i][rows.start * w..rows.end * w]
    }

    /// The run holding row `i`.
    fn run_of(&self, i: usize) -> &KeyRun {
        let runs = &self.keys.runs;
        &runs[runs.partition_point(|r| (r.start as usize) <= i) - 1]
    }

    /// The key of row `i`.
    pub fn key(&self, i: usize) -> RowKey {
        let mut k = [0u8; KEY_LEN];
        k[..RUN_KEY_LEN].copy_from_slice(&self.run_of(i).prefix);
        k[RUN_KEY_LEN..].copy_from_slice(&reverse_ts(self.keys.ts[i]).to_be_bytes());
        k
    }

    /// The first row whose key is `>= key`.
    pub fn seek(&self, key: &RowKey) -> usize {
        let runs = &self.keys.runs;
        let r = runs.partition_point(|r| r.prefix[..] < key[..RUN_KEY_LEN]);
        let Some(run) = runs.get(r) else {
            return self.rows();
        };
        if run.prefix[..] != key[..RUN_KEY_LEN] {
            return run.start as usize;
        }
        let (start, end) = (run.start as usize, (run.start + run.len) as usize);
        let ts = ts_of(key);
        start + self.keys.ts[start..end].partition_point(|&t| t > ts)
    }

    /// Append rows `rows` as row-major cells of `width` bytes (the fields
    /// must be all the table's, in order, and `seq` present).
    pub fn write_cells(&self, rows: std::ops::Range<usize>, width: usize, out: &mut Vec<u8>) {
        let seq = self.seq.as_ref().expect("cells need sequence numbers");
        let widths: Vec<usize> = (0..self.fields.len()).map(|i| self.width(i)).collect();
        debug_assert_eq!(CELL_HEAD_LEN + widths.iter().sum::<usize>(), width);
        out.reserve(rows.len() * width);
        let mut run = self.run_of(rows.start);
        for i in rows {
            if i >= (run.start + run.len) as usize {
                run = self.run_of(i);
            }
            out.extend_from_slice(&run.prefix);
            out.extend_from_slice(&reverse_ts(self.keys.ts[i]).to_be_bytes());
            out.extend_from_slice(&seq[i * 8..i * 8 + 8]);
            out.push(
                self.keys
                    .kinds
                    .as_ref()
                    .map_or(CellKind::Put as u8, |k| k[i]),
            );
            for (f, &w) in self.fields.iter().zip(&widths) {
                out.extend_from_slice(&f[i * w..(i + 1) * w]);
            }
        }
    }
}

/// Which parts of a block to decode.
#[derive(Clone, Copy, Debug)]
pub struct Want<'a> {
    pub keys: bool,
    /// Sequence numbers (only merging reads need them).
    pub seq: bool,
    pub fields: &'a [FieldSlot],
}

/// What [`decode_parts`] returns: the keys and sequence numbers if asked
/// for, and the asked fields' values (`cells × width` bytes each) in the
/// order asked.
#[derive(Debug, Default)]
pub struct BlockParts {
    pub keys: Option<BlockKeys>,
    /// Every row's sequence number, little-endian u64s.
    pub seq: Option<Vec<u8>>,
    pub fields: Vec<Vec<u8>>,
}

fn bad(what: impl Into<String>) -> Error {
    Error::decode("columnar block", what)
}

/// Skip a chunk without decompressing it (its lengths still checked).
fn skip_chunk(r: &mut BinReader<'_>, inner_max: usize) -> Result<()> {
    r.u8()?;
    r.u8()?;
    let inner_len = r.u32()? as usize;
    let stored_len = r.u32()? as usize;
    if inner_len > inner_max {
        return Err(bad(format!(
            "chunk of {inner_len} bytes (at most {inner_max} expected)"
        )));
    }
    r.take(stored_len)?;
    Ok(())
}

/// Decode the keys (when `keys`) and the fields in `slots` of a columnar
/// body of `cells` cells of `width` bytes. Never panics on any input.
pub fn decode_parts(body: &[u8], cells: usize, width: usize, want: Want<'_>) -> Result<BlockParts> {
    let slots = want.fields;
    let mut r = BinReader::new(body, "columnar block");
    let p = take_prologue(&mut r, cells, width)?;
    let runs = p.runs.len() / RUN_LEN;
    let mut out = BlockParts::default();
    let deltas = match want.keys {
        true => Some(values(
            take_chunk(&mut r, (cells - runs) * 8)?,
            FieldType::I64,
            cells - runs,
        )?),
        false => skip_chunk(&mut r, (cells - runs) * 8).map(|()| None)?,
    };
    out.seq = match want.seq {
        true => Some(values(
            take_chunk(&mut r, cells * 8)?,
            FieldType::U64,
            cells,
        )?),
        false => skip_chunk(&mut r, cells * 8).map(|()| None)?,
    };
    if let Some(deltas) = deltas {
        let kinds = values(take_chunk(&mut r, cells)?, FieldType::Bool, cells)?;
        out.keys = Some(keys_of_runs(&p.runs, &deltas, kinds)?);
    } else {
        skip_chunk(&mut r, cells)?;
    }
    let mut found: Vec<Option<Vec<u8>>> = vec![None; slots.len()];
    let mut offset = CELL_HEAD_LEN;
    for i in 0..p.fields {
        let t = FieldType::from_code(r.u8()?)?;
        let wanted: Vec<usize> = (0..slots.len()).filter(|&j| slots[j].index == i).collect();
        if wanted.is_empty() {
            skip_chunk(&mut r, cells * t.width())?;
        } else {
            if wanted
                .iter()
                .any(|&j| slots[j].offset != offset || slots[j].width != t.width())
            {
                return Err(bad(format!("field {i} is not where the table has it")));
            }
            let c = take_chunk(&mut r, cells * t.width())?;
            let v = field_values(c, t, cells, &p.runs)?;
            for j in wanted {
                found[j] = Some(v.clone());
            }
        }
        offset += t.width();
    }
    r.finish()?;
    if offset != width {
        return Err(bad(format!(
            "fields take {} bytes, cells have {}",
            offset - CELL_HEAD_LEN,
            width - CELL_HEAD_LEN
        )));
    }
    for (j, f) in found.into_iter().enumerate() {
        let f = f.ok_or_else(|| bad(format!("no field {} in the block", slots[j].index)))?;
        out.fields.push(f);
    }
    Ok(out)
}

/// Device runs and timestamps from the runs chunk (checked by
/// `take_prologue`) and the in-run differences; checks that runs are in
/// key order and timestamps do not go back within a run.
fn keys_of_runs(runs_chunk: &[u8], deltas: &[u8], kinds: Vec<u8>) -> Result<BlockKeys> {
    let mut runs = Vec::with_capacity(runs_chunk.len() / RUN_LEN);
    let mut ts = Vec::with_capacity(kinds.len());
    let mut d = deltas.chunks_exact(8);
    let mut prev: Option<[u8; RUN_KEY_LEN]> = None;
    for run in runs_chunk.chunks_exact(RUN_LEN) {
        let prefix: [u8; RUN_KEY_LEN] = run[..RUN_KEY_LEN].try_into().expect("run key");
        if prev.is_some_and(|p| p >= prefix) {
            return Err(bad("runs out of key order"));
        }
        prev = Some(prefix);
        let n = run_count(run);
        let mut rev = u64::from_le_bytes(run[RUN_KEY_LEN + 4..].try_into().expect("8 bytes"));
        runs.push(KeyRun {
            device: device_of_prefix(&prefix),
            prefix,
            start: ts.len() as u32,
            len: n as u32,
        });
        ts.push(unreverse_ts(rev));
        for _ in 1..n {
            let step = d.next().ok_or_else(|| bad("too few deltas"))?;
            let step = i64::from_le_bytes(step.try_into().expect("8 bytes"));
            rev = u64::try_from(step)
                .ok()
                .and_then(|s| rev.checked_add(s))
                .ok_or_else(|| bad("timestamps out of order in a run"))?;
            ts.push(unreverse_ts(rev));
        }
    }
    Ok(BlockKeys {
        runs,
        ts,
        kinds: checked_kinds(kinds)?,
    })
}

fn device_of_prefix(p: &[u8; RUN_KEY_LEN]) -> DeviceId {
    DeviceId(u64::from_be_bytes(p[2..10].try_into().expect("8 bytes")))
}

/// Every kind must be known; all puts (the common case) is kept as `None`.
fn checked_kinds(kinds: Vec<u8>) -> Result<Option<Vec<u8>>> {
    if kinds.iter().any(|&k| CellKind::from_code(k).is_none()) {
        return Err(bad("unknown cell kind"));
    }
    Ok(match kinds.iter().all(|&k| k == CellKind::Put as u8) {
        true => None,
        false => Some(kinds),
    })
}

/// The same parts from row-major cells (already verified: in order,
/// known kinds).
pub fn parts_of_cells(cells: &[u8], width: usize, want: Want<'_>) -> Result<BlockParts> {
    let mut out = BlockParts {
        seq: want.seq.then(|| gather(cells, width, SEQ_OFFSET, 8)),
        ..BlockParts::default()
    };
    if want.keys {
        let mut runs: Vec<KeyRun> = Vec::new();
        let mut ts = Vec::with_capacity(cells.len() / width);
        for (i, c) in cells.chunks_exact(width).enumerate() {
            let prefix: [u8; RUN_KEY_LEN] = c[..RUN_KEY_LEN].try_into().expect("run key");
            match runs.last_mut() {
                Some(r) if r.prefix == prefix => r.len += 1,
                _ => runs.push(KeyRun {
                    device: device_of_prefix(&prefix),
                    prefix,
                    start: i as u32,
                    len: 1,
                }),
            }
            let rev = u64::from_be_bytes(c[RUN_KEY_LEN..KEY_LEN].try_into().expect("8 bytes"));
            ts.push(unreverse_ts(rev));
        }
        out.keys = Some(BlockKeys {
            runs,
            ts,
            kinds: checked_kinds(gather(cells, width, KIND_OFFSET, 1))?,
        });
    }
    for s in want.fields {
        if s.offset < CELL_HEAD_LEN || s.offset + s.width > width {
            return Err(bad(format!("field {} outside the cell", s.index)));
        }
        out.fields.push(gather(cells, width, s.offset, s.width));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::push;
    use crate::hfile::columnar::{encode, ColumnarConfig};
    use crate::key::encode as key;
    use crate::schema::Compression;

    const TYPES: [FieldType; 3] = [FieldType::F64, FieldType::Bool, FieldType::I32];

    fn slots() -> Vec<FieldSlot> {
        let mut off = CELL_HEAD_LEN;
        TYPES
            .iter()
            .enumerate()
            .map(|(index, t)| {
                let s = FieldSlot {
                    index,
                    offset: off,
                    width: t.width(),
                };
                off += t.width();
                s
            })
            .collect()
    }

    fn every(fields: &[FieldSlot]) -> Want<'_> {
        Want {
            keys: true,
            seq: true,
            fields,
        }
    }

    fn fields_only(fields: &[FieldSlot]) -> Want<'_> {
        Want {
            keys: false,
            seq: false,
            fields,
        }
    }

    /// Cells of three devices, one with a duplicate key and a delete.
    fn cells() -> (Vec<u8>, usize) {
        let width = CELL_HEAD_LEN + 13;
        let mut out = Vec::new();
        let mut keys = Vec::new();
        for d in [7u64, 8, 9] {
            for ts in (0..20i64).rev() {
                keys.push(key(DeviceId(d), ts * 10));
            }
        }
        keys.sort();
        let mut seq = 1000;
        for k in keys {
            let mut f = Vec::new();
            f.extend_from_slice(&(seq as f64 * 0.5).to_le_bytes());
            f.push((seq % 2) as u8);
            f.extend_from_slice(&(seq as i32 - 900).to_le_bytes());
            if k == key(DeviceId(8), 50) {
                push(&mut out, &k, seq, CellKind::Delete, &f);
                seq -= 1;
            }
            push(&mut out, &k, seq, CellKind::Put, &f);
            seq -= 1;
        }
        (out, width)
    }

    #[test]
    fn columns_of_a_columnar_body_equal_those_of_its_cells() {
        let (cells, width) = cells();
        let n = cells.len() / width;
        let cfg = ColumnarConfig {
            pco_level: 4,
            compression: Compression::Zstd(1),
        };
        let mut body = Vec::new();
        encode(&cells, width, &TYPES, cfg, &mut body).unwrap();
        let all = slots();
        let every = Want {
            keys: true,
            seq: true,
            fields: &all,
        };
        let want = parts_of_cells(&cells, width, every).unwrap();
        let got = decode_parts(&body, n, width, every).unwrap();
        assert_eq!(got.keys, want.keys);
        assert_eq!(got.seq, want.seq);
        assert_eq!(got.fields, want.fields);
        let keys = got.keys.unwrap();
        assert_eq!(keys.runs.len(), 3);
        assert_eq!(keys.ts.len(), n);
        assert!(keys.kinds.is_some(), "a delete is kept");
        // One field, in any order, and duplicates, without the keys.
        let some = [all[2], all[0], all[2]];
        let got = decode_parts(&body, n, width, fields_only(&some)).unwrap();
        assert!(got.keys.is_none() && got.seq.is_none());
        assert_eq!(
            got.fields,
            vec![
                want.fields[2].clone(),
                want.fields[0].clone(),
                want.fields[2].clone()
            ]
        );
    }

    #[test]
    fn damaged_bodies_and_wrong_slots_are_errors() {
        let (cells, width) = cells();
        let n = cells.len() / width;
        let cfg = ColumnarConfig {
            pco_level: 4,
            compression: Compression::None,
        };
        let mut body = Vec::new();
        encode(&cells, width, &TYPES, cfg, &mut body).unwrap();
        let all = slots();
        for cut in [0, 1, 7, body.len() / 2, body.len() - 1] {
            assert!(decode_parts(&body[..cut], n, width, every(&all)).is_err());
        }
        for i in 0..body.len() {
            let mut b = body.clone();
            b[i] ^= 0x5a;
            // Never a panic; a flip may still decode (the block CRC is
            // what catches it).
            let _ = decode_parts(&b, n, width, every(&all));
        }
        let mut wrong = all[1];
        wrong.width = 8;
        assert!(decode_parts(&body, n, width, fields_only(&[wrong])).is_err());
        let missing = FieldSlot {
            index: 5,
            offset: CELL_HEAD_LEN,
            width: 8,
        };
        assert!(decode_parts(&body, n, width, fields_only(&[missing])).is_err());
    }
}
