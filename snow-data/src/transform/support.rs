//! What every transform shares: reading its configuration as Connect's `ConfigDef` does (lists
//! split at commas and trimmed, booleans `true`/`false` in any case, Connect's error texts), the
//! `Requirements` checks with their messages, the Java class a value would be (messages name it,
//! as Connect's do), copying a schema's basics (`SchemaUtil.copySchemaBasics`) and reading a
//! struct field with or without its default (`replace.null.with.default`).

use std::collections::BTreeMap;

use crate::error::DataError;
use crate::schema::{Kind, Logical, Schema};
use crate::value::Value;

/// One transform's or predicate's own keys (the `transforms.<alias>.` prefix removed).
pub struct Conf<'a> {
    keys: &'a BTreeMap<String, String>,
}

impl<'a> Conf<'a> {
    /// The keys of one transform.
    pub fn new(keys: &'a BTreeMap<String, String>) -> Self {
        Self { keys }
    }

    /// A string key (`None` when absent).
    pub fn string(&self, key: &str) -> Option<&'a str> {
        self.keys.get(key).map(String::as_str)
    }

    /// A required string key.
    pub fn required(&self, key: &str) -> Result<&'a str, String> {
        self.string(key).ok_or_else(|| format!("Missing required configuration \"{key}\" which has no default value."))
    }

    /// A required, non-empty string key.
    pub fn non_empty(&self, key: &str) -> Result<&'a str, String> {
        let v = self.required(key)?;
        if v.is_empty() {
            return Err(invalid(v, key, "String may not be empty"));
        }
        Ok(v)
    }

    /// A list key as `ConfigDef` reads it: trimmed, split at commas with the spaces around them;
    /// an empty string is an empty list.
    pub fn list(&self, key: &str) -> Vec<String> {
        self.string(key).map(split_list).unwrap_or_default()
    }

    /// A required list key that must not be empty.
    pub fn non_empty_list(&self, key: &str) -> Result<Vec<String>, String> {
        let raw = self.required(key)?;
        let list = split_list(raw);
        if list.is_empty() {
            return Err(invalid(raw, key, "Empty list"));
        }
        Ok(list)
    }

    /// A boolean key with its default.
    pub fn boolean(&self, key: &str, default: bool) -> Result<bool, String> {
        match self.string(key).map(str::trim) {
            None => Ok(default),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
            Some(v) => Err(invalid(v, key, "Expected value to be either true or false")),
        }
    }

    /// A string key that must be one of `allowed` (exactly, as `ValidString.in`), with its default.
    pub fn one_of(&self, key: &str, allowed: &[&str], default: Option<&'a str>) -> Result<&'a str, String> {
        let v = match (self.string(key), default) {
            (Some(v), _) => v,
            (None, Some(d)) => d,
            (None, None) => return self.required(key),
        };
        if allowed.contains(&v) { Ok(v) } else { Err(invalid(v, key, &format!("String must be one of: {}", allowed.join(", ")))) }
    }

    /// `replace.null.with.default` (default true).
    pub fn replace_null_with_default(&self) -> Result<bool, String> {
        self.boolean("replace.null.with.default", true)
    }
}

/// `Invalid value <v> for configuration <key>: <why>`.
pub fn invalid(value: &str, key: &str, why: &str) -> String {
    format!("Invalid value {value} for configuration {key}: {why}")
}

/// A `ConfigDef` LIST: trimmed, split on `\s*,\s*`; empty text is an empty list.
pub fn split_list(raw: &str) -> Vec<String> {
    let t = raw.trim();
    if t.is_empty() {
        return Vec::new();
    }
    t.split(',').map(|s| s.trim().to_string()).collect()
}

/// The Java class Connect would hold `value` as (for messages that name it).
pub fn java_class(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Boolean(_) => "java.lang.Boolean",
        Value::Int8(_) => "java.lang.Byte",
        Value::Int16(_) => "java.lang.Short",
        Value::Int32(_) => "java.lang.Integer",
        Value::Int64(_) => "java.lang.Long",
        Value::Float32(_) => "java.lang.Float",
        Value::Float64(_) => "java.lang.Double",
        Value::String(_) => "java.lang.String",
        Value::Bytes(_) => "[B",
        Value::Array(_) => "java.util.ArrayList",
        Value::Map(_) => "java.util.HashMap",
        Value::Struct(_) => "org.apache.kafka.connect.data.Struct",
        Value::Decimal(_) => "java.math.BigDecimal",
        Value::Date(_) | Value::Time(_) | Value::Timestamp(_) => "java.util.Date",
    }
}

/// `Requirements.requireMap`: a schemaless map, or Connect's error.
pub fn require_map<'v>(value: &'v Value, purpose: &str) -> Result<&'v [(Value, Value)], DataError> {
    match value {
        Value::Map(entries) => Ok(entries),
        other => {
            Err(DataError::new(format!("Only Map objects supported in absence of schema for [{purpose}], found: {}", java_class(other))))
        }
    }
}

/// `Requirements.requireStruct`: a struct, or Connect's error.
pub fn require_struct<'v>(value: &'v Value, purpose: &str) -> Result<&'v [(String, Value)], DataError> {
    match value {
        Value::Struct(fields) => Ok(fields),
        other => Err(DataError::new(format!("Only Struct objects supported for [{purpose}], found: {}", java_class(other)))),
    }
}

/// A schemaless map's entry `name` (`None` when absent).
pub fn map_get<'v>(entries: &'v [(Value, Value)], name: &str) -> Option<&'v Value> {
    entries.iter().rev().find(|(k, _)| k.as_str() == Some(name)).map(|(_, v)| v)
}

/// Puts `name` = `value` into a schemaless map (replacing an entry of that name, as `HashMap.put`).
pub fn map_put(entries: &mut Vec<(Value, Value)>, name: &str, value: Value) {
    match entries.iter_mut().find(|(k, _)| k.as_str() == Some(name)) {
        Some(entry) => entry.1 = value,
        None => entries.push((Value::String(name.to_string()), value)),
    }
}

/// A struct field's value: with `with_default`, a null is the field's default (`Struct.get`),
/// else it is the raw value (`getWithoutDefault`).
pub fn field_value(fields: &[(String, Value)], schema: &Schema, name: &str, with_default: bool) -> Value {
    let raw = fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()).unwrap_or(Value::Null);
    if raw.is_null()
        && with_default
        && let Some(d) = schema.field(name).and_then(|f| f.schema.default.clone())
    {
        return d;
    }
    raw
}

/// `SchemaUtil.copySchemaBasics`: a schema of `kind` with `source`'s name, version, doc and
/// parameters (not its optionality nor its default).
pub fn copy_basics(source: &Schema, kind: Kind) -> Schema {
    Schema {
        kind,
        optional: false,
        name: source.name.clone(),
        version: source.version,
        doc: source.doc.clone(),
        parameters: source.parameters.clone(),
        default: None,
    }
}

/// Checks `value` against `schema` as `Struct.put` does: null only in an optional field, a
/// decimal at its schema's scale.
pub fn check_put(field: &str, schema: &Schema, value: &Value) -> Result<(), DataError> {
    if value.is_null() && !schema.optional && schema.default.is_none() {
        return Err(DataError::new(format!(
            "Invalid value: null used for required field: \"{field}\", schema type: {}",
            schema.kind.name().to_ascii_uppercase()
        )));
    }
    if let (Some(Logical::Decimal { scale }), Value::Decimal(d)) = (schema.logical(), value)
        && d.scale != scale
    {
        return Err(DataError::new(format!(
            "Decimal value has mismatching scale for given Decimal schema. Schema has scale {scale}, value has scale {}.",
            d.scale
        )));
    }
    Ok(())
}

/// `Schema{<name>:<TYPE>}` or `Schema{<TYPE>}`, as Connect prints a schema in messages.
pub fn schema_text(schema: &Schema) -> String {
    let ty = schema.kind.name().to_ascii_uppercase();
    match &schema.name {
        Some(n) => format!("Schema{{{n}:{ty}}}"),
        None => format!("Schema{{{ty}}}"),
    }
}

/// True when `schema` is one of Connect's temporal logical types.
pub fn is_temporal(schema: &Schema) -> bool {
    matches!(schema.logical(), Some(Logical::Date | Logical::Time | Logical::Timestamp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_split_as_configdef_splits_them() {
        assert_eq!(split_list(" a , ,b ,"), ["a", "", "b", ""]);
        assert!(split_list("  ").is_empty());
        let keys: BTreeMap<String, String> = [("x".to_string(), "Yes".to_string())].into();
        assert_eq!(
            Conf::new(&keys).boolean("x", true).expect_err("bad"),
            "Invalid value Yes for configuration x: Expected value to be either true or false"
        );
        assert_eq!(
            Conf::new(&keys).required("field").expect_err("missing"),
            "Missing required configuration \"field\" which has no default value."
        );
    }
}
