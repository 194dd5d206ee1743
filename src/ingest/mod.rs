//! Ingest over the network: the binary protocol (`proto`, spec
//! `formats/ingest.md`), the TCP server (`server`), the HTTP endpoints
//! (`http`: health, metrics, tables) and a small blocking client
//! (`client`). Every protocol checks tokens through `auth`.

pub mod auth;
pub mod client;
pub mod http;
pub mod lineparse;
pub mod lineproto;
pub mod proto;
pub mod query_http;
pub mod server;
