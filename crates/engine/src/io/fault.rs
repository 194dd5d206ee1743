//! A fault-injecting wrapper around any backend, for tests: fail the Nth
//! sync, fail writes after a point, count operations.

use super::{Backend, BackendRef, IoFile, IoKind, OpenMode};
use crate::error::{Error, Result};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Shared fault plan. `u64::MAX` means "never".
#[derive(Debug)]
pub struct Faults {
    /// Syncs so far.
    pub syncs: AtomicU64,
    /// Fail every sync once `syncs` reaches this count.
    pub fail_sync_from: AtomicU64,
    /// Writes so far.
    pub writes: AtomicU64,
    /// Fail every write once `writes` reaches this count.
    pub fail_write_from: AtomicU64,
    /// Fail every file removal while set.
    pub fail_remove: std::sync::atomic::AtomicBool,
    /// The sync with this number (counting from 0, as `syncs` does)
    /// takes `slow_sync_ms` longer...
    pub slow_sync_at: AtomicU64,
    pub slow_sync_ms: AtomicU64,
    /// ...and then fails, when set.
    pub slow_sync_fails: std::sync::atomic::AtomicBool,
    /// Set once the slow sync is over.
    pub slow_sync_done: std::sync::atomic::AtomicBool,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            syncs: AtomicU64::new(0),
            fail_sync_from: AtomicU64::new(u64::MAX),
            writes: AtomicU64::new(0),
            fail_write_from: AtomicU64::new(u64::MAX),
            fail_remove: std::sync::atomic::AtomicBool::new(false),
            slow_sync_at: AtomicU64::new(u64::MAX),
            slow_sync_ms: AtomicU64::new(0),
            slow_sync_fails: std::sync::atomic::AtomicBool::new(false),
            slow_sync_done: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

/// Backend wrapper applying [`Faults`].
pub struct FaultyBackend {
    inner: BackendRef,
    faults: Arc<Faults>,
}

impl FaultyBackend {
    pub fn new(inner: BackendRef, faults: Arc<Faults>) -> Self {
        FaultyBackend { inner, faults }
    }
}

fn injected(path: &Path, what: &str) -> Error {
    Error::io(
        path,
        std::io::Error::other(format!("injected {what} failure")),
    )
}

struct FaultyFile {
    inner: Box<dyn IoFile>,
    faults: Arc<Faults>,
}

impl FaultyFile {
    fn sync_check(&self) -> Result<()> {
        let f = &self.faults;
        let n = f.syncs.fetch_add(1, Ordering::SeqCst);
        if n == f.slow_sync_at.load(Ordering::SeqCst) {
            let ms = f.slow_sync_ms.load(Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(ms));
            f.slow_sync_done.store(true, Ordering::SeqCst);
            if f.slow_sync_fails.load(Ordering::SeqCst) {
                return Err(injected(self.inner.path(), "slow fsync"));
            }
        }
        if n >= f.fail_sync_from.load(Ordering::SeqCst) {
            return Err(injected(self.inner.path(), "fsync"));
        }
        Ok(())
    }
}

impl IoFile for FaultyFile {
    fn write_at(&self, buf: Vec<u8>, offset: u64) -> Result<Vec<u8>> {
        let n = self.faults.writes.fetch_add(1, Ordering::SeqCst);
        if n >= self.faults.fail_write_from.load(Ordering::SeqCst) {
            return Err(injected(self.inner.path(), "write"));
        }
        self.inner.write_at(buf, offset)
    }
    fn read_at(&self, len: usize, offset: u64) -> Result<Vec<u8>> {
        self.inner.read_at(len, offset)
    }
    fn sync_data(&self) -> Result<()> {
        self.sync_check()?;
        self.inner.sync_data()
    }
    fn sync_all(&self) -> Result<()> {
        self.sync_check()?;
        self.inner.sync_all()
    }
    fn set_len(&self, len: u64) -> Result<()> {
        self.inner.set_len(len)
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
}

impl Backend for FaultyBackend {
    fn kind(&self) -> IoKind {
        self.inner.kind()
    }
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Box<dyn IoFile>> {
        Ok(Box::new(FaultyFile {
            inner: self.inner.open(path, mode)?,
            faults: self.faults.clone(),
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }
    fn thread_ring(&self) -> Option<super::LocalRing> {
        self.inner.thread_ring()
    }
    fn remove_file(&self, path: &Path) -> Result<()> {
        if self.faults.fail_remove.load(Ordering::SeqCst) {
            return Err(injected(path, "unlink"));
        }
        self.inner.remove_file(path)
    }
}
