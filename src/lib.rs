//! telestore — a time-series store for device telemetry.
//!
//! This package is the `telestore` binary and a facade over the workspace's
//! crates, so that an embedder can write `telestore::Store` and name every
//! layer under one root:
//!
//! - the engine ([`telestore_engine`]): [`key`], [`schema`], [`read`],
//!   [`engine`] and [`io`] (its internals — WAL, memstore, HFiles,
//!   manifest, compaction — are public only with its `testing` feature);
//! - queries and export ([`telestore_query`], re-exported as [`query`]),
//!   SQL as [`sql`];
//! - the daemon's frontends ([`telestore_server`]): [`server`], [`ingest`],
//!   [`flight`], [`mqtt`];
//! - the terminal dashboard of `telestore top` ([`top`]).
//!
//! Someone who only embeds the store depends on `telestore-engine` alone
//! (docs/design.md, "Crates").
#![deny(unsafe_code)]

pub use telestore_engine::{clock, engine, error, io, key, read, region, schema, testkit, util};
pub use telestore_engine::{
    Compression, Durability, Error, Field, FieldType, Options, Order, Result, Row, RowView, Store,
    TableOptions, TableSchema, WriteAck,
};
pub use telestore_query as query;
pub use telestore_query::sql;
pub use telestore_server::{classes, daemon, flight, frontend, ingest, mqtt, server, settings};

pub mod top;
