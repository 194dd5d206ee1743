//! The io_uring backend: a `tokio_uring::Runtime` on one dedicated OS
//! thread, fed over a crossbeam channel. `tokio_uring::fs::File` is `!Send`,
//! so files live in a table on that thread and callers hold ids. Each
//! request runs as its own task, so many ops (writes and syncs of different
//! files) are in flight at once. Replies come back on one-shot crossbeam
//! channels; callers block on them.

use super::direct::{self, Staging};
use super::{Backend, IoFile, IoKind, OpenMode};
use crate::error::{Error, Result};
use crossbeam_channel::{bounded, unbounded, Sender};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::Notify;
use tokio_uring::buf::BoundedBuf;

static URING_OPS: AtomicU64 = AtomicU64::new(0);

/// Number of operations completed through io_uring in this process (tests
/// use it to prove that io_uring was really used).
pub fn uring_ops_completed() -> u64 {
    URING_OPS.load(Ordering::Relaxed)
}

type Reply<T> = Sender<io::Result<T>>;

/// The outcome, the buffer back, and whether the file still has `O_DIRECT`.
type WriteReply = (io::Result<()>, Vec<u8>, bool);

enum Req {
    /// Open; the reply says whether the file has `O_DIRECT`.
    Open(PathBuf, OpenMode, Reply<(u64, bool)>),
    /// Write `buf[range]` at `offset`, then fdatasync if `sync`.
    Write {
        id: u64,
        buf: Vec<u8>,
        range: Range<usize>,
        offset: u64,
        sync: bool,
        /// Turn `O_DIRECT` off first (an unaligned write).
        buffered: bool,
        reply: Sender<WriteReply>,
    },
    Read(u64, usize, u64, Reply<Vec<u8>>),
    SyncData(u64, Reply<()>),
    SyncAll(u64, Reply<()>),
    SetLen(u64, u64, Reply<()>),
    Rename(PathBuf, PathBuf, Reply<()>),
    Remove(PathBuf, Reply<()>),
    Close(u64),
    Shutdown,
}

struct Channel {
    tx: Sender<Req>,
    notify: Arc<Notify>,
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
            chan: Arc::new(Channel { tx, notify }),
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

async fn run_loop(rx: crossbeam_channel::Receiver<Req>, notify: Arc<Notify>) {
    let files: Files = Rc::new(RefCell::new(HashMap::new()));
    let mut next_id = 1u64;
    loop {
        loop {
            match rx.try_recv() {
                Ok(Req::Shutdown) | Err(crossbeam_channel::TryRecvError::Disconnected) => return,
                Ok(Req::Close(id)) => {
                    files.borrow_mut().remove(&id);
                }
                Ok(Req::Open(path, mode, reply)) => {
                    let id = next_id;
                    next_id += 1;
                    tokio_uring::spawn(open(files.clone(), id, path, mode, reply));
                }
                Ok(req) => {
                    tokio_uring::spawn(handle(files.clone(), req));
                }
                Err(crossbeam_channel::TryRecvError::Empty) => break,
            }
        }
        notify.notified().await;
    }
}

/// An open file on the ring thread.
struct RingFile {
    file: tokio_uring::fs::File,
    /// Set while the descriptor has `O_DIRECT` (see [`direct`]).
    direct: Cell<bool>,
}

impl RingFile {
    /// Turn `O_DIRECT` off for good (before an unaligned write or a read).
    fn end_direct(&self) -> io::Result<()> {
        if self.direct.get() {
            direct::clear_direct(self.file.as_raw_fd())?;
            self.direct.set(false);
        }
        Ok(())
    }

    /// After a failed op: `Ok(true)` when it was the kernel refusing
    /// `O_DIRECT`, now off, so the op is to be retried buffered.
    fn fall_back(&self, r: &io::Result<()>) -> io::Result<bool> {
        match r {
            Err(e) if self.direct.get() && direct::refused(e) => self.end_direct().map(|()| true),
            _ => Ok(false),
        }
    }

    async fn write(
        &self,
        buf: Vec<u8>,
        range: Range<usize>,
        offset: u64,
        sync: bool,
        buffered: bool,
    ) -> (io::Result<()>, Vec<u8>) {
        if buffered {
            if let Err(e) = self.end_direct() {
                return (Err(e), buf);
            }
        }
        let (mut r, mut slice) = self.file.write_all_at(buf.slice(range), offset).await;
        match self.fall_back(&r) {
            Ok(true) => (r, slice) = self.file.write_all_at(slice, offset).await,
            Ok(false) => {}
            Err(e) => r = Err(e),
        }
        let r = match done(r) {
            Ok(()) if sync => done(self.file.sync_data().await),
            other => other,
        };
        (r, slice.into_inner())
    }
}

type Files = Rc<RefCell<HashMap<u64, Rc<RingFile>>>>;

fn done<T>(r: io::Result<T>) -> io::Result<T> {
    if r.is_ok() {
        URING_OPS.fetch_add(1, Ordering::Relaxed);
    }
    r
}

async fn open_file(
    path: &Path,
    mode: OpenMode,
    direct_flag: bool,
) -> io::Result<tokio_uring::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = tokio_uring::fs::OpenOptions::new();
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
    done(o.open(path).await)
}

async fn open(files: Files, id: u64, path: PathBuf, mode: OpenMode, reply: Reply<(u64, bool)>) {
    let mut direct = mode == OpenMode::CreateNewDirect;
    let res = match open_file(&path, mode, direct).await {
        // No O_DIRECT on this filesystem. Linux checks it after O_CREAT |
        // O_EXCL made the file, so an empty file of ours may be there.
        Err(e) if direct && direct::refused(&e) => {
            direct = false;
            match open_file(&path, mode, false).await {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    open_file(&path, OpenMode::ReadWrite, false).await
                }
                other => other,
            }
        }
        other => other,
    };
    let res = res.map(|file| {
        let f = RingFile {
            file,
            direct: Cell::new(direct),
        };
        files.borrow_mut().insert(id, Rc::new(f));
        (id, direct)
    });
    let _ = reply.send(res);
}

fn get(files: &Files, id: u64) -> io::Result<Rc<RingFile>> {
    files
        .borrow()
        .get(&id)
        .cloned()
        .ok_or_else(|| io::Error::other("file handle closed"))
}

async fn handle(files: Files, req: Req) {
    match req {
        Req::Write {
            id,
            buf,
            range,
            offset,
            sync,
            buffered,
            reply,
        } => {
            let res = match get(&files, id) {
                Ok(f) => {
                    let (r, buf) = f.write(buf, range, offset, sync, buffered).await;
                    (r, buf, f.direct.get())
                }
                Err(e) => (Err(e), buf, false),
            };
            let _ = reply.send(res);
        }
        Req::Read(id, len, off, reply) => {
            let res = match get(&files, id) {
                Ok(f) => match f.end_direct() {
                    Ok(()) => {
                        let buf = Vec::with_capacity(len).slice(0..len);
                        let (r, slice) = f.file.read_exact_at(buf, off).await;
                        done(r).map(|()| slice.into_inner())
                    }
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            };
            let _ = reply.send(res);
        }
        Req::SyncData(id, reply) => {
            let res = match get(&files, id) {
                Ok(f) => done(f.file.sync_data().await),
                Err(e) => Err(e),
            };
            let _ = reply.send(res);
        }
        Req::SyncAll(id, reply) => {
            let res = match get(&files, id) {
                Ok(f) => done(f.file.sync_all().await),
                Err(e) => Err(e),
            };
            let _ = reply.send(res);
        }
        Req::SetLen(id, len, reply) => {
            // io_uring gained FTRUNCATE only in Linux 6.9 and tokio-uring
            // does not expose it: truncation (rare: torn WAL tails) is a
            // plain ftruncate on the ring thread.
            let res = get(&files, id).and_then(|f| ftruncate(f.file.as_raw_fd(), len));
            let _ = reply.send(res);
        }
        Req::Rename(from, to, reply) => {
            let _ = reply.send(done(tokio_uring::fs::rename(&from, &to).await));
        }
        Req::Remove(path, reply) => {
            let _ = reply.send(done(tokio_uring::fs::remove_file(&path).await));
        }
        Req::Open(..) | Req::Close(_) | Req::Shutdown => unreachable!("handled in run_loop"),
    }
}

fn ftruncate(fd: i32, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len).map_err(|_| io::Error::other("length too large"))?;
    // SAFETY: `fd` is a valid descriptor owned by a live File in the table.
    #[allow(unsafe_code)]
    let r = unsafe { libc::ftruncate(fd, len) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

struct UringFile {
    id: u64,
    path: PathBuf,
    chan: Arc<Channel>,
    /// `Some` while the file has `O_DIRECT` (as far as this side knows:
    /// the ring thread's flag is the truth, and comes back with each write).
    staging: Mutex<Option<Staging>>,
}

impl UringFile {
    /// One round trip to the ring thread: write, and fdatasync if `sync`.
    /// An aligned write to a direct file goes from the staging buffer; an
    /// unaligned one turns `O_DIRECT` off.
    fn write(&self, buf: Vec<u8>, offset: u64, sync: bool) -> Result<Vec<u8>> {
        // tokio-uring cannot slice an empty buffer (it panics, on the ring
        // thread): nothing to write.
        if buf.is_empty() {
            if sync {
                self.sync_data()?;
            }
            return Ok(buf);
        }
        let mut direct = self.staging.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(staging) = direct
            .as_mut()
            .filter(|_| direct::aligned(offset, buf.len()))
        else {
            let buffered = direct.take().is_some();
            let range = 0..buf.len();
            return self
                .round_trip(buf, range, offset, sync, buffered)
                .map(|(buf, _)| buf);
        };
        let range = staging.load(&buf);
        let (aligned, still_direct) =
            self.round_trip(staging.take(), range, offset, sync, false)?;
        staging.put(aligned);
        if !still_direct {
            *direct = None;
        }
        Ok(buf)
    }

    fn round_trip(
        &self,
        buf: Vec<u8>,
        range: Range<usize>,
        offset: u64,
        sync: bool,
        buffered: bool,
    ) -> Result<(Vec<u8>, bool)> {
        let (reply, rx) = bounded(1);
        self.chan.send(Req::Write {
            id: self.id,
            buf,
            range,
            offset,
            sync,
            buffered,
            reply,
        })?;
        let (res, buf, still_direct) = rx
            .recv()
            .map_err(|_| Error::io(&self.path, io::Error::other("io thread stopped")))?;
        res.map_err(|e| Error::io(&self.path, e))?;
        Ok((buf, still_direct))
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
        // The ring thread turns O_DIRECT off before a read.
        self.staging
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        self.chan
            .call(&self.path, |r| Req::Read(self.id, len, offset, r))
    }
    fn sync_data(&self) -> Result<()> {
        self.chan.call(&self.path, |r| Req::SyncData(self.id, r))
    }
    fn sync_all(&self) -> Result<()> {
        self.chan.call(&self.path, |r| Req::SyncAll(self.id, r))
    }
    fn set_len(&self, len: u64) -> Result<()> {
        self.chan.call(&self.path, |r| Req::SetLen(self.id, len, r))
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
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Box<dyn IoFile>> {
        let (id, direct) = self
            .chan
            .call(path, |r| Req::Open(path.to_path_buf(), mode, r))?;
        Ok(Box::new(UringFile {
            id,
            path: path.to_path_buf(),
            chan: self.chan.clone(),
            staging: Mutex::new(direct.then(Staging::default)),
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
}
