#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| telestore_engine::fuzzing::wal_segment_header(data));
