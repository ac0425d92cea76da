//! What a record asks of ServiceNow: the table (routing), the row (sys_id) and the operation, and
//! the body its value becomes.
//!
//! * **Table**: a header naming it (only a table of the allow-list), else the table the record's
//!   topic maps to, else the fixed table. Table names are checked; a record never chooses a path.
//! * **Row**: the first of the sys_id header, the key (when it is, or holds, a sys_id) and the
//!   value's sys_id field: **header, then key, then value** when they disagree. A malformed sys_id
//!   in a header or a value field is a record error.
//! * **Operation**: the operation header (`create`, `patch`, `put`, `delete`, `upsert`), else the
//!   configured operation, else from the record: a tombstone deletes, no sys_id creates, a sys_id
//!   updates (PATCH, or PUT by configuration).

use serde_json::Value;

use super::body;
use super::value::{self, is_sys_id};
use crate::config::SinkConfig;
use crate::config::sink::{KeySysId, OperationMode, UpdateMethod};
use crate::error::SnowError;
use crate::record::SinkRecord;
use crate::table::query::is_valid_table_name;

/// A resolved write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The table.
    pub table: String,
    /// What to do there.
    pub write: Write,
}

/// The write of a [`Plan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Create a row (with the given sys_id, when the record named one).
    Create {
        /// The sys_id the new row gets, if the record named one.
        sys_id: Option<String>,
        /// The fields.
        body: Vec<u8>,
    },
    /// Update row `sys_id`; `upsert` creates it (with that sys_id) when it does not exist.
    Update {
        /// The row.
        sys_id: String,
        /// PATCH or PUT.
        method: UpdateMethod,
        /// The fields.
        body: Vec<u8>,
        /// Create the row when it is missing.
        upsert: bool,
    },
    /// Delete row `sys_id`.
    Delete {
        /// The row.
        sys_id: String,
    },
}

/// Resolves what `record` asks for under `config`.
pub fn resolve(record: &SinkRecord, config: &SinkConfig) -> Result<Plan, SnowError> {
    let at = record.coordinates();
    let fail = |what: String| SnowError::data(format!("record {at}: {what}"));
    let table = route(record, config).map_err(&fail)?;
    let mut value = value::object(record)?;
    let sys_id = sys_id(record, config, value.as_mut()).map_err(&fail)?;
    let mode = match config.operation_header.as_deref().and_then(|h| value::header(record, h).map(|v| (h, v))) {
        Some((h, text)) => {
            operation_named(text).ok_or_else(|| fail(format!("header {h} is {text:?}, not one of create, patch, put, delete, upsert")))?
        }
        None => config.operation,
    };
    let body = |value: Option<serde_json::Map<String, Value>>, op: &str| -> Result<Vec<u8>, SnowError> {
        let value = value.ok_or_else(|| fail(format!("is a tombstone (no value), which cannot {op} a row")))?;
        let body = body::map(value, &config.body, &at)?;
        serde_json::to_vec(&body).map_err(|e| fail(e.to_string()))
    };
    // A create that names its row sends the sys_id with the fields: ServiceNow creates the row
    // under it.
    let create_as = |sys_id: String, value: Option<serde_json::Map<String, Value>>| -> Result<Write, SnowError> {
        let body = body(value, "create")?;
        Ok(Write::Create { body: with_sys_id(&body, &sys_id).map_err(&fail)?, sys_id: Some(sys_id) })
    };
    let needs_row =
        |op: &str| fail(format!("{op} needs a sys_id (none in the sys_id header, the key or the value's {} field)", config.sys_id_field));
    let update = |sys_id: String, method: UpdateMethod, upsert: bool, value| -> Result<Write, SnowError> {
        let op = if upsert {
            "upsert"
        } else if method == UpdateMethod::Put {
            "put"
        } else {
            "patch"
        };
        Ok(Write::Update { body: body(value, op)?, sys_id, method, upsert })
    };
    let write = match (mode, sys_id) {
        (OperationMode::Auto, Some(sys_id)) if value.is_none() => Write::Delete { sys_id },
        (OperationMode::Auto, None) if value.is_none() => return Err(needs_row("a delete (the record is a tombstone)")),
        (OperationMode::Auto, None) | (OperationMode::Create, None) | (OperationMode::Upsert, None) => {
            match derived_sys_id(&table, value.as_ref(), &config.natural_key).map_err(&fail)? {
                Some(sys_id) => create_as(sys_id, value)?,
                None => Write::Create { sys_id: None, body: body(value, "create")? },
            }
        }
        (OperationMode::Create, Some(sys_id)) => create_as(sys_id, value)?,
        (OperationMode::Auto, Some(sys_id)) => update(sys_id, config.update, false, value)?,
        (OperationMode::Patch, Some(sys_id)) => update(sys_id, UpdateMethod::Patch, false, value)?,
        (OperationMode::Put, Some(sys_id)) => update(sys_id, UpdateMethod::Put, false, value)?,
        (OperationMode::Upsert, Some(sys_id)) => update(sys_id, config.update, true, value)?,
        (OperationMode::Delete, Some(sys_id)) => Write::Delete { sys_id },
        (OperationMode::Patch, None) => return Err(needs_row("a patch")),
        (OperationMode::Put, None) => return Err(needs_row("a put")),
        (OperationMode::Delete, None) => return Err(needs_row("a delete")),
    };
    Ok(Plan { table, write })
}

/// `body` (a JSON object) with the field `sys_id` added.
pub fn with_sys_id(body: &[u8], sys_id: &str) -> Result<Vec<u8>, String> {
    let mut fields: serde_json::Map<String, Value> = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    fields.insert("sys_id".into(), Value::String(sys_id.to_string()));
    serde_json::to_vec(&fields).map_err(|e| e.to_string())
}

/// The sys_id a new row of `table` gets from the values of the natural key `fields` of `value`
/// (deterministic creates: the same record always names the same row), or none without a natural
/// key. A missing or null key field is an error naming it.
pub fn derived_sys_id(table: &str, value: Option<&serde_json::Map<String, Value>>, fields: &[String]) -> Result<Option<String>, String> {
    use sha2::{Digest, Sha256};
    let Some(value) = value.filter(|_| !fields.is_empty()) else { return Ok(None) };
    let mut digest = Sha256::new();
    digest.update(b"snow-connect natural key v1\0");
    digest.update(table.as_bytes());
    for field in fields {
        let text = match value.get(field) {
            None | Some(Value::Null) => return Err(format!("natural key field {field} is missing (snow.sink.natural.key.fields)")),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        digest.update([0]);
        digest.update(field.as_bytes());
        digest.update([0]);
        digest.update(text.as_bytes());
    }
    let bytes = digest.finalize();
    Ok(Some(bytes[..16].iter().map(|b| format!("{b:02x}")).collect()))
}

/// The table `record` goes to.
fn route(record: &SinkRecord, config: &SinkConfig) -> Result<String, String> {
    let routing = &config.routing;
    if let Some((name, allowed)) = &routing.header
        && let Some(table) = value::header(record, name)
    {
        if !is_valid_table_name(table) || !allowed.iter().any(|a| a == table) {
            return Err(format!("header {name} names table {table:?}, which snow.sink.table.header.allowed does not allow"));
        }
        return Ok(table.to_string());
    }
    if let Some(table) = routing.by_topic.get(&record.topic) {
        return Ok(table.clone());
    }
    routing.table.clone().ok_or_else(|| format!("no table for topic {} (snow.sink.table.map, snow.sink.table)", record.topic))
}

/// The row the record names, by precedence: header, key, value field. The value's sys_id field is
/// taken out of the value whatever names the row (it is the URL's, never a field to write).
fn sys_id(record: &SinkRecord, config: &SinkConfig, value: Option<&mut serde_json::Map<String, Value>>) -> Result<Option<String>, String> {
    let checked = |id: &str, from: String| -> Result<String, String> {
        if is_sys_id(id) { Ok(id.to_ascii_lowercase()) } else { Err(format!("{from} is {id:?}, not a 32-character hex sys_id")) }
    };
    let field = &config.sys_id_field;
    let in_value = match value.and_then(|v| v.remove(field)) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(checked(&s, format!("the value's {field} field"))?),
        Some(other) => return Err(format!("the value's {field} field is {}, not a sys_id", value::kind(&other))),
    };
    if let Some(name) = config.sys_id_header.as_deref()
        && let Some(id) = value::header(record, name)
    {
        return checked(id, format!("header {name}")).map(Some);
    }
    if config.sys_id_key == KeySysId::Auto
        && let Some(id) = value::key_sys_id(record, &config.sys_id_key_field)
    {
        return checked(&id, format!("the key's {}", config.sys_id_key_field)).map(Some);
    }
    Ok(in_value)
}

/// An operation named by a header.
fn operation_named(text: &str) -> Option<OperationMode> {
    Some(match text.trim().to_ascii_lowercase().as_str() {
        "create" | "insert" => OperationMode::Create,
        "patch" | "update" => OperationMode::Patch,
        "put" | "replace" => OperationMode::Put,
        "delete" => OperationMode::Delete,
        "upsert" => OperationMode::Upsert,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::reader::entries_from_pairs;
    use crate::sink::value::tests::record;

    const ID: &str = "0123456789abcdef0123456789abcdef";
    const OTHER: &str = "fedcba9876543210fedcba9876543210";

    fn config(pairs: &[(&str, &str)]) -> SinkConfig {
        let mut all = vec![("snow.instance.url", "https://acme.service-now.com"), ("snow.sink.table", "incident")];
        all.extend_from_slice(pairs);
        SinkConfig::parse(&entries_from_pairs(all).unwrap()).unwrap()
    }

    fn write(key: Option<&str>, value: Option<&str>, headers: &[(&str, &str)], c: &SinkConfig) -> Result<Write, String> {
        resolve(&record(key, value, headers), c).map(|p| p.write).map_err(|e| e.to_string())
    }

    #[test]
    fn auto_creates_updates_and_deletes() {
        let c = config(&[]);
        assert_eq!(write(Some("INC1"), Some(r#"{"a":"1"}"#), &[], &c), Ok(Write::Create { sys_id: None, body: br#"{"a":"1"}"#.to_vec() }));
        let patched = write(None, Some(&format!(r#"{{"sys_id":"{}","a":"1"}}"#, ID.to_uppercase())), &[], &c);
        assert_eq!(
            patched,
            Ok(Write::Update { sys_id: ID.into(), method: UpdateMethod::Patch, body: br#"{"a":"1"}"#.to_vec(), upsert: false })
        );
        assert_eq!(write(Some(ID), None, &[], &c), Ok(Write::Delete { sys_id: ID.into() }), "a tombstone with a sys_id key deletes");
        assert!(write(Some("INC1"), None, &[], &c).unwrap_err().contains("a delete (the record is a tombstone) needs a sys_id"));
        let put = config(&[("snow.sink.update.method", "put")]);
        assert!(matches!(write(Some(ID), Some(r#"{"a":"1"}"#), &[], &put), Ok(Write::Update { method: UpdateMethod::Put, .. })));
    }

    #[test]
    fn the_sys_id_precedence_is_header_then_key_then_value() {
        let c = config(&[]);
        let value = format!(r#"{{"sys_id":"{OTHER}","a":"1"}}"#);
        let id_of = |w: Result<Write, String>| match w.unwrap() {
            Write::Update { sys_id, .. } | Write::Delete { sys_id } => sys_id,
            Write::Create { sys_id, .. } => sys_id.unwrap_or_default(),
        };
        assert_eq!(id_of(write(Some(ID), Some(&value), &[], &c)), ID, "the key wins over the value");
        assert_eq!(id_of(write(Some(OTHER), Some(&value), &[("snow.sys_id", ID)], &c)), ID, "the header wins over both");
        assert_eq!(id_of(write(Some(&format!(r#"{{"sys_id":"{ID}"}}"#)), Some(r#"{"a":"1"}"#), &[], &c)), ID, "a JSON key");
        let confluent_key = config(&[("snow.sink.sys.id.key.field", "sysId")]);
        assert_eq!(id_of(write(Some(&format!(r#"{{"sysId":"{ID}"}}"#)), Some(&value), &[], &confluent_key)), ID, "Confluent's key");
        assert_eq!(id_of(write(Some(&format!(r#"{{"sys_id":"{ID}"}}"#)), Some(&value), &[], &confluent_key)), OTHER);
        let ignore_key = config(&[("snow.sink.sys.id.key", "ignore")]);
        assert_eq!(id_of(write(Some(ID), Some(&value), &[], &ignore_key)), OTHER);
        assert!(
            write(None, Some(r#"{"sys_id":"../x"}"#), &[], &c)
                .unwrap_err()
                .contains("the value's sys_id field is \"../x\", not a 32-character hex sys_id")
        );
        assert!(write(None, Some(r#"{"a":"1"}"#), &[("snow.sys_id", "x")], &c).unwrap_err().contains("header snow.sys_id is \"x\""));
        assert!(write(Some(r#"{"sys_id":"x"}"#), Some(r#"{"a":"1"}"#), &[], &c).unwrap_err().contains("the key's sys_id is \"x\""));
        assert!(write(None, Some(r#"{"sys_id":5}"#), &[], &c).unwrap_err().contains("is a number, not a sys_id"));
    }

    #[test]
    fn operations_from_the_header_or_the_configuration() {
        let c = config(&[]);
        let value = r#"{"a":"1"}"#;
        assert!(matches!(write(Some(ID), Some(value), &[("snow.operation", "DELETE")], &c), Ok(Write::Delete { .. })));
        let created = write(Some(ID), Some(value), &[("snow.operation", "create")], &c);
        assert_eq!(
            created,
            Ok(Write::Create { sys_id: Some(ID.into()), body: format!(r#"{{"a":"1","sys_id":"{ID}"}}"#).into_bytes() }),
            "a create may choose its sys_id"
        );
        assert!(matches!(write(None, Some(value), &[("snow.operation", "upsert")], &c), Ok(Write::Create { sys_id: None, .. })));
        assert!(matches!(write(Some(ID), Some(value), &[("snow.operation", "upsert")], &c), Ok(Write::Update { upsert: true, .. })));
        assert!(write(None, Some(value), &[("snow.operation", "merge")], &c).unwrap_err().contains("header snow.operation is \"merge\""));
        assert!(write(None, Some(value), &[("snow.operation", "patch")], &c).unwrap_err().contains("a patch needs a sys_id"));
        assert!(
            write(Some(ID), None, &[("snow.operation", "patch")], &c)
                .unwrap_err()
                .contains("is a tombstone (no value), which cannot patch a row")
        );
        let fixed = config(&[("snow.sink.operation", "put")]);
        assert!(matches!(write(Some(ID), Some(value), &[], &fixed), Ok(Write::Update { method: UpdateMethod::Put, .. })));
        let no_header = config(&[("snow.sink.operation.header", "none")]);
        assert!(
            matches!(write(Some(ID), Some(value), &[("snow.operation", "delete")], &no_header), Ok(Write::Update { .. })),
            "headers ignored"
        );
    }

    #[test]
    fn a_natural_key_makes_creates_deterministic() {
        let c = config(&[("snow.sink.natural.key.fields", "u_external_id")]);
        let create = |v: &str| write(Some("business-key"), Some(v), &[], &c);
        let first = create(r#"{"u_external_id":"E-1","a":"1"}"#).unwrap();
        let again = create(r#"{"u_external_id":"E-1","a":"2"}"#).unwrap();
        let (Write::Create { sys_id: Some(a), .. }, Write::Create { sys_id: Some(b), body }) = (first, again) else { panic!("creates") };
        assert_eq!(a, b, "the same natural key names the same row");
        assert!(is_sys_id(&a));
        assert!(String::from_utf8(body).unwrap().contains(&format!(r#""sys_id":"{a}""#)), "sent with the create");
        let Write::Create { sys_id: Some(other), .. } = create(r#"{"u_external_id":"E-2"}"#).unwrap() else { panic!() };
        assert_ne!(a, other);
        assert!(create(r#"{"a":"1"}"#).unwrap_err().contains("natural key field u_external_id is missing"));
        assert_ne!(
            derived_sys_id("incident", Some(&serde_json::from_str(r#"{"k":"ab"}"#).unwrap()), &["k".into()]),
            derived_sys_id("problem", Some(&serde_json::from_str(r#"{"k":"ab"}"#).unwrap()), &["k".into()]),
            "per table"
        );
    }

    #[test]
    fn routing_by_header_allow_list_topic_map_then_fixed_table() {
        let c = config(&[
            ("snow.sink.table.map", "t:change_request"),
            ("snow.sink.table.header", "snow.table"),
            ("snow.sink.table.header.allowed", "problem"),
        ]);
        let table = |headers: &[(&str, &str)], topic: &str| {
            let mut r = record(None, Some(r#"{"a":"1"}"#), headers);
            r.topic = topic.into();
            resolve(&r, &c).map(|p| p.table).map_err(|e| e.to_string())
        };
        assert_eq!(table(&[("snow.table", "problem")], "t"), Ok("problem".into()));
        assert_eq!(table(&[], "t"), Ok("change_request".into()));
        assert_eq!(table(&[], "other"), Ok("incident".into()));
        assert!(
            table(&[("snow.table", "sys_user")], "t")
                .unwrap_err()
                .contains("names table \"sys_user\", which snow.sink.table.header.allowed does not allow")
        );
        assert!(table(&[("snow.table", "../../x")], "t").unwrap_err().contains("does not allow"), "a record never chooses a path");
    }
}
