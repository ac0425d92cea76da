//! A protobuf schema file as the registry holds it, whichever way it was written (`.proto` text
//! from Connect and the Java serializers, a base64 `FileDescriptorProto` from Python's and .NET's):
//! its package, imports, messages (with nested ones) and enums. Type names stay as written until
//! [`super::read`] resolves them.

/// One `.proto` file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct File {
    /// `package a.b;` (empty when there is none).
    pub package: String,
    /// The files it imports.
    pub imports: Vec<String>,
    /// Its top-level messages, in order (a record's message indexes count in this order).
    pub messages: Vec<Message>,
    /// Its top-level enums.
    pub enums: Vec<Enum>,
}

/// A message type.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Message {
    /// Its name within its scope.
    pub name: String,
    /// Its fields, in declaration order (oneof members in place).
    pub fields: Vec<FieldDef>,
    /// Messages declared inside it.
    pub nested: Vec<Message>,
    /// Enums declared inside it.
    pub enums: Vec<Enum>,
    /// True for the entry message of a `map<K, V>` field.
    pub map_entry: bool,
}

/// A field of a message.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldDef {
    /// Its name.
    pub name: String,
    /// Its number (the tag on the wire).
    pub number: u32,
    /// How many values it holds and whether an absent one is null.
    pub label: Label,
    /// Its type.
    pub ty: Type,
    /// Confluent's `(confluent.field_meta).params` (a decimal's `scale` and `precision`).
    pub params: Vec<(String, String)>,
}

/// A field's cardinality.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// One value; absent means the type's default (a proto3 plain field, a proto2 `required`).
    Singular,
    /// One value with presence: absent means null (`optional`, a oneof member, proto2 fields).
    Optional,
    /// Any number of values (`repeated`, a map's entries).
    Repeated,
}

/// A field's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Type {
    /// A scalar.
    Scalar(Scalar),
    /// A message or enum, by name as written (`.pkg.Msg` fully qualified, else relative).
    Named(String),
}

/// Protobuf's scalar types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    /// `double`.
    Double,
    /// `float`.
    Float,
    /// `int64`.
    Int64,
    /// `uint64`.
    Uint64,
    /// `int32`.
    Int32,
    /// `fixed64`.
    Fixed64,
    /// `fixed32`.
    Fixed32,
    /// `bool`.
    Bool,
    /// `string`.
    String,
    /// `bytes`.
    Bytes,
    /// `uint32`.
    Uint32,
    /// `sfixed32`.
    Sfixed32,
    /// `sfixed64`.
    Sfixed64,
    /// `sint32`.
    Sint32,
    /// `sint64`.
    Sint64,
}

/// Every scalar with its `.proto` name and its `FieldDescriptorProto.Type` number.
const SCALARS: [(Scalar, &str, i32); 15] = [
    (Scalar::Double, "double", 1),
    (Scalar::Float, "float", 2),
    (Scalar::Int64, "int64", 3),
    (Scalar::Uint64, "uint64", 4),
    (Scalar::Int32, "int32", 5),
    (Scalar::Fixed64, "fixed64", 6),
    (Scalar::Fixed32, "fixed32", 7),
    (Scalar::Bool, "bool", 8),
    (Scalar::String, "string", 9),
    (Scalar::Bytes, "bytes", 12),
    (Scalar::Uint32, "uint32", 13),
    (Scalar::Sfixed32, "sfixed32", 15),
    (Scalar::Sfixed64, "sfixed64", 16),
    (Scalar::Sint32, "sint32", 17),
    (Scalar::Sint64, "sint64", 18),
];

impl Scalar {
    /// The scalar called `name` in a `.proto` file.
    pub fn named(name: &str) -> Option<Self> {
        SCALARS.iter().find(|(_, n, _)| *n == name).map(|(s, ..)| *s)
    }

    /// The scalar with `FieldDescriptorProto.Type` number `n`.
    pub fn numbered(n: i32) -> Option<Self> {
        SCALARS.iter().find(|(.., k)| *k == n).map(|(s, ..)| *s)
    }

    /// Its `.proto` name.
    pub fn name(self) -> &'static str {
        SCALARS.iter().find(|(s, ..)| *s == self).map_or("?", |(_, n, _)| n)
    }

    /// Its wire type when not packed: 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit.
    pub fn wire_type(self) -> u8 {
        match self {
            Scalar::Double | Scalar::Fixed64 | Scalar::Sfixed64 => 1,
            Scalar::Float | Scalar::Fixed32 | Scalar::Sfixed32 => 5,
            Scalar::String | Scalar::Bytes => 2,
            _ => 0,
        }
    }
}

/// An enum type.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Enum {
    /// Its name within its scope.
    pub name: String,
    /// Its values' names and numbers, in order (the first is the default).
    pub values: Vec<(String, i32)>,
}

/// Well-known message types Connect maps to its own types, by full name.
pub mod known {
    /// `google.protobuf.Timestamp` (Connect's `Timestamp`).
    pub const TIMESTAMP: &str = "google.protobuf.Timestamp";
    /// `google.type.Date` (Connect's `Date`).
    pub const DATE: &str = "google.type.Date";
    /// `google.type.TimeOfDay` (Connect's `Time`).
    pub const TIME_OF_DAY: &str = "google.type.TimeOfDay";
    /// `confluent.type.Decimal` (Connect's `Decimal`).
    pub const DECIMAL: &str = "confluent.type.Decimal";
    /// The files that declare them, as imports name them.
    pub const TIMESTAMP_FILE: &str = "google/protobuf/timestamp.proto";
    /// `google.type.Date`'s file.
    pub const DATE_FILE: &str = "google/type/date.proto";
    /// `google.type.TimeOfDay`'s file.
    pub const TIME_OF_DAY_FILE: &str = "google/type/timeofday.proto";
    /// `confluent.type.Decimal`'s file.
    pub const DECIMAL_FILE: &str = "confluent/type/decimal.proto";
    /// Confluent's field options (`confluent.field_meta`).
    pub const META_FILE: &str = "confluent/meta.proto";
    /// The wrappers' file.
    pub const WRAPPERS_FILE: &str = "google/protobuf/wrappers.proto";
    /// `google.protobuf.*Value` wrappers in their file's order, with the scalar each wraps.
    pub const WRAPPERS: [(&str, super::Scalar); 9] = [
        ("DoubleValue", super::Scalar::Double),
        ("FloatValue", super::Scalar::Float),
        ("Int64Value", super::Scalar::Int64),
        ("UInt64Value", super::Scalar::Uint64),
        ("Int32Value", super::Scalar::Int32),
        ("UInt32Value", super::Scalar::Uint32),
        ("BoolValue", super::Scalar::Bool),
        ("StringValue", super::Scalar::String),
        ("BytesValue", super::Scalar::Bytes),
    ];
}
