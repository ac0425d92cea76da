//! Connect values written straight to JSON text, without building a `serde_json::Value` first (a
//! source writes every row through this: it is the hot path of the JSON formats). A timestamp,
//! date or time is its number; bytes are base64; a decimal is base64 of its unscaled bytes
//! (`JsonConverter`'s `decimal.format=BASE64`) or an exact JSON number (`JsonSchemaConverter`).
//! The value is written as it is: checking it against a schema is the caller's (a source's rows
//! were typed by the very schema they are written under).

use std::fmt::Write;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::error::DataError;
use crate::value::Value;

/// How a decimal is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decimals {
    /// Base64 of the unscaled value's bytes, in a string (`JsonConverter`).
    Base64,
    /// Its exact digits as a JSON number (`JsonSchemaConverter`).
    Number,
}

/// Appends `value` as JSON text to `out`.
pub fn write(value: &Value, decimals: Decimals, out: &mut String) -> Result<(), DataError> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Boolean(v) => out.push_str(if *v { "true" } else { "false" }),
        Value::Int8(v) => number(out, v),
        Value::Int16(v) => number(out, v),
        Value::Int32(v) | Value::Date(v) | Value::Time(v) => number(out, v),
        Value::Int64(v) | Value::Timestamp(v) => number(out, v),
        Value::Float32(v) if v.is_finite() => number(out, v),
        Value::Float64(v) if v.is_finite() => number(out, v),
        Value::Float32(_) | Value::Float64(_) => return Err(DataError::new("JSON has no NaN or infinity")),
        Value::String(v) => string(v, out),
        Value::Bytes(v) => string(&STANDARD.encode(v), out),
        Value::Decimal(d) => match decimals {
            Decimals::Base64 => string(&STANDARD.encode(d.to_bytes()), out),
            Decimals::Number => number(out, d),
        },
        Value::Array(list) => {
            out.push('[');
            for (i, v) in list.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(v, decimals, out)?;
            }
            out.push(']');
        }
        Value::Map(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                let key = k.as_str().ok_or_else(|| DataError::new(format!("a map key is {}, not a string", k.type_name())))?;
                if i > 0 {
                    out.push(',');
                }
                string(key, out);
                out.push(':');
                write(v, decimals, out)?;
            }
            out.push('}');
        }
        Value::Struct(fields) => {
            out.push('{');
            for (i, (name, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(name, out);
                out.push(':');
                write(v, decimals, out).map_err(|e| e.at(format!("field {name}")))?;
            }
            out.push('}');
        }
    }
    Ok(())
}

fn number(out: &mut String, v: &impl std::fmt::Display) {
    let _ = write!(out, "{v}");
}

/// `text` as a JSON string, escaped as serde_json escapes it.
fn string(text: &str, out: &mut String) {
    out.push('"');
    let mut start = 0;
    for (i, b) in text.bytes().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&text[start..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decimal::Decimal;

    #[test]
    fn values_write_as_serde_json_would_and_decimals_either_way() {
        let v = Value::Struct(vec![
            ("s".into(), Value::String("a \"q\" \\ é\n\u{1}".into())),
            ("f".into(), Value::Float64(1.5)),
            ("t".into(), Value::Timestamp(1_714_557_600_000)),
            ("d".into(), Value::Decimal(Decimal { unscaled: 12_345, scale: 2 })),
            ("m".into(), Value::Map(vec![(Value::String("k".into()), Value::Null)])),
        ]);
        let mut text = String::new();
        write(&v, Decimals::Base64, &mut text).expect("write");
        let parsed: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(parsed["s"], "a \"q\" \\ é\n\u{1}");
        assert_eq!(parsed["d"], "MDk=");
        assert_eq!(parsed["t"], 1_714_557_600_000_i64);
        let mut number = String::new();
        write(&v, Decimals::Number, &mut number).expect("write");
        assert!(number.contains(r#""d":123.45"#), "{number}");
        assert!(write(&Value::Float64(f64::NAN), Decimals::Number, &mut String::new()).is_err());
    }
}
