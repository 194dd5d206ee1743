//! The std backend: pwrite/pread/fdatasync through `std::fs`.

use super::{Backend, IoFile, IoKind, OpenMode};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// pwrite/pread backend.
#[derive(Debug, Default)]
pub struct StdBackend;

struct StdFile {
    file: File,
    path: PathBuf,
}

impl IoFile for StdFile {
    fn write_at(&self, buf: Vec<u8>, offset: u64) -> Result<Vec<u8>> {
        self.file
            .write_all_at(&buf, offset)
            .map_err(|e| Error::io(&self.path, e))?;
        Ok(buf)
    }
    fn read_at(&self, len: usize, offset: u64) -> Result<Vec<u8>> {
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

impl Backend for StdBackend {
    fn kind(&self) -> IoKind {
        IoKind::Std
    }
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Box<dyn IoFile>> {
        let mut o = OpenOptions::new();
        match mode {
            OpenMode::CreateNew => o.read(true).write(true).create_new(true),
            OpenMode::ReadWrite => o.read(true).write(true),
            OpenMode::Directory => o.read(true),
        };
        let file = o.open(path).map_err(|e| Error::io(path, e))?;
        Ok(Box::new(StdFile {
            file,
            path: path.to_path_buf(),
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io(from, e))
    }
    fn remove_file(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io(path, e))
    }
}
