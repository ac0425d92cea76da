//! Kafka Connect's `Schema`: a type (primitive, array, map or struct), whether it is optional,
//! and its name, version, doc, parameters and default. Connect's logical types are named
//! schemas over a primitive (`Decimal` over bytes with a `scale` parameter, `Date` and `Time`
//! over int32, `Timestamp` over int64): [`Schema::logical`] tells which one a schema is.

use std::collections::BTreeMap;

use crate::value::Value;

/// Connect's logical type names: one definition, shared with the component that writes them.
pub use snow_core::source::schema::{DATE, DECIMAL, TIME, TIMESTAMP};
/// The parameter that holds a decimal's scale.
pub const SCALE: &str = "scale";

/// A schema's type.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// 8-bit signed integer.
    Int8,
    /// 16-bit signed integer.
    Int16,
    /// 32-bit signed integer.
    Int32,
    /// 64-bit signed integer.
    Int64,
    /// 32-bit float.
    Float32,
    /// 64-bit float.
    Float64,
    /// `true` or `false`.
    Boolean,
    /// UTF-8 text.
    String,
    /// Bytes.
    Bytes,
    /// A list of values of one schema.
    Array(Box<Schema>),
    /// Keys of one schema to values of another.
    Map(Box<Schema>, Box<Schema>),
    /// Named fields, in order.
    Struct(Vec<Field>),
}

impl Kind {
    /// Connect's name of the type (`int32`, `struct`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Int8 => "int8",
            Kind::Int16 => "int16",
            Kind::Int32 => "int32",
            Kind::Int64 => "int64",
            Kind::Float32 => "float32",
            Kind::Float64 => "float64",
            Kind::Boolean => "boolean",
            Kind::String => "string",
            Kind::Bytes => "bytes",
            Kind::Array(_) => "array",
            Kind::Map(..) => "map",
            Kind::Struct(_) => "struct",
        }
    }

    /// The type's name in `JsonConverter`'s schema envelope, which calls the floats `float` and
    /// `double` (`Schema.Type`'s names are `float32` and `float64`).
    pub fn json_name(&self) -> &'static str {
        match self {
            Kind::Float32 => "float",
            Kind::Float64 => "double",
            other => other.name(),
        }
    }

    /// The primitive type called `name` (either naming of the floats), if it is one.
    pub fn primitive(name: &str) -> Option<Kind> {
        Some(match name {
            "int8" => Kind::Int8,
            "int16" => Kind::Int16,
            "int32" => Kind::Int32,
            "int64" => Kind::Int64,
            "float32" | "float" => Kind::Float32,
            "float64" | "double" => Kind::Float64,
            "boolean" => Kind::Boolean,
            "string" => Kind::String,
            "bytes" => Kind::Bytes,
            _ => return None,
        })
    }
}

/// One field of a struct schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The field's name.
    pub name: String,
    /// Its schema.
    pub schema: Schema,
}

/// A Connect schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    /// The type.
    pub kind: Kind,
    /// Whether null is a valid value.
    pub optional: bool,
    /// The schema's name (a record's name; a logical type's name).
    pub name: Option<String>,
    /// The schema's version.
    pub version: Option<i32>,
    /// Its documentation.
    pub doc: Option<String>,
    /// Parameters (a decimal's `scale`, converters' extras).
    pub parameters: BTreeMap<String, String>,
    /// The default value.
    pub default: Option<Value>,
}

/// Connect's logical types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logical {
    /// An exact decimal with this scale, over bytes (the unscaled value, big-endian two's complement).
    Decimal {
        /// Digits after the point.
        scale: i32,
    },
    /// Days since the epoch.
    Date,
    /// Milliseconds since midnight.
    Time,
    /// Milliseconds since the epoch.
    Timestamp,
}

impl Schema {
    /// A required schema of `kind` with nothing else set.
    pub fn new(kind: Kind) -> Self {
        Self { kind, optional: false, name: None, version: None, doc: None, parameters: BTreeMap::new(), default: None }
    }

    /// The same schema, optional.
    pub fn optional(mut self) -> Self {
        self.optional = true;
        self
    }

    /// The same schema, named.
    pub fn named(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    /// A struct of `fields`.
    pub fn record(name: &str, fields: Vec<Field>) -> Self {
        Self::new(Kind::Struct(fields)).named(name)
    }

    /// Connect's `Timestamp`.
    pub fn timestamp() -> Self {
        Self { version: Some(1), ..Self::new(Kind::Int64).named(TIMESTAMP) }
    }

    /// Connect's `Date`.
    pub fn date() -> Self {
        Self { version: Some(1), ..Self::new(Kind::Int32).named(DATE) }
    }

    /// Connect's `Time`.
    pub fn time() -> Self {
        Self { version: Some(1), ..Self::new(Kind::Int32).named(TIME) }
    }

    /// Connect's `Decimal` with `scale`.
    pub fn decimal(scale: i32) -> Self {
        let mut s = Self { version: Some(1), ..Self::new(Kind::Bytes).named(DECIMAL) };
        s.parameters.insert(SCALE.into(), scale.to_string());
        s
    }

    /// Which logical type this schema is, if any (by name and underlying type, as Connect decides).
    pub fn logical(&self) -> Option<Logical> {
        match (self.name.as_deref()?, &self.kind) {
            (DECIMAL, Kind::Bytes) => Some(Logical::Decimal { scale: self.parameters.get(SCALE)?.parse().ok()? }),
            (DATE, Kind::Int32) => Some(Logical::Date),
            (TIME, Kind::Int32) => Some(Logical::Time),
            (TIMESTAMP, Kind::Int64) => Some(Logical::Timestamp),
            _ => None,
        }
    }

    /// The fields of a struct schema (none for other types).
    pub fn fields(&self) -> &[Field] {
        match &self.kind {
            Kind::Struct(fields) => fields,
            _ => &[],
        }
    }

    /// The field called `name` of a struct schema.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields().iter().find(|f| f.name == name)
    }
}

impl Field {
    /// A field called `name` of `schema`.
    pub fn new(name: &str, schema: Schema) -> Self {
        Self { name: name.to_string(), schema }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logical_types_are_recognised_by_name_and_type() {
        assert_eq!(Schema::decimal(2).logical(), Some(Logical::Decimal { scale: 2 }));
        assert_eq!(Schema::timestamp().logical(), Some(Logical::Timestamp));
        assert_eq!(Schema::new(Kind::String).named(TIMESTAMP).logical(), None, "a timestamp name over a string is not a timestamp");
        assert_eq!(Schema::new(Kind::Bytes).named(DECIMAL).logical(), None, "a decimal needs its scale");
    }
}
