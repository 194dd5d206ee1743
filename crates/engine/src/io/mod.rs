//! The I/O backend: one small trait with owned buffers, so that io_uring
//! (which needs buffers it can own while the kernel writes them) and plain
//! pwrite/pread share one interface.
//!
//! Every WAL append and fsync, every HFile and manifest write and fsync, and
//! the renames that publish files go through the selected [`Backend`].
//! Reads of immutable files may use `pread` directly.

#[doc(hidden)]
pub mod direct;
#[doc(hidden)]
pub mod fault;
mod local_ring;
pub mod priority;
mod probe;
#[doc(hidden)]
pub mod rate;
mod std_backend;
mod uring;

use crate::error::{Error, Result};
use std::path::Path;
use std::sync::Arc;

pub use local_ring::{local_ring_ops_completed, LocalRing};
pub use probe::probe_uring;
pub use std_backend::StdBackend;
pub use uring::{uring_ops_completed, UringBackend};

/// Which backend a store uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoKind {
    /// io_uring (tokio-uring on a ring thread).
    Uring,
    /// Plain blocking calls.
    Std,
}

impl IoKind {
    /// `uring` or `std`.
    pub fn name(self) -> &'static str {
        match self {
            IoKind::Uring => "uring",
            IoKind::Std => "std",
        }
    }
}

/// What the caller asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum IoChoice {
    /// Probe io_uring once; fall back to std with one warning.
    #[default]
    Auto,
    /// io_uring or an error.
    Uring,
    /// pwrite/pread.
    Std,
}

impl IoChoice {
    /// Parse `auto`, `uring` or `std`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "auto" | "" => Ok(IoChoice::Auto),
            "uring" => Ok(IoChoice::Uring),
            "std" => Ok(IoChoice::Std),
            other => Err(Error::invalid(
                "io backend",
                format!("{other:?} (expected auto, uring or std)"),
            )),
        }
    }

    /// The choice named by `TELESTORE_IO`, or `Auto` when unset.
    pub fn from_env() -> Result<Self> {
        match std::env::var("TELESTORE_IO") {
            Ok(v) => Self::parse(&v),
            Err(_) => Ok(IoChoice::Auto),
        }
    }
}

/// How to open a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Create a new file; fail if it exists. Read + write.
    CreateNew,
    /// As `CreateNew`, for one front-to-back pass of large writes that
    /// bypass the page cache where they can ([`direct`] has the rules).
    CreateNewDirect,
    /// Open an existing file read + write.
    ReadWrite,
    /// Open an existing file for reading only (a read-only store).
    ReadOnly,
    /// Open a directory (only to fsync it).
    Directory,
}

/// An open file. Buffers are passed by value and handed back.
pub trait IoFile: Send + Sync {
    /// Write all of `buf` at `offset`; returns the buffer for reuse.
    fn write_at(&self, buf: Vec<u8>, offset: u64) -> Result<Vec<u8>>;
    /// Read exactly `len` bytes at `offset`.
    fn read_at(&self, len: usize, offset: u64) -> Result<Vec<u8>>;
    /// fdatasync.
    fn sync_data(&self) -> Result<()>;
    /// Write all of `buf` at `offset`, then fdatasync: one request where the
    /// backend can chain them (a WAL group commit).
    fn write_sync_at(&self, buf: Vec<u8>, offset: u64) -> Result<Vec<u8>> {
        let buf = self.write_at(buf, offset)?;
        self.sync_data()?;
        Ok(buf)
    }
    /// fsync.
    fn sync_all(&self) -> Result<()>;
    /// Truncate or extend.
    fn set_len(&self, len: u64) -> Result<()>;
    /// Path the file was opened with (for errors).
    fn path(&self) -> &Path;
}

/// A storage backend.
pub trait Backend: Send + Sync {
    /// Which backend this is.
    fn kind(&self) -> IoKind;
    /// Open `path` in `mode`.
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Box<dyn IoFile>>;
    /// Atomically rename `from` to `to`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Remove a file.
    fn remove_file(&self, path: &Path) -> Result<()>;
    /// Give the calling thread its own ring for the ops it issues, for as
    /// long as the guard lives (io_uring only: [`LocalRing`] says when it
    /// pays). `None` on other backends, or when the thread cannot have one
    /// (logged); its ops then take the usual path.
    fn thread_ring(&self) -> Option<LocalRing> {
        None
    }
    /// fsync a directory so that renames and creations in it are durable.
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.open(dir, OpenMode::Directory)?.sync_all()
    }
}

/// Shared handle to a backend.
pub type BackendRef = Arc<dyn Backend>;

/// Select a backend: `Auto` probes io_uring once and falls back to std
/// with a single warning; `Uring` fails when io_uring is unavailable.
pub fn select(choice: IoChoice) -> Result<BackendRef> {
    match choice {
        IoChoice::Std => Ok(Arc::new(StdBackend)),
        IoChoice::Uring => {
            probe_uring().map_err(|reason| Error::BackendUnavailable {
                backend: "uring",
                reason,
            })?;
            Ok(Arc::new(UringBackend::start()?))
        }
        IoChoice::Auto => match probe_uring()
            .and_then(|()| UringBackend::start().map_err(|e| e.to_string()))
        {
            Ok(b) => Ok(Arc::new(b)),
            Err(reason) => {
                tracing::warn!("io_uring unavailable ({reason}); using the std (pwrite) backend");
                Ok(Arc::new(StdBackend))
            }
        },
    }
}

/// Ask the kernel to read `len` bytes of `file` into the page cache in the
/// background (`posix_fadvise(POSIX_FADV_WILLNEED)`). False where that is
/// unavailable or refused; nothing depends on it but speed.
pub fn advise_willneed(file: &std::fs::File, len: u64) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let Ok(len) = libc::off_t::try_from(len) else {
            return false;
        };
        #[allow(unsafe_code)]
        // SAFETY: a syscall on a descriptor `file` keeps open; no memory
        // is passed.
        let r = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, len, libc::POSIX_FADV_WILLNEED) };
        r == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (file, len);
        false
    }
}
