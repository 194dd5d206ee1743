//! The write-ahead log: one shared, sequential stream of segments.
//! Spec: `formats/wal.md`. Group commit lives in `engine::commit`; this
//! module writes, syncs, rolls over, replays and retires segments.

pub mod frame;
mod replay;
pub mod segment;

pub use replay::{replay, scan_segment, tail_note, Recovery, ReplayOutcome, Verdict};
pub use segment::SegmentInfo;

use crate::error::{Error, Result};
use crate::ids::{SeqNo, TableId};
use crate::io::{Backend, BackendRef, IoFile, OpenMode};
use crate::util::ratelimit::LogEvery;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Default segment size before rolling over.
pub const SEGMENT_BYTES_DEFAULT: u64 = 64 << 20;

/// Zero-fill writes of a preallocated segment.
const PREALLOC_CHUNK: usize = 1 << 20;
/// The next segment is preallocated once the active one holds this many
/// bytes (or a quarter of the segment size, if less): a store that is
/// barely written never zero-fills a whole segment.
const PREALLOC_START_BYTES: u64 = 1 << 20;

/// Appends to the active segment; owns the list of live segments.
pub struct WalWriter {
    dir: PathBuf,
    backend: BackendRef,
    file: Box<dyn IoFile>,
    offset: u64,
    segment_bytes_max: u64,
    active: SegmentInfo,
    sealed: Vec<SegmentInfo>,
    /// Prepare the next segment in the background (`Options::wal_preallocate`).
    preallocate: bool,
    /// The next segment being zero-filled, once started.
    next: Option<std::thread::JoinHandle<Result<Box<dyn IoFile>>>>,
    /// Whether the active segment was preallocated (if not, the writer
    /// moves to a preallocated one as soon as one is ready).
    active_preallocated: bool,
    /// Extra handles on the active segment, one per sync worker of the
    /// group commit (`engine::syncer`), opened before any frame is
    /// written: each open file description then reports every writeback
    /// error of the segment to its own next fdatasync, so concurrent
    /// syncs cannot hide one another's failure.
    syncers: Vec<Arc<dyn IoFile>>,
    /// After a failed preallocation (a full disk), none is tried again
    /// before this instant, and the warning is rate-limited.
    prealloc_retry_at: Option<Instant>,
    prealloc_warn: LogEvery,
}

/// How long after a failed preallocation the next one is tried.
const PREALLOC_RETRY_AFTER: Duration = Duration::from_secs(10);

impl WalWriter {
    /// Start a new segment numbered after `prior`'s; `prior` are the
    /// replayed segments that still hold unflushed edits. `sync_handles`
    /// extra handles per segment serve [`WalWriter::syncer`].
    pub fn open(
        dir: &Path,
        backend: BackendRef,
        prior: Vec<SegmentInfo>,
        last_no: u64,
        segment_bytes_max: u64,
        preallocate: bool,
        sync_handles: usize,
    ) -> Result<Self> {
        let leftover = dir.join(segment::PREALLOC_NAME);
        if leftover.exists() {
            backend.remove_file(&leftover)?;
        }
        let (file, active) = create_segment(dir, &*backend, last_no + 1)?;
        let syncers = open_syncers(&*backend, &active.path, sync_handles)?;
        Ok(WalWriter {
            dir: dir.to_path_buf(),
            backend,
            file,
            offset: segment::SEGMENT_HEADER_LEN as u64,
            segment_bytes_max,
            active,
            sealed: prior,
            preallocate,
            next: None,
            active_preallocated: false,
            syncers,
            prealloc_retry_at: None,
            prealloc_warn: LogEvery::new(Duration::from_secs(60)),
        })
    }

    /// The writer of a read-only store: it lists the replayed `segments`
    /// and refuses every write and sync (nothing is created).
    pub fn read_only(dir: &Path, backend: BackendRef, mut segments: Vec<SegmentInfo>) -> Self {
        let active = segments
            .pop()
            .unwrap_or_else(|| SegmentInfo::new(0, dir.join("(none)")));
        WalWriter {
            dir: dir.to_path_buf(),
            backend,
            file: Box::new(ReadOnlyFile(active.path.clone())),
            offset: segment::SEGMENT_HEADER_LEN as u64,
            segment_bytes_max: u64::MAX,
            active,
            sealed: segments,
            preallocate: false,
            next: None,
            active_preallocated: true,
            syncers: Vec::new(),
            prealloc_retry_at: None,
            prealloc_warn: LogEvery::new(Duration::from_secs(60)),
        }
    }

    /// Write `buf` (whole frames) at the end of the log, rolling over to a
    /// new segment first when the active one is full. `tables` lists
    /// `(table id, last seq)` of the frames. Returns the buffer.
    /// With `sync`, the write is followed by an fdatasync in the same
    /// backend request.
    pub fn write(&mut self, buf: Vec<u8>, tables: &[(TableId, SeqNo)], sync: bool) -> Result<Vec<u8>> {
        let hdr = segment::SEGMENT_HEADER_LEN as u64;
        let full = self.offset + buf.len() as u64 > self.segment_bytes_max;
        let upgrade = !self.active_preallocated && self.prepared_ready();
        if self.offset > hdr && (full || upgrade) {
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
        let start = (self.segment_bytes_max / 4).min(PREALLOC_START_BYTES);
        let backing_off = self.prealloc_retry_at.is_some_and(|t| Instant::now() < t);
        if self.preallocate && self.next.is_none() && self.offset > start && !backing_off {
            self.next = Some(spawn_prealloc(
                self.dir.join(segment::PREALLOC_NAME),
                self.backend.clone(),
                self.segment_bytes_max,
            ));
        }
        Ok(buf)
    }

    /// fdatasync the active segment.
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync_data()
    }

    /// Sync handle `i` of the active segment: an fdatasync through it
    /// makes every frame written so far durable (frames of earlier
    /// segments were synced when the writer rolled past them), and
    /// reports any writeback error of the segment not yet reported
    /// through this handle.
    pub fn syncer(&self, i: usize) -> Arc<dyn IoFile> {
        self.syncers[i].clone()
    }

    fn roll(&mut self) -> Result<()> {
        self.file.sync_data()?;
        let no = self.active.no + 1;
        let prepared = self.take_prepared();
        self.active_preallocated = prepared.is_some();
        let (file, info) = match prepared {
            Some(f) => publish_prepared(&self.dir, &*self.backend, f, no)?,
            None => create_segment(&self.dir, &*self.backend, no)?,
        };
        self.syncers = open_syncers(&*self.backend, &info.path, self.syncers.len())?;
        self.file = file;
        self.offset = segment::SEGMENT_HEADER_LEN as u64;
        let old = std::mem::replace(&mut self.active, info);
        self.sealed.push(old);
        Ok(())
    }

    fn prepared_ready(&self) -> bool {
        self.next.as_ref().is_some_and(|h| h.is_finished())
    }

    /// The preallocated next segment, if its zero-fill has finished (a
    /// roll never waits for it: without one, the next segment is created
    /// empty and grows as it is written). A failed preallocation is
    /// logged and dropped.
    fn take_prepared(&mut self) -> Option<Box<dyn IoFile>> {
        if !self.prepared_ready() {
            return None;
        }
        let joined = self.next.take()?.join();
        match joined {
            Ok(Ok(f)) => Some(f),
            Ok(Err(e)) => {
                let now = Instant::now();
                self.prealloc_retry_at = Some(now + PREALLOC_RETRY_AFTER);
                if let Some(held) = self.prealloc_warn.check(now) {
                    tracing::warn!(
                        "WAL preallocation failed ({e}); the next segment grows as written \
                         ({held} more failures since the last warning; retried every {} s)",
                        PREALLOC_RETRY_AFTER.as_secs()
                    );
                }
                let _ = self
                    .backend
                    .remove_file(&self.dir.join(segment::PREALLOC_NAME));
                None
            }
            Err(_) => {
                tracing::error!("WAL preallocation thread panicked");
                None
            }
        }
    }

    /// Delete sealed segments whose every edit is flushed. Returns how many.
    pub fn retire(&mut self, flushed: &dyn Fn(TableId) -> SeqNo) -> Result<usize> {
        let segs = self.take_retirable(flushed);
        let n = segs.len();
        let backend = self.backend.clone();
        let dir = self.dir.clone();
        self.delete_or_restore(delete_segments(&*backend, &dir, segs))?;
        Ok(n)
    }

    /// Take the sealed segments whose every edit is flushed off the list.
    /// The caller deletes them with [`delete_segments`] — outside the lock
    /// the writer lives behind, so the unlinks and the directory fsync do
    /// not hold up appends — and hands failures to
    /// [`WalWriter::delete_or_restore`].
    pub fn take_retirable(&mut self, flushed: &dyn Fn(TableId) -> SeqNo) -> Vec<SegmentInfo> {
        let (gone, keep) = std::mem::take(&mut self.sealed)
            .into_iter()
            .partition(|s| s.retirable(flushed));
        self.sealed = keep;
        gone
    }

    /// Put back the segments [`delete_segments`] could not delete (they
    /// are retried at the next retirement) and return its error.
    pub fn delete_or_restore(
        &mut self,
        outcome: std::result::Result<(), (Vec<SegmentInfo>, Error)>,
    ) -> Result<()> {
        let Err((failed, e)) = outcome else {
            return Ok(());
        };
        self.sealed.extend(failed);
        self.sealed.sort_by_key(|s| s.no);
        Err(e)
    }

    /// The backend and directory [`delete_segments`] needs.
    pub fn files(&self) -> (BackendRef, PathBuf) {
        (self.backend.clone(), self.dir.clone())
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

impl Drop for WalWriter {
    /// Wait for a preallocation in progress, so no thread writes into the
    /// directory after the store is closed (the file is deleted at the
    /// next open).
    fn drop(&mut self) {
        if let Some(h) = self.next.take() {
            let _ = h.join();
        }
    }
}

/// Zero-fill `path` to `len` bytes and fsync it, on its own thread, so
/// that writes into it later overwrite allocated blocks and an
/// fdatasync has no file-size or extent metadata to commit.
fn spawn_prealloc(
    path: PathBuf,
    backend: BackendRef,
    len: u64,
) -> std::thread::JoinHandle<Result<Box<dyn IoFile>>> {
    std::thread::spawn(move || {
        let file = backend.open(&path, OpenMode::CreateNew)?;
        let mut buf = vec![0u8; PREALLOC_CHUNK];
        let mut off = 0u64;
        while off < len {
            let n = (len - off).min(PREALLOC_CHUNK as u64) as usize;
            buf.resize(n, 0);
            buf = file.write_sync_at(buf, off)?;
            off += n as u64;
        }
        file.sync_all()?;
        Ok(file)
    })
}

/// Make a preallocated file segment `no`: header written and synced
/// before the rename, so a file under a segment name always has one.
fn publish_prepared(
    dir: &Path,
    backend: &dyn crate::io::Backend,
    file: Box<dyn IoFile>,
    no: u64,
) -> Result<(Box<dyn IoFile>, SegmentInfo)> {
    let path = dir.join(segment::file_name(no));
    file.write_sync_at(segment::encode_header(no), 0)?;
    backend.rename(&dir.join(segment::PREALLOC_NAME), &path)?;
    backend.sync_dir(dir)?;
    Ok((file, SegmentInfo::new(no, path)))
}

fn open_syncers(backend: &dyn Backend, path: &Path, n: usize) -> Result<Vec<Arc<dyn IoFile>>> {
    (0..n)
        .map(|_| backend.open(path, OpenMode::ReadWrite).map(Arc::from))
        .collect()
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
    Ok((file, SegmentInfo::new(no, path)))
}

/// Delete retired segments and fsync the directory. On failure, the
/// segments not known to be gone come back with the error (a segment
/// whose unlink succeeded but whose directory fsync failed is listed again
/// too: deleting it twice is harmless, forgetting it is not).
pub fn delete_segments(
    backend: &dyn Backend,
    dir: &Path,
    segs: Vec<SegmentInfo>,
) -> std::result::Result<(), (Vec<SegmentInfo>, Error)> {
    if segs.is_empty() {
        return Ok(());
    }
    for (i, s) in segs.iter().enumerate() {
        // Gone already: a retry after a failed directory fsync.
        if !s.path.exists() {
            continue;
        }
        if let Err(e) = backend.remove_file(&s.path) {
            return Err((segs.into_iter().skip(i).collect(), e));
        }
    }
    match backend.sync_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) => Err((segs, e)),
    }
}

/// The active "segment" of a read-only store's writer: every operation is
/// refused with [`Error::ReadOnly`].
struct ReadOnlyFile(PathBuf);

impl ReadOnlyFile {
    fn refuse<T>(&self, what: &'static str) -> Result<T> {
        let dir = self.0.parent().map(Path::to_path_buf).unwrap_or_default();
        Err(Error::ReadOnly { what, dir })
    }
}

impl IoFile for ReadOnlyFile {
    fn write_at(&self, _: Vec<u8>, _: u64) -> Result<Vec<u8>> {
        self.refuse("WAL write")
    }
    fn read_at(&self, _: usize, _: u64) -> Result<Vec<u8>> {
        self.refuse("WAL read through the writer")
    }
    fn sync_data(&self) -> Result<()> {
        self.refuse("WAL sync")
    }
    fn sync_all(&self) -> Result<()> {
        self.refuse("WAL sync")
    }
    fn set_len(&self, _: u64) -> Result<()> {
        self.refuse("WAL truncate")
    }
    fn path(&self) -> &Path {
        &self.0
    }
}
