//! What Confluent's `ProtobufConverter` writes for a Connect schema and value (its
//! `ProtobufData.fromConnectSchema` / `fromConnectData`, defaults): a struct becomes a proto3
//! message named after the schema (`servicenow.incident` → package `servicenow`, message
//! `incident`; unnamed ones `ConnectDefault1`, `2`...), its fields numbered in order from 1;
//! Connect's `Timestamp`, `Date`, `Time` and `Decimal` become `google.protobuf.Timestamp`,
//! `google.type.Date`, `google.type.TimeOfDay` and `confluent.type.Decimal` (scale in Confluent's
//! field params); an array is `repeated`, a map a repeated key/value entry; int8/int16 are int32
//! with `connect.type` params. A root primitive (a string key) is the matching
//! `google.protobuf.*Value` wrapper. A null is left out; with `optional.for.nullables` an optional
//! field is `optional` (it keeps its presence, so a null reads back as null, not `""` or `0`).

use std::collections::BTreeSet;

use snow_core::time::civil_from_days;

use crate::error::DataError;
use crate::schema::{Kind, Logical, Schema};
use crate::value::Value;

use crate::binary_io::varint;

use super::codec::{delimited, key, write_indexes};
use super::descriptor::{Enum, FieldDef, File, Label, Message, Scalar, Type, known};
use super::text;

/// Confluent's parameter fixing a field's number.
pub const TAG: &str = "io.confluent.connect.protobuf.Tag";
/// Connect's decimal precision parameter.
const PRECISION: &str = "connect.decimal.precision";

/// `ProtobufConverter`'s options that change what is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// `optional.for.nullables`: optional Connect fields are proto3 `optional`.
    pub optional_for_nullables: bool,
}

/// The protobuf schema of a Connect schema: the file to register and where its message is.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// The file.
    pub file: File,
    /// It as `.proto` text (what the registry is given).
    pub text: String,
    /// The message indexes of the record's message in the file.
    pub path: Vec<i32>,
}

/// The file `ProtobufConverter` registers for `schema`.
pub fn from_connect(schema: &Schema, options: Options) -> Result<Written, DataError> {
    if wrapped(schema).is_some() {
        let file = wrappers_file();
        return Ok(Written { text: text::write(&file), file, path: path(schema).to_vec() });
    }
    if !matches!(schema.kind, Kind::Struct(_)) || schema.logical().is_some() {
        return Err(DataError::new(format!(
            "a {} schema cannot be the root of a protobuf record (a struct or a primitive can)",
            crate::connect_json::type_label(schema)
        )));
    }
    let mut ctx = Context { options, imports: BTreeSet::new(), unnamed: 0 };
    let full = ctx.name_or_default(schema.name.as_deref());
    let mut parts: Vec<String> = full.split('.').map(scrub).collect();
    let name = parts.pop().unwrap_or_default();
    let message = ctx.message(&name, schema)?;
    let file = File { package: parts.join("."), imports: ctx.imports.into_iter().collect(), messages: vec![message], enums: Vec::new() };
    Ok(Written { text: text::write(&file), file, path: vec![0] })
}

/// The scalar a root primitive schema's wrapper holds.
fn wrapped(schema: &Schema) -> Option<Scalar> {
    if schema.logical().is_some() {
        return None;
    }
    Some(match schema.kind {
        Kind::Int8 | Kind::Int16 | Kind::Int32 => Scalar::Int32,
        Kind::Int64 => Scalar::Int64,
        Kind::Float32 => Scalar::Float,
        Kind::Float64 => Scalar::Double,
        Kind::Boolean => Scalar::Bool,
        Kind::String => Scalar::String,
        Kind::Bytes => Scalar::Bytes,
        _ => return None,
    })
}

/// `google/protobuf/wrappers.proto`'s messages, in its order.
fn wrappers_file() -> File {
    let messages = known::WRAPPERS
        .iter()
        .map(|(name, scalar)| Message {
            name: (*name).to_string(),
            fields: vec![FieldDef {
                name: "value".into(),
                number: 1,
                label: Label::Singular,
                ty: Type::Scalar(*scalar),
                params: Vec::new(),
            }],
            ..Message::default()
        })
        .collect();
    File { package: "google.protobuf".into(), imports: Vec::new(), messages, enums: Vec::<Enum>::new() }
}

/// `name` made a valid protobuf identifier (`[A-Za-z_][A-Za-z0-9_]*`): each other character
/// becomes `_`, and a name that does not start with a letter or `_` gets an `x` in front (as
/// Confluent's `scrub.invalid.names`, which is applied always: an invalid name could not be
/// registered at all). A valid name is left as it is.
fn scrub(name: &str) -> String {
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out: String = name.chars().map(|c| if ok(c) { c } else { '_' }).collect();
    if !out.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.insert(0, 'x');
    }
    out
}

struct Context {
    options: Options,
    imports: BTreeSet<String>,
    unnamed: usize,
}

impl Context {
    fn name_or_default(&mut self, name: Option<&str>) -> String {
        match name.filter(|n| !n.is_empty()) {
            Some(n) => n.to_string(),
            None => {
                self.unnamed += 1;
                format!("ConnectDefault{}", self.unnamed)
            }
        }
    }

    fn unqualified(&mut self, name: Option<&str>) -> String {
        let full = self.name_or_default(name);
        scrub(full.rsplit('.').next().unwrap_or(&full))
    }

    fn message(&mut self, name: &str, schema: &Schema) -> Result<Message, DataError> {
        let mut message = Message { name: name.to_string(), ..Message::default() };
        let mut next = 1u32;
        for f in schema.fields() {
            let number = match f.schema.parameters.get(TAG) {
                Some(tag) => tag.parse().map_err(|_| DataError::new(format!("field {}: {TAG} {tag:?} is not a number", f.name)))?,
                None => {
                    next += 1;
                    next - 1
                }
            };
            let field = self.field(&mut message, &f.schema, &scrub(&f.name), number).map_err(|e| e.at(format!("field {}", f.name)))?;
            message.fields.push(field);
        }
        Ok(message)
    }

    fn field(&mut self, message: &mut Message, schema: &Schema, name: &str, number: u32) -> Result<FieldDef, DataError> {
        let (label, inner) = match &schema.kind {
            Kind::Array(items) => (Label::Repeated, &**items),
            Kind::Map(..) => (Label::Repeated, schema),
            _ if schema.optional && self.options.optional_for_nullables => (Label::Optional, schema),
            _ => (Label::Singular, schema),
        };
        let mut params = Vec::new();
        let ty = match (inner.logical(), &inner.kind) {
            (Some(Logical::Decimal { scale }), _) => {
                self.imports.insert(known::DECIMAL_FILE.to_string());
                self.imports.insert(known::META_FILE.to_string());
                if let Some(p) = inner.parameters.get(PRECISION) {
                    params.push(("precision".to_string(), p.clone()));
                }
                params.push(("scale".to_string(), scale.to_string()));
                Type::Named(known::DECIMAL.into())
            }
            (Some(Logical::Date), _) => {
                self.imports.insert(known::DATE_FILE.to_string());
                Type::Named(known::DATE.into())
            }
            (Some(Logical::Time), _) => {
                self.imports.insert(known::TIME_OF_DAY_FILE.to_string());
                Type::Named(known::TIME_OF_DAY.into())
            }
            (Some(Logical::Timestamp), _) => {
                self.imports.insert(known::TIMESTAMP_FILE.to_string());
                Type::Named(known::TIMESTAMP.into())
            }
            (None, Kind::Int8 | Kind::Int16) => {
                self.imports.insert(known::META_FILE.to_string());
                params.push(("connect.type".to_string(), inner.kind.name().to_string()));
                Type::Scalar(Scalar::Int32)
            }
            (None, Kind::Int32) => Type::Scalar(Scalar::Int32),
            (None, Kind::Int64) => Type::Scalar(Scalar::Int64),
            (None, Kind::Float32) => Type::Scalar(Scalar::Float),
            (None, Kind::Float64) => Type::Scalar(Scalar::Double),
            (None, Kind::Boolean) => Type::Scalar(Scalar::Bool),
            (None, Kind::String) => Type::Scalar(Scalar::String),
            (None, Kind::Bytes) => Type::Scalar(Scalar::Bytes),
            (None, Kind::Array(_)) => return Err(DataError::new("an array of arrays has no protobuf form (Connect refuses it too)")),
            (None, Kind::Map(keys, values)) => {
                let entry_name = format!("{}Entry", camel(name));
                let mut entry = Message { name: entry_name.clone(), ..Message::default() };
                let k = self.field(&mut entry, &required(keys), "key", 1)?;
                let v = self.field(&mut entry, &required(values), "value", 2)?;
                let key_ok = matches!(k.ty, Type::Scalar(s) if !matches!(s, Scalar::Double | Scalar::Float | Scalar::Bytes));
                entry.map_entry = key_ok && v.label != Label::Repeated && !matches!(values.kind, Kind::Map(..));
                entry.fields = vec![k, v];
                message.nested.push(entry);
                Type::Named(entry_name)
            }
            (None, Kind::Struct(_)) => {
                let mut type_name = self.unqualified(inner.name.as_deref());
                if type_name == name {
                    type_name.push_str("Message");
                }
                if !message.nested.iter().any(|m| m.name == type_name) {
                    let nested = self.message(&type_name, inner)?;
                    message.nested.push(nested);
                }
                Type::Named(type_name)
            }
        };
        Ok(FieldDef { name: name.to_string(), number, label, ty, params })
    }
}

/// `foo_bar` → `FooBar`.
fn camel(name: &str) -> String {
    name.split('_').filter(|p| !p.is_empty()).map(|p| p[..1].to_uppercase() + &p[1..]).collect()
}

/// `schema` with each field's number fixed (Confluent's [`TAG`] parameter): the number the field
/// has in `previous` (the message the subject last registered), and for a field `previous` lacks
/// the next number after every one `previous` used. A table's fields are in name order, so a new
/// dictionary element would otherwise renumber the fields after it and old readers would misread
/// them; with the numbers kept the new schema is compatible with the old one.
pub fn keep_numbers(schema: &Schema, previous: &Message) -> Schema {
    let mut next = previous.fields.iter().map(|f| f.number).max().unwrap_or(0) + 1;
    let mut out = schema.clone();
    if let Kind::Struct(fields) = &mut out.kind {
        for f in fields {
            let number = match previous.fields.iter().find(|p| p.name == scrub(&f.name)) {
                Some(p) => p.number,
                None => {
                    next += 1;
                    next - 1
                }
            };
            f.schema.parameters.insert(TAG.to_string(), number.to_string());
        }
    }
    out
}

/// Whether values written under `schema` (a Connect schema read from `registered`, the message a
/// subject holds) are what `registered` describes: every field of `registered` must be one
/// [`from_connect`] writes with the same number and type. A message of other shapes (enums,
/// other integer encodings) cannot be written here: the error names the first field that differs.
pub fn writes_as(schema: &Schema, registered: &Message) -> Result<(), DataError> {
    let ours = from_connect(schema, Options::default())?;
    let ours = ours.file.messages.first().ok_or_else(|| DataError::new("no message"))?;
    let name = |t: &Type| match t {
        Type::Scalar(s) => s.name().to_string(),
        Type::Named(n) => n.trim_start_matches('.').rsplit('.').next().unwrap_or_default().to_string(),
    };
    for f in &registered.fields {
        match ours.fields.iter().find(|o| o.name == f.name) {
            Some(o)
                if o.number == f.number && name(&o.ty) == name(&f.ty) && (o.label == Label::Repeated) == (f.label == Label::Repeated) => {}
            Some(o) => {
                return Err(DataError::new(format!(
                    "field {} is {} = {} in the registered message and would be written as {} = {}",
                    f.name,
                    name(&f.ty),
                    f.number,
                    name(&o.ty),
                    o.number
                )));
            }
            None => return Err(DataError::new(format!("field {} of the registered message cannot be written", f.name))),
        }
    }
    Ok(())
}

/// `schema`, not optional (a map entry's key and value are written whatever they hold).
fn required(schema: &Schema) -> Schema {
    Schema { optional: false, ..schema.clone() }
}

/// The message indexes of `schema`'s message in the file [`from_connect`] writes for it.
pub fn path(schema: &Schema) -> [i32; 1] {
    [known::WRAPPERS.iter().position(|(_, s)| Some(*s) == wrapped(schema)).map_or(0, |i| i as i32)]
}

/// `value` under `schema` as `ProtobufConverter` writes it after the registry framing: the message
/// indexes, then the message.
pub fn encode(schema: &Schema, value: &Value, options: Options, out: &mut Vec<u8>) -> Result<(), DataError> {
    write_indexes(&path(schema), out);
    if matches!(schema.kind, Kind::Struct(_)) {
        message(schema, value, options, out)
    } else {
        single(1, schema, value, false, options, out)
    }
}

fn message(schema: &Schema, value: &Value, options: Options, out: &mut Vec<u8>) -> Result<(), DataError> {
    if !matches!(value, Value::Struct(_)) {
        return Err(mismatch(schema, value));
    }
    let mut next = 1u32;
    for (i, f) in schema.fields().iter().enumerate() {
        let number = match f.schema.parameters.get(TAG).and_then(|t| t.parse().ok()) {
            Some(n) => n,
            None => {
                next += 1;
                next - 1
            }
        };
        let v = value.field(i, &f.name).unwrap_or(&Value::Null);
        if v.is_null() {
            continue;
        }
        let presence = f.schema.optional && options.optional_for_nullables;
        field(number, &f.schema, v, presence, options, out).map_err(|e| e.at(format!("field {}", f.name)))?;
    }
    Ok(())
}

fn field(number: u32, schema: &Schema, value: &Value, presence: bool, options: Options, out: &mut Vec<u8>) -> Result<(), DataError> {
    match (&schema.kind, value) {
        (Kind::Array(items), Value::Array(list)) => {
            let packed = items.logical().is_none()
                && matches!(
                    items.kind,
                    Kind::Int8 | Kind::Int16 | Kind::Int32 | Kind::Int64 | Kind::Float32 | Kind::Float64 | Kind::Boolean
                );
            if packed && !list.is_empty() {
                let mut run = Vec::with_capacity(list.len() * 2);
                for v in list {
                    scalar_bytes(items, v, &mut run)?;
                }
                delimited(number, &run, out);
                return Ok(());
            }
            for v in list {
                if v.is_null() {
                    return Err(DataError::new("an array holds a null, which protobuf cannot write"));
                }
                single(number, items, v, true, options, out)?;
            }
            Ok(())
        }
        (Kind::Map(keys, values), Value::Map(entries)) => {
            let mut entry = Vec::new();
            for (k, v) in entries {
                entry.clear();
                single(1, keys, k, true, options, &mut entry)?;
                if !v.is_null() {
                    single(2, values, v, true, options, &mut entry)?;
                }
                delimited(number, &entry, out);
            }
            Ok(())
        }
        _ => single(number, schema, value, presence, options, out),
    }
}

/// A scalar's bytes without its key (a packed run's element).
fn scalar_bytes(schema: &Schema, value: &Value, out: &mut Vec<u8>) -> Result<(), DataError> {
    match (&schema.kind, value) {
        (Kind::Int8, Value::Int8(v)) => varint(i64::from(*v) as u64, out),
        (Kind::Int16, Value::Int16(v)) => varint(i64::from(*v) as u64, out),
        (Kind::Int32, Value::Int32(v)) => varint(i64::from(*v) as u64, out),
        (Kind::Int64, Value::Int64(v)) => varint(*v as u64, out),
        (Kind::Boolean, Value::Boolean(v)) => out.push(u8::from(*v)),
        (Kind::Float32, Value::Float32(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (Kind::Float64, Value::Float64(v)) => out.extend_from_slice(&v.to_le_bytes()),
        _ => return Err(mismatch(schema, value)),
    }
    Ok(())
}

/// One field occurrence: its key and value; a default scalar is left out unless it has presence.
fn single(number: u32, schema: &Schema, value: &Value, presence: bool, options: Options, out: &mut Vec<u8>) -> Result<(), DataError> {
    let mut sub = Vec::new();
    match (schema.logical(), &schema.kind, value) {
        (Some(Logical::Timestamp), _, Value::Timestamp(ms)) => {
            let (seconds, millis) = (ms.div_euclid(1000), ms.rem_euclid(1000));
            put_varint(&mut sub, 1, seconds as u64);
            put_varint(&mut sub, 2, (millis * 1_000_000) as u64);
        }
        (Some(Logical::Date), _, Value::Date(days)) => {
            let (y, m, d) = civil_from_days(i64::from(*days));
            put_varint(&mut sub, 1, y as u64);
            put_varint(&mut sub, 2, m as u64);
            put_varint(&mut sub, 3, d as u64);
        }
        (Some(Logical::Time), _, Value::Time(ms)) => {
            let ms = i64::from(*ms);
            put_varint(&mut sub, 1, (ms / 3_600_000) as u64);
            put_varint(&mut sub, 2, (ms / 60_000 % 60) as u64);
            put_varint(&mut sub, 3, (ms / 1000 % 60) as u64);
            put_varint(&mut sub, 4, (ms % 1000 * 1_000_000) as u64);
        }
        (Some(Logical::Decimal { .. }), _, Value::Decimal(d)) => {
            delimited(1, &d.to_bytes(), &mut sub);
            put_varint(&mut sub, 2, u64::from(d.precision()));
            put_varint(&mut sub, 3, i64::from(d.scale) as u64);
        }
        (Some(_), ..) => return Err(mismatch(schema, value)),
        (None, Kind::Struct(_), _) => message(schema, value, options, &mut sub)?,
        (None, Kind::String, Value::String(s)) => {
            if presence || !s.is_empty() {
                delimited(number, s.as_bytes(), out);
            }
            return Ok(());
        }
        (None, Kind::Bytes, Value::Bytes(b)) => {
            if presence || !b.is_empty() {
                delimited(number, b, out);
            }
            return Ok(());
        }
        (None, Kind::Float32, Value::Float32(v)) => {
            if presence || *v != 0.0 {
                key(number, 5, out);
                out.extend_from_slice(&v.to_le_bytes());
            }
            return Ok(());
        }
        (None, Kind::Float64, Value::Float64(v)) => {
            if presence || *v != 0.0 {
                key(number, 1, out);
                out.extend_from_slice(&v.to_le_bytes());
            }
            return Ok(());
        }
        (None, _, v) => {
            let n = match (&schema.kind, v) {
                (Kind::Int8, Value::Int8(v)) => i64::from(*v),
                (Kind::Int16, Value::Int16(v)) => i64::from(*v),
                (Kind::Int32, Value::Int32(v)) => i64::from(*v),
                (Kind::Int64, Value::Int64(v)) => *v,
                (Kind::Boolean, Value::Boolean(v)) => i64::from(*v),
                _ => return Err(mismatch(schema, value)),
            };
            if presence || n != 0 {
                key(number, 0, out);
                varint(n as u64, out);
            }
            return Ok(());
        }
    }
    delimited(number, &sub, out);
    Ok(())
}

/// Field `number` as a varint, left out when zero (proto3's default).
fn put_varint(out: &mut Vec<u8>, number: u32, n: u64) {
    if n != 0 {
        key(number, 0, out);
        varint(n, out);
    }
}

fn mismatch(schema: &Schema, value: &Value) -> DataError {
    DataError::new(format!("a {} value does not fit a {} schema", value.type_name(), crate::connect_json::type_label(schema)))
}
