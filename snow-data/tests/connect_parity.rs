//! Our transforms against Kafka Connect 4.1.1's own, record for record: every case of
//! `smt_cases.jsonl` (a configuration and a record in JsonConverter's envelope form) runs through
//! Connect's transforms (the real jars, `tests/kafka/java/SmtHarness.java`) and through
//! `snow_data::transform`, and the results must be the same record (topic, partition,
//! timestamp, key and value with their schemas, headers), the same drop, or both an error (with
//! Connect's message inside ours, unless the case says the messages differ on purpose).
#![allow(clippy::unwrap_used)] // a panic is how a test fails

use std::collections::BTreeMap;

use serde_json::{Value as Json, json};
use snow_data::connect_json;
use snow_data::transform::{Chain, Header, Record};
use snow_data::{Schema, Value};

const CASES: &str = include_str!("smt_cases.jsonl");

fn envelope(j: &Json) -> (Option<Schema>, Value) {
    if j.is_null() {
        return (None, Value::Null);
    }
    connect_json::decode(Some(j.to_string().as_bytes()), true).unwrap()
}

/// `value` in JsonConverter's envelope; an error when JsonConverter cannot write it.
fn to_envelope(schema: Option<&Schema>, value: &Value) -> Result<Json, String> {
    if schema.is_none() && value.is_null() {
        return Ok(Json::Null);
    }
    let bytes = connect_json::encode(schema, value, true).map_err(|e| e.to_string())?.unwrap();
    Ok(serde_json::from_slice(&bytes).unwrap())
}

fn run(case: &Json) -> Json {
    let config: BTreeMap<String, String> =
        case["config"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string())).collect();
    let mut errors = Vec::new();
    let chain = Chain::from_entries(&config, &mut errors);
    if !errors.is_empty() {
        return json!({ "error": errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n") });
    }
    let r = &case["record"];
    let (key_schema, key) = envelope(&r["key"]);
    let (value_schema, value) = envelope(&r["value"]);
    let headers = r["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let (schema, value) = envelope(&h["value"]);
            Header { key: h["key"].as_str().unwrap().to_string(), schema, value }
        })
        .collect();
    let record = Record {
        topic: r["topic"].as_str().unwrap().to_string(),
        partition: r["partition"].as_i64().map(|p| p as i32),
        offset: r["offset"].as_i64(),
        key_schema,
        key,
        value_schema,
        value,
        timestamp: r["timestamp"].as_i64(),
        headers,
    };
    match chain.apply_now(record).map(|mut out| out.pop()) {
        Ok(None) => json!({ "dropped": true }),
        Err(e) => json!({ "error": e.message }),
        Ok(Some(out)) => {
            let written = (|| -> Result<Json, String> {
                let headers: Vec<Json> = out
                    .headers
                    .iter()
                    .map(|h| Ok(json!({ "key": h.key, "value": to_envelope(h.schema.as_ref(), &h.value)? })))
                    .collect::<Result<_, String>>()?;
                Ok(json!({ "record": {
                    "topic": out.topic,
                    "partition": out.partition,
                    "timestamp": out.timestamp,
                    "key": to_envelope(out.key_schema.as_ref(), &out.key)?,
                    "value": to_envelope(out.value_schema.as_ref(), &out.value)?,
                    "headers": headers,
                }}))
            })();
            written.unwrap_or_else(|e| json!({ "error": e }))
        }
    }
}

#[test]
fn every_case_gives_what_kafka_connects_own_transforms_give() {
    let answers = kafka_harness::connect_smt::run(CASES).unwrap();
    let cases: Vec<Json> = CASES.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(answers.len(), cases.len(), "one answer per case from Connect");
    let mut failures = Vec::new();
    for (case, answer) in cases.iter().zip(&answers) {
        let connect: Json = serde_json::from_str(answer).unwrap();
        let ours = run(case);
        let same = match (connect.get("error"), ours.get("error")) {
            (Some(theirs), Some(mine)) => case["compare_messages"] == false || mine.as_str().unwrap().contains(theirs.as_str().unwrap()),
            _ => connect == ours,
        };
        if !same {
            failures.push(format!("{}:\n  Connect: {connect}\n  ours:    {ours}", case["name"]));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ from Kafka Connect 4.1.1:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
