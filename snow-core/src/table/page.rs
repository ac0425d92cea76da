//! A page of Table API rows kept as raw JSON text: values pass through to Kafka without being
//! re-encoded. Only the fields the cursor needs are decoded from each row.
//!
//! A cursor field may be a plain string or, with `sysparm_display_value=all`, an object whose
//! `value` member holds the raw value; both are read.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

/// One row of a page: its raw JSON text and the decoded cursor fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRow<'a> {
    /// The row exactly as ServiceNow sent it.
    pub raw: &'a str,
    /// The id field's value (`sys_id`), if present.
    pub id: Option<Cow<'a, str>>,
    /// The timestamp field's value, if present.
    pub timestamp: Option<Cow<'a, str>>,
    /// `sys_mod_count`, if present.
    pub mod_count: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    result: Vec<&'a RawValue>,
}

/// Splits a `{"result":[...]}` body into rows and decodes `id_field` and `timestamp_field` of each.
pub fn parse_page<'a>(body: &'a [u8], id_field: &str, timestamp_field: &str) -> Result<Vec<PageRow<'a>>, String> {
    let envelope: Envelope<'a> = serde_json::from_slice(body).map_err(|e| format!("not a Table API list answer: {e}"))?;
    envelope
        .result
        .into_iter()
        .enumerate()
        .map(|(i, raw)| {
            let seed = RowSeed { id_field, timestamp_field };
            let mut de = serde_json::Deserializer::from_str(raw.get());
            let (id, timestamp, mod_count) = seed.deserialize(&mut de).map_err(|e| format!("row {i} of the page: {e}"))?;
            Ok(PageRow { raw: raw.get(), id, timestamp, mod_count })
        })
        .collect()
}

type CursorFields<'a> = (Option<Cow<'a, str>>, Option<Cow<'a, str>>, Option<Cow<'a, str>>);

struct RowSeed<'f> {
    id_field: &'f str,
    timestamp_field: &'f str,
}

impl<'de> DeserializeSeed<'de> for RowSeed<'_> {
    type Value = CursorFields<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowSeed<'_> {
    type Value = CursorFields<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a row object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut id, mut ts, mut mod_count) = (None, None, None);
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            let slot = if key == self.id_field {
                &mut id
            } else if key == self.timestamp_field {
                &mut ts
            } else if key == "sys_mod_count" {
                &mut mod_count
            } else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            *slot = map.next_value::<FieldValue<'de>>()?.0;
        }
        Ok((id, ts, mod_count))
    }
}

/// A field value: `"text"`, `{"value":"text", ...}` or `null`.
struct FieldValue<'a>(Option<Cow<'a, str>>);

impl<'de> Deserialize<'de> for FieldValue<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FieldValue<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, an object with a value member, or null")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(FieldValue(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(FieldValue(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(FieldValue(Some(Cow::Owned(v))))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(FieldValue(None))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(FieldValue(Some(Cow::Owned(v.to_string()))))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(FieldValue(Some(Cow::Owned(v.to_string()))))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut value = None;
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key == "value" {
                        value = map.next_value::<FieldValue<'de>>()?.0;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(FieldValue(value))
            }
        }
        deserializer.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_raw_rows_and_decodes_cursor_fields() {
        let body = br#"{"result":[
            {"number":"INC1","sys_id":"a1","sys_updated_on":"2024-01-01 00:00:00","sys_mod_count":"2","caller_id":{"link":"x","value":"u1"}},
            {"sys_id":{"display_value":"a2","value":"a2"},"sys_updated_on":{"display_value":"01/01/2024","value":"2024-01-01 00:00:01"}},
            {"sys_id":"a\u0033","sys_updated_on":null}
        ]}"#;
        let rows = parse_page(body, "sys_id", "sys_updated_on").unwrap();
        assert_eq!(rows.len(), 3);
        assert!(rows[0].raw.starts_with(r#"{"number":"INC1""#));
        assert_eq!(rows[0].id.as_deref(), Some("a1"));
        assert_eq!(rows[0].mod_count.as_deref(), Some("2"));
        assert_eq!(rows[1].timestamp.as_deref(), Some("2024-01-01 00:00:01"));
        assert_eq!(rows[2].id.as_deref(), Some("a3"));
        assert_eq!(rows[2].timestamp, None);
    }

    #[test]
    fn malformed_body_is_an_error() {
        assert!(parse_page(br#"{"result":[{"sys_id":"a"#, "sys_id", "sys_updated_on").is_err());
        assert!(parse_page(br#"{"error":{"message":"x"}}"#, "sys_id", "sys_updated_on").is_err());
        assert!(parse_page(br#"{"result":["x"]}"#, "sys_id", "sys_updated_on").unwrap_err().contains("row 0"));
    }
}
