//! What a Kafka record carries, decoded: the value as a JSON object (as is, inside Kafka Connect's
//! `{"schema":..,"payload":..}` envelope, or as a JSON string holding the object's text), the
//! key's sys_id when it names one, and headers as text.

use serde_json::{Map, Value};

use crate::error::SnowError;
use crate::record::SinkRecord;

/// A record's value as an object; `None` for a tombstone.
pub fn object(record: &SinkRecord) -> Result<Option<Map<String, Value>>, SnowError> {
    let Some(bytes) = &record.value else { return Ok(None) };
    let bad = |what: String| SnowError::data(format!("record {}: the value {what}", record.coordinates()));
    let value: Value = serde_json::from_slice(bytes).map_err(|e| bad(format!("is not JSON: {e}")))?;
    let value = match value {
        // A JSON string whose text is the object (a string converter upstream).
        Value::String(text) => serde_json::from_str(&text).map_err(|e| bad(format!("is a JSON string that does not hold JSON: {e}")))?,
        other => other,
    };
    match value {
        Value::Object(mut map) if is_envelope(&map) => match map.remove("payload") {
            Some(Value::Object(payload)) => Ok(Some(payload)),
            Some(Value::Null) | None => Ok(None),
            Some(other) => Err(bad(format!("has a Connect envelope whose payload is not an object but {}", kind(&other)))),
        },
        Value::Object(map) => Ok(Some(map)),
        other => Err(bad(format!("is not a JSON object but {}", kind(&other)))),
    }
}

/// Kafka Connect's JsonConverter envelope: exactly `schema` and `payload`.
fn is_envelope(map: &Map<String, Value>) -> bool {
    map.len() == 2 && map.contains_key("schema") && map.contains_key("payload")
}

/// A JSON value's kind, for messages.
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The sys_id a record's key names, if it names one: a key that is a sys_id (as text or as a JSON
/// string), or a JSON object whose `field` member is a string. Other keys (business ids) name none.
pub fn key_sys_id(record: &SinkRecord, field: &str) -> Option<String> {
    let key = record.key.as_deref()?;
    let text = std::str::from_utf8(key).ok()?.trim();
    if is_sys_id(text) {
        return Some(text.to_ascii_lowercase());
    }
    match serde_json::from_str::<Value>(text).ok()? {
        Value::String(s) if is_sys_id(&s) => Some(s.to_ascii_lowercase()),
        Value::Object(map) => map.get(field).and_then(Value::as_str).map(str::to_string),
        _ => None,
    }
}

/// The text of header `name` on `record` (the last one, if repeated).
pub fn header<'a>(record: &'a SinkRecord, name: &str) -> Option<&'a str> {
    record.headers.iter().rev().find(|h| h.key == name).and_then(|h| std::str::from_utf8(&h.value).ok())
}

/// 32 hex digits.
pub fn is_sys_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::Header;

    /// A record of topic `t`, partition 0, offset 7 (the sink tests' builder).
    pub(crate) fn record(key: Option<&str>, value: Option<&str>, headers: &[(&str, &str)]) -> SinkRecord {
        SinkRecord {
            topic: "t".into(),
            partition: 0,
            offset: 7,
            key: key.map(|k| k.as_bytes().to_vec()),
            value: value.map(|v| v.as_bytes().to_vec()),
            headers: headers.iter().map(|(k, v)| Header { key: k.to_string(), value: v.as_bytes().to_vec() }).collect(),
            timestamp_ms: None,
        }
    }

    #[test]
    fn values_plain_enveloped_or_as_a_json_string() {
        let plain = object(&record(None, Some(r#"{"a":"1"}"#), &[])).unwrap().unwrap();
        assert_eq!(plain["a"], "1");
        let enveloped = object(&record(None, Some(r#"{"schema":{"type":"struct"},"payload":{"a":"2"}}"#), &[])).unwrap().unwrap();
        assert_eq!(enveloped["a"], "2");
        let string = object(&record(None, Some(r#""{\"a\":\"3\"}""#), &[])).unwrap().unwrap();
        assert_eq!(string["a"], "3");
        assert_eq!(object(&record(None, None, &[])).unwrap(), None, "a tombstone");
        assert_eq!(object(&record(None, Some(r#"{"schema":null,"payload":null}"#), &[])).unwrap(), None, "an enveloped tombstone");
        let err = object(&record(None, Some("[1]"), &[])).unwrap_err().to_string();
        assert!(err.contains("record t-0@7: the value is not a JSON object but an array"), "{err}");
        assert!(object(&record(None, Some("{bad"), &[])).unwrap_err().to_string().contains("is not JSON"));
    }

    #[test]
    fn keys_name_a_row_only_when_they_are_or_hold_a_sys_id() {
        let id = "0123456789ABCDEF0123456789abcdef";
        assert_eq!(key_sys_id(&record(Some(id), None, &[]), "sys_id").as_deref(), Some(id.to_ascii_lowercase().as_str()));
        assert_eq!(key_sys_id(&record(Some(&format!("\"{id}\"")), None, &[]), "sys_id").unwrap().len(), 32);
        assert_eq!(key_sys_id(&record(Some(r#"{"sys_id":"x"}"#), None, &[]), "sys_id").as_deref(), Some("x"), "checked later");
        assert_eq!(key_sys_id(&record(Some("INC0010001"), None, &[]), "sys_id"), None, "a business id");
        assert_eq!(header(&record(None, None, &[("h", "a"), ("h", "b")]), "h"), Some("b"));
    }
}
