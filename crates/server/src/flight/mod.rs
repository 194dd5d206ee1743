//! Arrow Flight (`serve --flight-listen`): tables as flights, one
//! endpoint per region holding data (so any Flight client can pull a
//! table in parallel, and a future cluster can point endpoints at other
//! nodes), `DoPut` bulk loads, and SQL. Documents and tickets:
//! `formats/flight.md`. Auth: the daemon's tokens in an
//! `authorization` header (`Bearer`, or `Basic` with the token as the
//! password, as `Handshake` and pyarrow's `authenticate_basic_token` do).

mod ipc_check;
pub mod put;
pub mod service;
pub mod sql;
pub mod ticket;

use crate::frontend::conn::{Admitted, Gate};
use crate::frontend::tls::{Port, Tls};
use arrow_flight::flight_service_server::FlightServiceServer;
use service::Service;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use telestore_engine::error::{Error, Result};
use tokio::net::TcpListener;

/// Largest gRPC message accepted or sent (a `DoPut` batch, a `DoGet`
/// batch of 65,536 wide rows).
pub const FLIGHT_MESSAGE_MAX: usize = 64 << 20;

/// The location clients reach `addr` at (`grpc+tls://` when `tls`), or
/// `None` for a wildcard address (endpoints then name no location: "the
/// service you asked").
pub fn location_of(addr: SocketAddr, tls: bool) -> Option<String> {
    let scheme = if tls { "grpc+tls" } else { "grpc+tcp" };
    (!addr.ip().is_unspecified()).then(|| format!("{scheme}://{addr}"))
}

/// Bytes of HTTP/2's connection preface: a client must send them within
/// the header timeout.
const PREFACE_BYTES: usize = 24;

/// Serve Flight on `listener` until `stop` completes: each connection
/// takes a slot of `gate`, must send HTTP/2's preface within
/// `header_timeout`, and is pinged every `header_timeout` once open (a
/// peer that stops answering is dropped).
pub async fn serve(
    listener: TcpListener,
    service: Service,
    gate: std::sync::Arc<Gate>,
    (header_timeout, tls): (Duration, Option<std::sync::Arc<Tls>>),
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let addr = listener
        .local_addr()
        .map_err(|e| Error::io("<flight listener>", e))?;
    let svc = FlightServiceServer::new(service)
        .max_decoding_message_size(FLIGHT_MESSAGE_MAX)
        .max_encoding_message_size(FLIGHT_MESSAGE_MAX);
    let incoming = futures::stream::unfold((listener, gate), move |(l, gate)| async move {
        let (conn, _) = gate.accept(&l, Some((header_timeout, PREFACE_BYTES))).await;
        if let Err(e) = conn.stream().set_nodelay(true) {
            tracing::warn!("TCP_NODELAY on a Flight connection: {e}");
        }
        Some((Ok::<_, std::io::Error>(conn), (l, gate)))
    });
    let server = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(header_timeout))
        .http2_keepalive_timeout(Some(header_timeout))
        .add_service(svc);
    let done = match tls {
        None => server.serve_with_incoming_shutdown(incoming, stop).await,
        Some(tls) => {
            let secured = handshakes(incoming, tls, header_timeout);
            server.serve_with_incoming_shutdown(secured, stop).await
        }
    };
    done.map_err(|e| Error::io(format!("<flight {addr}>"), std::io::Error::other(e)))
}

/// The connections of `incoming` once their TLS handshake is done (each in
/// a task of its own, within `timeout`: a slow client holds up no other).
fn handshakes(
    incoming: impl futures::Stream<Item = std::io::Result<Admitted>> + Send + 'static,
    tls: std::sync::Arc<Tls>,
    timeout: Duration,
) -> impl futures::Stream<Item = std::io::Result<TlsConn>> {
    use futures::StreamExt;
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        let mut incoming = std::pin::pin!(incoming);
        while let Some(Ok(conn)) = incoming.next().await {
            let (tls, tx) = (tls.clone(), tx.clone());
            tokio::spawn(async move {
                match tls.accept(Port::Flight, conn, timeout).await {
                    Ok(s) => _ = tx.send(Ok(TlsConn(s))).await,
                    Err(e) => tracing::debug!("flight tls handshake: {e}"),
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// A Flight connection over TLS, as tonic takes one.
pub struct TlsConn(tokio_rustls::server::TlsStream<Admitted>);

impl tonic::transport::server::Connected for TlsConn {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        self.0.get_ref().0.connect_info()
    }
}

impl tokio::io::AsyncRead for TlsConn {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for TlsConn {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
