//! Ingest over the network: the binary protocol (`proto`, spec
//! `formats/ingest.md`), the TCP server (`server`) and a small blocking
//! client (`client`).

pub mod client;
pub mod proto;
pub mod server;
