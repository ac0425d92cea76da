//! The header transforms: HeaderFrom (copies or moves key/value fields into headers, each with
//! its field's schema), InsertHeader (appends a header whose literal is typed as Connect's
//! `Values.parseString` types it) and DropHeaders (removes every header of the given keys).

use crate::error::DataError;
use crate::schema::{Kind, Schema};
use crate::value::Value;

use super::support::{Conf, copy_basics, field_value, map_get, require_map, require_struct};
use super::{Header, Record, Side, Transform};

/// `HeaderFrom$Key` / `$Value`.
pub struct HeaderFrom {
    side: Side,
    pairs: Vec<(String, String)>,
    moving: bool,
    with_default: bool,
}

impl HeaderFrom {
    /// From its keys.
    pub fn new(side: Side, conf: &Conf<'_>) -> Result<Self, String> {
        let fields = conf.non_empty_list("fields")?;
        let headers = conf.non_empty_list("headers")?;
        if fields.len() != headers.len() {
            return Err("'fields' config must have the same number of elements as 'headers' config.".into());
        }
        let moving = conf.one_of("operation", &["move", "copy"], None)? == "move";
        Ok(Self { side, pairs: fields.into_iter().zip(headers).collect(), moving, with_default: conf.replace_null_with_default()? })
    }
}

impl Transform for HeaderFrom {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, DataError> {
        let purpose = if self.moving { "header move" } else { "header copy" };
        let (schema, value) = record.operating(self.side);
        let mut added = Vec::with_capacity(self.pairs.len());
        let (schema, value) = match schema {
            None => {
                let entries = require_map(value, purpose)?;
                for (field, header) in &self.pairs {
                    added.push(Header {
                        key: header.clone(),
                        schema: None,
                        value: map_get(entries, field).cloned().unwrap_or(Value::Null),
                    });
                }
                let kept = entries
                    .iter()
                    .filter(|(k, _)| !self.moving || !self.pairs.iter().any(|(f, _)| k.as_str() == Some(f)))
                    .cloned()
                    .collect();
                (None, Value::Map(kept))
            }
            Some(schema) => {
                let fields = require_struct(value, purpose)?;
                for (field, header) in &self.pairs {
                    let f = schema.field(field).ok_or_else(|| DataError::new(format!("field {field} is not in the record's schema")))?;
                    let v = field_value(fields, schema, field, self.with_default);
                    if v.is_null() && !f.schema.optional {
                        return Err(DataError::new(format!(
                            "A null value requires an optional schema but was {}",
                            super::support::schema_text(&f.schema)
                        )));
                    }
                    added.push(Header { key: header.clone(), schema: Some(f.schema.clone()), value: v });
                }
                if self.moving {
                    let kept: Vec<_> = schema.fields().iter().filter(|f| !self.pairs.iter().any(|(n, _)| n == &f.name)).cloned().collect();
                    let values = kept.iter().map(|f| (f.name.clone(), field_value(fields, schema, &f.name, self.with_default))).collect();
                    (Some(copy_basics(schema, Kind::Struct(kept))), Value::Struct(values))
                } else {
                    (Some(schema.clone()), value.clone())
                }
            }
        };
        record.headers.extend(added);
        Ok(Some(record.with(self.side, schema, value)))
    }
}

/// `InsertHeader`.
pub struct InsertHeader {
    header: String,
    literal: (Option<Schema>, Value),
}

impl InsertHeader {
    /// From its keys.
    pub fn new(conf: &Conf<'_>) -> Result<Self, String> {
        Ok(Self { header: conf.required("header")?.to_string(), literal: parse_literal(conf.required("value.literal")?) })
    }
}

impl Transform for InsertHeader {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, DataError> {
        record.headers.push(Header { key: self.header.clone(), schema: self.literal.0.clone(), value: self.literal.1.clone() });
        Ok(Some(record))
    }
}

/// `DropHeaders`.
pub struct DropHeaders {
    headers: Vec<String>,
}

impl DropHeaders {
    /// From its keys.
    pub fn new(conf: &Conf<'_>) -> Result<Self, String> {
        Ok(Self { headers: conf.non_empty_list("headers")? })
    }
}

impl Transform for DropHeaders {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, DataError> {
        record.headers.retain(|h| !self.headers.contains(&h.key));
        Ok(Some(record))
    }
}

/// A header literal typed as `Values.parseString` types it, for the forms a header literal
/// takes: `null`, `true`/`false`, whole numbers (the smallest integer type that holds them),
/// fractions (float32, or float64 when float32 cannot hold it), ISO dates, times and timestamps
/// (`2024-01-02`, `12:34:56.789Z`, `2024-01-02T12:34:56.789Z`), JSON arrays and objects of
/// those; anything else is the text itself.
pub fn parse_literal(text: &str) -> (Option<Schema>, Value) {
    if text == "null" {
        return (None, Value::Null);
    }
    if text == "true" || text == "false" {
        return (Some(Schema::new(Kind::Boolean)), Value::Boolean(text == "true"));
    }
    if let Some(n) = number(text.trim()) {
        return n;
    }
    if let Some(t) = temporal(text) {
        return t;
    }
    let bracketed = (text.starts_with('[') && text.ends_with(']')) || (text.starts_with('{') && text.ends_with('}'));
    if bracketed
        && let Ok(json) = serde_json::from_str::<serde_json::Value>(text)
        && let Some(v) = from_json(&json)
    {
        return v;
    }
    (Some(Schema::new(Kind::String)), Value::String(text.to_string()))
}

fn number(t: &str) -> Option<(Option<Schema>, Value)> {
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.' | b'e' | b'E')) {
        return None;
    }
    let f: f64 = t.parse().ok()?;
    if f.fract() == 0.0 && f.abs() < 9.2e18 {
        let whole = f as i64;
        return Some(if let Ok(v) = i8::try_from(whole) {
            (Some(Schema::new(Kind::Int8)), Value::Int8(v))
        } else if let Ok(v) = i16::try_from(whole) {
            (Some(Schema::new(Kind::Int16)), Value::Int16(v))
        } else if let Ok(v) = i32::try_from(whole) {
            (Some(Schema::new(Kind::Int32)), Value::Int32(v))
        } else {
            (Some(Schema::new(Kind::Int64)), Value::Int64(whole))
        });
    }
    let narrow = f as f32;
    Some(if narrow.is_finite() {
        (Some(Schema::new(Kind::Float32)), Value::Float32(narrow))
    } else {
        (Some(Schema::new(Kind::Float64)), Value::Float64(f))
    })
}

fn temporal(text: &str) -> Option<(Option<Schema>, Value)> {
    // The forms below are ASCII; slicing other text at their offsets could split a character.
    if !text.is_ascii() {
        return None;
    }
    let stamp = |date: &str, time: &str| snow_core::time::Timestamp::parse(&format!("{date} {time}")).ok();
    match text.len() {
        10 => stamp(text, "00:00:00").map(|t| (Some(Schema::date()), Value::Date(t.0.div_euclid(86_400) as i32))),
        13 if text.ends_with('Z') && text.as_bytes()[8] == b'.' => {
            let t = stamp("1970-01-01", &text[..8])?;
            let ms: i32 = text[9..12].parse().ok()?;
            Some((Some(Schema::time()), Value::Time(t.0 as i32 * 1000 + ms)))
        }
        24 if text.ends_with('Z') && text.as_bytes()[10] == b'T' => {
            let t = stamp(&text[..10], &text[11..19])?;
            let ms: i64 = text[20..23].parse().ok()?;
            Some((Some(Schema::timestamp()), Value::Timestamp(t.as_millis() + ms)))
        }
        _ => None,
    }
}

fn from_json(json: &serde_json::Value) -> Option<(Option<Schema>, Value)> {
    match json {
        serde_json::Value::Null => Some((None, Value::Null)),
        serde_json::Value::Bool(b) => Some((Some(Schema::new(Kind::Boolean)), Value::Boolean(*b))),
        serde_json::Value::Number(n) => number(&n.to_string()),
        serde_json::Value::String(s) => Some((Some(Schema::new(Kind::String)), Value::String(s.clone()))),
        serde_json::Value::Array(items) => {
            let parsed: Vec<(Option<Schema>, Value)> = items.iter().map(from_json).collect::<Option<_>>()?;
            let element = common(parsed.iter().map(|(s, _)| s.as_ref()));
            let schema = element.map(|e| Schema::new(Kind::Array(Box::new(e))));
            Some((schema, Value::Array(parsed.into_iter().map(|(_, v)| v).collect())))
        }
        serde_json::Value::Object(map) => {
            let parsed: Vec<(String, (Option<Schema>, Value))> =
                map.iter().map(|(k, v)| from_json(v).map(|p| (k.clone(), p))).collect::<Option<_>>()?;
            let values = common(parsed.iter().map(|(_, (s, _))| s.as_ref()));
            let schema = values.map(|v| Schema::new(Kind::Map(Box::new(Schema::new(Kind::String)), Box::new(v))));
            Some((schema, Value::Map(parsed.into_iter().map(|(k, (_, v))| (Value::String(k), v)).collect())))
        }
    }
}

/// The one schema every element has, if they share one.
fn common<'s>(mut schemas: impl Iterator<Item = Option<&'s Schema>>) -> Option<Schema> {
    let first = schemas.next()??.clone();
    schemas.all(|s| s == Some(&first)).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_with_a_character_where_a_date_has_digits_is_text() {
        for literal in ["2024-01-0é", "12:34:5é.789Z", "2024-01-02T12:34:5é.789Z", "é2024-01-02T12:34:56.7Z"] {
            assert_eq!(parse_literal(literal), (Some(Schema::new(Kind::String)), Value::String(literal.to_string())), "{literal}");
        }
    }

    #[test]
    fn literals_are_typed_as_values_parse_string_types_them() {
        assert_eq!(parse_literal("null"), (None, Value::Null));
        assert_eq!(parse_literal("true").1, Value::Boolean(true));
        assert_eq!(parse_literal("True").1, Value::String("True".into()));
        assert_eq!(parse_literal("42").1, Value::Int8(42));
        assert_eq!(parse_literal("300").1, Value::Int16(300));
        assert_eq!(parse_literal("70000").1, Value::Int32(70_000));
        assert_eq!(parse_literal("99999999999").1, Value::Int64(99_999_999_999));
        assert_eq!(parse_literal("1.0").1, Value::Int8(1));
        assert_eq!(parse_literal("1E3").1, Value::Int16(1000));
        assert_eq!(parse_literal("1.5").1, Value::Float32(1.5));
        assert_eq!(parse_literal("2024-01-02").1, Value::Date(19_724));
        assert_eq!(parse_literal("12:34:56.789Z").1, Value::Time(45_296_789));
        assert_eq!(parse_literal("2024-01-02T12:34:56.789Z").1, Value::Timestamp(1_704_198_896_789));
        assert_eq!(parse_literal("[1,2,3]").0.map(|s| s.kind), Some(Kind::Array(Box::new(Schema::new(Kind::Int8)))));
        assert_eq!(parse_literal("abc,def").1, Value::String("abc,def".into()));
        assert_eq!(parse_literal("").1, Value::String(String::new()));
    }
}
