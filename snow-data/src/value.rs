//! Connect's values. A value is read with its schema (a struct's fields are in the schema's
//! order); a schemaless value (Connect's `null` schema) carries its own shape: Connect's
//! `JsonConverter` reads a schemaless integer as int64, a fraction as float64, an object as a map
//! with string keys. Logical values have variants of their own so that a transform or converter
//! never mistakes a timestamp for a plain int64.

use crate::decimal::Decimal;

/// A Connect value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// No value (an optional schema's null, or a tombstone).
    Null,
    /// `true` or `false`.
    Boolean(bool),
    /// int8.
    Int8(i8),
    /// int16.
    Int16(i16),
    /// int32.
    Int32(i32),
    /// int64.
    Int64(i64),
    /// float32.
    Float32(f32),
    /// float64.
    Float64(f64),
    /// Text.
    String(String),
    /// Bytes.
    Bytes(Vec<u8>),
    /// A list.
    Array(Vec<Value>),
    /// Key/value pairs, in their order.
    Map(Vec<(Value, Value)>),
    /// A struct's fields, by name, in the schema's order.
    Struct(Vec<(String, Value)>),
    /// Connect's `Decimal`.
    Decimal(Decimal),
    /// Connect's `Date`: days since the epoch.
    Date(i32),
    /// Connect's `Time`: milliseconds since midnight.
    Time(i32),
    /// Connect's `Timestamp`: milliseconds since the epoch.
    Timestamp(i64),
}

impl Value {
    /// True for [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The text of a string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The field `name` of a struct, or the entry under the string key `name` of a map.
    pub fn get(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Struct(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            Value::Map(entries) => entries.iter().find(|(k, _)| k.as_str() == Some(name)).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The field `name` of a struct, expected at `index` (its place in the schema, where structs
    /// built against that schema hold it): found there without a search, else by name.
    pub fn field(&self, index: usize, name: &str) -> Option<&Value> {
        match self {
            Value::Struct(fields) => match fields.get(index) {
                Some((n, v)) if n == name => Some(v),
                _ => self.get(name),
            },
            _ => None,
        }
    }

    /// What kind of value this is, for error messages (`int32`, `struct`, `Timestamp`...).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Boolean(_) => "boolean",
            Value::Int8(_) => "int8",
            Value::Int16(_) => "int16",
            Value::Int32(_) => "int32",
            Value::Int64(_) => "int64",
            Value::Float32(_) => "float32",
            Value::Float64(_) => "float64",
            Value::String(_) => "string",
            Value::Bytes(_) => "bytes",
            Value::Array(_) => "array",
            Value::Map(_) => "map",
            Value::Struct(_) => "struct",
            Value::Decimal(_) => "Decimal",
            Value::Date(_) => "Date",
            Value::Time(_) => "Time",
            Value::Timestamp(_) => "Timestamp",
        }
    }
}
