//! The exactly-once version header read back from a table's topic (ADR 0030): any bytes are read
//! or refused, never a panic, and what is read is written back to the same version.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snow_runtime::source::produce::{encode_version, parse_version};

fuzz_target!(|value: &[u8]| {
    if let Some((ts, id, count)) = parse_version(value) {
        let again = encode_version(ts, &id, &count);
        assert_eq!(parse_version(again.as_bytes()), Some((ts, id, count)));
    }
});
