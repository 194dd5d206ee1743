//! Direct (page-cache bypassing) writes for files written once, front to
//! back: HFiles from flushes and compactions.
//!
//! Why: a WAL fdatasync makes the disk flush its write cache, and that
//! flush waits for every write the device has queued. Buffered HFile
//! writes reach the device as kernel writeback: bursts of many MiB that a
//! group commit's fdatasync then queues behind. With `O_DIRECT` each HFile
//! write goes to the device as it is issued, one chunk at a time, so a WAL
//! sync waits behind at most one chunk (benches/RESULTS.md, "Direct HFile
//! writes").
//!
//! Rules, the same for every backend:
//! - A file opened with [`super::OpenMode::CreateNewDirect`] tries
//!   `O_DIRECT`; a filesystem that refuses it (tmpfs) gets a plain file.
//! - A write whose offset and length are multiples of [`DIRECT_ALIGN`] is
//!   copied to an aligned staging buffer and written direct.
//! - Any other write (a file's last, partial block) and any read first
//!   turn `O_DIRECT` off for that file for good, and go buffered. So does a
//!   direct write the kernel rejects with `EINVAL`, retried buffered.
//!   Nothing is lost either way; only the page-cache bypass is.
//! - fsync is still needed: direct writes may sit in the disk's cache, and
//!   the file's size and extents are metadata.
//! - Writers that want it take turns through [`lane`]: one direct write in
//!   flight per process, so a flush and a compaction writing at the same
//!   time still put one chunk at a time before a WAL sync.

use std::io;
use std::ops::Range;
use std::os::fd::RawFd;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Offset, length and memory alignment of a direct write. 4 KiB covers
/// disks with 512-byte and 4 KiB logical blocks.
pub const DIRECT_ALIGN: usize = 4096;

static LANE: Mutex<()> = Mutex::new(());

/// Hold while issuing one direct write: background writers take turns.
pub fn lane() -> MutexGuard<'static, ()> {
    LANE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether a write of `len` bytes at `offset` may go direct.
pub fn aligned(offset: u64, len: usize) -> bool {
    offset.is_multiple_of(DIRECT_ALIGN as u64) && len.is_multiple_of(DIRECT_ALIGN) && len > 0
}

/// Whether an error is the kernel refusing `O_DIRECT` (at open or write).
pub fn refused(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINVAL)
}

/// Turn `O_DIRECT` off on an open descriptor.
pub fn clear_direct(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl with F_GETFL/F_SETFL on a descriptor the caller keeps
    // open for the duration of the call; no memory is passed.
    #[allow(unsafe_code)]
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(unsafe_code)]
    let r = unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_DIRECT) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// An aligned copy of one write: a `Vec` with room to start its data on
/// a [`DIRECT_ALIGN`] boundary (no custom allocator, no unsafe).
#[derive(Default)]
struct Staging {
    buf: Vec<u8>,
}

impl Staging {
    /// Copy `data` to an aligned place; returns the range of the buffer
    /// that holds it.
    fn load(&mut self, data: &[u8]) -> Range<usize> {
        let need = data.len() + DIRECT_ALIGN;
        if self.buf.len() < need {
            self.buf = vec![0; need];
        }
        let misalign = self.buf.as_ptr() as usize % DIRECT_ALIGN;
        let start = (DIRECT_ALIGN - misalign) % DIRECT_ALIGN;
        let range = start..start + data.len();
        self.buf[range.clone()].copy_from_slice(data);
        range
    }

    /// Hand the buffer over (an io_uring write owns it while in flight).
    fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// Take a buffer back after an owned write.
    fn put(&mut self, buf: Vec<u8>) {
        self.buf = buf;
    }
}

/// A file's direct state, the same for every backend: `Some` staging
/// buffer while its descriptor has `O_DIRECT`.
pub struct DirectState(Mutex<Option<Staging>>);

impl DirectState {
    pub fn new(direct: bool) -> Self {
        DirectState(Mutex::new(direct.then(Staging::default)))
    }

    /// Write `buf` at `offset` direct, if the file has `O_DIRECT` and the
    /// write is aligned: `write` gets an aligned copy and the range of it
    /// to write, and hands the copy back. `Ok(false)`: the caller writes
    /// `buf` buffered, `O_DIRECT` being off from now on (the file never
    /// had it, the write is unaligned, or the kernel refused it).
    pub fn write(
        &self,
        fd: RawFd,
        buf: &[u8],
        offset: u64,
        write: impl FnOnce(Vec<u8>, Range<usize>) -> (io::Result<()>, Vec<u8>),
    ) -> io::Result<bool> {
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(staging) = state.as_mut() else {
            return Ok(false);
        };
        if aligned(offset, buf.len()) {
            let range = staging.load(buf);
            let (r, copy) = write(staging.take(), range);
            staging.put(copy);
            match r {
                Ok(()) => return Ok(true),
                Err(e) if refused(&e) => {}
                Err(e) => return Err(e),
            }
        }
        end(fd, &mut state)?;
        Ok(false)
    }

    /// Turn `O_DIRECT` off for good (before a read).
    pub fn end(&self, fd: RawFd) -> io::Result<()> {
        end(
            fd,
            &mut self.0.lock().unwrap_or_else(PoisonError::into_inner),
        )
    }
}

fn end(fd: RawFd, state: &mut Option<Staging>) -> io::Result<()> {
    if state.is_some() {
        clear_direct(fd)?;
        *state = None;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staged_data_starts_on_an_aligned_address() {
        let mut s = Staging::default();
        for len in [4096usize, 8192, 1 << 20] {
            let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let r = s.load(&data);
            assert_eq!(s.buf[r.clone()], data[..]);
            assert_eq!(s.buf[r].as_ptr() as usize % DIRECT_ALIGN, 0);
        }
    }

    #[test]
    fn only_whole_aligned_blocks_go_direct() {
        assert!(aligned(0, 4096));
        assert!(aligned(8192, 1 << 20));
        assert!(!aligned(0, 0));
        assert!(!aligned(512, 4096));
        assert!(!aligned(4096, 4000));
    }
}
