//! The Java properties reader (connector and worker files): any text is read or refused with a
//! message, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = snow_runtime::config::parse_properties(&text);
});
