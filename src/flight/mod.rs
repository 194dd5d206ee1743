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

use crate::error::{Error, Result};
use crate::server::conn::Gate;
use arrow_flight::flight_service_server::FlightServiceServer;
use service::Service;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;

/// Largest gRPC message accepted or sent (a `DoPut` batch, a `DoGet`
/// batch of 65,536 wide rows).
pub const FLIGHT_MESSAGE_MAX: usize = 64 << 20;

/// The location clients reach `addr` at, or `None` for a wildcard
/// address (endpoints then name no location: "the service you asked").
pub fn location_of(addr: SocketAddr) -> Option<String> {
    (!addr.ip().is_unspecified()).then(|| format!("grpc+tcp://{addr}"))
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
    header_timeout: Duration,
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
    tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(header_timeout))
        .http2_keepalive_timeout(Some(header_timeout))
        .add_service(svc)
        .serve_with_incoming_shutdown(incoming, stop)
        .await
        .map_err(|e| Error::io(format!("<flight {addr}>"), std::io::Error::other(e)))
}
