//! telestore-server — the daemon's protocol frontends over a telestore
//! store: the binary ingest protocol and HTTP ([`server`]), the line
//! protocol and the binary codec ([`ingest`]), Arrow Flight and Flight SQL
//! ([`flight`]) and the MQTT subscriber ([`mqtt`]).
#![deny(unsafe_code)]

pub mod classes;
pub mod flight;
pub mod fuzzing;
pub mod ingest;
pub mod mqtt;
pub mod server;
