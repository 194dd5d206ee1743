//! telestore-query — getting data out of a telestore store: query plans (`latest`, `range`, `scan`, `agg`), the
//! Arrow mapping of rows (`formats/arrow.md`), text and Arrow output, and
//! file export (Arrow IPC file/stream, Parquet). The CLI and the daemon's
//! `/api/v1/query` and `/api/v1/export` share all of it, so a query gives
//! the same result embedded or through `--server`.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod agg;
pub mod columns;
pub mod exec;
pub mod export;
pub mod output;
pub mod plan;
#[cfg(feature = "sql")]
pub mod sql;
pub mod time;

pub use exec::{Prepared, RunStats};
pub use plan::{Kind, Params, Plan};
