//! What the converters read from outside: a writer's Avro schema from the registry and the framed
//! record bytes it decodes, Connect's JSON (with and without the envelope), a source component's
//! value schema and the row it types. Input: schema text, a zero byte, then the record bytes. None
//! of it may panic, loop or allocate beyond the input; what encodes must decode to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snow_data::{avro, connect_json, snow_text, wire};

fuzz_target!(|data: &[u8]| {
    let (schema, payload) = match data.iter().position(|b| *b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let text = String::from_utf8_lossy(schema);
    if let Ok((node, connect)) = avro::parse(&text) {
        let body = wire::unframe(payload).map(|(_, b)| b).unwrap_or(payload);
        if let Ok(value) = avro::decode(&node, body) {
            // A value read under a schema we can write must write back, read under our own schema,
            // and write the same bytes again (bytes, not values, are compared: NaN is not NaN).
            let mut again = Vec::new();
            let ours = avro::from_connect(&connect).ok().and_then(|j| avro::parse(&j.to_string()).ok());
            if let Some((ours, _)) = ours.filter(|_| avro::encode(&connect, &value, &mut again).is_ok()) {
                let reread = avro::decode(&ours, &again).expect("what we wrote reads back under our schema");
                let mut third = Vec::new();
                avro::encode(&connect, &reread, &mut third).expect("what we read back writes again");
                assert_eq!(third, again, "a round trip changed the value");
            }
        }
    }
    for envelope in [true, false] {
        let _ = connect_json::decode(Some(payload), envelope);
    }
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(schema) {
        if let Ok(connect) = connect_json::schema_from_json(&json) {
            let _ = snow_text::row(payload, &connect);
        }
    }
});
