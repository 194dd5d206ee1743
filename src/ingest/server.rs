//! The ingest TCP server: one task per connection on a tokio runtime.
//! A connection reads a handshake, answers `Ready` (or an error and
//! closes), then reads frames; each valid frame is written to the store on
//! a blocking thread while the next frames are read (pipelining), and the
//! acks go back in frame order. In-flight payload bytes per connection are
//! bounded by a semaphore: when they are used up the server stops reading
//! (backpressure by not reading). A rejected frame gets an error response
//! and nothing of it is applied; only lost framing closes the connection.

use super::auth::{Access, HttpAuth, Tokens};
use super::proto::{ErrorCode, FrameHeader, Handshake, Response, WireError, FRAME_HEADER_LEN};
use crate::engine::Durability;
use crate::error::Error;
use crate::Store;
use axum::serve::ListenerExt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

/// Server settings.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Tokens a client must present (none configured: any client); the
    /// binary protocol writes, so it needs a read-write token.
    pub tokens: Tokens,
    /// Serve `/metrics` without a token.
    pub metrics_public: bool,
    /// Payload bytes a connection may have in flight (read, not yet acked).
    pub max_inflight_bytes: usize,
    /// How long a client may take to send its handshake.
    pub handshake_timeout: Duration,
    /// How long a shutdown waits for connections to send their last acks.
    pub shutdown_grace: Duration,
    /// Where the HTTP endpoints listen (`None`: no HTTP).
    pub http_listen: Option<SocketAddr>,
    /// The line-protocol tag naming the device.
    pub device_tag: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            tokens: Tokens::default(),
            metrics_public: true,
            max_inflight_bytes: 32 << 20,
            handshake_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(10),
            http_listen: None,
            device_tag: "device".into(),
        }
    }
}

/// Counters for the metrics endpoint and tests.
pub struct ServerStats {
    pub connections_open: AtomicU64,
    pub connections_total: AtomicU64,
    pub frames: AtomicU64,
    pub rows: AtomicU64,
    pub bytes: AtomicU64,
    /// Rejected frames and handshakes by error code (index = code).
    pub rejected: [AtomicU64; 16],
    /// Line-protocol rows written, requests applied and rejected.
    pub http_rows: AtomicU64,
    pub http_requests: AtomicU64,
    pub http_rejected: AtomicU64,
    /// Binary frames, from the payload read to the ack written (seconds).
    pub frame_seconds: prometheus_client::metrics::histogram::Histogram,
}

impl Default for ServerStats {
    fn default() -> Self {
        use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
        ServerStats {
            connections_open: AtomicU64::default(),
            connections_total: AtomicU64::default(),
            frames: AtomicU64::default(),
            rows: AtomicU64::default(),
            bytes: AtomicU64::default(),
            rejected: Default::default(),
            http_rows: AtomicU64::default(),
            http_requests: AtomicU64::default(),
            http_rejected: AtomicU64::default(),
            frame_seconds: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
        }
    }
}

impl ServerStats {
    fn reject(&self, code: ErrorCode) {
        self.rejected[(code as usize).min(15)].fetch_add(1, Relaxed);
    }
    /// Rejections of one code.
    pub fn rejected_of(&self, code: ErrorCode) -> u64 {
        self.rejected[(code as usize).min(15)].load(Relaxed)
    }
}

/// Serve `listener` until `shutdown` turns true: stop accepting, let every
/// connection finish the frames it has read and send their acks, then
/// return.
pub async fn serve(
    store: Arc<Store>,
    listener: TcpListener,
    cfg: ServerConfig,
    stats: Arc<ServerStats>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let (store, cfg, stats, stop) = (store.clone(), cfg.clone(), stats.clone(), shutdown.clone());
                    conns.spawn(async move {
                        stats.connections_open.fetch_add(1, Relaxed);
                        stats.connections_total.fetch_add(1, Relaxed);
                        if let Err(e) = connection(store, stream, peer, cfg, stats.clone(), stop).await {
                            tracing::debug!("connection {peer}: {e}");
                        }
                        stats.connections_open.fetch_sub(1, Relaxed);
                    });
                }
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    // Connections finish the frames they have read; a client that never
    // reads its acks cannot hold the shutdown up past the grace period.
    let drain = async { while conns.join_next().await.is_some() {} };
    if tokio::time::timeout(cfg.shutdown_grace, drain)
        .await
        .is_err()
    {
        tracing::warn!(
            "closing {} connections still busy after the grace period",
            conns.len()
        );
        conns.abort_all();
    }
}

/// What the ack task waits for, in frame order.
enum Pending {
    Write {
        batch_id: u64,
        rows: u32,
        durability: Durability,
        job: JoinHandle<crate::Result<crate::WriteAck>>,
        _permit: OwnedSemaphorePermit,
        /// When its payload was read.
        read_at: std::time::Instant,
    },
    Reject(WireError, OwnedSemaphorePermit),
    /// Framing lost: answer, then close.
    Fatal(WireError),
}

/// What a frame costs in the in-flight budget on top of its payload.
const FRAME_OVERHEAD_BYTES: usize = 256;

async fn connection(
    store: Arc<Store>,
    stream: TcpStream,
    peer: SocketAddr,
    cfg: ServerConfig,
    stats: Arc<ServerStats>,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::with_capacity(256 << 10, rd);
    let hs = match tokio::time::timeout(cfg.handshake_timeout, read_handshake(&mut rd)).await {
        Ok(Ok(Ok(h))) => h,
        Ok(Ok(Err(e))) => return reject_and_close(&mut wr, &stats, e).await,
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            let e = WireError::fatal(ErrorCode::BadHandshake, "no handshake within the timeout");
            return reject_and_close(&mut wr, &stats, e).await;
        }
    };
    if !cfg.tokens.allows(hs.token.as_bytes(), Access::Write) {
        let e = WireError::fatal(ErrorCode::AuthFailed, "wrong or missing token");
        return reject_and_close(&mut wr, &stats, e).await;
    }
    let schema = match store.schema(&hs.table) {
        Ok(s) => s,
        Err(_) => {
            let msg = format!(
                "no table {:?} (tables: {})",
                hs.table,
                store.table_names().join(", ")
            );
            return reject_and_close(
                &mut wr,
                &stats,
                WireError::fatal(ErrorCode::UnknownTable, msg),
            )
            .await;
        }
    };
    wr.write_all(&Response::ready(&schema).encode()).await?;
    tracing::debug!("{peer}: ingest into {} ({:?})", hs.table, hs.durability);
    let (tx, rx) = mpsc::unbounded_channel::<Pending>();
    let acks = tokio::spawn(send_acks(wr, rx, stats.clone()));
    let budget = cfg
        .max_inflight_bytes
        .clamp(FRAME_OVERHEAD_BYTES, u32::MAX as usize);
    let sem = Arc::new(Semaphore::new(budget));
    let width = schema.row_width();
    let table: Arc<str> = Arc::from(hs.table.as_str());
    loop {
        let mut head = [0u8; FRAME_HEADER_LEN];
        // Between frames is the only place a shutdown stops reading.
        let got = tokio::select! {
            r = read_exact_or_eof(&mut rd, &mut head) => r?,
            _ = stop.changed() => false,
        };
        if !got {
            break;
        }
        let f = match FrameHeader::decode(&head) {
            Ok(f) => f,
            Err(e) => {
                stats.reject(e.code);
                let _ = tx.send(Pending::Fatal(e));
                break;
            }
        };
        // Every frame is charged its payload plus a fixed overhead (so
        // a flood of tiny or rejected frames is bounded too); one frame
        // larger than the whole budget takes all of it.
        let charge = (f.payload_len as usize + FRAME_OVERHEAD_BYTES).min(budget) as u32;
        let permit = sem
            .clone()
            .acquire_many_owned(charge)
            .await
            .map_err(|_| std::io::Error::other("semaphore closed"))?;
        let mut payload = vec![0u8; f.payload_len as usize];
        rd.read_exact(&mut payload).await?;
        if let Err(e) = f.check_payload(&payload, width) {
            let _ = tx.send(Pending::Reject(e, permit));
            continue;
        }
        stats.bytes.fetch_add(payload.len() as u64, Relaxed);
        let (store, table, d) = (store.clone(), table.clone(), hs.durability);
        let read_at = std::time::Instant::now();
        let job = tokio::task::spawn_blocking(move || store.write_vec(&table, payload, d));
        let _ = tx.send(Pending::Write {
            batch_id: f.batch_id,
            rows: f.rows,
            durability: hs.durability,
            job,
            _permit: permit,
            read_at,
        });
    }
    drop(tx);
    acks.await.map_err(std::io::Error::other)?
}

async fn read_handshake(
    rd: &mut (impl AsyncReadExt + Unpin),
) -> std::io::Result<Result<Handshake, WireError>> {
    let mut head = [0u8; 16];
    rd.read_exact(&mut head).await?;
    let len = match Handshake::decode_head(&head) {
        Ok((_, _, len, _)) => len,
        Err(e) => return Ok(Err(e)),
    };
    let mut all = head.to_vec();
    all.resize(16 + len, 0);
    rd.read_exact(&mut all[16..]).await?;
    Ok(Handshake::decode(&all))
}

/// Fill `buf`; false on a clean EOF before its first byte.
async fn read_exact_or_eof(
    rd: &mut (impl AsyncReadExt + Unpin),
    buf: &mut [u8],
) -> std::io::Result<bool> {
    let mut n = 0;
    while n < buf.len() {
        let k = rd.read(&mut buf[n..]).await?;
        if k == 0 {
            if n == 0 {
                return Ok(false);
            }
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed inside a frame header",
            ));
        }
        n += k;
    }
    Ok(true)
}

async fn reject_and_close(
    wr: &mut (impl AsyncWriteExt + Unpin),
    stats: &ServerStats,
    e: WireError,
) -> std::io::Result<()> {
    stats.reject(e.code);
    tracing::debug!("rejected: {} {}", e.code.name(), e.message);
    wr.write_all(&Response::Error(e).encode()).await?;
    wr.shutdown().await
}

/// Answer each pending frame in order; a fatal error ends the connection.
async fn send_acks(
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Pending>,
    stats: Arc<ServerStats>,
) -> std::io::Result<()> {
    while let Some(p) = rx.recv().await {
        let mut acked_from = None;
        let resp = match p {
            Pending::Reject(e, _permit) => {
                stats.reject(e.code);
                Response::Error(e)
            }
            Pending::Fatal(e) => Response::Error(e),
            Pending::Write {
                batch_id,
                rows,
                durability,
                job,
                _permit,
                read_at,
            } => match job.await {
                Ok(Ok(ack)) => {
                    acked_from = Some(read_at);
                    stats.frames.fetch_add(1, Relaxed);
                    stats.rows.fetch_add(u64::from(rows), Relaxed);
                    Response::Ack {
                        batch_id,
                        durability,
                        first_seq: ack.first_seq,
                        rows,
                    }
                }
                Ok(Err(e)) => {
                    let we = store_error(e).batch(batch_id);
                    stats.reject(we.code);
                    Response::Error(we)
                }
                Err(e) => {
                    let we =
                        WireError::frame(ErrorCode::Internal, format!("write task failed: {e}"));
                    stats.reject(we.code);
                    Response::Error(we.batch(batch_id))
                }
            },
        };
        let fatal = matches!(&resp, Response::Error(e) if e.fatal);
        wr.write_all(&resp.encode()).await?;
        if let Some(t0) = acked_from {
            stats.frame_seconds.observe(t0.elapsed().as_secs_f64());
        }
        if fatal {
            break;
        }
    }
    wr.shutdown().await
}

/// An engine error as a wire error.
fn store_error(e: Error) -> WireError {
    match e {
        Error::Busy { retry_after_ms } => WireError::frame(
            ErrorCode::Busy,
            format!("store busy (write stall), retry after {retry_after_ms} ms"),
        ),
        Error::InvalidInput { .. } => WireError::frame(ErrorCode::RowCountMismatch, e.to_string()),
        Error::Poisoned { .. } | Error::Closed => {
            WireError::fatal(ErrorCode::Unavailable, e.to_string())
        }
        other => WireError::frame(ErrorCode::Internal, other.to_string()),
    }
}

/// A server running on its own runtime thread.
pub struct Running {
    pub addr: SocketAddr,
    /// The HTTP endpoints' address, when they listen.
    pub http_addr: Option<SocketAddr>,
    pub stats: Arc<ServerStats>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Stop accepting, finish in-flight frames and their acks, return.
    pub fn stop(mut self) {
        self.shutdown();
    }
    fn shutdown(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Bind `listen` and serve on a new runtime thread.
pub fn start(store: Arc<Store>, listen: SocketAddr, cfg: ServerConfig) -> crate::Result<Running> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("telestore-net")
        .enable_all()
        .build()
        .map_err(|e| Error::io("<ingest runtime>", e))?;
    let listener = rt
        .block_on(TcpListener::bind(listen))
        .map_err(|e| Error::io(format!("<listen {listen}>"), e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::io("<listener>", e))?;
    let stats = Arc::new(ServerStats::default());
    let (stop, rx) = watch::channel(false);
    let http_addr = match cfg.http_listen {
        Some(a) => {
            let l = rt
                .block_on(TcpListener::bind(a))
                .map_err(|e| Error::io(format!("<listen {a}>"), e))?;
            let bound = l.local_addr().map_err(|e| Error::io("<listener>", e))?;
            let state = super::http::HttpState {
                store: store.clone(),
                stats: stats.clone(),
                device_tag: Arc::from(cfg.device_tag.as_str()),
                auth: Arc::new(HttpAuth {
                    tokens: cfg.tokens.clone(),
                    metrics_public: cfg.metrics_public,
                }),
            };
            let mut stop_http = rx.clone();
            let app = super::http::router(state);
            rt.spawn(async move {
                let done = async move {
                    let _ = stop_http.changed().await;
                };
                // Without TCP_NODELAY a response written in two pieces
                // waits for the client's delayed ACK (~40 ms) on a
                // kept-alive connection.
                let l = l.tap_io(|tcp| {
                    if let Err(e) = tcp.set_nodelay(true) {
                        tracing::warn!("TCP_NODELAY on an HTTP connection: {e}");
                    }
                });
                if let Err(e) = axum::serve(l, app).with_graceful_shutdown(done).await {
                    tracing::error!("http server failed: {e}");
                }
            });
            Some(bound)
        }
        None => None,
    };
    let st = stats.clone();
    let thread = std::thread::Builder::new()
        .name("telestore-ingest".into())
        .spawn(move || rt.block_on(serve(store, listener, cfg, st, rx)))
        .map_err(|e| Error::io("<ingest thread>", e))?;
    Ok(Running {
        addr,
        http_addr,
        stats,
        stop,
        thread: Some(thread),
    })
}
