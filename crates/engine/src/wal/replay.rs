//! WAL recovery. Entries are applied in order. In the last segment, a bad
//! frame with no valid frame header anywhere after it is the torn (or
//! corrupt) last entry: it is truncated and logged. Any other bad frame is
//! corruption before the tail: a typed error naming the file and offset,
//! unless `salvage` is set, in which case the log is cut there and the loss
//! is logged. A last segment too short for its header, or all zeros (a
//! crash while it was being created, before its header was synced) is
//! removed. From segment version 2, zero bytes from a frame boundary to
//! the end of a segment are its preallocated space, not damage. A
//! read-only replay ([`Recovery::ReadOnly`]) decides the same but changes
//! nothing: it stops at a torn tail without cutting it, skips a segment
//! cut short at creation without removing it, and cannot salvage.

use super::frame::{decode, valid_header_at, Decoded, Entry};
use super::segment::{self, SegmentInfo};
use crate::ids::{SeqNo, TableId};
use crate::error::{Error, Result};
use crate::io::{Backend, OpenMode};
use std::path::Path;

/// What a replay may change to get past damage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// Change nothing: a torn tail is reported, not cut.
    ReadOnly,
    /// Cut a torn tail, remove a segment cut short at creation.
    Repair,
    /// As `Repair`, and cut the log at corruption before the tail too
    /// (losing what follows; `Options::salvage_wal`).
    Salvage,
}

/// What replay found.
#[derive(Debug, Default)]
pub struct ReplayOutcome {
    pub segments: Vec<SegmentInfo>,
    /// Highest sequence number seen (0 if none).
    pub last_seq: u64,
    /// Highest segment number seen (0 if none).
    pub last_segment: u64,
    /// `(file, offset, bytes dropped)` when a tail was cut (or, read-only,
    /// would be cut by a repairing open).
    pub truncated: Option<(std::path::PathBuf, u64, u64)>,
    /// What the cut tail held, in words (for logs, `/health`, `verify`).
    pub tail_note: Option<String>,
    pub entries: u64,
}

/// How a segment's scan ended.
#[derive(Debug)]
pub enum Verdict {
    /// Every byte belonged to a valid entry.
    Clean,
    /// The last segment ends in a torn or corrupt last entry at this offset.
    Torn(usize),
    /// Corruption before the tail at this offset (salvage may cut there).
    Corrupt(usize, Error),
}

/// The valid entries of one segment (with their offsets) and its verdict.
#[derive(Debug)]
pub struct SegmentScan<'a> {
    pub entries: Vec<(usize, Entry<'a>)>,
    pub verdict: Verdict,
}

/// Decide, without side effects, what a segment holds. `last` says whether
/// it is the newest segment (only there can a tail be torn); `prev_seq` is
/// the last sequence number before it. Errors that salvage cannot fix
/// (header, sequence order) are `Err`.
pub fn scan_segment<'a>(
    data: &'a [u8],
    path: &Path,
    no: u64,
    last: bool,
    prev_seq: u64,
) -> Result<SegmentScan<'a>> {
    let (hdr_no, version) = segment::decode_header_versioned(data, path)?;
    if hdr_no != no {
        return Err(Error::corrupt(
            format!("wal segment number {hdr_no} in a file named {no}"),
            path,
            8,
        ));
    }
    let mut entries = Vec::new();
    let mut last_seq = prev_seq;
    let mut pos = segment::SEGMENT_HEADER_LEN;
    while pos < data.len() {
        match decode(&data[pos..]) {
            Decoded::Entry(e, used) => {
                if e.first_seq <= last_seq {
                    return Err(Error::corrupt(
                        format!(
                            "wal sequence {} after {last_seq} (not increasing)",
                            e.first_seq
                        ),
                        path,
                        pos as u64,
                    ));
                }
                last_seq = e.last_seq();
                entries.push((pos, e));
                pos += used;
            }
            // From version 2 the rest of a segment may be preallocated
            // space: zero bytes at a frame boundary end its frames.
            _ if version >= 2 && all_zero(&data[pos..]) => break,
            bad => {
                let tail = last && (bad == Decoded::Incomplete || !valid_header_after(data, pos));
                let verdict = if tail {
                    Verdict::Torn(pos)
                } else {
                    Verdict::Corrupt(pos, mid_log_error(bad, pos, path))
                };
                return Ok(SegmentScan { entries, verdict });
            }
        }
    }
    Ok(SegmentScan {
        entries,
        verdict: Verdict::Clean,
    })
}

/// Replay every segment in `dir`, calling `apply` for each entry in order.
pub fn replay(
    dir: &Path,
    backend: &dyn Backend,
    recovery: Recovery,
    mut apply: impl FnMut(&Entry<'_>) -> Result<()>,
) -> Result<ReplayOutcome> {
    let repair = recovery != Recovery::ReadOnly;
    let salvage = recovery == Recovery::Salvage;
    let files = segment::list(dir)?;
    let mut out = ReplayOutcome::default();
    let n = files.len();
    for (i, (no, path)) in files.into_iter().enumerate() {
        let last = i + 1 == n;
        let data = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        out.last_segment = out.last_segment.max(no);
        if segment::never_written(&data) && last {
            // Crashed while creating the segment: nothing in it was acked.
            if repair {
                tracing::warn!(
                    "WAL {}: removing a segment cut short at creation",
                    path.display()
                );
                backend.remove_file(&path)?;
                backend.sync_dir(dir)?;
            }
            continue;
        }
        let scan = scan_segment(&data, &path, no, last, out.last_seq)?;
        let mut info = SegmentInfo::new(no, path.clone());
        for (pos, e) in &scan.entries {
            apply(e).map_err(|err| err.at(&path, *pos as u64))?;
            out.last_seq = e.last_seq();
            out.entries += 1;
            info.note(TableId(e.table_id), SeqNo(e.last_seq()));
        }
        match scan.verdict {
            Verdict::Clean => {}
            Verdict::Torn(pos) if !repair => {
                let dropped = (data.len() - pos) as u64;
                let note = tail_note(&data, pos, &path);
                tracing::warn!("{note}; not read (a read-write open cuts it)");
                out.truncated = Some((path.clone(), pos as u64, dropped));
                out.tail_note = Some(note);
            }
            Verdict::Torn(pos) => cut(backend, &path, &data, pos, &mut out)?,
            Verdict::Corrupt(_, e) if !salvage => return Err(e),
            Verdict::Corrupt(pos, e) => {
                tracing::error!(
                    "salvage: cutting WAL {} at offset {pos} ({e}); {} bytes and every later segment dropped",
                    path.display(),
                    data.len() - pos
                );
                cut(backend, &path, &data, pos, &mut out)?;
                out.segments.push(info);
                drop_later(dir, backend, no)?;
                return Ok(out);
            }
        }
        out.segments.push(info);
    }
    Ok(out)
}

/// Is there a frame header with a valid checksum anywhere after `pos`?
/// If not, the bad frame at `pos` is the last entry of the log. A valid
/// header holds non-zero bytes, so none starts in a trailing run of zeros
/// (a preallocated segment's tail is not searched byte by byte).
fn valid_header_after(data: &[u8], pos: usize) -> bool {
    let end = data.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    (pos + 1..end).any(|p| valid_header_at(&data[p..]))
}

fn all_zero(b: &[u8]) -> bool {
    b.iter().all(|x| *x == 0)
}

fn mid_log_error(bad: Decoded<'_>, pos: usize, path: &Path) -> Error {
    match bad {
        Decoded::BadHeader { expected, actual } | Decoded::BadPayload { expected, actual } => {
            Error::ChecksumMismatch {
                file: path.to_path_buf(),
                offset: pos as u64,
                expected,
                actual,
            }
        }
        Decoded::Invalid(m) => Error::corrupt(format!("wal frame ({m})"), path, pos as u64),
        _ => Error::corrupt("wal frame cut short in a sealed segment", path, pos as u64),
    }
}

/// The last entry of a log, cut at `pos`, in words: how many bytes, and,
/// when its header holds, the rows it carried. A crash during a write
/// leaves such a tail (never acknowledged); so does damage to the last
/// entry after it was written, which only the rows' senders can tell.
pub fn tail_note(data: &[u8], pos: usize, path: &Path) -> String {
    let bytes = data.len() - pos;
    let head = format!(
        "WAL {}: the last entry, at offset {pos} ({bytes} bytes), is torn or damaged",
        path.display()
    );
    let b = &data[pos..];
    if !valid_header_at(b) {
        return format!("{head}: its header does not hold, so its rows are not known");
    }
    let len = crate::util::bin::le_u32(b, 0) as usize;
    let count = crate::util::bin::le_u32(b, 12);
    let seq = crate::util::bin::le_u64(b, 16);
    let whole = super::frame::FRAME_HEADER_LEN + len <= b.len();
    let payload = if whole {
        "its payload checksum fails"
    } else {
        "its payload is cut short"
    };
    format!(
        "{head}: {payload}; it held {count} rows or deletes (sequence {seq}..), dropped: written by a crash they were never acknowledged, acknowledged they were damaged since"
    )
}

fn cut(
    backend: &dyn Backend,
    path: &Path,
    data: &[u8],
    pos: usize,
    out: &mut ReplayOutcome,
) -> Result<()> {
    let len = data.len();
    let note = tail_note(data, pos, path);
    tracing::warn!("{note}; truncated");
    out.tail_note = Some(note);
    let f = backend.open(path, OpenMode::ReadWrite)?;
    f.set_len(pos as u64)?;
    f.sync_all()?;
    out.truncated = Some((path.to_path_buf(), pos as u64, (len - pos) as u64));
    Ok(())
}

fn drop_later(dir: &Path, backend: &dyn Backend, no: u64) -> Result<()> {
    for (n, p) in segment::list(dir)? {
        if n > no {
            backend.remove_file(&p)?;
        }
    }
    backend.sync_dir(dir)
}
