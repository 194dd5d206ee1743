//! The write-ahead log: one shared, sequential stream of segments.
//! Spec: `formats/wal.md`. Group commit lives in `engine::commit`; this
//! module writes, syncs, rolls over, replays and retires segments.

pub mod frame;
mod replay;
pub mod segment;

pub use frame::{Entry, EntryKind};
pub use replay::{replay, scan_segment, ReplayOutcome, SegmentScan, Verdict};
pub use segment::SegmentInfo;

use crate::error::Result;
use crate::io::{BackendRef, IoFile, OpenMode};
use std::path::{Path, PathBuf};

/// Default segment size before rolling over.
pub const SEGMENT_BYTES_DEFAULT: u64 = 64 << 20;

/// Appends to the active segment; owns the list of live segments.
pub struct WalWriter {
    dir: PathBuf,
    backend: BackendRef,
    file: Box<dyn IoFile>,
    offset: u64,
    segment_bytes_max: u64,
    active: SegmentInfo,
    sealed: Vec<SegmentInfo>,
}

impl WalWriter {
    /// Start a new segment numbered after `prior`'s; `prior` are the
    /// replayed segments that still hold unflushed edits.
    pub fn open(
        dir: &Path,
        backend: BackendRef,
        prior: Vec<SegmentInfo>,
        last_no: u64,
        segment_bytes_max: u64,
    ) -> Result<Self> {
        let (file, active) = create_segment(dir, &*backend, last_no + 1)?;
        Ok(WalWriter {
            dir: dir.to_path_buf(),
            backend,
            file,
            offset: segment::SEGMENT_HEADER_LEN as u64,
            segment_bytes_max,
            active,
            sealed: prior,
        })
    }

    /// Write `buf` (whole frames) at the end of the log, rolling over to a
    /// new segment first when the active one is full. `tables` lists
    /// `(table id, last seq)` of the frames. Returns the buffer.
    /// With `sync`, the write is followed by an fdatasync in the same
    /// backend request.
    pub fn write(&mut self, buf: Vec<u8>, tables: &[(u32, u64)], sync: bool) -> Result<Vec<u8>> {
        let hdr = segment::SEGMENT_HEADER_LEN as u64;
        if self.offset > hdr && self.offset + buf.len() as u64 > self.segment_bytes_max {
            self.roll()?;
        }
        let len = buf.len() as u64;
        let buf = if sync {
            self.file.write_sync_at(buf, self.offset)?
        } else {
            self.file.write_at(buf, self.offset)?
        };
        self.offset += len;
        for (t, s) in tables {
            self.active.note(*t, *s);
        }
        Ok(buf)
    }

    /// fdatasync the active segment.
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync_data()
    }

    fn roll(&mut self) -> Result<()> {
        self.file.sync_data()?;
        let (file, info) = create_segment(&self.dir, &*self.backend, self.active.no + 1)?;
        self.file = file;
        self.offset = segment::SEGMENT_HEADER_LEN as u64;
        let old = std::mem::replace(&mut self.active, info);
        self.sealed.push(old);
        Ok(())
    }

    /// Delete sealed segments whose every edit is flushed. Returns how many.
    pub fn retire(&mut self, flushed: &dyn Fn(u32) -> u64) -> Result<usize> {
        let mut removed = 0;
        let mut i = 0;
        while i < self.sealed.len() {
            if self.sealed[i].retirable(flushed) {
                // On error the segment stays listed (and is retried later).
                self.backend.remove_file(&self.sealed[i].path)?;
                self.sealed.remove(i);
                removed += 1;
            } else {
                i += 1;
            }
        }
        if removed > 0 {
            self.backend.sync_dir(&self.dir)?;
        }
        Ok(removed)
    }

    /// The oldest sealed segment, if any (the one a lagging table pins).
    pub fn oldest_sealed(&self) -> Option<&SegmentInfo> {
        self.sealed.first()
    }

    /// Live segment count (sealed + active).
    pub fn segment_count(&self) -> usize {
        self.sealed.len() + 1
    }
}

fn create_segment(
    dir: &Path,
    backend: &dyn crate::io::Backend,
    no: u64,
) -> Result<(Box<dyn IoFile>, SegmentInfo)> {
    let path = dir.join(segment::file_name(no));
    let file = backend.open(&path, OpenMode::CreateNew)?;
    file.write_at(segment::encode_header(no), 0)?;
    file.sync_all()?;
    backend.sync_dir(dir)?;
    Ok((
        file,
        SegmentInfo {
            no,
            path,
            ..Default::default()
        },
    ))
}
