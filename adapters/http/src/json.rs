//! The adapter's JSON: requests into WIT values, WIT values into answers. Bytes are base64.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

use crate::bindings::snow::connector::types as wit;

/// `body.config`, an object of string values, as the connectors' configuration.
pub(crate) fn config(body: &Value) -> Result<wit::Config, String> {
    let object = body["config"].as_object().ok_or("config: an object of string values is required")?;
    object
        .iter()
        .map(|(key, value)| match value.as_str() {
            Some(v) => Ok(wit::ConfigEntry { key: key.clone(), value: v.to_string() }),
            None => Err(format!("config.{key}: must be a string")),
        })
        .collect()
}

/// `[{partition, position}]`; none is no offsets (start from the configuration).
pub(crate) fn offsets(value: &Value) -> Result<Vec<wit::SourceOffset>, String> {
    let Some(list) = value.as_array() else { return if value.is_null() { Ok(Vec::new()) } else { Err("offsets: must be a list".into()) } };
    list.iter()
        .enumerate()
        .map(|(i, o)| match (o["partition"].as_str(), o["position"].as_str()) {
            (Some(partition), Some(position)) => Ok(wit::SourceOffset { partition: partition.into(), position: position.into() }),
            _ => Err(format!("offsets[{i}]: needs partition and position strings")),
        })
        .collect()
}

fn bytes(value: &Value, what: &str) -> Result<Option<Vec<u8>>, String> {
    match value {
        Value::Null => Ok(None),
        Value::String(text) => STANDARD.decode(text).map(Some).map_err(|e| format!("{what}: not base64: {e}")),
        _ => Err(format!("{what}: must be base64 or null")),
    }
}

/// `[{topic, partition, offset, key, value, headers, timestamp_ms}]`.
pub(crate) fn sink_records(value: &Value) -> Result<Vec<wit::SinkRecord>, String> {
    let list = value.as_array().ok_or("records: a list is required")?;
    list.iter()
        .enumerate()
        .map(|(i, r)| {
            let at = |field: &str| format!("records[{i}].{field}");
            let headers = match &r["headers"] {
                Value::Null => Vec::new(),
                Value::Array(pairs) => pairs
                    .iter()
                    .map(|pair| match (pair[0].as_str(), bytes(&pair[1], &at("headers"))) {
                        (Some(key), Ok(value)) => Ok(wit::Header { key: key.into(), value: value.unwrap_or_default() }),
                        _ => Err(format!("{}: each is [name, base64 value]", at("headers"))),
                    })
                    .collect::<Result<_, _>>()?,
                _ => return Err(format!("{}: must be a list", at("headers"))),
            };
            Ok(wit::SinkRecord {
                topic: r["topic"].as_str().ok_or_else(|| format!("{}: a string is required", at("topic")))?.into(),
                partition: r["partition"].as_i64().ok_or_else(|| format!("{}: a number is required", at("partition")))? as i32,
                offset: r["offset"].as_i64().ok_or_else(|| format!("{}: a number is required", at("offset")))?,
                key: bytes(&r["key"], &at("key"))?,
                value: bytes(&r["value"], &at("value"))?,
                headers,
                timestamp_ms: r["timestamp_ms"].as_i64(),
            })
        })
        .collect()
}

pub(crate) fn config_errors(errors: &[wit::ConfigError]) -> Value {
    Value::Array(errors.iter().map(|e| json!({ "key": e.key, "message": e.message })).collect())
}

fn class(class: wit::ErrorClass) -> &'static str {
    match class {
        wit::ErrorClass::Transient => "transient",
        wit::ErrorClass::Fatal => "fatal",
        wit::ErrorClass::Ambiguous => "ambiguous",
    }
}

pub(crate) fn snow_error(error: &wit::SnowError) -> Value {
    match error {
        wit::SnowError::Config(errors) => json!({ "config": config_errors(errors) }),
        wit::SnowError::Http(h) => json!({ "http": {
            "status": h.status, "message": h.message, "detail": h.detail, "request_id": h.request_id, "class": class(h.class)
        } }),
        wit::SnowError::Transport(f) => json!({ "transport": { "message": f.message, "class": class(f.class) } }),
        wit::SnowError::Denied(message) => json!({ "denied": message }),
        wit::SnowError::Data(f) => json!({ "data": { "message": f.message, "class": class(f.class) } }),
    }
}

fn entries(config: &wit::Config) -> Value {
    Value::Object(config.iter().map(|e| (e.key.clone(), Value::String(e.value.clone()))).collect::<Map<_, _>>())
}

pub(crate) fn task(task: &wit::TaskConfig) -> Value {
    json!({ "units": task.units.iter().map(|u| json!({ "partition": u.partition, "name": u.name, "config": entries(&u.config) })).collect::<Vec<_>>() })
}

/// One poll's records, their bytes resolved from the batch's (`data` then `extra`).
pub(crate) fn batch(unit: &str, batch: &wit::PollBatch) -> Value {
    let all: Vec<u8> = batch.data.iter().chain(&batch.extra).copied().collect();
    let span = |s: wit::Span| all.get(s.start as usize..(s.start as usize + s.len as usize)).unwrap_or(&[]);
    let b64 = |s: wit::Span| Value::String(STANDARD.encode(span(s)));
    let records: Vec<Value> = batch
        .records
        .iter()
        .map(|r| {
            let own = batch.record_headers.get(r.headers.start as usize..(r.headers.start + r.headers.len) as usize).unwrap_or(&[]);
            let headers: Vec<Value> = batch
                .headers
                .iter()
                .map(|h| json!([h.key, STANDARD.encode(&h.value)]))
                .chain(own.iter().map(|h| json!([String::from_utf8_lossy(span(h.key)), b64(h.value)])))
                .collect();
            json!({
                "key": r.key.map(b64),
                "value": r.value.map(b64),
                "headers": headers,
                "timestamp_ms": r.timestamp_ms,
            })
        })
        .collect();
    json!({
        "unit": unit,
        "topic": batch.topic,
        "records": records,
        "offset": batch.offset.as_ref().map(|o| json!({ "partition": o.partition, "position": o.position })),
        "next_poll_ms": batch.next_poll_ms,
        "notice": batch.notice,
        "value_schema": batch.value_schema,
    })
}

pub(crate) fn outcome(outcome: &wit::Outcome) -> Value {
    match outcome {
        wit::Outcome::Written(w) => json!({ "written": {
            "operation": match w.operation {
                wit::Operation::Create => "create",
                wit::Operation::Patch => "patch",
                wit::Operation::Put => "put",
                wit::Operation::Delete => "delete",
            },
            "table": w.table, "sys_id": w.sys_id, "status": w.status
        } }),
        wit::Outcome::Skipped(s) => json!({ "skipped": {
            "table": s.table, "sys_id": s.sys_id,
            "reason": match s.reason { wit::SkipReason::NotFound => "not-found", wit::SkipReason::Stale => "stale" }
        } }),
        wit::Outcome::Failed(e) => json!({ "failed": snow_error(e) }),
    }
}
