//! The std backend: pwrite/pread/fdatasync through `std::fs`.

use super::direct::{self, Staging};
use super::{Backend, IoFile, IoKind, OpenMode};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// pwrite/pread backend.
#[derive(Debug, Default)]
pub struct StdBackend;

struct StdFile {
    file: File,
    path: PathBuf,
    /// `Some` while the descriptor has `O_DIRECT` (see [`direct`]).
    direct: Mutex<Option<Staging>>,
}

impl StdFile {
    /// Write through `O_DIRECT` when the file has it and the write is
    /// aligned. `Ok(false)`: the caller writes buffered (`O_DIRECT` is off
    /// from now on).
    fn try_direct(&self, buf: &[u8], offset: u64) -> Result<bool> {
        let mut direct = self.direct.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(staging) = direct.as_mut() else {
            return Ok(false);
        };
        if direct::aligned(offset, buf.len()) {
            let range = staging.load(buf);
            match self.file.write_all_at(&staging.buf()[range], offset) {
                Ok(()) => return Ok(true),
                Err(e) if direct::refused(&e) => {}
                Err(e) => return Err(Error::io(&self.path, e)),
            }
        }
        self.end_direct(&mut direct)?;
        Ok(false)
    }

    /// Turn `O_DIRECT` off for good (before an unaligned write or a read).
    fn end_direct(&self, direct: &mut Option<Staging>) -> Result<()> {
        if direct.is_some() {
            direct::clear_direct(self.file.as_raw_fd()).map_err(|e| Error::io(&self.path, e))?;
            *direct = None;
        }
        Ok(())
    }
}

impl IoFile for StdFile {
    fn write_at(&self, buf: Vec<u8>, offset: u64) -> Result<Vec<u8>> {
        if !self.try_direct(&buf, offset)? {
            self.file
                .write_all_at(&buf, offset)
                .map_err(|e| Error::io(&self.path, e))?;
        }
        Ok(buf)
    }
    fn read_at(&self, len: usize, offset: u64) -> Result<Vec<u8>> {
        self.end_direct(&mut self.direct.lock().unwrap_or_else(PoisonError::into_inner))?;
        let mut buf = vec![0u8; len];
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(|e| Error::io(&self.path, e))?;
        Ok(buf)
    }
    fn sync_data(&self) -> Result<()> {
        self.file.sync_data().map_err(|e| Error::io(&self.path, e))
    }
    fn sync_all(&self) -> Result<()> {
        self.file.sync_all().map_err(|e| Error::io(&self.path, e))
    }
    fn set_len(&self, len: u64) -> Result<()> {
        self.file.set_len(len).map_err(|e| Error::io(&self.path, e))
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

fn open_file(path: &Path, mode: OpenMode, direct_flag: bool) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    match mode {
        OpenMode::CreateNew | OpenMode::CreateNewDirect => {
            o.read(true).write(true).create_new(true)
        }
        OpenMode::ReadWrite => o.read(true).write(true),
        OpenMode::Directory => o.read(true),
    };
    if direct_flag {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path)
}

/// Open without `O_DIRECT` after the filesystem refused it. Linux checks
/// `O_DIRECT` after `O_CREAT | O_EXCL` created the file, so the empty file
/// may be there already: it is ours.
fn plain_after_refusal(path: &Path, mode: OpenMode) -> std::io::Result<File> {
    match open_file(path, mode, false) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            open_file(path, OpenMode::ReadWrite, false)
        }
        other => other,
    }
}

impl Backend for StdBackend {
    fn kind(&self) -> IoKind {
        IoKind::Std
    }
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Box<dyn IoFile>> {
        let mut direct = mode == OpenMode::CreateNewDirect;
        let file = match open_file(path, mode, direct) {
            Err(e) if direct && direct::refused(&e) => {
                direct = false;
                plain_after_refusal(path, mode)
            }
            other => other,
        }
        .map_err(|e| Error::io(path, e))?;
        Ok(Box::new(StdFile {
            file,
            path: path.to_path_buf(),
            direct: Mutex::new(direct.then(Staging::default)),
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io(from, e))
    }
    fn remove_file(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io(path, e))
    }
}
