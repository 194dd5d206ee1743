//! telestore-server — the daemon's protocol frontends over a telestore
//! store: the binary ingest protocol and HTTP ([`server`]), the line
//! protocol and the binary codec ([`ingest`]), Arrow Flight and Flight SQL
//! ([`flight`]) and the MQTT subscriber ([`mqtt`]). What they share is in
//! [`frontend`] (tokens, the connection cap, TLS, counters) and
//! [`classes`] (each protocol's answer to each class of error); [`daemon`]
//! starts them all.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod classes;
pub mod daemon;
pub mod flight;
pub mod frontend;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod ingest;
pub mod mqtt;
pub mod server;
pub mod settings;
