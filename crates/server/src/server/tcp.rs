//! The binary protocol's TCP server: one task per connection on a tokio
//! runtime. A connection reads a handshake, answers `Ready` (or an error and
//! closes), then reads frames; each valid frame is written to the store on
//! a blocking thread while the next frames are read (pipelining), and the
//! acks go back in frame order. In-flight payload bytes per connection are
//! bounded by a semaphore: when they are used up the server stops reading
//! (backpressure by not reading). A rejected frame gets an error response
//! and nothing of it is applied; only lost framing closes the connection.

use super::auth::Access;
use crate::frontend::config::ServerConfig;
use crate::frontend::conn::{Admitted, Gate};
use crate::frontend::stats::ServerStats;
use crate::frontend::tls::Port;
use crate::ingest::proto::{
    ErrorCode, FrameHeader, Handshake, Response, WireError, FRAME_HEADER_LEN,
};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use telestore_engine::engine::Durability;
use telestore_engine::error::Error;
use telestore_engine::Store;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

/// Serve `listener` until `shutdown` turns true: stop accepting, let every
/// connection finish the frames it has read and send their acks, then
/// return.
pub async fn serve(
    store: Arc<Store>,
    listener: TcpListener,
    cfg: ServerConfig,
    stats: Arc<ServerStats>,
    gate: Arc<Gate>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            (stream, peer) = gate.accept(&listener, None) => {
                let (store, cfg, stats, stop) = (store.clone(), cfg.clone(), stats.clone(), shutdown.clone());
                conns.spawn(async move {
                    stats.connections_open.fetch_add(1, Relaxed);
                    stats.connections_total.fetch_add(1, Relaxed);
                    if let Err(e) = connection(store, stream, peer, cfg, stats.clone(), stop).await {
                        tracing::debug!("connection {peer}: {e}");
                    }
                    stats.connections_open.fetch_sub(1, Relaxed);
                });
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
        job: JoinHandle<telestore_engine::Result<telestore_engine::WriteAck>>,
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
    admitted: Admitted,
    peer: SocketAddr,
    cfg: ServerConfig,
    stats: Arc<ServerStats>,
    stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let (stream, _slot) = admitted.into_parts();
    stream.set_nodelay(true)?;
    let Some(tls) = cfg.tls.clone() else {
        return speak(store, stream, peer, cfg, stats, stop).await;
    };
    // The TLS handshake counts against the protocol's handshake timeout.
    let s = tls
        .accept(Port::Binary, stream, cfg.handshake_timeout)
        .await?;
    speak(store, s, peer, cfg, stats, stop).await
}

/// The binary protocol over `stream` (TCP, or TLS over it).
#[expect(
    clippy::too_many_lines,
    reason = "one connection's life (handshake, frames, acks, shutdown) in the order of formats/ingest.md"
)]
async fn speak<S>(
    store: Arc<Store>,
    stream: S,
    peer: SocketAddr,
    cfg: ServerConfig,
    stats: Arc<ServerStats>,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let (rd, mut wr) = tokio::io::split(stream);
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
        Err(e) => {
            let mut we = store_error(e, hs.version);
            if we.code == ErrorCode::UnknownTable {
                we.message = format!(
                    "no table {:?} (tables: {})",
                    hs.table,
                    store.table_names().join(", ")
                );
            }
            we.fatal = true;
            return reject_and_close(&mut wr, &stats, we).await;
        }
    };
    wr.write_all(&Response::ready(&schema).encode()).await?;
    tracing::debug!("{peer}: ingest into {} ({:?})", hs.table, hs.durability);
    let (tx, rx) = mpsc::unbounded_channel::<Pending>();
    let acks = tokio::spawn(send_acks(wr, rx, stats.clone(), hs.version));
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
    mut wr: impl tokio::io::AsyncWrite + Unpin,
    mut rx: mpsc::UnboundedReceiver<Pending>,
    stats: Arc<ServerStats>,
    version: u16,
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
                    let we = store_error(e, version).batch(batch_id);
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

/// An engine error as a wire error, by [`crate::classes::wire`].
fn store_error(e: Error, version: u16) -> WireError {
    let (code, fatal) = crate::classes::wire(e.class(), version);
    let message = match e {
        Error::Busy { retry_after_ms } => {
            format!("store busy (write stall), retry after {retry_after_ms} ms")
        }
        other => other.to_string(),
    };
    WireError {
        code,
        fatal,
        batch_id: 0,
        message,
    }
}
