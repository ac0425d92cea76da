//! Kafka Connect's `JsonConverter` format: schemas as JSON (`{"type":"struct","fields":[...]}`),
//! values as JSON under a schema (bytes and decimals base64, logical times as numbers), the
//! `{"schema":...,"payload":...}` envelope of `schemas.enable=true`, and schemaless values
//! (integers read as int64, fractions as float64, objects as maps). The source component also
//! describes its table in this schema format (ADR 0027).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value as Json, json};

use crate::decimal::Decimal;
use crate::error::DataError;
use crate::schema::{Field, Kind, Logical, Schema};
use crate::value::Value;

/// A schema as `JsonConverter` writes it.
pub fn schema_to_json(schema: &Schema) -> Json {
    let mut out = Map::new();
    out.insert("type".into(), json!(schema.kind.json_name()));
    match &schema.kind {
        Kind::Struct(fields) => {
            let fields = fields
                .iter()
                .map(|f| {
                    let mut j = schema_to_json(&f.schema);
                    j["field"] = json!(f.name);
                    j
                })
                .collect();
            out.insert("fields".into(), Json::Array(fields));
        }
        Kind::Array(items) => {
            out.insert("items".into(), schema_to_json(items));
        }
        Kind::Map(keys, values) => {
            out.insert("keys".into(), schema_to_json(keys));
            out.insert("values".into(), schema_to_json(values));
        }
        _ => {}
    }
    out.insert("optional".into(), json!(schema.optional));
    if let Some(name) = &schema.name {
        out.insert("name".into(), json!(name));
    }
    if let Some(version) = schema.version {
        out.insert("version".into(), json!(version));
    }
    if let Some(doc) = &schema.doc {
        out.insert("doc".into(), json!(doc));
    }
    if !schema.parameters.is_empty() {
        out.insert("parameters".into(), json!(schema.parameters));
    }
    if let Some(default) = &schema.default {
        // A default that does not fit its own schema is left out rather than written wrong.
        if let Ok(d) = value_to_json(default, Some(schema)) {
            out.insert("default".into(), d);
        }
    }
    Json::Object(out)
}

/// A schema from `JsonConverter`'s JSON form.
pub fn schema_from_json(j: &Json) -> Result<Schema, DataError> {
    let obj = j.as_object().ok_or_else(|| DataError::new(format!("a schema must be a JSON object, got {j}")))?;
    let ty = obj.get("type").and_then(Json::as_str).ok_or_else(|| DataError::new("a schema needs a \"type\" string"))?;
    let sub = |key: &str| -> Result<Schema, DataError> {
        schema_from_json(obj.get(key).ok_or_else(|| DataError::new(format!("a {ty} schema needs \"{key}\"")))?)
    };
    let kind = match ty {
        "struct" => {
            let fields = obj.get("fields").and_then(Json::as_array).ok_or_else(|| DataError::new("a struct schema needs \"fields\""))?;
            let mut out = Vec::with_capacity(fields.len());
            for f in fields {
                let name = f.get("field").and_then(Json::as_str).ok_or_else(|| DataError::new("a struct field needs a \"field\" name"))?;
                out.push(Field::new(name, schema_from_json(f).map_err(|e| e.at(format!("field {name}")))?));
            }
            Kind::Struct(out)
        }
        "array" => Kind::Array(Box::new(sub("items")?)),
        "map" => Kind::Map(Box::new(sub("keys")?), Box::new(sub("values")?)),
        other => Kind::primitive(other).ok_or_else(|| DataError::new(format!("unknown schema type {other:?}")))?,
    };
    let mut schema = Schema::new(kind);
    schema.optional = obj.get("optional").and_then(Json::as_bool).unwrap_or(false);
    schema.name = obj.get("name").and_then(Json::as_str).map(str::to_string);
    schema.version = obj.get("version").and_then(Json::as_i64).and_then(|v| i32::try_from(v).ok());
    schema.doc = obj.get("doc").and_then(Json::as_str).map(str::to_string);
    if let Some(params) = obj.get("parameters").and_then(Json::as_object) {
        for (k, v) in params {
            let text = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
            schema.parameters.insert(k.clone(), text);
        }
    }
    if let Some(default) = obj.get("default").filter(|d| !d.is_null()) {
        schema.default = Some(value_from_json(default, Some(&schema)).map_err(|e| e.at("default"))?);
    }
    Ok(schema)
}

/// `value` as JSON under `schema` (`None`: schemaless).
pub fn value_to_json(value: &Value, schema: Option<&Schema>) -> Result<Json, DataError> {
    let Some(schema) = schema else { return schemaless_to_json(value) };
    if value.is_null() {
        return match (&schema.default, schema.optional) {
            (Some(d), _) => value_to_json(d, Some(schema)),
            (None, true) => Ok(Json::Null),
            (None, false) => Err(DataError::new(format!("a null value for a required {} with no default", schema.kind.name()))),
        };
    }
    let mismatch = || DataError::new(format!("a {} value does not fit a {} schema", value.type_name(), type_label(schema)));
    Ok(match (schema.logical(), &schema.kind, value) {
        (Some(Logical::Decimal { scale }), _, Value::Decimal(d)) => json!(STANDARD.encode(d.rescale(scale)?.to_bytes())),
        (Some(Logical::Date), _, Value::Date(days)) => json!(days),
        (Some(Logical::Time), _, Value::Time(ms)) => json!(ms),
        (Some(Logical::Timestamp), _, Value::Timestamp(ms)) => json!(ms),
        (Some(_), ..) => return Err(mismatch()),
        (None, Kind::Int8, Value::Int8(v)) => json!(v),
        (None, Kind::Int16, Value::Int16(v)) => json!(v),
        (None, Kind::Int32, Value::Int32(v)) => json!(v),
        (None, Kind::Int64, Value::Int64(v)) => json!(v),
        (None, Kind::Float32, Value::Float32(v)) => json!(v),
        (None, Kind::Float64, Value::Float64(v)) => json!(v),
        (None, Kind::Boolean, Value::Boolean(v)) => json!(v),
        (None, Kind::String, Value::String(v)) => json!(v),
        (None, Kind::Bytes, Value::Bytes(v)) => json!(STANDARD.encode(v)),
        (None, Kind::Array(items), Value::Array(list)) => {
            Json::Array(list.iter().map(|v| value_to_json(v, Some(items))).collect::<Result<_, _>>()?)
        }
        (None, Kind::Map(keys, values), Value::Map(entries)) if keys.kind == Kind::String => {
            let mut out = Map::new();
            for (k, v) in entries {
                let key = k.as_str().ok_or_else(mismatch)?;
                out.insert(key.to_string(), value_to_json(v, Some(values))?);
            }
            Json::Object(out)
        }
        (None, Kind::Map(keys, values), Value::Map(entries)) => Json::Array(
            entries
                .iter()
                .map(|(k, v)| Ok(json!([value_to_json(k, Some(keys))?, value_to_json(v, Some(values))?])))
                .collect::<Result<_, DataError>>()?,
        ),
        (None, Kind::Struct(fields), Value::Struct(_)) => {
            let mut out = Map::new();
            for (i, f) in fields.iter().enumerate() {
                let v = value.field(i, &f.name).unwrap_or(&Value::Null);
                out.insert(f.name.clone(), value_to_json(v, Some(&f.schema)).map_err(|e| e.at(format!("field {}", f.name)))?);
            }
            Json::Object(out)
        }
        _ => return Err(mismatch()),
    })
}

fn schemaless_to_json(value: &Value) -> Result<Json, DataError> {
    Ok(match value {
        Value::Null => Json::Null,
        Value::Boolean(v) => json!(v),
        Value::Int8(v) => json!(v),
        Value::Int16(v) => json!(v),
        Value::Int32(v) | Value::Date(v) | Value::Time(v) => json!(v),
        Value::Int64(v) | Value::Timestamp(v) => json!(v),
        Value::Float32(v) => json!(v),
        Value::Float64(v) => json!(v),
        Value::String(v) => json!(v),
        Value::Bytes(v) => json!(STANDARD.encode(v)),
        Value::Decimal(d) => json!(STANDARD.encode(d.to_bytes())),
        Value::Array(list) => Json::Array(list.iter().map(schemaless_to_json).collect::<Result<_, _>>()?),
        Value::Map(entries) if entries.iter().all(|(k, _)| k.as_str().is_some()) => {
            let mut out = Map::new();
            for (k, v) in entries {
                out.insert(k.as_str().unwrap_or_default().to_string(), schemaless_to_json(v)?);
            }
            Json::Object(out)
        }
        Value::Map(entries) => Json::Array(
            entries.iter().map(|(k, v)| Ok(json!([schemaless_to_json(k)?, schemaless_to_json(v)?]))).collect::<Result<_, DataError>>()?,
        ),
        Value::Struct(_) => return Err(DataError::new("a struct value needs a schema")),
    })
}

/// A value from JSON under `schema` (`None`: schemaless, as `JsonConverter` reads it).
pub fn value_from_json(j: &Json, schema: Option<&Schema>) -> Result<Value, DataError> {
    let Some(schema) = schema else { return Ok(schemaless_from_json(j)) };
    if j.is_null() {
        return match (&schema.default, schema.optional) {
            (Some(d), _) => Ok(d.clone()),
            (None, true) => Ok(Value::Null),
            (None, false) => Err(DataError::new(format!("null for a required {} with no default", type_label(schema)))),
        };
    }
    let mismatch = || DataError::new(format!("JSON {} does not fit a {} schema", json_kind(j), type_label(schema)));
    let int = |min: i64, max: i64| j.as_i64().filter(|v| (min..=max).contains(v)).ok_or_else(mismatch);
    Ok(match (schema.logical(), &schema.kind) {
        (Some(Logical::Decimal { scale }), _) => Value::Decimal(match j {
            Json::String(text) => Decimal::from_bytes(&STANDARD.decode(text).map_err(|_| mismatch())?, scale)?,
            Json::Number(n) => Decimal::parse(&n.to_string(), scale)?,
            _ => return Err(mismatch()),
        }),
        (Some(Logical::Date), _) => Value::Date(int(i32::MIN.into(), i32::MAX.into())? as i32),
        (Some(Logical::Time), _) => Value::Time(int(0, 86_399_999)? as i32),
        (Some(Logical::Timestamp), _) => Value::Timestamp(j.as_i64().ok_or_else(mismatch)?),
        (None, Kind::Int8) => Value::Int8(int(i8::MIN.into(), i8::MAX.into())? as i8),
        (None, Kind::Int16) => Value::Int16(int(i16::MIN.into(), i16::MAX.into())? as i16),
        (None, Kind::Int32) => Value::Int32(int(i32::MIN.into(), i32::MAX.into())? as i32),
        (None, Kind::Int64) => Value::Int64(j.as_i64().ok_or_else(mismatch)?),
        (None, Kind::Float32) => Value::Float32(j.as_f64().ok_or_else(mismatch)? as f32),
        (None, Kind::Float64) => Value::Float64(j.as_f64().ok_or_else(mismatch)?),
        (None, Kind::Boolean) => Value::Boolean(j.as_bool().ok_or_else(mismatch)?),
        (None, Kind::String) => Value::String(j.as_str().ok_or_else(mismatch)?.to_string()),
        (None, Kind::Bytes) => Value::Bytes(STANDARD.decode(j.as_str().ok_or_else(mismatch)?).map_err(|_| mismatch())?),
        (None, Kind::Array(items)) => {
            Value::Array(j.as_array().ok_or_else(mismatch)?.iter().map(|v| value_from_json(v, Some(items))).collect::<Result<_, _>>()?)
        }
        (None, Kind::Map(keys, values)) => {
            match j {
                Json::Object(obj) if keys.kind == Kind::String => Value::Map(
                    obj.iter()
                        .map(|(k, v)| Ok((Value::String(k.clone()), value_from_json(v, Some(values))?)))
                        .collect::<Result<_, DataError>>()?,
                ),
                Json::Array(pairs) => Value::Map(
                    pairs
                        .iter()
                        .map(|p| match p.as_array().map(Vec::as_slice) {
                            Some([k, v]) => Ok((value_from_json(k, Some(keys))?, value_from_json(v, Some(values))?)),
                            _ => Err(mismatch()),
                        })
                        .collect::<Result<_, DataError>>()?,
                ),
                _ => return Err(mismatch()),
            }
        }
        (None, Kind::Struct(fields)) => {
            let obj = j.as_object().ok_or_else(mismatch)?;
            let mut out = Vec::with_capacity(fields.len());
            for f in fields {
                let v = value_from_json(obj.get(&f.name).unwrap_or(&Json::Null), Some(&f.schema))
                    .map_err(|e| e.at(format!("field {}", f.name)))?;
                out.push((f.name.clone(), v));
            }
            Value::Struct(out)
        }
    })
}

fn schemaless_from_json(j: &Json) -> Value {
    match j {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) => n.as_i64().map(Value::Int64).unwrap_or_else(|| Value::Float64(n.as_f64().unwrap_or(f64::NAN))),
        Json::String(s) => Value::String(s.clone()),
        Json::Array(list) => Value::Array(list.iter().map(schemaless_from_json).collect()),
        Json::Object(obj) => Value::Map(obj.iter().map(|(k, v)| (Value::String(k.clone()), schemaless_from_json(v))).collect()),
    }
}

/// `schema` for messages: its logical name when it has one, else its type.
pub fn type_label(schema: &Schema) -> String {
    match schema.logical() {
        Some(Logical::Decimal { scale }) => format!("Decimal(scale {scale})"),
        Some(Logical::Date) => "Date".into(),
        Some(Logical::Time) => "Time".into(),
        Some(Logical::Timestamp) => "Timestamp".into(),
        None => schema.kind.name().into(),
    }
}

fn json_kind(j: &Json) -> &'static str {
    match j {
        Json::Null => "null",
        Json::Bool(_) => "boolean",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

/// `JsonConverter.fromConnectData`: the record's bytes (`None` for a null value).
pub fn encode(schema: Option<&Schema>, value: &Value, schemas_enable: bool) -> Result<Option<Vec<u8>>, DataError> {
    if value.is_null() && schema.is_none_or(|s| s.default.is_none()) && !schemas_enable {
        return Ok(None);
    }
    let payload = value_to_json(value, schema)?;
    let json = if schemas_enable { json!({ "schema": schema.map_or(Json::Null, schema_to_json), "payload": payload }) } else { payload };
    Ok(Some(serde_json::to_vec(&json).map_err(|e| DataError::new(e.to_string()))?))
}

/// `JsonConverter.toConnectData`: schema and value of the record's bytes (`None`: a null record).
pub fn decode(bytes: Option<&[u8]>, schemas_enable: bool) -> Result<(Option<Schema>, Value), DataError> {
    let Some(bytes) = bytes else { return Ok((None, Value::Null)) };
    let json: Json = serde_json::from_slice(bytes).map_err(|e| DataError::new(format!("not JSON: {e}")))?;
    if !schemas_enable {
        return Ok((None, schemaless_from_json(&json)));
    }
    let envelope =
        json.as_object().filter(|o| o.len() == 2 && o.contains_key("schema") && o.contains_key("payload")).ok_or_else(envelope_required)?;
    let schema = match &envelope["schema"] {
        Json::Null => None,
        s => Some(schema_from_json(s)?),
    };
    let value = value_from_json(&envelope["payload"], schema.as_ref())?;
    Ok((schema, value))
}

/// [`decode`] of an envelope (`schemas.enable=true`) whose schema is read through `schema_of`,
/// given the schema's JSON text (`null` for none): a reader that sees the same schema on every
/// record parses it once and keeps it (a sink does, per connector).
pub fn decode_envelope<S>(
    bytes: &[u8],
    schema_of: impl FnOnce(&str) -> Result<Option<S>, DataError>,
) -> Result<(Option<S>, Value), DataError>
where
    S: std::ops::Deref<Target = Schema>,
{
    let fields: std::collections::BTreeMap<String, &serde_json::value::RawValue> =
        serde_json::from_slice(bytes).map_err(|e| match serde_json::from_slice::<Json>(bytes) {
            Err(_) => DataError::new(format!("not JSON: {e}")),
            Ok(_) => envelope_required(),
        })?;
    let (Some(schema), Some(payload), 2) = (fields.get("schema"), fields.get("payload"), fields.len()) else {
        return Err(envelope_required());
    };
    let schema = schema_of(schema.get())?;
    let payload: Json = serde_json::from_str(payload.get()).map_err(|e| DataError::new(format!("not JSON: {e}")))?;
    let value = value_from_json(&payload, schema.as_deref())?;
    Ok((schema, value))
}

fn envelope_required() -> DataError {
    DataError::new(
        "JsonConverter with schemas.enable requires \"schema\" and \"payload\" fields and may not contain additional fields; \
         for plain JSON set schemas.enable=false in the converter's configuration",
    )
}

/// A schema's JSON text as [`decode_envelope`] hands it, read (`None` for `null`).
pub fn schema_from_text(text: &str) -> Result<Option<Schema>, DataError> {
    let json: Json = serde_json::from_str(text).map_err(|e| DataError::new(format!("not JSON: {e}")))?;
    if json.is_null() { Ok(None) } else { schema_from_json(&json).map(Some) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Schema {
        Schema::record(
            "servicenow.incident",
            vec![
                Field::new("number", Schema::new(Kind::String)),
                Field::new("priority", Schema::new(Kind::Int32).optional()),
                Field::new("cost", Schema::decimal(2).optional()),
                Field::new("opened_at", Schema::timestamp().optional()),
            ],
        )
    }

    #[test]
    fn schemas_round_trip_through_connects_json() {
        let s = table();
        let j = schema_to_json(&s);
        assert_eq!(j["fields"][2]["parameters"]["scale"], "2");
        assert_eq!(j["fields"][3]["name"], "org.apache.kafka.connect.data.Timestamp");
        assert_eq!(schema_from_json(&j).expect("parse"), s);
    }

    #[test]
    fn values_round_trip_under_their_schema_and_nulls_are_checked() {
        let s = table();
        let v = Value::Struct(vec![
            ("number".into(), Value::String("INC1".into())),
            ("priority".into(), Value::Int32(2)),
            ("cost".into(), Value::Decimal(Decimal::parse("10.5", 2).expect("d"))),
            ("opened_at".into(), Value::Timestamp(1_700_000_000_000)),
        ]);
        let bytes = encode(Some(&s), &v, true).expect("encode").expect("bytes");
        let (schema, back) = decode(Some(&bytes), true).expect("decode");
        assert_eq!((schema.as_ref(), &back), (Some(&s), &v));
        let j: Json = serde_json::from_slice(&bytes).expect("json");
        assert_eq!(j["payload"]["cost"], "BBo=", "1050 as BigInteger bytes, base64");
        let missing = Value::Struct(vec![("priority".into(), Value::Int32(2))]);
        assert!(encode(Some(&s), &missing, false).expect_err("required").to_string().contains("field number"));
    }

    #[test]
    fn schemaless_json_reads_as_connect_does() {
        let (schema, v) = decode(Some(br#"{"a":1,"b":1.5,"c":[true]}"#), false).expect("decode");
        assert!(schema.is_none());
        assert_eq!(v.get("a"), Some(&Value::Int64(1)));
        assert_eq!(v.get("b"), Some(&Value::Float64(1.5)));
        let e = decode(Some(br#"{"a":1}"#), true).expect_err("no envelope").to_string();
        assert!(e.contains("schemas.enable=false"), "{e}");
    }

    #[test]
    fn an_envelope_read_through_a_schema_cache_reads_as_decode_does() {
        let bytes = encode(Some(&table()), &Value::Struct(vec![("number".into(), Value::String("INC1".into()))]), true).unwrap().unwrap();
        let mut seen = Vec::new();
        let (schema, value) = decode_envelope(&bytes, |text| {
            seen.push(text.to_string());
            schema_from_text(text).map(|s| s.map(std::sync::Arc::new))
        })
        .unwrap();
        let (expected_schema, expected_value) = decode(Some(&bytes), true).unwrap();
        assert_eq!((schema.map(|s| (*s).clone()), value), (expected_schema, expected_value));
        assert_eq!(seen.len(), 1);
        for bad in [&b"{\"payload\":1}"[..], b"{\"schema\":null,\"payload\":1,\"x\":2}", b"[1]"] {
            let e = decode_envelope(bad, |t| schema_from_text(t).map(|s| s.map(std::sync::Arc::new))).unwrap_err();
            assert!(e.to_string().contains("requires \"schema\" and \"payload\""), "{e}");
        }
        assert!(
            decode_envelope(b"{nope", |t| schema_from_text(t).map(|s| s.map(std::sync::Arc::new)))
                .unwrap_err()
                .to_string()
                .starts_with("not JSON")
        );
    }
}
