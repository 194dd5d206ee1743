//! Export to files: Arrow IPC file, Arrow IPC stream or Parquet, written
//! batch by batch under a temporary name and renamed into place only
//! when complete (an interrupted export leaves nothing under the final
//! name; the temporary file is removed on error or interruption).

use arrow_array::RecordBatch;
use arrow_ipc::writer::{FileWriter, IpcWriteOptions, StreamWriter};
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use telestore_engine::error::{Error, Result};

/// Rows per Parquet row group.
pub const PARQUET_ROW_GROUP_ROWS: usize = 256 * 1024;

/// A file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum FileFormat {
    /// Arrow IPC file (random access, `.arrow`).
    Arrow,
    /// Arrow IPC stream (`.arrows`).
    #[cfg_attr(feature = "clap", value(name = "arrow-stream"))]
    #[serde(rename = "arrow-stream")]
    ArrowStream,
    /// Apache Parquet.
    Parquet,
}

/// Compression inside the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Codec {
    /// Uncompressed.
    None,
    /// Zstandard.
    Zstd,
    /// LZ4.
    Lz4,
}

impl FileFormat {
    /// Default compression: none for Arrow (fastest to write and to map),
    /// zstd for Parquet.
    pub fn default_codec(self) -> Codec {
        match self {
            FileFormat::Parquet => Codec::Zstd,
            _ => Codec::None,
        }
    }
}

enum Inner {
    File(FileWriter<BufWriter<File>>),
    Stream(StreamWriter<BufWriter<File>>),
    Parquet(Box<ArrowWriter<File>>),
}

/// A file being exported.
pub struct FileSink {
    inner: Option<Inner>,
    tmp: PathBuf,
    dest: PathBuf,
    rows: u64,
    committed: bool,
}

fn ipc_options(codec: Codec) -> Result<IpcWriteOptions> {
    use arrow_ipc::CompressionType;
    let c = match codec {
        Codec::None => None,
        Codec::Zstd => Some(CompressionType::ZSTD),
        Codec::Lz4 => Some(CompressionType::LZ4_FRAME),
    };
    IpcWriteOptions::default()
        .try_with_compression(c)
        .map_err(|e| Error::invalid("--compression", e.to_string()))
}

impl FileSink {
    /// Start writing `dest` (through a temporary sibling file).
    pub fn create(
        dest: &Path,
        format: FileFormat,
        codec: Codec,
        schema: &SchemaRef,
    ) -> Result<Self> {
        let name = dest.file_name().ok_or_else(|| {
            Error::invalid("--out", format!("{} is not a file name", dest.display()))
        })?;
        if dest.is_dir() {
            return Err(Error::invalid(
                "--out",
                format!("{} is a directory", dest.display()),
            ));
        }
        let tmp = dest.with_file_name(format!(
            ".{}.tmp-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        let file = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        let mut sink = FileSink {
            inner: None,
            tmp,
            dest: dest.to_path_buf(),
            rows: 0,
            committed: false,
        };
        let arrow = |e: arrow_schema::ArrowError| Error::invalid("export", e.to_string());
        sink.inner = Some(match format {
            FileFormat::Arrow => Inner::File(
                FileWriter::try_new_with_options(BufWriter::new(file), schema, ipc_options(codec)?)
                    .map_err(arrow)?,
            ),
            FileFormat::ArrowStream => Inner::Stream(
                StreamWriter::try_new_with_options(
                    BufWriter::new(file),
                    schema,
                    ipc_options(codec)?,
                )
                .map_err(arrow)?,
            ),
            FileFormat::Parquet => {
                use parquet::basic::{Compression, ZstdLevel};
                let c = match codec {
                    Codec::None => Compression::UNCOMPRESSED,
                    Codec::Zstd => Compression::ZSTD(ZstdLevel::default()),
                    Codec::Lz4 => Compression::LZ4_RAW,
                };
                // Parquet buffers a whole row group before writing it: a
                // smaller group than the default (1 Mi rows) bounds memory.
                let props = WriterProperties::builder()
                    .set_compression(c)
                    .set_max_row_group_row_count(Some(PARQUET_ROW_GROUP_ROWS))
                    .build();
                Inner::Parquet(Box::new(
                    ArrowWriter::try_new(file, schema.clone(), Some(props))
                        .map_err(|e| Error::invalid("export", e.to_string()))?,
                ))
            }
        });
        Ok(sink)
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Write one batch.
    pub fn write(&mut self, b: &RecordBatch) -> Result<()> {
        self.rows += b.num_rows() as u64;
        let r = match self.inner.as_mut() {
            Some(Inner::File(w)) => w.write(b).map_err(|e| e.to_string()),
            Some(Inner::Stream(w)) => w.write(b).map_err(|e| e.to_string()),
            Some(Inner::Parquet(w)) => w.write(b).map_err(|e| e.to_string()),
            None => Err("already finished".into()),
        };
        r.map_err(|m| Error::io(&self.tmp, std::io::Error::other(m)))
    }

    /// Complete the file, fsync it and rename it into place.
    pub fn commit(mut self) -> Result<PathBuf> {
        let tmp = self.tmp.clone();
        let err = |m: String| Error::io(&tmp, std::io::Error::other(m));
        let file: File = match self.inner.take() {
            Some(Inner::File(mut w)) => {
                w.finish().map_err(|e| err(e.to_string()))?;
                w.into_inner()
                    .map_err(|e| err(e.to_string()))?
                    .into_inner()
                    .map_err(|e| err(e.to_string()))?
            }
            Some(Inner::Stream(mut w)) => {
                w.finish().map_err(|e| err(e.to_string()))?;
                w.into_inner()
                    .map_err(|e| err(e.to_string()))?
                    .into_inner()
                    .map_err(|e| err(e.to_string()))?
            }
            Some(Inner::Parquet(w)) => w.into_inner().map_err(|e| err(e.to_string()))?,
            None => return Err(err("already finished".into())),
        };
        file.sync_all().map_err(|e| Error::io(&tmp, e))?;
        drop(file);
        std::fs::rename(&tmp, &self.dest).map_err(|e| Error::io(&self.dest, e))?;
        self.committed = true;
        let parent = match self.dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        File::open(&parent)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io(&parent, e))?;
        Ok(self.dest.clone())
    }
}

impl Drop for FileSink {
    /// Not committed: remove the temporary file.
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Batches queued between the query and the file writer thread.
const WRITER_QUEUE: usize = 4;

/// A [`FileSink`] fed from another thread: encoding, compression and
/// `write(2)` (which blocks when the kernel throttles dirty pages) overlap
/// with the scan instead of stalling it. Memory stays bounded: at most
/// [`WRITER_QUEUE`] batches wait.
pub struct BackgroundSink {
    tx: Option<crossbeam_channel::Sender<RecordBatch>>,
    handle: Option<std::thread::JoinHandle<Result<FileSink>>>,
    rows: u64,
}

impl BackgroundSink {
    /// Run `sink` on a thread of its own, fed batches through a bounded channel.
    pub fn spawn(mut sink: FileSink) -> Self {
        let (tx, rx) = crossbeam_channel::bounded::<RecordBatch>(WRITER_QUEUE);
        let handle = std::thread::Builder::new()
            .name("telestore-export".into())
            .spawn(move || {
                for b in rx {
                    sink.write(&b)?;
                }
                Ok(sink)
            })
            .expect("spawn the export writer thread");
        BackgroundSink {
            tx: Some(tx),
            handle: Some(handle),
            rows: 0,
        }
    }

    /// Rows handed over so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Hand one batch to the writing thread (waits while it is behind).
    pub fn write(&mut self, b: RecordBatch) -> Result<()> {
        self.rows += b.num_rows() as u64;
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send(b).is_ok());
        if sent {
            return Ok(());
        }
        // The writer stopped: report its error.
        Err(self
            .join()
            .err()
            .unwrap_or_else(|| Error::io("export", std::io::Error::other("export writer stopped"))))
    }

    fn join(&mut self) -> Result<FileSink> {
        self.tx = None;
        match self.handle.take() {
            Some(h) => h.join().map_err(|_| {
                Error::io("export", std::io::Error::other("export writer panicked"))
            })?,
            None => Err(Error::io(
                "export",
                std::io::Error::other("export writer gone"),
            )),
        }
    }

    /// Wait for the writer, then complete the file as [`FileSink::commit`].
    pub fn commit(mut self) -> Result<PathBuf> {
        self.join()?.commit()
    }
}

impl Drop for BackgroundSink {
    /// Not committed: stop the writer; its FileSink removes the file.
    fn drop(&mut self) {
        self.tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
