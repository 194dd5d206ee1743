//! telestore-engine — the storage engine of telestore, a time-series store
//! for device telemetry, as a library with no network or SQL stack.
//!
//! The modules follow the path of a row: [`key`] → [`schema`]/[`cell`] →
//! [`wal`] → [`memstore`] → [`hfile`] (with [`cache`]) → [`manifest`] →
//! [`compaction`] → [`region`] → [`read`] → [`engine`]. [`io`] sits under
//! every writer; [`clock`] and [`util`] under everything.
#![deny(unsafe_code)]

pub mod cache;
pub mod cell;
pub mod clock;
pub mod compaction;
pub mod engine;
pub mod error;
pub mod failpoint;
pub mod fuzzing;
pub mod hfile;
pub mod io;
pub mod key;
pub mod manifest;
pub mod memstore;
pub mod read;
pub mod region;
pub mod schema;
pub mod testkit;
pub mod util;
pub mod wal;

pub use engine::{Durability, Options, Store, WriteAck};
pub use error::{Error, Result};
pub use read::{Order, Row, RowView};
pub use schema::{Compression, Field, FieldType, TableOptions, TableSchema};
