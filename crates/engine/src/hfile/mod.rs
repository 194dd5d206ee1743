//! HFiles: immutable sorted files of compressed, checksummed blocks with a
//! block index, a bloom filter, file info and a fixed-size trailer.
//! Spec: `formats/hfile.md`.

pub mod block;
pub mod bloom;
pub mod columnar;
pub mod columns;
pub mod decimal;
pub mod reader;
pub mod sections;
/// Per-column byte accounting of stored files (lab studies and tests only).
#[cfg(any(test, feature = "testing"))]
pub mod stats;
pub mod writer;

pub use reader::HFileReader;
pub use writer::{publish, HFileWriter, WriterOptions};
