//! telestore — a time-series store for device telemetry.
//!
//! The modules follow the path of a row: [`key`] → [`schema`] → [`wal`] →
//! [`region`] → [`memstore`] → [`hfile`] → [`manifest`] → [`engine`]. [`io`]
//! sits under every writer.
#![deny(unsafe_code)]

pub mod cache;
pub mod cell;
pub mod clock;
pub mod compaction;
pub mod engine;
pub mod error;
pub mod flight;
pub mod fuzzing;
pub mod hfile;
pub mod ingest;
pub mod io;
pub mod key;
pub mod manifest;
pub mod memstore;
pub mod mqtt;
pub mod query;
pub mod read;
pub mod region;
pub mod schema;
pub mod server;
pub mod sql;
pub mod testkit;
pub mod top;
pub mod util;
pub mod wal;

pub use engine::{Durability, Options, Store, WriteAck};
pub use error::{Error, Result};
pub use read::{Order, Row, RowView};
pub use schema::{Compression, Field, FieldType, TableOptions, TableSchema};
