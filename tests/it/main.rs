//! The integration tests of `telestore`, gathered into one test binary
//! (one link instead of one per file). Each module opens with a `//!`
//! saying what it guards; run one with
//! `cargo test -p telestore --test it <module>::`.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "test code: a failed unwrap is a failed test, and a scenario reads top to bottom"
)]

mod common;
mod connection_limits;
mod console;
mod crash_kill9;
mod devices;
mod disk_full;
mod doc_examples;
mod docs;
mod http_auth;
mod ingest_http;
mod ingest_tcp;
mod mqtt;
mod query_cli;
mod read_only;
mod sql;
mod store_lifecycle;
mod table_semantics;
mod tls;
