//! Avro's binary encoding of a Connect value, under the Avro schema [`super::from_connect`]
//! gives for its Connect schema: zig-zag varints for int and long, little-endian floats,
//! length-prefixed bytes and strings, a union's branch index before its value (`0` null, `1`
//! the value), records as their fields in order, arrays and maps as one block and an end marker.

use crate::binary_io;
use crate::error::DataError;
use crate::schema::{Kind, Logical, Schema};
use crate::value::Value;

/// `value` under `schema`, appended to `out`.
pub fn encode(schema: &Schema, value: &Value, out: &mut Vec<u8>) -> Result<(), DataError> {
    if schema.optional {
        if value.is_null() {
            out.push(0);
            return Ok(());
        }
        out.push(2); // zig-zag 1: the second branch
    }
    let value = match (value, &schema.default) {
        (Value::Null, Some(d)) => d,
        _ => value,
    };
    let mismatch =
        || DataError::new(format!("a {} value does not fit a {} schema", value.type_name(), crate::connect_json::type_label(schema)));
    match (schema.logical(), &schema.kind, value) {
        (Some(Logical::Decimal { scale }), _, Value::Decimal(d)) => bytes(&d.rescale(scale)?.to_bytes(), out),
        (Some(Logical::Date), _, Value::Date(v)) | (Some(Logical::Time), _, Value::Time(v)) => long(i64::from(*v), out),
        (Some(Logical::Timestamp), _, Value::Timestamp(v)) => long(*v, out),
        (Some(_), ..) => return Err(mismatch()),
        (None, Kind::Int8, Value::Int8(v)) => long(i64::from(*v), out),
        (None, Kind::Int16, Value::Int16(v)) => long(i64::from(*v), out),
        (None, Kind::Int32, Value::Int32(v)) => long(i64::from(*v), out),
        (None, Kind::Int64, Value::Int64(v)) => long(*v, out),
        (None, Kind::Float32, Value::Float32(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (None, Kind::Float64, Value::Float64(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (None, Kind::Boolean, Value::Boolean(v)) => out.push(u8::from(*v)),
        (None, Kind::String, Value::String(v)) => bytes(v.as_bytes(), out),
        (None, Kind::Bytes, Value::Bytes(v)) => bytes(v, out),
        (None, Kind::Array(items), Value::Array(list)) => {
            if !list.is_empty() {
                long(list.len() as i64, out);
                for v in list {
                    encode(items, v, out)?;
                }
            }
            out.push(0);
        }
        (None, Kind::Map(_, values), Value::Map(entries)) => {
            if !entries.is_empty() {
                long(entries.len() as i64, out);
                for (k, v) in entries {
                    bytes(k.as_str().ok_or_else(mismatch)?.as_bytes(), out);
                    encode(values, v, out)?;
                }
            }
            out.push(0);
        }
        (None, Kind::Struct(fields), Value::Struct(_)) => {
            for (i, f) in fields.iter().enumerate() {
                encode(&f.schema, value.field(i, &f.name).unwrap_or(&Value::Null), out).map_err(|e| e.at(format!("field {}", f.name)))?;
            }
        }
        (None, _, Value::Null) => return Err(DataError::new(format!("a null value for a required {}", schema.kind.name()))),
        _ => return Err(mismatch()),
    }
    Ok(())
}

/// A zig-zag varint.
pub fn long(v: i64, out: &mut Vec<u8>) {
    binary_io::varint(binary_io::zigzag(v), out);
}

/// Length-prefixed bytes.
pub fn bytes(b: &[u8], out: &mut Vec<u8>) {
    long(b.len() as i64, out);
    out.extend_from_slice(b);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Field;

    #[test]
    fn values_are_written_in_avros_binary_encoding() {
        let mut out = Vec::new();
        for v in [0i64, -1, 1, -64, 64, i64::MAX, i64::MIN] {
            long(v, &mut out);
        }
        assert_eq!(&out[..6], [0, 1, 2, 0x7f, 0x80, 0x01]);
        let schema =
            Schema::record("t", vec![Field::new("a", Schema::new(Kind::String)), Field::new("b", Schema::new(Kind::Int32).optional())]);
        let mut out = Vec::new();
        encode(&schema, &Value::Struct(vec![("a".into(), Value::String("hi".into())), ("b".into(), Value::Null)]), &mut out).expect("enc");
        assert_eq!(out, [4, b'h', b'i', 0]);
        let mut out = Vec::new();
        encode(&schema, &Value::Struct(vec![("a".into(), Value::String("".into())), ("b".into(), Value::Int32(-2))]), &mut out)
            .expect("enc");
        assert_eq!(out, [0, 2, 3]);
        let e = encode(&schema, &Value::Struct(vec![("b".into(), Value::Int32(1))]), &mut Vec::new()).expect_err("required");
        assert!(e.to_string().starts_with("field a: a null value for a required string"), "{e}");
    }
}
