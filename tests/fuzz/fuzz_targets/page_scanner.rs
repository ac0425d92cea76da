//! The page scanner (snow-core's `table::page::parse_page`): any body ServiceNow (or anything
//! answering in its place) sends is parsed without a panic, and every row it returns lies in it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    if let Ok(rows) = snow_core::table::page::parse_page(body, "sys_id", "sys_updated_on") {
        for row in rows {
            let _ = format!("{row:?}");
        }
    }
});
