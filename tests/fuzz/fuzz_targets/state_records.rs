//! The fleet's state topics as a worker reads them back: configuration records (`connector-…`,
//! `target-state-…`, `restart-…`, `logger-…`) and offset keys (`["connector", partition]`), any
//! bytes a writer of the topics put there (input: records separated by 0x1E, each key 0x1F
//! value). Never a panic; what decodes is what any worker decodes from the same records.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snow_fleet::worker::configs::{connectors_of, loggers_of};
use snow_runtime::offsets::kafka::decode_key;

fuzz_target!(|data: &[u8]| {
    let records: Vec<(Vec<u8>, Vec<u8>)> = data
        .split(|b| *b == 0x1e)
        .map(|r| match r.iter().position(|b| *b == 0x1f) {
            Some(at) => (r[..at].to_vec(), r[at + 1..].to_vec()),
            None => (r.to_vec(), Vec::new()),
        })
        .collect();
    let connectors = connectors_of(records.clone());
    assert_eq!(connectors, connectors_of(records.clone()), "every worker reads the same");
    let _ = loggers_of(records.clone());
    for (key, _) in &records {
        let _ = decode_key(key);
    }
});
