#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| telestore_server::fuzzing::line_protocol(data));
