//! The HTTP listener: each connection takes a slot of the [`Gate`], must
//! send its first bytes within the header timeout, and hyper closes it
//! when a request's headers (the first, or the next on a kept-alive
//! connection) take longer than that. A stop stops accepting and lets the
//! open connections finish their requests, for at most the grace period.

use crate::frontend::conn::Gate;
use crate::frontend::tls::{Port, Tls};
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Bytes of a connection's start that must come within the header timeout
/// (the length of HTTP/2's preface; an HTTP/1.1 request line and Host
/// header are longer).
const FIRST_BYTES: usize = 24;

/// Serve `app` on `listener` until `stop` turns true; with `tls`, every
/// connection's TLS handshake must end within the header timeout.
pub(super) async fn serve(
    listener: TcpListener,
    app: Router,
    gate: Arc<Gate>,
    (header_timeout, grace): (Duration, Duration),
    tls: Option<Arc<Tls>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(header_timeout));
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();
    loop {
        let (conn, peer) = tokio::select! {
            _ = stop.changed() => break,
            accepted = gate.accept(&listener, Some((header_timeout, FIRST_BYTES))) => accepted,
        };
        // Without TCP_NODELAY a response written in two pieces waits for
        // the client's delayed ACK (~40 ms) on a kept-alive connection.
        if let Err(e) = conn.stream().set_nodelay(true) {
            tracing::warn!("TCP_NODELAY on an HTTP connection: {e}");
        }
        let svc = TowerToHyperService::new(app.clone());
        let (tls, builder, watcher) = (tls.clone(), builder.clone(), graceful.watcher());
        // One task per connection, the TLS handshake (if any) in it: a
        // slow client does not hold up the accept loop.
        tokio::spawn(async move {
            let served = match tls {
                None => {
                    let c = builder.serve_connection_with_upgrades(TokioIo::new(conn), svc);
                    watcher.watch(c.into_owned()).await
                }
                Some(tls) => match tls.accept(Port::Http, conn, header_timeout).await {
                    Ok(s) => {
                        let c = builder.serve_connection_with_upgrades(TokioIo::new(s), svc);
                        watcher.watch(c.into_owned()).await
                    }
                    Err(e) => return tracing::debug!("tls handshake from {peer}: {e}"),
                },
            };
            if let Err(e) = served {
                tracing::debug!("http connection {peer}: {e}");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("http connections still open after the grace period are dropped");
    }
}
