//! Reading Avro's binary encoding under a writer's schema ([`super::parse`]'s node tree) into
//! Connect values. Every length and count is checked against the bytes left before anything is
//! allocated, so a corrupt record is an error naming the byte, never a huge allocation.

use crate::binary_io::{ByteReader, unzigzag};
use crate::decimal::Decimal;
use crate::error::DataError;
use crate::value::Value;

use super::schema::{IntAs, LongAs, Node};

/// The value `bytes` hold under `node`; every byte must be used.
pub fn decode(node: &Node, bytes: &[u8]) -> Result<Value, DataError> {
    let mut r = Reader(ByteReader::new(bytes, "Avro"));
    let v = r.value(node, 0)?;
    if !r.0.done() {
        return Err(DataError::new(format!("{} bytes left after the Avro value (at byte {})", r.0.left(), r.0.at())));
    }
    Ok(v)
}

const MAX_DEPTH: usize = 64;

/// Avro's reads on [`ByteReader`]: zig-zag longs, lengths, blocks, values.
struct Reader<'a>(ByteReader<'a>);

impl Reader<'_> {
    fn err(&self, what: &str) -> DataError {
        self.0.err(what)
    }

    fn long(&mut self) -> Result<i64, DataError> {
        self.0.varint().map(unzigzag)
    }

    fn take(&mut self, n: usize) -> Result<&[u8], DataError> {
        self.0.take(n)
    }

    fn len(&mut self) -> Result<usize, DataError> {
        let n = self.long()?;
        usize::try_from(n).ok().filter(|n| *n <= self.0.left()).ok_or_else(|| self.err(&format!("length {n} does not fit the bytes left")))
    }

    fn int(&mut self) -> Result<i32, DataError> {
        let v = self.long()?;
        i32::try_from(v).map_err(|_| self.err(&format!("{v} does not fit an int")))
    }

    /// The items of an array or map: blocks of a count (negative: a byte size follows) until 0.
    fn blocks(&mut self, mut item: impl FnMut(&mut Self) -> Result<(), DataError>) -> Result<(), DataError> {
        loop {
            let mut count = self.long()?;
            if count == 0 {
                return Ok(());
            }
            if count < 0 {
                count = count.checked_neg().ok_or_else(|| self.err("a block count out of range"))?;
                self.long()?;
            }
            // Each item takes at least one byte except nulls; bound the count by what is left.
            if count as u64 > self.0.left() as u64 + 1 {
                return Err(self.err(&format!("a block of {count} items does not fit the bytes left")));
            }
            for _ in 0..count {
                item(self)?;
            }
        }
    }

    fn value(&mut self, node: &Node, depth: usize) -> Result<Value, DataError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deep"));
        }
        Ok(match node {
            Node::Null => Value::Null,
            Node::Boolean => match self.take(1)?[0] {
                0 => Value::Boolean(false),
                1 => Value::Boolean(true),
                b => return Err(self.err(&format!("boolean byte {b}"))),
            },
            Node::Int(as_) => {
                let v = self.int()?;
                match as_ {
                    IntAs::Int32 => Value::Int32(v),
                    IntAs::Int8 => Value::Int8(i8::try_from(v).map_err(|_| self.err(&format!("{v} does not fit int8")))?),
                    IntAs::Int16 => Value::Int16(i16::try_from(v).map_err(|_| self.err(&format!("{v} does not fit int16")))?),
                    IntAs::Date => Value::Date(v),
                    IntAs::Time => Value::Time(v),
                }
            }
            Node::Long(LongAs::Int64) => Value::Int64(self.long()?),
            Node::Long(LongAs::Timestamp) => Value::Timestamp(self.long()?),
            Node::Float => Value::Float32(f32::from_le_bytes(self.take(4)?.try_into().map_err(|_| self.err("float"))?)),
            Node::Double => Value::Float64(f64::from_le_bytes(self.take(8)?.try_into().map_err(|_| self.err("double"))?)),
            Node::Bytes(scale) => {
                let n = self.len()?;
                let b = self.take(n)?;
                match scale {
                    Some(s) => Value::Decimal(Decimal::from_bytes(b, *s)?),
                    None => Value::Bytes(b.to_vec()),
                }
            }
            Node::Fixed(size, scale) => {
                let b = self.take(*size)?;
                match scale {
                    Some(s) => Value::Decimal(Decimal::from_bytes(b, *s)?),
                    None => Value::Bytes(b.to_vec()),
                }
            }
            Node::String => {
                let n = self.len()?;
                let at = self.0.at();
                let b = self.take(n)?;
                Value::String(
                    String::from_utf8(b.to_vec())
                        .map_err(|_| DataError::new(format!("Avro data broken at byte {at}: a string that is not UTF-8")))?,
                )
            }
            Node::Enum(symbols) => {
                let i = self.long()?;
                let s = usize::try_from(i)
                    .ok()
                    .and_then(|i| symbols.get(i))
                    .ok_or_else(|| self.err(&format!("enum index {i} of {}", symbols.len())))?;
                Value::String(s.clone())
            }
            Node::Array(items) => {
                let mut out = Vec::new();
                self.blocks(|r| {
                    out.push(r.value(items, depth + 1)?);
                    Ok(())
                })?;
                Value::Array(out)
            }
            Node::Map(values) => {
                let mut out = Vec::new();
                self.blocks(|r| {
                    let k = r.value(&Node::String, depth + 1)?;
                    out.push((k, r.value(values, depth + 1)?));
                    Ok(())
                })?;
                Value::Map(out)
            }
            Node::Record(fields) => {
                let mut out = Vec::with_capacity(fields.len());
                for (name, f) in fields {
                    out.push((name.clone(), self.value(f, depth + 1).map_err(|e| e.at(format!("field {name}")))?));
                }
                Value::Struct(out)
            }
            Node::Union(branches) => {
                let i = self.long()?;
                let branch = usize::try_from(i)
                    .ok()
                    .and_then(|i| branches.get(i))
                    .ok_or_else(|| self.err(&format!("union branch {i} of {}", branches.len())))?;
                self.value(branch, depth + 1)?
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::avro::{encode, from_connect, parse};
    use crate::schema::{Field, Kind, Schema};

    #[test]
    fn what_we_encode_decodes_to_the_same_value() {
        let schema = Schema::record(
            "servicenow.incident",
            vec![
                Field::new("sys_id", Schema::new(Kind::String)),
                Field::new("priority", Schema::new(Kind::Int32).optional()),
                Field::new("active", Schema::new(Kind::Boolean).optional()),
                Field::new("cost", Schema::decimal(2).optional()),
                Field::new("opened_at", Schema::timestamp().optional()),
                Field::new("due", Schema::date().optional()),
                Field::new("ratio", Schema::new(Kind::Float64).optional()),
                Field::new("tags", Schema::new(Kind::Array(Box::new(Schema::new(Kind::String)))).optional()),
            ],
        );
        let value = Value::Struct(vec![
            ("sys_id".into(), Value::String("abc".into())),
            ("priority".into(), Value::Int32(3)),
            ("active".into(), Value::Null),
            ("cost".into(), Value::Decimal(Decimal::parse("-12.34", 2).expect("d"))),
            ("opened_at".into(), Value::Timestamp(1_700_000_000_000)),
            ("due".into(), Value::Date(19_700)),
            ("ratio".into(), Value::Float64(0.25)),
            ("tags".into(), Value::Array(vec![Value::String("a".into()), Value::String("b".into())])),
        ]);
        let mut bytes = Vec::new();
        encode(&schema, &value, &mut bytes).expect("encode");
        let (node, _) = parse(&from_connect(&schema).expect("avro").to_string()).expect("parse");
        assert_eq!(decode(&node, &bytes).expect("decode"), value);
    }

    #[test]
    fn corrupt_bytes_are_errors_not_allocations() {
        let (node, _) = parse(r#"{"type":"array","items":"string"}"#).expect("parse");
        for bad in [&[0xfe, 0xff, 0xff, 0xff, 0x0f][..], &[2, 0xff, 0xff, 0xff, 0xff, 0x0f], &[2, 2, b'a'], &[0, 0]] {
            assert!(decode(&node, bad).is_err(), "{bad:?}");
        }
    }
}
