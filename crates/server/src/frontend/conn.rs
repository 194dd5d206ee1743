//! What every listener shares: a cap on open connections (one
//! [`Gate`] for HTTP, the binary protocol and Flight), accepting that
//! takes a full descriptor table as back-pressure instead of an error,
//! and a deadline for a connection's first bytes.
//!
//! Idle sockets must not be able to take the descriptors the WAL and the
//! HFiles need: at start the soft `RLIMIT_NOFILE` is raised to the hard
//! one, [`FDS_RESERVED`] descriptors are kept back, and the connections
//! share what is left (at most the configured cap). A listener waits for
//! a free slot before it accepts, so past the cap new clients wait in the
//! kernel's backlog; an `accept` failing for want of descriptors or
//! memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) pauses that listener briefly
//! and is counted, never fatal.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

/// Descriptors kept back from connections, for the WAL, HFiles, spill
/// files, the manifest and the process's own.
pub const FDS_RESERVED: u64 = 512;
/// Fewest connections allowed whatever the descriptor limit.
const CONNECTIONS_MIN: u64 = 16;
/// How long a listener pauses after an accept refused for want of
/// descriptors or memory.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// The open-connection cap every listener takes its slots from.
pub struct Gate {
    slots: Arc<Semaphore>,
    max: usize,
    /// Accepts that failed (a full descriptor table, no memory) and were
    /// retried after a pause.
    pub accept_errors: AtomicU64,
    /// Connections closed because their first bytes did not come in time.
    pub first_byte_timeouts: Arc<AtomicU64>,
}

impl Gate {
    /// A gate of `max` connections.
    pub fn new(max: usize) -> Arc<Gate> {
        Arc::new(Gate {
            slots: Arc::new(Semaphore::new(max.max(1))),
            max: max.max(1),
            accept_errors: AtomicU64::new(0),
            first_byte_timeouts: Arc::default(),
        })
    }

    /// The cap.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.max - self.slots.available_permits()
    }

    /// Wait for a free slot, then accept. `first_bytes` sets how long the
    /// connection may take to send its first `n` bytes (`None`: no limit).
    pub async fn accept(
        &self,
        listener: &TcpListener,
        first_bytes: Option<(Duration, usize)>,
    ) -> (Admitted, SocketAddr) {
        loop {
            let Ok(permit) = self.slots.clone().acquire_owned().await else {
                unreachable!("the gate's semaphore is never closed");
            };
            match listener.accept().await {
                Ok((stream, peer)) => {
                    let deadline =
                        first_bytes.map(|(d, n)| (Box::pin(tokio::time::sleep(d)), n.max(1)));
                    let a = Admitted {
                        inner: stream,
                        _permit: permit,
                        deadline,
                        timeouts: self.first_byte_timeouts.clone(),
                    };
                    return (a, peer);
                }
                Err(e) => {
                    drop(permit);
                    let n = self.accept_errors.fetch_add(1, Relaxed);
                    if n.is_power_of_two() || n == 0 {
                        tracing::warn!(
                            "accept on {:?} failed ({e}); pausing {} ms (failure {})",
                            listener.local_addr().ok(),
                            ACCEPT_PAUSE.as_millis(),
                            n + 1
                        );
                    }
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                }
            }
        }
    }
}

/// The connection cap for a descriptor limit of `nofile`: what is left
/// after `open_now` descriptors and [`FDS_RESERVED`], at most `wanted`.
pub fn connections_for(nofile: u64, open_now: u64, wanted: usize) -> usize {
    let left = nofile.saturating_sub(open_now + FDS_RESERVED);
    (wanted as u64).min(left.max(CONNECTIONS_MIN)) as usize
}

/// Raise the soft descriptor limit to the hard one; the soft limit now.
pub fn raise_nofile_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let lim = getrlimit(Resource::Nofile);
    let (soft, hard) = (lim.current, lim.maximum);
    if soft.is_some() && soft != hard {
        let raised = Rlimit {
            current: hard,
            maximum: hard,
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!("could not raise the open-file limit from {soft:?} to {hard:?}: {e}");
        }
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// Descriptors this process holds now.
pub fn open_descriptors() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(64, |d| d.count() as u64)
}

/// An accepted connection: it holds its slot of the [`Gate`] until it is
/// dropped, and fails with `TimedOut` if its first bytes do not come in
/// time.
pub struct Admitted {
    inner: TcpStream,
    _permit: OwnedSemaphorePermit,
    /// Until the first `n` bytes came: when the connection is dropped.
    deadline: Option<(Pin<Box<Sleep>>, usize)>,
    timeouts: Arc<AtomicU64>,
}

impl Admitted {
    /// The admitted connection.
    pub fn stream(&self) -> &TcpStream {
        &self.inner
    }

    /// The stream, and the slot to hold for as long as it is open (no
    /// first-byte deadline applies to the stream any more).
    pub fn into_parts(self) -> (TcpStream, OwnedSemaphorePermit) {
        (self.inner, self._permit)
    }
}

impl AsyncRead for Admitted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let me = &mut *self;
        match Pin::new(&mut me.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let got = buf.filled().len() - before;
                if let Some((_, need)) = &mut me.deadline {
                    *need = need.saturating_sub(got);
                    if *need == 0 || got == 0 {
                        me.deadline = None;
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                let expired = match &mut me.deadline {
                    Some((sleep, _)) => sleep.as_mut().poll(cx).is_ready(),
                    None => false,
                };
                if !expired {
                    return Poll::Pending;
                }
                me.deadline = None;
                me.timeouts.fetch_add(1, Relaxed);
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client sent nothing in time",
                )))
            }
            other => other,
        }
    }
}

impl AsyncWrite for Admitted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl tonic::transport::server::Connected for Admitted {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_the_reserve_to_the_store() {
        assert_eq!(connections_for(1024, 40, 4096), 1024 - 40 - 512);
        assert_eq!(connections_for(1 << 20, 40, 4096), 4096);
        assert_eq!(connections_for(256, 40, 4096), CONNECTIONS_MIN as usize);
    }

    #[tokio::test]
    async fn past_the_cap_a_listener_stops_accepting_until_a_slot_frees() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let gate = Gate::new(1);
        let _c1 = TcpStream::connect(addr).await.unwrap();
        let _c2 = TcpStream::connect(addr).await.unwrap();
        let (first, _) = gate.accept(&l, None).await;
        assert_eq!(gate.open(), 1);
        let second = tokio::time::timeout(Duration::from_millis(100), gate.accept(&l, None));
        assert!(second.await.is_err(), "no slot: not accepted");
        drop(first);
        let (_second, _) = gate.accept(&l, None).await;
        assert_eq!(gate.open(), 1);
    }

    #[tokio::test]
    async fn a_connection_silent_past_its_first_byte_deadline_fails() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let gate = Gate::new(4);
        let _silent = TcpStream::connect(addr).await.unwrap();
        let (mut a, _) = gate.accept(&l, Some((Duration::from_millis(50), 1))).await;
        let e = a.read(&mut [0u8; 8]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(gate.first_byte_timeouts.load(Relaxed), 1);
        // One that speaks in time is read as usual, and never times out.
        let mut talks = TcpStream::connect(addr).await.unwrap();
        talks.write_all(b"x").await.unwrap();
        let (mut b, _) = gate.accept(&l, Some((Duration::from_millis(50), 1))).await;
        assert_eq!(b.read(&mut [0u8; 8]).await.unwrap(), 1);
        tokio::time::sleep(Duration::from_millis(80)).await;
        talks.write_all(b"y").await.unwrap();
        assert_eq!(b.read(&mut [0u8; 8]).await.unwrap(), 1);
    }
}
