//! The std backend: pwrite/pread/fdatasync through `std::fs`.

use super::direct::{self, DirectState};
use super::{Backend, IoFile, IoKind, OpenMode};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// pwrite/pread backend.
#[derive(Debug, Default)]
pub struct StdBackend;

struct StdFile {
    file: File,
    path: PathBuf,
    direct: DirectState,
}

impl IoFile for StdFile {
    fn write_at(&self, buf: Vec<u8>, offset: u64) -> Result<Vec<u8>> {
        let fd = self.file.as_raw_fd();
        let direct = self.direct.write(fd, &buf, offset, |copy, range| {
            (self.file.write_all_at(&copy[range], offset), copy)
        });
        if !direct.map_err(|e| Error::io(&self.path, e))? {
            self.file
                .write_all_at(&buf, offset)
                .map_err(|e| Error::io(&self.path, e))?;
        }
        Ok(buf)
    }
    fn read_at(&self, len: usize, offset: u64) -> Result<Vec<u8>> {
        self.direct
            .end(self.file.as_raw_fd())
            .map_err(|e| Error::io(&self.path, e))?;
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
        OpenMode::ReadOnly | OpenMode::Directory => o.read(true),
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

/// Open `path` as `mode` asks. `CreateNewDirect` tries `O_DIRECT` and
/// opens plain when the filesystem refuses it; the flag says which it got.
/// Both backends open files this way.
pub(super) fn open_std(path: &Path, mode: OpenMode) -> Result<(File, bool)> {
    let direct = mode == OpenMode::CreateNewDirect;
    match open_file(path, mode, direct) {
        Ok(f) => Ok((f, direct)),
        Err(e) if direct && direct::refused(&e) => {
            plain_after_refusal(path, mode).map(|f| (f, false))
        }
        Err(e) => Err(e),
    }
    .map_err(|e| Error::io(path, e))
}

impl Backend for StdBackend {
    fn kind(&self) -> IoKind {
        IoKind::Std
    }
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Box<dyn IoFile>> {
        let (file, direct) = open_std(path, mode)?;
        Ok(Box::new(StdFile {
            file,
            path: path.to_path_buf(),
            direct: DirectState::new(direct),
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io(from, e))
    }
    fn remove_file(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io(path, e))
    }
}
