//! What a record asks for: a value without a sys_id creates a row, a value with one patches it.

use serde_json::{Map, Value};

use crate::error::SnowError;
use crate::record::SinkRecord;

/// A resolved write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Create a row with this JSON body.
    Create {
        /// The record value, passed through as received.
        body: Vec<u8>,
    },
    /// Patch row `sys_id` with this JSON body (the value without its sys_id field).
    Patch {
        /// Target row.
        sys_id: String,
        /// The fields to set.
        body: Vec<u8>,
    },
}

/// Resolves the write `record` asks for; `sys_id_field` names the value member holding the target row.
pub fn resolve(record: &SinkRecord, sys_id_field: &str) -> Result<Write, SnowError> {
    let Some(value) = &record.value else {
        return Err(SnowError::data(format!("record {} is a tombstone; deletes are not enabled for this sink", record.coordinates())));
    };
    let mut object: Map<String, Value> = serde_json::from_slice(value)
        .map_err(|e| SnowError::data(format!("record {}: value is not a JSON object: {e}", record.coordinates())))?;
    match object.remove(sys_id_field) {
        None | Some(Value::Null) => Ok(Write::Create { body: value.clone() }),
        Some(Value::String(id)) if id.is_empty() => Ok(Write::Create { body: value.clone() }),
        Some(Value::String(id)) if is_sys_id(&id) => {
            let body = serde_json::to_vec(&object).map_err(|e| SnowError::data(format!("record {}: {e}", record.coordinates())))?;
            Ok(Write::Patch { sys_id: id.to_ascii_lowercase(), body })
        }
        Some(other) => Err(SnowError::data(format!(
            "record {}: field {sys_id_field} must be a 32-character hex sys_id, got {other}",
            record.coordinates()
        ))),
    }
}

fn is_sys_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(value: Option<&str>) -> SinkRecord {
        SinkRecord {
            topic: "t".into(),
            partition: 0,
            offset: 7,
            key: None,
            value: value.map(|v| v.as_bytes().to_vec()),
            headers: vec![],
            timestamp_ms: None,
        }
    }

    #[test]
    fn create_patch_and_refusals() {
        let create = resolve(&record(Some(r#"{"short_description":"x"}"#)), "sys_id").unwrap();
        assert_eq!(create, Write::Create { body: br#"{"short_description":"x"}"#.to_vec() });
        let id = "0123456789abcdef0123456789ABCDEF";
        let patch = resolve(&record(Some(&format!(r#"{{"sys_id":"{id}","state":"2"}}"#))), "sys_id").unwrap();
        assert_eq!(patch, Write::Patch { sys_id: id.to_ascii_lowercase(), body: br#"{"state":"2"}"#.to_vec() });
        assert!(resolve(&record(None), "sys_id").unwrap_err().to_string().contains("t-0@7 is a tombstone"));
        assert!(resolve(&record(Some("[1]")), "sys_id").unwrap_err().to_string().contains("t-0@7: value is not a JSON object"));
        assert!(
            resolve(&record(Some(r#"{"sys_id":"../x"}"#)), "sys_id").unwrap_err().to_string().contains("must be a 32-character hex sys_id")
        );
    }
}
