//! The Batch API answer decoder: any body is decoded or refused, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    let _ = snow_core::sink::batch::decode(body);
});
