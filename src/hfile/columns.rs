//! A block as columns, for batch scans: its keys (device runs, every
//! row's timestamp and kind) and only the fields a scan asks for, each as
//! a vector of little-endian values. A columnar block skips the chunks
//! of the fields it is not asked for without decompressing them; a
//! row-major block (which a columnar file may hold after a table changed
//! encoding) is decompressed and its columns gathered. Either way the
//! result is the same, and nothing is turned back into row-major cells.

use super::columnar::{
    gather, run_count, take_chunk, take_prologue, values, KIND_OFFSET, RUN_KEY_LEN, RUN_LEN,
};
use crate::cell::{CellKind, CELL_HEAD_LEN};
use crate::error::{Error, Result};
use crate::key::{unreverse_ts, DeviceId, KEY_LEN};
use crate::schema::FieldType;
use crate::util::bin::BinReader;

/// Where one field sits in a cell, and its index among the table's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldSlot {
    /// Index among the table's fields (the columnar block's field order).
    pub index: usize,
    /// Byte offset in the cell (after the cell head).
    pub offset: usize,
    pub width: usize,
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

/// What [`decode_parts`] returns: the keys if asked for, and the asked
/// fields' values (`cells × width` bytes each) in the order asked.
#[derive(Debug, Default)]
pub struct BlockParts {
    pub keys: Option<BlockKeys>,
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
pub fn decode_parts(
    body: &[u8],
    cells: usize,
    width: usize,
    keys: bool,
    slots: &[FieldSlot],
) -> Result<BlockParts> {
    let mut r = BinReader::new(body, "columnar block");
    let p = take_prologue(&mut r, cells, width)?;
    let runs = p.runs.len() / RUN_LEN;
    let mut out = BlockParts::default();
    if keys {
        let deltas = values(take_chunk(&mut r, (cells - runs) * 8)?, FieldType::I64, cells - runs)?;
        skip_chunk(&mut r, cells * 8)?;
        let kinds = values(take_chunk(&mut r, cells)?, FieldType::Bool, cells)?;
        out.keys = Some(keys_of_runs(&p.runs, &deltas, kinds)?);
    } else {
        skip_chunk(&mut r, (cells - runs) * 8)?;
        skip_chunk(&mut r, cells * 8)?;
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
            let v = values(take_chunk(&mut r, cells * t.width())?, t, cells)?;
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
pub fn parts_of_cells(
    cells: &[u8],
    width: usize,
    keys: bool,
    slots: &[FieldSlot],
) -> Result<BlockParts> {
    let mut out = BlockParts::default();
    if keys {
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
    for s in slots {
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
        let want = parts_of_cells(&cells, width, true, &all).unwrap();
        let got = decode_parts(&body, n, width, true, &all).unwrap();
        assert_eq!(got.keys, want.keys);
        assert_eq!(got.fields, want.fields);
        let keys = got.keys.unwrap();
        assert_eq!(keys.runs.len(), 3);
        assert_eq!(keys.ts.len(), n);
        assert!(keys.kinds.is_some(), "a delete is kept");
        // One field, in any order, and duplicates, without the keys.
        let some = [all[2], all[0], all[2]];
        let got = decode_parts(&body, n, width, false, &some).unwrap();
        assert!(got.keys.is_none());
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
            assert!(decode_parts(&body[..cut], n, width, true, &all).is_err());
        }
        for i in 0..body.len() {
            let mut b = body.clone();
            b[i] ^= 0x5a;
            // Never a panic; a flip may still decode (the block CRC is
            // what catches it).
            let _ = decode_parts(&b, n, width, true, &all);
        }
        let mut wrong = all[1];
        wrong.width = 8;
        assert!(decode_parts(&body, n, width, false, &[wrong]).is_err());
        let missing = FieldSlot {
            index: 5,
            offset: CELL_HEAD_LEN,
            width: 8,
        };
        assert!(decode_parts(&body, n, width, false, &[missing]).is_err());
    }
}
