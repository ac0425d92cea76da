//! A component manifest from a fleet's component topic: any bytes are accepted only within the
//! bounds (a manifest may not ask for more memory than a component may take).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((size, chunks)) = snow_fleet::worker::components::check_manifest(data) {
        assert!(size <= snow_fleet::worker::components::MAX_COMPONENT);
        assert_eq!(chunks, size.div_ceil(snow_fleet::worker::components::CHUNK));
    }
});
