//! ServiceNow's text forms and Connect's typed values, both ways. The Table API writes every
//! value as text (`"3"`, `"true"`, `"2024-05-01 10:00:00"`, `""` for empty); a source row is typed
//! by its table's schema ([`row`]), and a sink value is rendered back as the Table API expects
//! it ([`to_json`]): timestamps as `YYYY-MM-DD HH:MM:SS` UTC, dates `YYYY-MM-DD`, times
//! `1970-01-01 HH:MM:SS`, decimals as their exact digits (never through a float).
//!
//! A field whose schema has the parameter [`DISPLAY_OF`] holds the display value of the field it
//! names (rows read with `sysparm_display_value=all`, where each field is
//! `{"value":…,"display_value":…}`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value as Json, json};
use snow_core::time::Timestamp;

use crate::decimal::Decimal;
use crate::error::DataError;
use crate::schema::{Kind, Logical, Schema};
use crate::value::Value;

/// The schema parameter naming the field whose display value a field holds (the source
/// component sets it).
pub use snow_core::source::schema::DISPLAY_OF;

/// A row typed by its table's schema, and the names of the row's fields the schema does not have.
/// `bytes` is the row's JSON object as the Table API wrote it; it is read once, each field's text
/// borrowed from it where it needs no unescaping (a `{"value","display_value"}` pair read for the
/// part a schema field wants), never built into a JSON tree.
pub fn row(bytes: &[u8], schema: &Schema) -> Result<(Value, Vec<String>), DataError> {
    let fields: RowFields<'_> = serde_json::from_slice(bytes).map_err(|e| DataError::new(format!("the row is not a JSON object: {e}")))?;
    let fields = fields.0;
    let mut out = Vec::with_capacity(schema.fields().len());
    // How many of the row's fields a schema field of the same name reads: the row carries fields
    // the schema lacks only when it has more than this (then, and only then, they are named).
    let mut matched = 0;
    for f in schema.fields() {
        let (source, display) = match f.schema.parameters.get(DISPLAY_OF) {
            Some(base) if *base != f.name => (base.as_str(), true),
            Some(_) => (f.name.as_str(), true),
            None => (f.name.as_str(), false),
        };
        let found = fields.get(source);
        if found.is_some() && source == f.name {
            matched += 1;
        }
        let text = match found {
            Some(Raw::Pair { value, display: shown }) => {
                if display {
                    shown.as_deref()
                } else {
                    value.as_deref()
                }
            }
            Some(Raw::Text(text)) => Some(&**text),
            Some(Raw::Null) | None => None,
        };
        let v = match text {
            None => Ok(Value::Null),
            Some(text) => from_text(text, &f.schema),
        }
        .and_then(|v| required(v, &f.schema))
        .map_err(|e| e.at(format!("field {}", f.name)))?;
        out.push((f.name.clone(), v));
    }
    let dropped = if fields.len() > matched {
        fields.keys().filter(|k| schema.field(k).is_none()).map(|k| k.to_string()).collect()
    } else {
        Vec::new()
    };
    Ok((Value::Struct(out), dropped))
}

/// A row's fields by name, borrowed from its bytes.
struct RowFields<'a>(HashMap<Cow<'a, str>, Raw<'a>>);

/// One field of a row as the Table API writes it: text (numbers and booleans as their JSON text),
/// null, or a `{"value","display_value"}` pair (`sysparm_display_value=all`).
enum Raw<'a> {
    Null,
    Text(Cow<'a, str>),
    Pair { value: Option<Cow<'a, str>>, display: Option<Cow<'a, str>> },
}

impl<'de> Deserialize<'de> for RowFields<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = RowFields<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = HashMap::with_capacity(map.size_hint().unwrap_or(64));
                while let Some(Name(name)) = map.next_key()? {
                    let raw = map.next_value()?;
                    out.insert(name, raw);
                }
                Ok(RowFields(out))
            }
        }
        d.deserialize_map(Fields)
    }
}

/// A JSON string, borrowed when it needs no unescaping.
struct Name<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl<'de> Visitor<'de> for Text {
            type Value = Name<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Name(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Name(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(Text)
    }
}

impl<'de> Deserialize<'de> for Raw<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Field;
        impl<'de> Visitor<'de> for Field {
            type Value = Raw<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field's value")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Raw::Null)
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Raw::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Raw::Text(Cow::Owned(v.to_string())))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Raw::Text(Cow::Owned(v.to_string())))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Raw::Text(Cow::Owned(v.to_string())))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Raw::Text(Cow::Owned(v.to_string())))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Raw::Text(Cow::Owned(Json::from(v).to_string())))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                let list: Vec<Json> = Deserialize::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(Raw::Text(Cow::Owned(Json::Array(list).to_string())))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let (mut value, mut display) = (None, None);
                while let Some(Name(key)) = map.next_key()? {
                    match &*key {
                        "value" => value = map.next_value::<Raw<'de>>()?.text(),
                        "display_value" => display = map.next_value::<Raw<'de>>()?.text(),
                        _ => {
                            map.next_value::<de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(Raw::Pair { value, display })
            }
        }
        d.deserialize_any(Field)
    }
}

impl<'a> Raw<'a> {
    /// The text of a pair's part (a nested pair has none).
    fn text(self) -> Option<Cow<'a, str>> {
        match self {
            Raw::Text(t) => Some(t),
            Raw::Null | Raw::Pair { .. } => None,
        }
    }
}

fn required(v: Value, schema: &Schema) -> Result<Value, DataError> {
    match (&v, schema.optional, &schema.default) {
        (Value::Null, false, Some(d)) => Ok(d.clone()),
        (Value::Null, false, None) => Err(DataError::new("empty, but the schema requires a value")),
        _ => Ok(v),
    }
}

/// The typed value of ServiceNow's `text` for a field of `schema` (`""` is null except for text).
pub fn from_text(text: &str, schema: &Schema) -> Result<Value, DataError> {
    if text.is_empty() && !matches!(schema.kind, Kind::String | Kind::Bytes) {
        return Ok(Value::Null);
    }
    let bad = |what: &str| DataError::new(format!("{text:?} is not {what}"));
    Ok(match (schema.logical(), &schema.kind) {
        (Some(Logical::Decimal { scale }), _) => Value::Decimal(Decimal::parse(text, scale)?),
        (Some(Logical::Timestamp), _) => {
            Value::Timestamp(Timestamp::parse(text).map_err(|_| bad("a date and time (YYYY-MM-DD HH:MM:SS)"))?.as_millis())
        }
        (Some(Logical::Date), _) => {
            let t = Timestamp::parse(&format!("{text} 00:00:00")).map_err(|_| bad("a date (YYYY-MM-DD)"))?;
            Value::Date(i32::try_from(t.0.div_euclid(86_400)).map_err(|_| bad("a date in range"))?)
        }
        (Some(Logical::Time), _) => {
            let full = if text.len() == 8 { format!("1970-01-01 {text}") } else { text.to_string() };
            let t = Timestamp::parse(&full).map_err(|_| bad("a time (HH:MM:SS)"))?;
            Value::Time((t.0.rem_euclid(86_400) * 1000) as i32)
        }
        (None, Kind::String) => Value::String(text.to_string()),
        (None, Kind::Bytes) => Value::Bytes(text.as_bytes().to_vec()),
        (None, Kind::Boolean) => match text {
            "true" | "1" => Value::Boolean(true),
            "false" | "0" => Value::Boolean(false),
            _ => return Err(bad("true or false")),
        },
        (None, Kind::Int8) => Value::Int8(text.parse().map_err(|_| bad("an int8"))?),
        (None, Kind::Int16) => Value::Int16(text.parse().map_err(|_| bad("an int16"))?),
        (None, Kind::Int32) => Value::Int32(text.parse().map_err(|_| bad("a whole number that fits int32"))?),
        (None, Kind::Int64) => Value::Int64(text.parse().map_err(|_| bad("a whole number that fits int64"))?),
        (None, Kind::Float32) => Value::Float32(text.parse().map_err(|_| bad("a number"))?),
        (None, Kind::Float64) => Value::Float64(text.parse().map_err(|_| bad("a number"))?),
        (_, kind) => return Err(DataError::new(format!("ServiceNow text cannot be read as a {}", kind.name()))),
    })
}

/// `value` as the Table API takes it in a request body.
pub fn to_json(value: &Value) -> Json {
    match value {
        Value::Null => Json::Null,
        Value::Boolean(b) => json!(b),
        Value::Int8(v) => json!(v),
        Value::Int16(v) => json!(v),
        Value::Int32(v) => json!(v),
        Value::Int64(v) => json!(v),
        Value::Float32(v) => json!(v),
        Value::Float64(v) => json!(v),
        Value::String(s) => json!(s),
        Value::Bytes(b) => json!(base64::Engine::encode(&base64::engine::general_purpose::STANDARD, b)),
        Value::Decimal(d) => json!(d.to_string()),
        Value::Timestamp(ms) => json!(Timestamp(ms.div_euclid(1000)).to_string()),
        Value::Date(days) => {
            let (y, m, d) = snow_core::time::civil_from_days(i64::from(*days));
            json!(format!("{y:04}-{m:02}-{d:02}"))
        }
        Value::Time(ms) => json!(Timestamp(i64::from(*ms).div_euclid(1000)).to_string()),
        Value::Array(list) => Json::Array(list.iter().map(to_json).collect()),
        Value::Map(entries) => Json::Object(
            entries.iter().map(|(k, v)| (k.as_str().map(str::to_string).unwrap_or_else(|| to_json(k).to_string()), to_json(v))).collect(),
        ),
        Value::Struct(fields) => Json::Object(fields.iter().map(|(k, v)| (k.clone(), to_json(v))).collect()),
    }
}

/// A record's typed value as the body of a Table API write: a struct's fields (or a map's
/// entries) by name, each as [`to_json`] renders it. Display values ([`DISPLAY_OF`] fields, which
/// a source wrote beside their field) are read-only and left out; a null is `""`, ServiceNow's
/// empty (the source reads an empty field as null, so a row read and written back is unchanged).
pub fn body(value: &Value, schema: Option<&Schema>) -> Result<Map<String, Json>, DataError> {
    let empty = |v: &Value| if v.is_null() { json!("") } else { to_json(v) };
    match value {
        Value::Struct(fields) => Ok(fields
            .iter()
            .filter(|(name, _)| schema.and_then(|s| s.field(name)).is_none_or(|f| !f.schema.parameters.contains_key(DISPLAY_OF)))
            .map(|(name, v)| (name.clone(), empty(v)))
            .collect()),
        Value::Map(entries) => entries
            .iter()
            .map(|(k, v)| match k {
                Value::String(name) => Ok((name.clone(), empty(v))),
                other => Err(DataError::new(format!("a map key is {}, not a field name", other.type_name()))),
            })
            .collect(),
        other => Err(DataError::new(format!("the value is {}, not a struct of fields", other.type_name()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Field;

    #[test]
    fn a_date_past_the_year_9999_keeps_its_day() {
        let days = snow_core::time::days_from_civil(10_000, 1, 31) as i32;
        assert_eq!(to_json(&Value::Date(days)), json!("10000-01-31"));
    }

    fn schema() -> Schema {
        let mut dv = Schema::new(Kind::String).optional();
        dv.parameters.insert(DISPLAY_OF.into(), "caller_id".into());
        Schema::record(
            "servicenow.incident",
            vec![
                Field::new("sys_id", Schema::new(Kind::String)),
                Field::new("priority", Schema::new(Kind::Int32).optional()),
                Field::new("active", Schema::new(Kind::Boolean).optional()),
                Field::new("cost", Schema::decimal(2).optional()),
                Field::new("opened_at", Schema::timestamp().optional()),
                Field::new("due", Schema::date().optional()),
                Field::new("caller_id", Schema::new(Kind::String).optional()),
                Field::new("dv_caller_id", dv),
            ],
        )
    }

    #[test]
    fn rows_are_typed_by_their_schema() {
        let raw = br#"{"sys_id":"a1","priority":"2","active":"true","cost":"1234.5","opened_at":"2024-05-01 10:00:00","due":"",
                "caller_id":{"value":"u1","display_value":"Ann Lee","link":"x"},"sys_tags":""}"#;
        let (v, dropped) = row(raw, &schema()).expect("typed");
        assert_eq!(v.get("priority"), Some(&Value::Int32(2)));
        assert_eq!(v.get("cost").map(to_json), Some(json!("1234.50")));
        assert_eq!(v.get("opened_at"), Some(&Value::Timestamp(1_714_557_600_000)));
        assert_eq!(v.get("due"), Some(&Value::Null));
        assert_eq!(v.get("caller_id"), Some(&Value::String("u1".into())));
        assert_eq!(v.get("dv_caller_id"), Some(&Value::String("Ann Lee".into())));
        assert_eq!(dropped, ["sys_tags"]);
    }

    #[test]
    fn a_value_that_does_not_fit_names_its_field() {
        let e = row(br#"{"sys_id":"a1","priority":"high"}"#, &schema()).expect_err("bad").to_string();
        assert_eq!(e, "field priority: \"high\" is not a whole number that fits int32");
        assert!(row(br#"{"priority":"1"}"#, &schema()).expect_err("required").to_string().starts_with("field sys_id: empty"));
        assert!(row(b"[1]", &schema()).expect_err("not an object").to_string().starts_with("the row is not a JSON object"));
        let (v, _) = row(br#"{"sys_id":"a\u0031","priority":3,"active":true,"cost":null}"#, &schema()).expect("unescaped and non-text");
        assert_eq!(
            (v.get("sys_id"), v.get("priority"), v.get("active"), v.get("cost")),
            (Some(&Value::String("a1".into())), Some(&Value::Int32(3)), Some(&Value::Boolean(true)), Some(&Value::Null))
        );
    }

    #[test]
    fn a_typed_row_written_back_leaves_out_display_values_and_empties_nulls() {
        let raw = br#"{"sys_id":"a1","priority":"2","cost":"1234.5","opened_at":"2024-05-01 10:00:00","due":"",
                "caller_id":{"value":"u1","display_value":"Ann Lee"}}"#;
        let (v, _) = row(raw, &schema()).expect("typed");
        let body = body(&v, Some(&schema())).expect("body");
        assert_eq!(
            Json::Object(body),
            json!({"sys_id":"a1","priority":2,"active":"","cost":"1234.50","opened_at":"2024-05-01 10:00:00","due":"","caller_id":"u1"})
        );
        assert_eq!(
            super::body(&Value::Int32(3), None).expect_err("not a struct").to_string(),
            "the value is int32, not a struct of fields"
        );
    }

    #[test]
    fn typed_values_render_as_the_table_api_takes_them() {
        assert_eq!(to_json(&Value::Timestamp(1_714_557_600_999)), json!("2024-05-01 10:00:00"));
        assert_eq!(to_json(&Value::Date(19_844)), json!("2024-05-01"));
        assert_eq!(to_json(&Value::Time(3_600_000)), json!("1970-01-01 01:00:00"));
        assert_eq!(
            to_json(&Value::Decimal(Decimal { unscaled: 123_456_789_012_345_678_901_234_567_890, scale: 3 })),
            json!("123456789012345678901234567.890")
        );
        assert_eq!(from_text("10:30:00", &Schema::time()).expect("time"), Value::Time(37_800_000));
    }
}
