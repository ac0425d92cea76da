//! JSON Schema as Confluent's `JsonSchemaConverter` writes and reads it (its `JsonSchemaData`):
//! a Connect schema becomes a draft-07 schema whose `connect.type`, `connect.index`, `title`,
//! `connect.version` and `connect.parameters` keep what JSON Schema cannot say (int widths,
//! field order, logical types), an optional schema is `oneOf` null and it; a value is plain JSON
//! (a timestamp its epoch milliseconds, a decimal an exact JSON number, bytes base64). Reading
//! takes any writer's schema of that shape (also `"type": ["null", T]` and `anyOf`), so records
//! from Confluent's serializers in other languages read too.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value as Json, json};

use crate::decimal::Decimal;
use crate::error::DataError;
use crate::schema::{Field, Kind, Logical, Schema};
use crate::value::Value;

/// Deepest nesting read (a schema is data from the registry; it must not exhaust the stack).
const MAX_DEPTH: usize = 64;

/// The JSON Schema of `schema`, as `JsonSchemaData.fromConnectSchema` writes it.
pub fn from_connect(schema: &Schema) -> Json {
    let mut out = required(schema);
    if let Some(o) = out.as_object_mut() {
        if let Some(name) = &schema.name {
            o.insert("title".into(), json!(name));
        }
        if let Some(version) = schema.version {
            o.insert("connect.version".into(), json!(version));
        }
        if let Some(doc) = &schema.doc {
            o.insert("description".into(), json!(doc));
        }
        if !schema.parameters.is_empty() {
            o.insert("connect.parameters".into(), json!(schema.parameters));
        }
    }
    if schema.optional { json!({ "oneOf": [{ "type": "null" }, out] }) } else { out }
}

fn required(schema: &Schema) -> Json {
    let typed = |ty: &str, connect: &str| json!({ "type": ty, "connect.type": connect });
    match &schema.kind {
        Kind::Int8 => typed("integer", "int8"),
        Kind::Int16 => typed("integer", "int16"),
        Kind::Int32 => typed("integer", "int32"),
        Kind::Int64 => typed("integer", "int64"),
        Kind::Float32 => typed("number", "float32"),
        Kind::Float64 => typed("number", "float64"),
        Kind::Boolean => json!({ "type": "boolean" }),
        Kind::String => json!({ "type": "string" }),
        Kind::Bytes if matches!(schema.logical(), Some(Logical::Decimal { .. })) => typed("number", "bytes"),
        Kind::Bytes => typed("string", "bytes"),
        Kind::Array(items) => json!({ "type": "array", "items": from_connect(items) }),
        Kind::Map(keys, values) if keys.kind == Kind::String => {
            json!({ "type": "object", "additionalProperties": from_connect(values), "connect.type": "map" })
        }
        Kind::Map(keys, values) => json!({
            "type": "array", "connect.type": "map",
            "items": { "type": "object", "properties": { "key": from_connect(keys), "value": from_connect(values) } }
        }),
        Kind::Struct(fields) => {
            let properties: Map<String, Json> = fields
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let mut p = from_connect(&f.schema);
                    if let Some(o) = p.as_object_mut() {
                        o.insert("connect.index".into(), json!(i));
                    }
                    (f.name.clone(), p)
                })
                .collect();
            let required: Vec<&str> = fields.iter().filter(|f| !f.schema.optional).map(|f| f.name.as_str()).collect();
            let mut o = json!({ "type": "object", "properties": properties });
            if !required.is_empty() {
                o["required"] = json!(required);
            }
            o
        }
    }
}

/// The Connect schema a writer's JSON Schema reads as.
pub fn to_connect(j: &Json) -> Result<Schema, DataError> {
    schema_of(j, 0)
}

fn schema_of(j: &Json, depth: usize) -> Result<Schema, DataError> {
    if depth > MAX_DEPTH {
        return Err(DataError::new(format!("the JSON Schema nests deeper than {MAX_DEPTH}")));
    }
    let o = match j {
        Json::Bool(true) => return Ok(Schema::new(Kind::String).optional()),
        Json::Object(o) => o,
        other => return Err(DataError::new(format!("a JSON Schema is an object, not {other}"))),
    };
    if o.contains_key("$ref") {
        return Err(DataError::new("JSON Schemas with $ref are not supported"));
    }
    // oneOf / anyOf of null and one schema: that schema, optional.
    if let Some(branches) = o.get("oneOf").or_else(|| o.get("anyOf")).and_then(Json::as_array) {
        let non_null: Vec<&Json> = branches.iter().filter(|b| b.get("type").and_then(Json::as_str) != Some("null")).collect();
        return match non_null.as_slice() {
            [one] => Ok(schema_of(one, depth + 1)?.optional()),
            _ => Err(DataError::new("oneOf/anyOf other than null and one schema is not supported")),
        };
    }
    let (ty, nullable) = match o.get("type") {
        Some(Json::String(t)) => (t.as_str(), false),
        Some(Json::Array(types)) => {
            let non_null: Vec<&str> = types.iter().filter_map(Json::as_str).filter(|t| *t != "null").collect();
            match non_null.as_slice() {
                [one] => (*one, non_null.len() < types.len()),
                _ => return Err(DataError::new(format!("a type list other than null and one type is not supported: {types:?}"))),
            }
        }
        None if o.contains_key("properties") => ("object", false),
        None => return Err(DataError::new("a JSON Schema without \"type\" is not supported")),
        Some(other) => return Err(DataError::new(format!("\"type\" is {other}, not a type name"))),
    };
    let connect = o.get("connect.type").and_then(Json::as_str);
    let title = o.get("title").and_then(Json::as_str);
    let parameters = o.get("connect.parameters").and_then(Json::as_object);
    let mut schema = match (ty, connect) {
        ("integer", Some("int8")) => Schema::new(Kind::Int8),
        ("integer", Some("int16")) => Schema::new(Kind::Int16),
        ("integer", Some("int32")) => Schema::new(Kind::Int32),
        ("integer", _) => Schema::new(Kind::Int64),
        ("number", Some("float32")) => Schema::new(Kind::Float32),
        ("number", Some("bytes")) => Schema::new(Kind::Bytes),
        ("number", _) => Schema::new(Kind::Float64),
        ("boolean", _) => Schema::new(Kind::Boolean),
        ("string", Some("bytes")) => Schema::new(Kind::Bytes),
        ("string", _) => Schema::new(Kind::String),
        ("array", Some("map")) => {
            let entry = o
                .get("items")
                .and_then(|i| i.get("properties"))
                .ok_or_else(|| DataError::new("a map as an array needs items.properties"))?;
            let part = |name: &str| {
                entry.get(name).ok_or_else(|| DataError::new(format!("a map entry needs \"{name}\""))).and_then(|s| schema_of(s, depth + 1))
            };
            Schema::new(Kind::Map(Box::new(part("key")?), Box::new(part("value")?)))
        }
        ("array", _) => {
            let items = o.get("items").ok_or_else(|| DataError::new("an array schema needs \"items\""))?;
            Schema::new(Kind::Array(Box::new(schema_of(items, depth + 1)?)))
        }
        ("object", _) if o.get("properties").is_none() => {
            let values = o.get("additionalProperties").filter(|a| a.is_object()).map(|a| schema_of(a, depth + 1)).transpose()?;
            let values = values.unwrap_or_else(|| Schema::new(Kind::String).optional());
            Schema::new(Kind::Map(Box::new(Schema::new(Kind::String)), Box::new(values)))
        }
        ("object", _) => {
            let properties =
                o.get("properties").and_then(Json::as_object).ok_or_else(|| DataError::new("\"properties\" is not an object"))?;
            let required: Vec<&str> =
                o.get("required").and_then(Json::as_array).map(|r| r.iter().filter_map(Json::as_str).collect()).unwrap_or_default();
            let mut fields: Vec<(i64, Field)> = Vec::with_capacity(properties.len());
            for (i, (name, p)) in properties.iter().enumerate() {
                let mut s = schema_of(p, depth + 1).map_err(|e| e.at(format!("property {name}")))?;
                // A property the schema does not require may be absent: it reads as null.
                if !required.contains(&name.as_str()) {
                    s.optional = true;
                }
                let index = p.get("connect.index").and_then(Json::as_i64).unwrap_or(i as i64);
                fields.push((index, Field::new(name, s)));
            }
            fields.sort_by_key(|(i, _)| *i);
            Schema::new(Kind::Struct(fields.into_iter().map(|(_, f)| f).collect()))
        }
        (other, _) => return Err(DataError::new(format!("JSON Schema type {other:?} is not supported"))),
    };
    schema.name = title.map(str::to_string);
    schema.version = o.get("connect.version").and_then(Json::as_i64).and_then(|v| i32::try_from(v).ok());
    schema.doc = o.get("description").and_then(Json::as_str).map(str::to_string);
    if let Some(parameters) = parameters {
        schema.parameters = parameters.iter().map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_string))).collect();
    }
    if nullable {
        schema.optional = true;
    }
    Ok(schema)
}

/// `value` as the JSON text `JsonSchemaConverter` writes (a decimal an exact number).
pub fn encode(value: &Value, out: &mut String) -> Result<(), DataError> {
    crate::json_text::write(value, crate::json_text::Decimals::Number, out)
}

/// The value `j` holds under `schema` (a writer's schema [`to_connect`] read).
pub fn decode(j: &Json, schema: &Schema) -> Result<Value, DataError> {
    if j.is_null() {
        return if schema.optional { Ok(Value::Null) } else { Err(DataError::new(format!("null for a required {}", schema.kind.name()))) };
    }
    let bad = || DataError::new(format!("{} does not fit a {} schema", shown(j), crate::connect_json::type_label(schema)));
    let int = |lo: i64, hi: i64| j.as_i64().filter(|v| (lo..=hi).contains(v)).ok_or_else(bad);
    Ok(match (schema.logical(), &schema.kind) {
        (Some(Logical::Decimal { scale }), _) => {
            let text = match j {
                Json::Number(n) => n.to_string(),
                Json::String(s) => s.clone(),
                _ => return Err(bad()),
            };
            Value::Decimal(Decimal::parse(&text, scale)?)
        }
        (Some(Logical::Timestamp), _) => Value::Timestamp(j.as_i64().ok_or_else(bad)?),
        (Some(Logical::Date), _) => Value::Date(int(i32::MIN.into(), i32::MAX.into())? as i32),
        (Some(Logical::Time), _) => Value::Time(int(0, 86_399_999)? as i32),
        (None, Kind::Int8) => Value::Int8(int(i8::MIN.into(), i8::MAX.into())? as i8),
        (None, Kind::Int16) => Value::Int16(int(i16::MIN.into(), i16::MAX.into())? as i16),
        (None, Kind::Int32) => Value::Int32(int(i32::MIN.into(), i32::MAX.into())? as i32),
        (None, Kind::Int64) => Value::Int64(j.as_i64().ok_or_else(bad)?),
        (None, Kind::Float32) => Value::Float32(j.as_f64().ok_or_else(bad)? as f32),
        (None, Kind::Float64) => Value::Float64(j.as_f64().ok_or_else(bad)?),
        (None, Kind::Boolean) => Value::Boolean(j.as_bool().ok_or_else(bad)?),
        (None, Kind::String) => Value::String(j.as_str().ok_or_else(bad)?.to_string()),
        (None, Kind::Bytes) => Value::Bytes(
            STANDARD.decode(j.as_str().ok_or_else(bad)?).map_err(|e| DataError::new(format!("bytes that are not base64: {e}")))?,
        ),
        (None, Kind::Array(items)) => {
            Value::Array(j.as_array().ok_or_else(bad)?.iter().map(|v| decode(v, items)).collect::<Result<_, _>>()?)
        }
        (None, Kind::Map(keys, values)) if keys.kind == Kind::String => Value::Map(
            j.as_object()
                .ok_or_else(bad)?
                .iter()
                .map(|(k, v)| Ok((Value::String(k.clone()), decode(v, values).map_err(|e| e.at(format!("key {k}")))?)))
                .collect::<Result<_, DataError>>()?,
        ),
        (None, Kind::Map(keys, values)) => Value::Map(
            j.as_array()
                .ok_or_else(bad)?
                .iter()
                .map(|e| Ok((decode(&e["key"], keys)?, decode(&e["value"], values)?)))
                .collect::<Result<_, DataError>>()?,
        ),
        (None, Kind::Struct(fields)) => {
            let o = j.as_object().ok_or_else(bad)?;
            Value::Struct(
                fields
                    .iter()
                    .map(|f| {
                        Ok((
                            f.name.clone(),
                            decode(o.get(&f.name).unwrap_or(&Json::Null), &f.schema).map_err(|e| e.at(format!("field {}", f.name)))?,
                        ))
                    })
                    .collect::<Result<_, DataError>>()?,
            )
        }
    })
}

/// `j` for a message: short.
fn shown(j: &Json) -> String {
    let text = j.to_string();
    if text.chars().count() > 40 { format!("{}…", text.chars().take(40).collect::<String>()) } else { text }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Schema {
        Schema::record(
            "servicenow.incident",
            vec![
                Field::new("sys_id", Schema::new(Kind::String)),
                Field::new("priority", Schema::new(Kind::Int32).optional()),
                Field::new("cost", Schema::decimal(2).optional()),
                Field::new("opened_at", Schema::timestamp().optional()),
                Field::new("active", Schema::new(Kind::Boolean).optional()),
            ],
        )
    }

    #[test]
    fn a_table_schema_round_trips_through_json_schema() {
        let written = from_connect(&table());
        assert_eq!(written["title"], "servicenow.incident");
        assert_eq!(written["required"], json!(["sys_id"]));
        let cost = &written["properties"]["cost"];
        assert_eq!(cost["oneOf"][0], json!({"type":"null"}));
        assert_eq!(cost["oneOf"][1]["title"], "org.apache.kafka.connect.data.Decimal");
        assert_eq!(cost["oneOf"][1]["connect.parameters"], json!({"scale":"2"}));
        assert_eq!(written["properties"]["opened_at"]["connect.index"], 3);
        assert_eq!(to_connect(&written).expect("read"), table());
    }

    #[test]
    fn values_are_plain_json_with_exact_decimals() {
        let value = Value::Struct(vec![
            ("sys_id".into(), Value::String("a1".into())),
            ("priority".into(), Value::Null),
            ("cost".into(), Value::Decimal(Decimal { unscaled: 123_456_789_012_345_678_901_234_567_890, scale: 2 })),
            ("opened_at".into(), Value::Timestamp(1_714_557_600_000)),
            ("active".into(), Value::Boolean(true)),
        ]);
        let mut text = String::new();
        encode(&value, &mut text).expect("encode");
        assert_eq!(
            text,
            r#"{"sys_id":"a1","priority":null,"cost":1234567890123456789012345678.90,"opened_at":1714557600000,"active":true}"#
        );
        let j: Json = serde_json::from_str(r#"{"sys_id":"a1","cost":12.5,"opened_at":1714557600000}"#).expect("json");
        let read = decode(&j, &table()).expect("decode");
        assert_eq!(read.get("cost"), Some(&Value::Decimal(Decimal { unscaled: 1250, scale: 2 })));
        assert_eq!(read.get("priority"), Some(&Value::Null), "an absent optional property is null");
        let e = decode(&serde_json::json!({"sys_id":"a1","priority":"high"}), &table()).expect_err("bad");
        assert_eq!(e.to_string(), "field priority: \"high\" does not fit a int32 schema");
    }

    #[test]
    fn other_writers_shapes_read_too() {
        let python: Json = serde_json::from_str(
            r#"{"type":"object","title":"Update","properties":{
                "n":{"type":"integer"},"note":{"type":["null","string"]},"at":{"anyOf":[{"type":"null"},{"type":"integer",
                "title":"org.apache.kafka.connect.data.Timestamp","connect.type":"int64"}]}},"required":["n"]}"#,
        )
        .expect("json");
        let s = to_connect(&python).expect("read");
        assert_eq!(s.name.as_deref(), Some("Update"));
        assert_eq!(s.field("n").map(|f| (&f.schema.kind, f.schema.optional)), Some((&Kind::Int64, false)));
        assert!(s.field("note").is_some_and(|f| f.schema.optional));
        assert_eq!(s.field("at").and_then(|f| f.schema.logical()), Some(Logical::Timestamp));
        assert!(to_connect(&json!({"$ref":"#/definitions/x"})).is_err());
    }
}
