//! `Cast$Key` / `$Value`: a whole key or value, or some of its fields, cast to a primitive type
//! as Connect 4.1.1 casts them: Java's narrowing for numbers (a float truncates, an int wraps),
//! strict parsing of text, `true` only for `"true"`, Java's `toString` for numbers when casting to
//! text (`1.0E10`), a timestamp as ISO text in UTC, bytes as base64. A whole-value cast keeps the
//! schema's name and parameters (a Timestamp cast to int64 is still named Timestamp), a field
//! cast gives the field a plain schema of its new type.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::error::DataError;
use crate::schema::{Field, Kind, Schema};
use crate::value::Value;

use super::support::{Conf, copy_basics, field_value, invalid, java_class, map_get, map_put, require_map, require_struct, split_list};
use super::timestamp::DateFormat;
use super::{Record, Side, Transform};

/// A type Cast casts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Int8,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    Boolean,
    String,
}

impl Target {
    fn parse(name: &str) -> Result<Self, String> {
        Ok(match name.to_ascii_uppercase().as_str() {
            "INT8" => Target::Int8,
            "INT16" => Target::Int16,
            "INT32" => Target::Int32,
            "INT64" => Target::Int64,
            "FLOAT32" => Target::Float32,
            "FLOAT64" => Target::Float64,
            "BOOLEAN" => Target::Boolean,
            "STRING" => Target::String,
            upper @ ("BYTES" | "ARRAY" | "MAP" | "STRUCT") => {
                return Err(format!(
                    "Cast transformation does not support casting to {upper}; supported types are [INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING]"
                ));
            }
            upper => {
                return Err(format!(
                    "Invalid value java.lang.IllegalArgumentException: No enum constant org.apache.kafka.connect.data.Schema.Type.{upper} \
                     for configuration Invalid type found in casting spec: {name}"
                ));
            }
        })
    }

    fn kind(self) -> Kind {
        match self {
            Target::Int8 => Kind::Int8,
            Target::Int16 => Kind::Int16,
            Target::Int32 => Kind::Int32,
            Target::Int64 => Kind::Int64,
            Target::Float32 => Kind::Float32,
            Target::Float64 => Kind::Float64,
            Target::Boolean => Kind::Boolean,
            Target::String => Kind::String,
        }
    }
}

/// What to cast.
enum Spec {
    Whole(Target),
    Fields(Vec<(String, Target)>),
}

/// `Cast$Key` / `$Value`.
pub struct Cast {
    side: Side,
    spec: Spec,
    with_default: bool,
}

impl Cast {
    /// From its keys.
    pub fn new(side: Side, conf: &Conf<'_>) -> Result<Self, String> {
        let raw = conf.required("spec")?;
        let entries = split_list(raw);
        if entries.is_empty() {
            return Err("Must specify at least one field to cast.".into());
        }
        let mut whole = None;
        let mut fields = Vec::new();
        for entry in &entries {
            let parts: Vec<&str> = entry.split(':').map(str::trim).collect();
            let parts: Vec<&str> = match parts.as_slice() {
                [rest @ .., ""] if !rest.is_empty() => rest.to_vec(),
                p => p.to_vec(),
            };
            match parts.as_slice() {
                [ty] => whole = Some(Target::parse(ty)?),
                [field, ty] => fields.push((field.to_string(), Target::parse(ty)?)),
                _ => {
                    return Err(invalid(&format!("[{}]", entries.join(", ")), "renames", &format!("Invalid rename mapping: {entry}")));
                }
            }
        }
        let spec = match (whole, fields.is_empty(), entries.len()) {
            (Some(t), true, 1) => Spec::Whole(t),
            (Some(_), ..) => {
                return Err(
                    "Cast transformations that specify a type to cast the entire value to may only specify a single cast in their spec"
                        .into(),
                );
            }
            (None, ..) => Spec::Fields(fields),
        };
        Ok(Self { side, spec, with_default: conf.replace_null_with_default()? })
    }
}

impl Transform for Cast {
    fn apply(&self, record: Record) -> Result<Option<Record>, DataError> {
        let (schema, value) = record.operating(self.side);
        if value.is_null() {
            return Ok(Some(record));
        }
        let (schema, value) = match (&self.spec, schema) {
            (Spec::Whole(target), None) => (None, cast(None, value, *target)?),
            (Spec::Fields(fields), None) => {
                let entries = require_map(value, "cast types")?;
                let mut out = entries.to_vec();
                for (name, target) in fields {
                    let v = map_get(entries, name).cloned().unwrap_or(Value::Null);
                    map_put(&mut out, name, cast(None, &v, *target)?);
                }
                (None, Value::Map(out))
            }
            (Spec::Whole(target), Some(schema)) => {
                let mut new_schema = copy_basics(schema, target.kind());
                new_schema.optional = schema.optional;
                new_schema.default = schema.default.as_ref().map(|d| cast(Some(schema), d, *target)).transpose()?;
                (Some(new_schema), cast(Some(schema), value, *target)?)
            }
            (Spec::Fields(casts), Some(schema)) => {
                let fields = require_struct(value, "cast types")?;
                let target_of = |name: &str| casts.iter().find(|(n, _)| n == name).map(|(_, t)| *t);
                let mut new_fields = Vec::with_capacity(schema.fields().len());
                let mut values = Vec::with_capacity(schema.fields().len());
                for f in schema.fields() {
                    let v = field_value(fields, schema, &f.name, self.with_default);
                    match target_of(&f.name) {
                        Some(target) => {
                            let mut s = Schema::new(target.kind());
                            s.optional = f.schema.optional;
                            s.default = f.schema.default.as_ref().map(|d| cast(Some(&f.schema), d, target)).transpose()?;
                            new_fields.push(Field::new(&f.name, s));
                            values.push((f.name.clone(), cast(Some(&f.schema), &v, target)?));
                        }
                        None => {
                            new_fields.push(f.clone());
                            values.push((f.name.clone(), v));
                        }
                    }
                }
                let mut new_schema = copy_basics(schema, Kind::Struct(new_fields));
                new_schema.optional = schema.optional;
                (Some(new_schema), Value::Struct(values))
            }
        };
        Ok(Some(record.with(self.side, schema, value)))
    }
}

/// A number as Java holds it before narrowing.
enum Num {
    Whole(i64),
    Fraction(f64),
    Decimal(crate::decimal::Decimal),
}

/// `castValueToType`.
fn cast(schema: Option<&Schema>, value: &Value, target: Target) -> Result<Value, DataError> {
    if value.is_null() {
        return Ok(Value::Null);
    }
    let supported = "[INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES]";
    let from_kind = match schema {
        Some(s) => s.kind.clone(),
        None => match value {
            Value::Date(_) | Value::Time(_) | Value::Timestamp(_) | Value::Decimal(_) => {
                return Err(DataError::new(format!(
                    "Cast transformation was passed a value of type class {} which is not supported by Connect's data API",
                    java_class(value)
                )));
            }
            _ => kind_of(value),
        },
    };
    if matches!(from_kind, Kind::Array(_) | Kind::Map(..) | Kind::Struct(_)) {
        return Err(DataError::new(format!(
            "Cast transformation does not support casting from {}; supported types are {supported}",
            from_kind.name().to_ascii_uppercase()
        )));
    }
    if target == Target::String {
        return Ok(Value::String(text_of(value)));
    }
    // A logical value is encoded first (a Decimal stays a number).
    let num = match value {
        Value::Int8(v) => Num::Whole(i64::from(*v)),
        Value::Int16(v) => Num::Whole(i64::from(*v)),
        Value::Int32(v) | Value::Date(v) | Value::Time(v) => Num::Whole(i64::from(*v)),
        Value::Int64(v) | Value::Timestamp(v) => Num::Whole(*v),
        Value::Float32(v) => Num::Fraction(f64::from(*v)),
        Value::Float64(v) => Num::Fraction(*v),
        Value::Decimal(d) => Num::Decimal(*d),
        Value::Boolean(b) => Num::Whole(i64::from(*b)),
        Value::String(s) => return parse_text(s, target),
        other => return Err(DataError::new(format!("Unexpected type in Cast transformation: class {}", java_class(other)))),
    };
    let long = || match &num {
        Num::Whole(v) => *v,
        Num::Fraction(f) => *f as i64,
        // A scale too large for a power of ten leaves nothing before the point.
        Num::Decimal(d) => 10_i128.checked_pow(d.scale.max(0).unsigned_abs()).map_or(0, |p| d.unscaled / p) as i64,
    };
    let int = || match &num {
        Num::Fraction(f) => *f as i32,
        _ => long() as i32,
    };
    let double = || match &num {
        Num::Whole(v) => *v as f64,
        Num::Fraction(f) => *f,
        Num::Decimal(d) => d.to_f64(),
    };
    Ok(match (target, value) {
        (Target::Boolean, Value::Boolean(b)) => Value::Boolean(*b),
        (Target::Boolean, _) => Value::Boolean(long() != 0),
        (Target::Int8, _) => Value::Int8(int() as i8),
        (Target::Int16, _) => Value::Int16(int() as i16),
        (Target::Int32, _) => Value::Int32(int()),
        (Target::Int64, _) => Value::Int64(long()),
        (Target::Float32, _) => Value::Float32(double() as f32),
        (Target::Float64, _) => Value::Float64(double()),
        (Target::String, _) => Value::String(text_of(value)),
    })
}

fn kind_of(value: &Value) -> Kind {
    match value {
        Value::Boolean(_) => Kind::Boolean,
        Value::Int8(_) => Kind::Int8,
        Value::Int16(_) => Kind::Int16,
        Value::Int32(_) => Kind::Int32,
        Value::Int64(_) => Kind::Int64,
        Value::Float32(_) => Kind::Float32,
        Value::Float64(_) => Kind::Float64,
        Value::Bytes(_) => Kind::Bytes,
        Value::Array(_) => Kind::Array(Box::new(Schema::new(Kind::String))),
        Value::Map(_) => Kind::Map(Box::new(Schema::new(Kind::String)), Box::new(Schema::new(Kind::String))),
        Value::Struct(_) => Kind::Struct(Vec::new()),
        _ => Kind::String,
    }
}

/// Text to a number or boolean, as Java's `parseX` reads it.
fn parse_text(text: &str, target: Target) -> Result<Value, DataError> {
    let range = || DataError::new(format!("Value ({text}) was out of range for requested data type"));
    Ok(match target {
        Target::Int8 => Value::Int8(text.parse().map_err(|_| range())?),
        Target::Int16 => Value::Int16(text.parse().map_err(|_| range())?),
        Target::Int32 => Value::Int32(text.parse().map_err(|_| range())?),
        Target::Int64 => Value::Int64(text.parse().map_err(|_| range())?),
        Target::Float32 => Value::Float32(text.trim().parse().map_err(|_| range())?),
        Target::Float64 => Value::Float64(text.trim().parse().map_err(|_| range())?),
        Target::Boolean => Value::Boolean(text.eq_ignore_ascii_case("true")),
        Target::String => Value::String(text.to_string()),
    })
}

/// A value as Connect's Cast writes it as text.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Boolean(b) => b.to_string(),
        Value::Int8(v) => v.to_string(),
        Value::Int16(v) => v.to_string(),
        Value::Int32(v) => v.to_string(),
        Value::Int64(v) => v.to_string(),
        Value::Float32(v) => java_float(f64::from(*v), format!("{v}"), format!("{v:e}")),
        Value::Float64(v) => java_float(*v, format!("{v}"), format!("{v:e}")),
        Value::Decimal(d) => d.to_string(),
        Value::Bytes(b) => STANDARD.encode(b),
        Value::Date(days) => date_text(i64::from(*days) * 86_400_000),
        Value::Time(ms) => date_text(i64::from(*ms)),
        Value::Timestamp(ms) => date_text(*ms),
        other => format!("{other:?}"),
    }
}

/// `Values.dateFormatFor`: a time of day, a date, or a timestamp, in UTC.
fn date_text(ms: i64) -> String {
    let pattern = if ms < 86_400_000 {
        "HH:mm:ss.SSS'Z'"
    } else if ms % 86_400_000 == 0 {
        "yyyy-MM-dd"
    } else {
        "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
    };
    DateFormat::new(pattern).map(|f| f.format(ms)).unwrap_or_default()
}

/// Java's `Double.toString` / `Float.toString`: plain between 10^-3 and 10^7 (always with a
/// fraction), else `d.dddE±n`. `plain` and `sci` are Rust's shortest forms of the same value.
fn java_float(v: f64, plain: String, sci: String) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    let a = v.abs();
    if a == 0.0 || (1e-3..1e7).contains(&a) {
        return if plain.contains('.') { plain } else { format!("{plain}.0") };
    }
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let mantissa = if mantissa.contains('.') { mantissa.to_string() } else { format!("{mantissa}.0") };
    format!("{mantissa}E{exp}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decimal_whose_scale_is_past_any_power_of_ten_casts_to_zero() {
        let huge = Value::Decimal(crate::decimal::Decimal { unscaled: 5, scale: 128 });
        assert_eq!(cast(Some(&Schema::decimal(128)), &huge, Target::Int64).expect("cast"), Value::Int64(0));
        assert!(crate::decimal::Decimal::from_bytes(&[5], i32::MIN).is_err(), "a scale from a record is bounded");
        assert!(crate::decimal::Decimal::parse("0", i32::MAX).is_err());
    }

    #[test]
    fn casts_narrow_and_print_as_java_does() {
        assert_eq!(cast(None, &Value::Float64(1.0e10), Target::String).expect("cast"), Value::String("1.0E10".into()));
        assert_eq!(cast(None, &Value::Float32(0.1), Target::String).expect("cast"), Value::String("0.1".into()));
        assert_eq!(cast(None, &Value::Float64(1_234_567.0), Target::String).expect("cast"), Value::String("1234567.0".into()));
        assert_eq!(cast(None, &Value::String("12".into()), Target::Int32).expect("cast"), Value::Int32(12));
        assert_eq!(cast(None, &Value::String("yes".into()), Target::Boolean).expect("cast"), Value::Boolean(false));
        assert_eq!(cast(None, &Value::Int32(300), Target::Int8).expect("cast"), Value::Int8(44));
        assert_eq!(cast(None, &Value::Float64(0.5), Target::Boolean).expect("cast"), Value::Boolean(false));
        assert_eq!(
            cast(None, &Value::String("300".into()), Target::Int8).expect_err("range").to_string(),
            "Value (300) was out of range for requested data type"
        );
        let ts = Schema::timestamp();
        assert_eq!(
            cast(Some(&ts), &Value::Timestamp(1_700_000_000_123), Target::String).expect("cast"),
            Value::String("2023-11-14T22:13:20.123Z".into())
        );
        assert_eq!(cast(Some(&ts), &Value::Timestamp(5), Target::Int64).expect("cast"), Value::Int64(5));
        assert_eq!(cast(None, &Value::Bytes(vec![1, 2, 3]), Target::String).expect("cast"), Value::String("AQID".into()));
        assert!(cast(None, &Value::Timestamp(5), Target::Int64).expect_err("schemaless date").to_string().contains("java.util.Date"));
    }
}
