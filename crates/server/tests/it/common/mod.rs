//! Helpers of the server crate's tests.
#![allow(dead_code)]

pub mod daemon;

pub use daemon::*;
pub use telestore_testsupport::*;
