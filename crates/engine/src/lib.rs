//! telestore-engine — the storage engine of telestore, a time-series store
//! for device telemetry, as a library with no network or SQL stack (80
//! crates to build, where the whole daemon takes about 460).
//!
//! A [`Store`] holds tables of fixed-width rows keyed by device and
//! timestamp; a write is acknowledged after the WAL's `fdatasync` (with
//! [`Durability::Sync`]), flushed to immutable HFiles and compacted in the
//! background.
//!
//! ```
//! use telestore_engine::schema::batch::push_row;
//! use telestore_engine::{Durability, Field, FieldType, Options, Order, Store, TableOptions, TableSchema};
//!
//! # fn main() -> telestore_engine::Result<()> {
//! # let dir = std::env::temp_dir().join(format!("telestore-doc-{}", std::process::id()));
//! let store = Store::open(&dir, Options::default())?;
//! store.create_table(TableSchema::new(
//!     "readings",
//!     vec![Field::new("temp", FieldType::F64)],
//!     TableOptions::default(),
//! )?)?;
//! // Rows are little-endian: device u64 | ts i64 (ms) | fields.
//! let mut rows = Vec::new();
//! push_row(&mut rows, 42, 1_700_000_000_000, &21.5f64.to_le_bytes());
//! store.write("readings", &rows, Durability::Sync)?; // after fdatasync
//! let newest = store.latest("readings", 42, 10)?;
//! assert_eq!(newest.len(), 1);
//! let window = store.scan("readings", 42, 0, i64::MAX, Order::OldestFirst)?;
//! assert_eq!(window.len(), 1);
//! # drop(store);
//! # let _ = std::fs::remove_dir_all(&dir);
//! # Ok(())
//! # }
//! ```
//!
//! The public modules are what an embedder uses: [`engine`] (the
//! [`Store`] and its options), [`schema`], [`read`] (rows as read),
//! [`key`], [`error`], [`clock`] and [`io`] (the I/O backend choice). The
//! others follow the path of a row — `wal` → `memstore` → `hfile` (with
//! `cache`) → `manifest` → `compaction` → `region` — and are not a stable
//! API: `region`, `failpoint`, `testkit` and `util` are public (hidden
//! from the documentation) for the `telestore` binary and the daemon;
//! `wal`, `memstore`, `hfile`, `cache`, `cell`, `manifest`, `compaction`
//! and `ids` are public only with the `testing` feature (for the benches,
//! fuzzers, the lab and tests), so in a build without it the compiler
//! sees every unused item of them.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod clock;
pub mod engine;
pub mod error;
pub mod io;
pub mod key;
pub mod read;
pub mod schema;

/// Modules public only with the `testing` feature (lib.rs's doc).
macro_rules! internal {
    ($($name:ident),* $(,)?) => {
        $(
            #[cfg(feature = "testing")]
            #[doc(hidden)]
            pub mod $name;
            #[cfg(not(feature = "testing"))]
            mod $name;
        )*
    };
}

internal!(cache, cell, compaction, hfile, ids, manifest, memstore, wal);

#[doc(hidden)]
pub mod failpoint;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod fuzzing;
#[doc(hidden)]
pub mod region;
#[doc(hidden)]
pub mod testkit;
#[doc(hidden)]
pub mod util;

pub use engine::{Durability, Options, Store, WriteAck};
pub use error::{Error, ErrorClass, Result};
pub use read::{Order, Row, RowView};
pub use schema::{Compression, Field, FieldType, TableOptions, TableSchema};
