//! The row versions a table's topic holds, as the cutover and verify read them: every record
//! from a time on (by record time, from a margin earlier: clocks differ), its value read as JSON
//! when it is JSON (Connect's envelope or a plain row, whatever its schema says: Confluent's
//! source declared reference fields as strings) and through the connector's converters otherwise
//! (Avro, JSON Schema, Protobuf by registry id); the version `(timestamp, sys_id, sys_mod_count)`
//! from the table's fields, and whether this runtime wrote the record (its `snow.instance`
//! header: the old connector wrote none).

use std::time::Duration;

use anyhow::Result;
use serde_json::{Value, json};
use snow_core::config::TableConfig;
use snow_core::cursor::SeenVersion;
use snow_core::time::Timestamp;

use snow_runtime::convert::sink::SinkConverters;
use snow_runtime::kafka::tools::{self, Connection};

/// One record's version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The row version it carries.
    pub version: SeenVersion,
    /// True when this runtime wrote it.
    pub ours: bool,
}

/// What a topic holds from a time on.
#[derive(Debug, Clone, Default)]
pub struct TopicVersions {
    /// Whether the topic exists (a missing one holds nothing).
    pub found: bool,
    /// Records read.
    pub records: u64,
    /// Records that are not rows of the table (no id or timestamp; unreadable bytes).
    pub unreadable: u64,
    /// The versions, one per record (tombstones left out).
    pub written: Vec<Written>,
}

/// A timestamp in the forms old offsets and records carry it.
pub fn timestamp_of(value: &Value) -> Option<Timestamp> {
    match value {
        Value::String(s) => {
            let s = s.trim();
            if let Ok(t) = Timestamp::parse(s) {
                return Some(t);
            }
            // ISO 8601: 2024-11-20T08:00:00, with fractions, Z or +00:00.
            let base = s.get(..19)?.replacen('T', " ", 1);
            let rest = &s[19..];
            let rest = rest.trim_start_matches(|c: char| c == '.' || c.is_ascii_digit());
            if !matches!(rest, "" | "Z" | "+00:00" | "+0000") {
                return None;
            }
            Timestamp::parse(&base).ok().or_else(|| s.parse::<i64>().ok().and_then(|n| timestamp_of(&json!(n))))
        }
        // Epoch milliseconds or seconds of this century (a page number or count is neither).
        Value::Number(n) => {
            const CENTURY: std::ops::Range<i64> = 946_684_800..4_102_444_800;
            let n = n.as_i64()?;
            if CENTURY.contains(&(n / 1000)) { Some(Timestamp(n / 1000)) } else { CENTURY.contains(&n).then_some(Timestamp(n)) }
        }
        Value::Object(map) => map.get("value").and_then(timestamp_of),
        _ => None,
    }
}

/// Reads `topic` from `since` (less `margin_seconds`, by record time).
pub async fn read(
    connection: &Connection,
    converters: &SinkConverters,
    topic: &str,
    table: &TableConfig,
    since: Timestamp,
    margin_seconds: i64,
    timeout: Duration,
) -> Result<TopicVersions> {
    let mut out = TopicVersions { found: tools::topic_exists(connection, topic, timeout)?, ..Default::default() };
    if !out.found {
        return Ok(out);
    }
    let mut raw = Vec::new();
    tools::read(connection, topic, Some(since.plus_seconds(-margin_seconds).as_millis()), timeout, |r| {
        raw.push((
            r.partition,
            r.offset,
            r.timestamp_ms,
            r.key.map(<[u8]>::to_vec),
            r.value.map(<[u8]>::to_vec),
            r.headers.contains(&"snow.instance"),
        ));
    })?;
    out.records = raw.len() as u64;
    for (partition, offset, timestamp_ms, key, value, ours) in raw {
        let Some(value) = value else { continue };
        let json = match serde_json::from_slice::<Value>(&value) {
            Ok(json) => Some(json),
            Err(_) => {
                let record = snow_runtime::component::bindings::types::SinkRecord {
                    topic: topic.to_string(),
                    partition,
                    offset,
                    key: key.clone(),
                    value: Some(value),
                    headers: Vec::new(),
                    timestamp_ms,
                };
                match converters.record(&record).await {
                    Ok(Some(r)) => r.value.and_then(|v| serde_json::from_slice::<Value>(&v).ok()),
                    _ => None,
                }
            }
        };
        match json.as_ref().and_then(|v| version_of(key.as_deref(), v, table)) {
            Some(version) => out.written.push(Written { version, ours }),
            None => out.unreadable += 1,
        }
    }
    Ok(out)
}

/// A row version as a record of the old topic carries it: the value's id, timestamp and
/// `sys_mod_count` fields (plain values, or `{"value": …}` objects), the id from the key when the
/// value has none.
pub fn version_of(key: Option<&[u8]>, value: &Value, table: &TableConfig) -> Option<SeenVersion> {
    let row = match value {
        Value::Object(map) if map.contains_key("payload") && map.contains_key("schema") => map.get("payload")?,
        Value::String(text) => return serde_json::from_str::<Value>(text).ok().and_then(|v| version_of(key, &v, table)),
        v => v,
    };
    let text = |name: &str| -> Option<String> {
        match row.get(name)? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Object(o) => o.get("value").and_then(Value::as_str).map(String::from),
            _ => None,
        }
    };
    let ts = timestamp_of(row.get(&table.timestamp_field)?)?;
    let id = text(&table.sys_id_field).or_else(|| key.and_then(key_text))?;
    Some(SeenVersion { ts, id, mod_count: text("sys_mod_count").unwrap_or_default() })
}

/// A record key as the sys_id it carries: text, a JSON string, or Connect's envelope of one.
fn key_text(key: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(key).ok()?.trim();
    match serde_json::from_str::<Value>(text) {
        Ok(Value::String(s)) => Some(s),
        Ok(Value::Object(map)) => map.get("payload").and_then(Value::as_str).map(String::from),
        _ => Some(text.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use snow_core::config::SourceConfig;

    use super::*;

    #[test]
    fn a_records_version_from_each_value_shape() {
        let entries: snow_core::config::Entries = [("snow.instance.url", "https://x.service-now.com"), ("snow.tables", "incident")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let table = SourceConfig::parse(&entries).unwrap().tables.remove(0);
        let want = SeenVersion { ts: Timestamp::parse("2024-11-20 08:00:00").unwrap(), id: "a1".into(), mod_count: "4".into() };
        let plain = json!({"sys_id": "a1", "sys_updated_on": "2024-11-20 08:00:00", "sys_mod_count": "4"});
        let envelope = json!({"schema": {"type": "struct"}, "payload": plain.clone()});
        let displayed = json!({"sys_id": {"value": "a1"}, "sys_updated_on": {"value": "2024-11-20 08:00:00"}, "sys_mod_count": 4});
        for v in [&plain, &envelope, &displayed, &Value::String(plain.to_string())] {
            assert_eq!(version_of(None, v, &table), Some(want.clone()), "{v}");
        }
        let keyed = json!({"sys_updated_on": "2024-11-20 08:00:00", "sys_mod_count": "4"});
        assert_eq!(version_of(Some(b"a1"), &keyed, &table), Some(want.clone()));
        assert_eq!(version_of(Some(br#"{"schema":{"type":"string"},"payload":"a1"}"#), &keyed, &table), Some(want));
        assert_eq!(version_of(None, &json!({"sys_id": "a1"}), &table), None);
    }
}
