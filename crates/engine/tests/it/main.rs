//! The integration tests of `telestore-engine`, gathered into one test binary
//! (one link instead of one per file). Each module opens with a `//!`
//! saying what it guards; run one with
//! `cargo test -p telestore-engine --test it <module>::`.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "test code: a failed unwrap is a failed test, and a scenario reads top to bottom"
)]

mod cache_warm;
mod columnar_reads;
mod common;
mod compaction;
mod engine_model;
mod format_columnar;
mod format_fixtures;
mod io_backend;
mod io_group_commit;
mod latest_cache;
mod regions;
mod wal_dir;
mod wal_pressure;
mod wal_recovery;
