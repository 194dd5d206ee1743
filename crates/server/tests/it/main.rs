//! The integration tests of `telestore-server`, gathered into one test binary
//! (one link instead of one per file). Each module opens with a `//!`
//! saying what it guards; run one with
//! `cargo test -p telestore-server --test it <module>::`.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "test code: a failed unwrap is a failed test, and a scenario reads top to bottom"
)]

mod common;
mod first_write;
mod flight;
mod format_flight;
mod fuzz_smoke;
mod http_fidelity;
mod metrics_doc;
mod openapi;
mod query_isolation;
mod settings;
