//! The daemon's settings for every frontend ([`ServerConfig`]).

use super::auth::Tokens;
use std::net::SocketAddr;
use std::time::Duration;

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
    /// Options of the tables a write creates (line protocol, MQTT, Flight
    /// DoPut) when its table does not exist; `None`: such writes are
    /// refused.
    pub auto_create: Option<telestore_engine::TableOptions>,
    /// Where the Arrow Flight service listens (`None`: no Flight).
    pub flight_listen: Option<SocketAddr>,
    /// The MQTT broker to subscribe to (`None`: no MQTT).
    pub mqtt: Option<crate::mqtt::MqttConfig>,
    /// The limits every query runs under.
    pub queries: telestore_query::sql::QueryLimits,
    /// Connections open at once over every listener (HTTP, binary,
    /// Flight), less if the descriptor limit leaves fewer.
    pub connections_max: usize,
    /// How long an HTTP or Flight client may take to send a request's
    /// headers (HTTP: also how long a kept-alive connection may sit idle).
    pub header_timeout: Duration,
    /// TLS on every listener (HTTP, binary, Flight); `None`: plain TCP.
    pub tls: Option<std::sync::Arc<crate::frontend::tls::Tls>>,
}

impl ServerConfig {
    /// How the line protocol maps lines to tables and series.
    pub fn line_rules(&self) -> crate::ingest::lineproto::Rules {
        crate::ingest::lineproto::Rules {
            device_tag: self.device_tag.clone(),
            create: self.auto_create.clone(),
        }
    }
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
            auto_create: Some(telestore_engine::TableOptions::default()),
            flight_listen: None,
            mqtt: None,
            queries: telestore_query::sql::QueryLimits::default(),
            connections_max: 4096,
            header_timeout: Duration::from_secs(30),
            tls: None,
        }
    }
}
