//! Helpers of this crate's tests.

pub use telestore_testsupport::*;
