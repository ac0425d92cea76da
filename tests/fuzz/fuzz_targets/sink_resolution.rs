//! Sink record resolution (snow-core `sink::resolve`): what table, row and operation a record
//! asks for, from its key, value and headers (input: key, value and headers' text separated by
//! zero bytes; headers as `name=value` lines). Never a panic; a record either resolves to a
//! table the configuration allows, or is refused with a reason.
#![no_main]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use snow_core::config::SinkConfig;
use snow_core::record::{Header, SinkRecord};
use snow_core::sink::resolve::resolve;

fn config() -> &'static SinkConfig {
    static CONFIG: OnceLock<SinkConfig> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let entries: BTreeMap<String, String> = [
            ("snow.instance.url", "https://acme.service-now.com"),
            ("snow.sink.table", "incident"),
            ("snow.sink.table.header.allowed", "incident,problem"),
            ("snow.sink.table.header", "snow.table"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        SinkConfig::parse(&entries).unwrap_or_else(|_| {
            let minimal: BTreeMap<String, String> =
                [("snow.instance.url", "https://acme.service-now.com"), ("snow.sink.table", "incident")]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
            SinkConfig::parse(&minimal).expect("a minimal sink configuration")
        })
    })
}

fuzz_target!(|data: &[u8]| {
    let mut parts = data.split(|b| *b == 0);
    let key = parts.next().filter(|k| !k.is_empty()).map(<[u8]>::to_vec);
    let value = parts.next().map(<[u8]>::to_vec);
    let headers = parts
        .next()
        .map(|h| {
            String::from_utf8_lossy(h)
                .lines()
                .filter_map(|l| l.split_once('=').map(|(k, v)| Header { key: k.to_string(), value: v.as_bytes().to_vec() }))
                .collect()
        })
        .unwrap_or_default();
    let record = SinkRecord { topic: "orders".into(), partition: 0, offset: 1, key, value, headers, timestamp_ms: None };
    let _ = resolve(&record, config());
});
