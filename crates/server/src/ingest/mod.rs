//! The ingest protocols' codecs: the binary frames (`proto`, spec
//! `formats/ingest.md`) with a small blocking client (`client`), and the
//! InfluxDB line protocol (`lineparse` parses, `lineproto` turns lines
//! into rows of a table). The daemon that serves them is `crate::daemon`.

pub mod client;
pub mod lineparse;
pub mod lineproto;
pub mod proto;
