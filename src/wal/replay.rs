//! WAL recovery. Entries are applied in order; a torn or corrupt *last*
//! entry of the last segment is truncated (and logged); corruption anywhere
//! else is a typed error unless `salvage` is set, in which case the log is
//! cut at the first bad frame and the loss is logged.

use super::frame::{decode, Decoded, Entry};
use super::segment::{self, SegmentInfo};
use crate::error::{Error, Result};
use crate::io::{Backend, OpenMode};
use std::path::Path;

/// What replay found.
#[derive(Debug, Default)]
pub struct ReplayOutcome {
    pub segments: Vec<SegmentInfo>,
    /// Highest sequence number seen (0 if none).
    pub last_seq: u64,
    /// Highest segment number seen (0 if none).
    pub last_segment: u64,
    /// `(file, offset, bytes dropped)` when a tail was cut.
    pub truncated: Option<(std::path::PathBuf, u64, u64)>,
    pub entries: u64,
}

/// Replay every segment in `dir`, calling `apply` for each entry in order.
pub fn replay(
    dir: &Path,
    backend: &dyn Backend,
    salvage: bool,
    mut apply: impl FnMut(&Entry<'_>) -> Result<()>,
) -> Result<ReplayOutcome> {
    let files = segment::list(dir)?;
    let mut out = ReplayOutcome::default();
    let n = files.len();
    for (i, (no, path)) in files.into_iter().enumerate() {
        let last = i + 1 == n;
        let data = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        out.last_segment = out.last_segment.max(no);
        let mut info = SegmentInfo {
            no,
            path: path.clone(),
            ..Default::default()
        };
        if data.len() < segment::SEGMENT_HEADER_LEN && last {
            // Crashed while creating the segment: nothing in it was acked.
            cut(backend, &path, 0, data.len(), &mut out)?;
            out.segments.push(info);
            continue;
        }
        let hdr_no = segment::decode_header(&data, &path)?;
        if hdr_no != no {
            return Err(Error::corrupt(
                format!("wal segment number {hdr_no} in a file named {no}"),
                &path,
                8,
            ));
        }
        let mut pos = segment::SEGMENT_HEADER_LEN;
        while pos < data.len() {
            match decode(&data[pos..]) {
                Decoded::Entry(e, used) => {
                    if e.first_seq <= out.last_seq {
                        return Err(Error::corrupt(
                            format!(
                                "wal sequence {} after {} (not increasing)",
                                e.first_seq, out.last_seq
                            ),
                            &path,
                            pos as u64,
                        ));
                    }
                    apply(&e).map_err(|err| err.at(&path, pos as u64))?;
                    out.last_seq = e.last_seq();
                    out.entries += 1;
                    info.note(e.table_id, e.last_seq());
                    pos += used;
                }
                Decoded::Incomplete if last => {
                    cut(backend, &path, pos, data.len(), &mut out)?;
                    break;
                }
                Decoded::Invalid(_) if last && is_tail(&data, pos) => {
                    cut(backend, &path, pos, data.len(), &mut out)?;
                    break;
                }
                bad => {
                    let what = match bad {
                        Decoded::Invalid(m) => m,
                        _ => "incomplete frame in a sealed segment".to_string(),
                    };
                    if !salvage {
                        return Err(mid_log_error(&data, pos, &path, what));
                    }
                    tracing::error!(
                        "salvage: cutting WAL {} at offset {pos} ({what}); {} bytes and every later segment dropped",
                        path.display(),
                        data.len() - pos
                    );
                    cut(backend, &path, pos, data.len(), &mut out)?;
                    out.segments.push(info);
                    drop_later(dir, backend, no)?;
                    return Ok(out);
                }
            }
        }
        out.segments.push(info);
    }
    Ok(out)
}

/// A bad frame is the torn tail when it is the last thing in the file: its
/// declared length reaches the end, or everything from it on is zero.
fn is_tail(data: &[u8], pos: usize) -> bool {
    let rest = &data[pos..];
    if rest.iter().all(|b| *b == 0) {
        return true;
    }
    if rest.len() < 4 {
        return true;
    }
    let len = crate::util::bin::le_u32(rest, 0) as usize;
    super::frame::FRAME_HEADER_LEN.saturating_add(len) >= rest.len()
}

fn mid_log_error(data: &[u8], pos: usize, path: &Path, what: String) -> Error {
    let rest = &data[pos..];
    if what.starts_with("checksum") && rest.len() >= super::frame::FRAME_HEADER_LEN {
        let len = crate::util::bin::le_u32(rest, 0) as usize;
        let end = (super::frame::FRAME_HEADER_LEN + len).min(rest.len());
        let actual = crc32c::crc32c_append(
            crate::util::bin::crc(&rest[8..super::frame::FRAME_HEADER_LEN]),
            &rest[super::frame::FRAME_HEADER_LEN..end],
        );
        return Error::ChecksumMismatch {
            file: path.to_path_buf(),
            offset: pos as u64,
            expected: crate::util::bin::le_u32(rest, 4),
            actual,
        };
    }
    Error::corrupt(format!("wal frame ({what})"), path, pos as u64)
}

fn cut(
    backend: &dyn Backend,
    path: &Path,
    pos: usize,
    len: usize,
    out: &mut ReplayOutcome,
) -> Result<()> {
    tracing::warn!(
        "WAL {}: torn tail of {} bytes at offset {pos} truncated",
        path.display(),
        len - pos
    );
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
