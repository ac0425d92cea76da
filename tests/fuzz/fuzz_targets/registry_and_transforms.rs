//! What a registry and a connector configuration hand the new parsers: a writer's JSON Schema
//! (any shape: Python's type lists, anyOf, nested refs) and the JSON value it types, and a
//! `transforms=` / `predicates=` configuration run over a schemaless record. Input: the schema or
//! configuration text, a zero byte, then the value's JSON. None of it may panic, loop or allocate
//! beyond the input; a value the JSON Schema reads must write back and read the same.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use snow_data::transform::{Chain, Record};
use snow_data::{Kind, Schema, Value, connect_json, json_schema};

fuzz_target!(|data: &[u8]| {
    let (head, payload) = match data.iter().position(|b| *b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let value = serde_json::from_slice::<serde_json::Value>(payload).ok();
    if let Ok(schema) = serde_json::from_slice::<serde_json::Value>(head) {
        if let (Ok(connect), Some(value)) = (json_schema::to_connect(&schema), value.as_ref()) {
            if let Ok(read) = json_schema::decode(value, &connect) {
                let mut text = String::new();
                if json_schema::encode(&read, &mut text).is_ok() {
                    let again: serde_json::Value = serde_json::from_str(&text).expect("what we wrote is JSON");
                    let reread = json_schema::decode(&again, &connect).expect("what we wrote reads back");
                    let mut third = String::new();
                    json_schema::encode(&reread, &mut third).expect("what we read back writes again");
                    assert_eq!(third, text, "a round trip changed the value");
                }
            }
            let _ = json_schema::from_connect(&connect);
        }
    }
    // The configuration: one key=value per line.
    let text = String::from_utf8_lossy(head);
    let entries: BTreeMap<String, String> =
        text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.trim().to_string(), v.to_string())).collect();
    if entries.contains_key("transforms") {
        let mut errors = Vec::new();
        let chain = Chain::from_entries(&entries, &mut errors);
        let (value_schema, value) = connect_json::decode(Some(payload), false).unwrap_or((None, Value::Null));
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
        let _ = chain.apply_now(record);
    }
});
