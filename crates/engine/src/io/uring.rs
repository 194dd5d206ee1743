//! The io_uring backend: a `tokio_uring::Runtime` on one dedicated OS
//! thread, fed over a crossbeam channel. `tokio_uring::fs::File` is `!Send`,
//! so the ring thread keeps a duplicate descriptor of every open file in a
//! table and callers hold ids. Each request runs as its own task, so many
//! ops (writes and syncs of different files) are in flight at once.
//! Replies come back on one-shot crossbeam channels; callers block on them.
//!
//! A thread holding a [`LocalRing`] (the group commit's threads) runs its
//! file ops on that ring instead, with no hand-off ([`local_ring`]).

use super::direct::DirectState;
use super::local_ring::{self, LocalRing};
use super::std_backend::open_std;
use super::{Backend, IoFile, IoKind, OpenMode};
use crate::error::{Error, Result};
use crossbeam_channel::{bounded, unbounded, Sender};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;
use tokio_uring::buf::BoundedBuf;

static URING_OPS: AtomicU64 = AtomicU64::new(0);

/// Number of operations completed through io_uring in this process (tests
/// use it to prove that io_uring was really used).
pub fn uring_ops_completed() -> u64 {
    URING_OPS.load(Ordering::Relaxed)
}

type Reply<T> = Sender<io::Result<T>>;

/// One op on an open file. It runs on the calling thread's own ring
/// ([`local_ring`]) if the thread has one, else on the ring thread.
enum FileOp {
    /// Write `buf[range]` at `offset`, then fdatasync if `sync`.
    Write {
        buf: Vec<u8>,
        range: Range<usize>,
        offset: u64,
        sync: bool,
    },
    /// Read exactly `len` bytes at `offset`.
    Read { len: usize, offset: u64 },
    /// fdatasync, or fsync with `all`.
    Sync { all: bool },
}

/// A finished [`FileOp`]: the outcome and the buffer (written or read;
/// empty after a sync).
type Done = (io::Result<()>, Vec<u8>);

impl FileOp {
    /// The buffer back when the op could not be issued.
    fn failed(self, e: io::Error) -> Done {
        match self {
            FileOp::Write { buf, .. } => (Err(e), buf),
            FileOp::Read { .. } | FileOp::Sync { .. } => (Err(e), Vec::new()),
        }
    }

    async fn perform(self, file: &tokio_uring::fs::File) -> Done {
        match self {
            FileOp::Write {
                buf,
                range,
                offset,
                sync,
            } => {
                let (r, slice) = file.write_all_at(buf.slice(range), offset).await;
                let r = match r {
                    Ok(()) if sync => file.sync_data().await,
                    other => other,
                };
                (r, slice.into_inner())
            }
            FileOp::Read { len, offset } => {
                let buf = Vec::with_capacity(len).slice(0..len);
                let (r, slice) = file.read_exact_at(buf, offset).await;
                (r, slice.into_inner())
            }
            FileOp::Sync { all: true } => (file.sync_all().await, Vec::new()),
            FileOp::Sync { all: false } => (file.sync_data().await, Vec::new()),
        }
    }
}

enum Req {
    /// Take a duplicate of an open file's descriptor under the caller's id.
    Adopt(u64, std::fs::File),
    File(u64, FileOp, Sender<Done>),
    Rename(PathBuf, PathBuf, Reply<()>),
    Remove(PathBuf, Reply<()>),
    Close(u64),
    Shutdown,
}

struct Channel {
    tx: Sender<Req>,
    notify: Arc<Notify>,
    /// Ids of open files, assigned by the callers.
    next_id: AtomicU64,
}

impl Channel {
    fn send(&self, req: Req) -> Result<()> {
        self.tx
            .send(req)
            .map_err(|_| Error::io("<io_uring thread>", io::Error::other("io thread stopped")))?;
        self.notify.notify_one();
        Ok(())
    }

    fn call<T>(&self, path: &Path, make: impl FnOnce(Reply<T>) -> Req) -> Result<T> {
        let (tx, rx) = bounded(1);
        self.send(make(tx))?;
        let res = rx
            .recv()
            .map_err(|_| Error::io(path, io::Error::other("io thread stopped")))?;
        res.map_err(|e| Error::io(path, e))
    }
}

/// io_uring backend handle. Dropping the last handle stops the thread.
pub struct UringBackend {
    chan: Arc<Channel>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl UringBackend {
    /// Start the I/O thread and its runtime. Call [`super::probe_uring`]
    /// first: building the runtime where io_uring is blocked may hang.
    pub fn start() -> Result<Self> {
        let (tx, rx) = unbounded::<Req>();
        let notify = Arc::new(Notify::new());
        let n2 = notify.clone();
        let (ready_tx, ready_rx) = bounded::<io::Result<()>>(1);
        let thread = std::thread::Builder::new()
            .name("telestore-uring".into())
            .spawn(move || {
                let rt = match tokio_uring::Runtime::new(tokio_uring::builder().entries(256)) {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                rt.block_on(run_loop(rx, n2));
            })
            .map_err(|e| Error::io("<io_uring thread>", e))?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(Error::BackendUnavailable {
                    backend: "uring",
                    reason: e.to_string(),
                })
            }
            Err(_) => {
                return Err(Error::BackendUnavailable {
                    backend: "uring",
                    reason: "runtime thread died".into(),
                })
            }
        }
        Ok(UringBackend {
            chan: Arc::new(Channel {
                tx,
                notify,
                next_id: AtomicU64::new(1),
            }),
            thread: Some(thread),
        })
    }
}

impl Drop for UringBackend {
    fn drop(&mut self) {
        let _ = self.chan.send(Req::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

type Files = Rc<RefCell<HashMap<u64, Rc<tokio_uring::fs::File>>>>;

async fn run_loop(rx: crossbeam_channel::Receiver<Req>, notify: Arc<Notify>) {
    let files: Files = Rc::new(RefCell::new(HashMap::new()));
    loop {
        loop {
            match rx.try_recv() {
                Ok(Req::Shutdown) | Err(crossbeam_channel::TryRecvError::Disconnected) => return,
                Ok(Req::Adopt(id, file)) => {
                    let file = tokio_uring::fs::File::from_std(file);
                    files.borrow_mut().insert(id, Rc::new(file));
                }
                Ok(Req::Close(id)) => {
                    files.borrow_mut().remove(&id);
                }
                Ok(Req::File(id, op, reply)) => {
                    spawn(file_op(files.clone(), id, op, reply));
                }
                Ok(Req::Rename(from, to, reply)) => {
                    spawn(async move {
                        let _ = reply.send(done(tokio_uring::fs::rename(&from, &to).await));
                    });
                }
                Ok(Req::Remove(path, reply)) => {
                    spawn(async move {
                        let _ = reply.send(done(tokio_uring::fs::remove_file(&path).await));
                    });
                }
                Err(crossbeam_channel::TryRecvError::Empty) => break,
            }
        }
        notify.notified().await;
    }
}

/// Run `op` as a task of the ring thread, woken now and then while it
/// waits so that a failed submission is retried
/// ([`local_ring::RESUBMIT_EVERY`]).
fn spawn(op: impl std::future::Future<Output = ()> + 'static) {
    tokio_uring::spawn(local_ring::resubmitting(op));
}

fn done<T>(r: io::Result<T>) -> io::Result<T> {
    if r.is_ok() {
        URING_OPS.fetch_add(1, Ordering::Relaxed);
    }
    r
}

async fn file_op(files: Files, id: u64, op: FileOp, reply: Sender<Done>) {
    let file = files.borrow().get(&id).cloned();
    let done = match file {
        Some(f) => op.perform(&f).await,
        None => op.failed(io::Error::other("file handle closed")),
    };
    let _ = reply.send(done);
}

struct UringFile {
    id: u64,
    path: PathBuf,
    chan: Arc<Channel>,
    /// The caller side's descriptor. The ring thread holds a duplicate:
    /// the same open file description, so the same `O_DIRECT` flag and
    /// the same record of writeback errors. Threads with their own ring
    /// duplicate it for each op; truncation uses it directly.
    file: std::fs::File,
    direct: DirectState,
}

impl UringFile {
    /// Run `op` on this thread's ring if it has one, else on the ring
    /// thread.
    fn perform(&self, op: FileOp) -> Done {
        let (r, buf) = local_ring::with(|ring| match ring {
            Some(ring) => local_ring::block_on(ring, self.perform_here(op)),
            None => self.send(op),
        });
        (done(r), buf)
    }

    /// [`UringFile::perform`], with the path in the error.
    fn run(&self, op: FileOp) -> Result<Vec<u8>> {
        let (r, buf) = self.perform(op);
        r.map_err(|e| Error::io(&self.path, e))?;
        Ok(buf)
    }

    async fn perform_here(&self, op: FileOp) -> Done {
        match self.file.try_clone() {
            // Closed (synchronously) when the op is done.
            Ok(dup) => op.perform(&tokio_uring::fs::File::from_std(dup)).await,
            Err(e) => op.failed(e),
        }
    }

    fn send(&self, op: FileOp) -> Done {
        let (reply, rx) = bounded(1);
        if let Err(e) = self.chan.send(Req::File(self.id, op, reply)) {
            return (Err(io::Error::other(e.to_string())), Vec::new());
        }
        rx.recv()
            .unwrap_or_else(|_| (Err(io::Error::other("io thread stopped")), Vec::new()))
    }

    /// Write `buf` at `offset`, and fdatasync if `sync`: direct from an
    /// aligned copy when the file has `O_DIRECT` and the write is aligned
    /// ([`direct`]), else buffered.
    fn write(&self, buf: Vec<u8>, offset: u64, sync: bool) -> Result<Vec<u8>> {
        // tokio-uring cannot slice an empty buffer (it panics): nothing
        // to write.
        if buf.is_empty() {
            if sync {
                self.sync_data()?;
            }
            return Ok(buf);
        }
        let fd = self.file.as_raw_fd();
        let direct = self.direct.write(fd, &buf, offset, |copy, range| {
            self.perform(FileOp::Write {
                buf: copy,
                range,
                offset,
                sync,
            })
        });
        if direct.map_err(|e| Error::io(&self.path, e))? {
            return Ok(buf);
        }
        let range = 0..buf.len();
        self.run(FileOp::Write {
            buf,
            range,
            offset,
            sync,
        })
    }
}

impl IoFile for UringFile {
    fn write_at(&self, buf: Vec<u8>, offset: u64) -> Result<Vec<u8>> {
        self.write(buf, offset, false)
    }
    fn write_sync_at(&self, buf: Vec<u8>, offset: u64) -> Result<Vec<u8>> {
        self.write(buf, offset, true)
    }
    fn read_at(&self, len: usize, offset: u64) -> Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new()); // see `write`: no empty slices
        }
        self.direct
            .end(self.file.as_raw_fd())
            .map_err(|e| Error::io(&self.path, e))?;
        self.run(FileOp::Read { len, offset })
    }
    fn sync_data(&self) -> Result<()> {
        self.run(FileOp::Sync { all: false }).map(drop)
    }
    fn sync_all(&self) -> Result<()> {
        self.run(FileOp::Sync { all: true }).map(drop)
    }
    fn set_len(&self, len: u64) -> Result<()> {
        // io_uring gained FTRUNCATE only in Linux 6.9 and tokio-uring does
        // not expose it: truncation (rare: torn WAL tails) is a plain
        // ftruncate on the caller's thread.
        self.file.set_len(len).map_err(|e| Error::io(&self.path, e))
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for UringFile {
    fn drop(&mut self) {
        let _ = self.chan.send(Req::Close(self.id));
    }
}

impl Backend for UringBackend {
    fn kind(&self) -> IoKind {
        IoKind::Uring
    }
    /// Opens are plain `openat` calls on the caller's thread (as cheap as
    /// a hand-off to the ring thread); the ring thread adopts a duplicate.
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Box<dyn IoFile>> {
        let (file, direct) = open_std(path, mode)?;
        let dup = file.try_clone().map_err(|e| Error::io(path, e))?;
        let id = self.chan.next_id.fetch_add(1, Ordering::Relaxed);
        self.chan.send(Req::Adopt(id, dup))?;
        Ok(Box::new(UringFile {
            id,
            path: path.to_path_buf(),
            chan: self.chan.clone(),
            file,
            direct: DirectState::new(direct),
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.chan.call(from, |r| {
            Req::Rename(from.to_path_buf(), to.to_path_buf(), r)
        })
    }
    fn remove_file(&self, path: &Path) -> Result<()> {
        self.chan.call(path, |r| Req::Remove(path.to_path_buf(), r))
    }
    fn thread_ring(&self) -> Option<LocalRing> {
        match LocalRing::enter() {
            Ok(ring) => Some(ring),
            Err(e) => {
                tracing::warn!(
                    "no io_uring of this thread's own ({e}); its I/O goes through the ring thread"
                );
                None
            }
        }
    }
}
