//! Typed values through Kafka Connect's transforms: a `transforms=` configuration (one key=value
//! per line) and a record in Connect's JSON envelope (`{"schema":…,"payload":…}`: structs,
//! timestamps, dates, decimals, arrays, maps), separated by a zero byte. The chain runs over the
//! typed value as a sink reads it; never a panic, whatever the configuration and the value.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use snow_data::transform::{Chain, Record};
use snow_data::{Kind, Schema, Value, connect_json};

fuzz_target!(|data: &[u8]| {
    let (head, payload) = match data.iter().position(|b| *b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let text = String::from_utf8_lossy(head);
    let entries: BTreeMap<String, String> =
        text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.trim().to_string(), v.to_string())).collect();
    let Ok((value_schema, value)) = connect_json::decode(Some(payload), true) else { return };
    let mut errors = Vec::new();
    let chain = Chain::from_entries(&entries, &mut errors);
    let record = Record {
        topic: "servicenow.incident".into(),
        partition: Some(0),
        offset: Some(7),
        key_schema: Some(Schema::new(Kind::String)),
        key: Value::String("0123456789abcdef0123456789abcdef".into()),
        value_schema,
        value,
        timestamp: Some(1_700_000_000_000),
        headers: Vec::new(),
    };
    if let Ok(out) = chain.apply_now(record) {
        // What the chain made is written as Connect would write it (or refused with a reason).
        for made in out {
            let _ = connect_json::encode(made.value_schema.as_ref(), &made.value, true);
        }
    }
});
