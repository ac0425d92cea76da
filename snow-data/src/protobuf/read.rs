//! Reading a record's protobuf message into Connect data, as Confluent's `ProtobufConverter`
//! reads it (`ProtobufData.toConnectSchema` / `toConnectData`): the writer's [`File`] and the
//! record's message indexes are compiled once into a [`Decoder`] (every type name resolved, the
//! Connect schema derived), which then reads each record's bytes. Well-known types become
//! Connect's: `google.protobuf.Timestamp` a `Timestamp`, `google.type.Date` a `Date`,
//! `google.type.TimeOfDay` a `Time`, `confluent.type.Decimal` a `Decimal`, the
//! `google.protobuf.*Value` wrappers optional primitives; an enum reads as its value's name;
//! unsigned 32-bit and all 64-bit integers as int64. A oneof's members are fields of the message
//! (Connect nests them in a struct of their own). An absent plain proto3 scalar reads as its
//! default (`""`, `0`, `false`), an absent message or `optional` field as null.

use std::collections::HashMap;

use snow_core::time::days_from_civil;

use crate::decimal::Decimal;
use crate::error::DataError;
use crate::schema::{Field, Kind, Schema};
use crate::value::Value;

use crate::binary_io::unzigzag;

use super::codec::Reader;
use super::descriptor::{Enum, File, Label, Message, Scalar, Type, known};

/// Deepest nesting of messages read from a record.
const MAX_DEPTH: usize = 64;

/// A writer's message, compiled for reading records.
#[derive(Debug)]
pub struct Decoder {
    messages: Vec<Compiled>,
    enums: Vec<Vec<(String, i32)>>,
    /// The record's message in `messages`, or the scalar of a root wrapper.
    root: Root,
    schema: Schema,
}

#[derive(Debug, Clone, Copy)]
enum Root {
    Message(usize),
    Wrapper(Scalar),
}

#[derive(Debug)]
struct Compiled {
    full_name: String,
    fields: Vec<CField>,
    by_number: HashMap<u32, usize>,
}

#[derive(Debug)]
struct CField {
    name: String,
    number: u32,
    repeated: bool,
    presence: bool,
    kind: CKind,
    /// Confluent's `connect.type` (int8/int16 written as int32) and decimal `scale` params.
    connect_type: Option<String>,
    scale: Option<i32>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum CKind {
    Scalar(Scalar),
    Enum(usize),
    Message(usize),
    Map(usize),
    Timestamp,
    Date,
    Time,
    Decimal,
    Wrapper(Scalar),
}

/// What a type name names.
enum Named<'f> {
    Message(String, &'f Message),
    Enum(String, &'f Enum),
    Known(CKind),
}

impl Decoder {
    /// Compiles the message at `path` (Confluent's message indexes) of `file`.
    pub fn new(file: &File, path: &[i32]) -> Result<Self, DataError> {
        let mut index = Index::default();
        index.add(file);
        let (full_name, root) = find(file, path)?;
        if file.package == "google.protobuf"
            && let Some((_, s)) = known::WRAPPERS.iter().find(|(n, _)| *n == root.name)
        {
            let schema = scalar_schema(*s, None).optional();
            return Ok(Self { messages: Vec::new(), enums: Vec::new(), root: Root::Wrapper(*s), schema });
        }
        let mut d = Self { messages: Vec::new(), enums: Vec::new(), root: Root::Message(0), schema: Schema::new(Kind::Boolean) };
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut enum_seen: HashMap<String, usize> = HashMap::new();
        let root_idx = d.compile(&index, &full_name, root, &mut seen, &mut enum_seen, 0)?;
        d.root = Root::Message(root_idx);
        d.schema = Schema { optional: false, ..d.connect_schema(root_idx, &mut Vec::new())? };
        Ok(d)
    }

    /// The Connect schema records of this message read as.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The value of one record's message bytes (after the framing and message indexes).
    pub fn decode(&self, bytes: &[u8]) -> Result<Value, DataError> {
        match self.root {
            Root::Message(i) => self.message(i, bytes, 0),
            Root::Wrapper(s) => {
                let mut r = Reader::new(bytes);
                let mut out = default_scalar(s);
                while !r.done() {
                    match r.key()? {
                        (1, wire) if wire == s.wire_type() => out = scalar(s, &mut r)?,
                        (_, wire) => r.skip(wire)?,
                    }
                }
                Ok(out)
            }
        }
    }

    fn compile(
        &mut self,
        index: &Index<'_>,
        full_name: &str,
        message: &Message,
        seen: &mut HashMap<String, usize>,
        enum_seen: &mut HashMap<String, usize>,
        depth: usize,
    ) -> Result<usize, DataError> {
        if let Some(i) = seen.get(full_name) {
            return Ok(*i);
        }
        if depth > MAX_DEPTH {
            return Err(DataError::new(format!("message {full_name} is nested deeper than {MAX_DEPTH} messages")));
        }
        let at = self.messages.len();
        seen.insert(full_name.to_string(), at);
        self.messages.push(Compiled { full_name: full_name.to_string(), fields: Vec::new(), by_number: HashMap::new() });
        let mut fields = Vec::with_capacity(message.fields.len());
        for f in &message.fields {
            let kind = match &f.ty {
                Type::Scalar(s) => CKind::Scalar(*s),
                Type::Named(name) => match index.resolve(name, full_name) {
                    Some(Named::Known(k)) => k,
                    Some(Named::Enum(enum_name, e)) => {
                        let i = *enum_seen.entry(enum_name).or_insert_with(|| {
                            self.enums.push(e.values.clone());
                            self.enums.len() - 1
                        });
                        CKind::Enum(i)
                    }
                    Some(Named::Message(nested_name, m)) => {
                        let i = self.compile(index, &nested_name, m, seen, enum_seen, depth + 1)?;
                        if m.map_entry { CKind::Map(i) } else { CKind::Message(i) }
                    }
                    None => {
                        return Err(DataError::new(format!(
                            "field {} of {full_name} has type {name}, which the schema does not define (imports other than Google's and Confluent's well-known types need schema references, which are not read)",
                            f.name
                        )));
                    }
                },
            };
            let param = |k: &str| f.params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            fields.push(CField {
                name: f.name.clone(),
                number: f.number,
                repeated: f.label == Label::Repeated,
                presence: f.label == Label::Optional,
                kind,
                connect_type: param("connect.type"),
                scale: param("scale").and_then(|s| s.parse().ok()),
            });
        }
        let mut by_number = HashMap::with_capacity(message.fields.len());
        for (i, f) in message.fields.iter().enumerate() {
            if !is_identifier(&f.name) {
                return Err(DataError::new(format!("message {full_name} has a field named {:?}, which is not a protobuf name", f.name)));
            }
            if by_number.insert(f.number, i).is_some() {
                return Err(DataError::new(format!("message {full_name} uses field number {} twice", f.number)));
            }
        }
        self.messages[at].fields = fields;
        self.messages[at].by_number = by_number;
        Ok(at)
    }

    fn connect_schema(&self, idx: usize, path: &mut Vec<usize>) -> Result<Schema, DataError> {
        let m = &self.messages[idx];
        if path.contains(&idx) {
            return Err(DataError::new(format!("message {} contains itself, which a Connect schema cannot", m.full_name)));
        }
        if path.len() > MAX_DEPTH {
            return Err(DataError::new(format!("message {} is nested deeper than {MAX_DEPTH} messages", m.full_name)));
        }
        path.push(idx);
        let mut fields = Vec::with_capacity(m.fields.len());
        for f in &m.fields {
            let one = self.kind_schema(f, f.kind, path)?;
            let mut schema =
                if f.repeated && !matches!(f.kind, CKind::Map(_)) { Schema::new(Kind::Array(Box::new(one))).optional() } else { one };
            // The field's number, as Connect's ProtobufConverter keeps it (written back under it).
            schema.parameters.insert(super::connect::TAG.to_string(), f.number.to_string());
            fields.push(Field::new(&f.name, schema));
        }
        path.pop();
        Ok(Schema::record(&m.full_name, fields).optional())
    }

    fn kind_schema(&self, f: &CField, kind: CKind, path: &mut Vec<usize>) -> Result<Schema, DataError> {
        Ok(match kind {
            CKind::Scalar(s) | CKind::Wrapper(s) => scalar_schema(s, f.connect_type.as_deref()).optional(),
            CKind::Enum(_) => Schema::new(Kind::String).optional(),
            CKind::Message(i) => self.connect_schema(i, path)?,
            CKind::Map(i) => {
                let entry = &self.messages[i];
                let part = |n: usize| -> Result<Schema, DataError> {
                    match entry.fields.get(n) {
                        Some(ef) => self.kind_schema(ef, ef.kind, &mut path.clone()),
                        None => Err(DataError::new(format!("map entry {} lacks its key or value", entry.full_name))),
                    }
                };
                Schema::new(Kind::Map(Box::new(part(0)?), Box::new(part(1)?))).optional()
            }
            CKind::Timestamp => Schema::timestamp().optional(),
            CKind::Date => Schema::date().optional(),
            CKind::Time => Schema::time().optional(),
            CKind::Decimal => Schema::decimal(f.scale.unwrap_or(0)).optional(),
        })
    }

    fn message(&self, idx: usize, bytes: &[u8], depth: usize) -> Result<Value, DataError> {
        if depth > MAX_DEPTH {
            return Err(DataError::new(format!("messages nested deeper than {MAX_DEPTH}")));
        }
        let m = &self.messages[idx];
        let mut slots: Vec<Option<Value>> = vec![None; m.fields.len()];
        let mut lists: Vec<Vec<Value>> = vec![Vec::new(); m.fields.len()];
        let mut pairs: Vec<Vec<(Value, Value)>> = vec![Vec::new(); m.fields.len()];
        let mut r = Reader::new(bytes);
        while !r.done() {
            let (number, wire) = r.key()?;
            let Some(&i) = m.by_number.get(&number) else {
                r.skip(wire)?;
                continue;
            };
            let f = &m.fields[i];
            let at = |e: DataError| e.at(format!("field {}", f.name));
            match f.kind {
                CKind::Map(entry) if f.repeated => pairs[i].push(self.entry(entry, r.delimited()?, depth).map_err(at)?),
                CKind::Scalar(s) if f.repeated && wire == 2 && s.wire_type() != 2 => {
                    let mut run = Reader::new(r.delimited()?);
                    while !run.done() {
                        lists[i].push(scalar(s, &mut run).map_err(at)?);
                    }
                }
                CKind::Enum(e) if f.repeated && wire == 2 => {
                    let mut run = Reader::new(r.delimited()?);
                    while !run.done() {
                        lists[i].push(self.enum_value(e, run.varint()?));
                    }
                }
                kind => {
                    let v = self.one(kind, wire, &mut r, depth).map_err(at)?;
                    if f.repeated {
                        lists[i].push(v);
                    } else {
                        slots[i] = Some(v);
                    }
                }
            }
        }
        let fields = m
            .fields
            .iter()
            .zip(slots.into_iter().zip(lists.into_iter().zip(pairs)))
            .map(|(f, (slot, (list, map)))| {
                let v = match (f.kind, f.repeated, slot) {
                    (CKind::Map(_), true, _) => Value::Map(map),
                    (_, true, _) => Value::Array(list.into_iter().map(|v| narrow(v, f.connect_type.as_deref())).collect()),
                    (_, false, Some(v)) => narrow(v, f.connect_type.as_deref()),
                    (CKind::Scalar(s), false, None) if !f.presence => narrow(default_scalar(s), f.connect_type.as_deref()),
                    (CKind::Enum(e), false, None) if !f.presence => self.enum_value(e, 0),
                    _ => Value::Null,
                };
                (f.name.clone(), v)
            })
            .collect();
        Ok(Value::Struct(fields))
    }

    fn entry(&self, idx: usize, bytes: &[u8], depth: usize) -> Result<(Value, Value), DataError> {
        match self.message(idx, bytes, depth + 1)? {
            Value::Struct(mut kv) if kv.len() == 2 => {
                let v = kv.pop().map(|(_, v)| v).unwrap_or(Value::Null);
                let k = kv.pop().map(|(_, v)| v).unwrap_or(Value::Null);
                Ok((k, v))
            }
            _ => Err(DataError::new("a map entry is not a key and a value")),
        }
    }

    fn enum_value(&self, e: usize, n: u64) -> Value {
        let n = n as i64 as i32;
        let values = &self.enums[e];
        match values.iter().find(|(_, v)| *v == n) {
            Some((name, _)) => Value::String(name.clone()),
            None if n == 0 => values.first().map_or(Value::String("0".into()), |(name, _)| Value::String(name.clone())),
            None => Value::String(n.to_string()),
        }
    }

    fn one(&self, kind: CKind, wire: u8, r: &mut Reader<'_>, depth: usize) -> Result<Value, DataError> {
        let expected = match kind {
            CKind::Scalar(s) => s.wire_type(),
            CKind::Enum(_) => 0,
            _ => 2,
        };
        if wire != expected {
            return Err(DataError::new(format!("wire type {wire} where the schema says {expected}")));
        }
        match kind {
            CKind::Scalar(s) => scalar(s, r),
            CKind::Enum(e) => Ok(self.enum_value(e, r.varint()?)),
            CKind::Message(i) | CKind::Map(i) => self.message(i, r.delimited()?, depth + 1),
            CKind::Wrapper(s) => {
                let mut sub = Reader::new(r.delimited()?);
                let mut out = default_scalar(s);
                while !sub.done() {
                    match sub.key()? {
                        (1, w) if w == s.wire_type() => out = scalar(s, &mut sub)?,
                        (_, w) => sub.skip(w)?,
                    }
                }
                Ok(out)
            }
            CKind::Timestamp | CKind::Date | CKind::Time => {
                let mut nums = [0i64; 4];
                let mut sub = Reader::new(r.delimited()?);
                while !sub.done() {
                    match sub.key()? {
                        (n @ 1..=4, 0) => nums[n as usize - 1] = sub.varint()? as i64,
                        (_, w) => sub.skip(w)?,
                    }
                }
                let out_of_range =
                    || DataError::new(format!("a {} out of range", if kind == CKind::Timestamp { "timestamp" } else { "time of day" }));
                Ok(match kind {
                    CKind::Timestamp => Value::Timestamp(
                        nums[0]
                            .checked_mul(1000)
                            .and_then(|ms| ms.checked_add((nums[1] as i32 as i64).div_euclid(1_000_000)))
                            .ok_or_else(out_of_range)?,
                    ),
                    CKind::Date => {
                        let (y, m, d) = (nums[0] as i32 as i64, nums[1] as i32 as i64, nums[2] as i32 as i64);
                        if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
                            return Err(DataError::new(format!("google.type.Date {y}-{m}-{d} is not a full date")));
                        }
                        Value::Date(i32::try_from(days_from_civil(y, m, d)).map_err(|_| DataError::new("a date out of range"))?)
                    }
                    _ => {
                        let [h, m, s, n] = nums.map(|n| i128::from(n as i32));
                        let ms = h * 3_600_000 + m * 60_000 + s * 1000 + n / 1_000_000;
                        Value::Time(i32::try_from(ms).map_err(|_| out_of_range())?)
                    }
                })
            }
            CKind::Decimal => {
                let (mut bytes, mut scale) = (&[][..], 0i32);
                let mut sub = Reader::new(r.delimited()?);
                while !sub.done() {
                    match sub.key()? {
                        (1, 2) => bytes = sub.delimited()?,
                        (3, 0) => scale = sub.varint()? as i32,
                        (_, w) => sub.skip(w)?,
                    }
                }
                if bytes.is_empty() {
                    crate::decimal::check_scale(scale)?;
                    return Ok(Value::Decimal(Decimal { unscaled: 0, scale }));
                }
                Ok(Value::Decimal(Decimal::from_bytes(bytes, scale)?))
            }
        }
    }
}

fn scalar(s: Scalar, r: &mut Reader<'_>) -> Result<Value, DataError> {
    Ok(match s {
        Scalar::Double => Value::Float64(f64::from_bits(r.fixed64()?)),
        Scalar::Float => Value::Float32(f32::from_bits(r.fixed32()?)),
        Scalar::Int64 | Scalar::Uint64 => Value::Int64(r.varint()? as i64),
        Scalar::Int32 => Value::Int32(r.varint()? as i64 as i32),
        Scalar::Uint32 => Value::Int64(i64::from(r.varint()? as u32)),
        Scalar::Sint32 => Value::Int32(unzigzag(r.varint()?) as i32),
        Scalar::Sint64 => Value::Int64(unzigzag(r.varint()?)),
        Scalar::Fixed32 => Value::Int64(i64::from(r.fixed32()?)),
        Scalar::Sfixed32 => Value::Int32(r.fixed32()? as i32),
        Scalar::Fixed64 | Scalar::Sfixed64 => Value::Int64(r.fixed64()? as i64),
        Scalar::Bool => Value::Boolean(r.varint()? != 0),
        Scalar::String => {
            Value::String(String::from_utf8(r.delimited()?.to_vec()).map_err(|_| DataError::new("a string that is not UTF-8"))?)
        }
        Scalar::Bytes => Value::Bytes(r.delimited()?.to_vec()),
    })
}

fn default_scalar(s: Scalar) -> Value {
    match s {
        Scalar::Double => Value::Float64(0.0),
        Scalar::Float => Value::Float32(0.0),
        Scalar::Int64 | Scalar::Uint64 | Scalar::Uint32 | Scalar::Sint64 | Scalar::Fixed32 | Scalar::Fixed64 | Scalar::Sfixed64 => {
            Value::Int64(0)
        }
        Scalar::Int32 | Scalar::Sint32 | Scalar::Sfixed32 => Value::Int32(0),
        Scalar::Bool => Value::Boolean(false),
        Scalar::String => Value::String(String::new()),
        Scalar::Bytes => Value::Bytes(Vec::new()),
    }
}

/// An int32 narrowed back to the int8/int16 Connect wrote it from (Confluent's `connect.type`).
fn narrow(v: Value, connect_type: Option<&str>) -> Value {
    match (v, connect_type) {
        (Value::Int32(n), Some("int8")) => Value::Int8(n as i8),
        (Value::Int32(n), Some("int16")) => Value::Int16(n as i16),
        (v, _) => v,
    }
}

fn scalar_schema(s: Scalar, connect_type: Option<&str>) -> Schema {
    Schema::new(match (s, connect_type) {
        (Scalar::Int32, Some("int8")) => Kind::Int8,
        (Scalar::Int32, Some("int16")) => Kind::Int16,
        (Scalar::Double, _) => Kind::Float64,
        (Scalar::Float, _) => Kind::Float32,
        (Scalar::Int32 | Scalar::Sint32 | Scalar::Sfixed32, _) => Kind::Int32,
        (Scalar::Bool, _) => Kind::Boolean,
        (Scalar::String, _) => Kind::String,
        (Scalar::Bytes, _) => Kind::Bytes,
        _ => Kind::Int64,
    })
}

/// True for a protobuf identifier (`[A-Za-z_][A-Za-z0-9_]*`).
fn is_identifier(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The message at `path` in `file`, with its full name.
fn find<'f>(file: &'f File, path: &[i32]) -> Result<(String, &'f Message), DataError> {
    let out_of_range = |i: i32, n: usize| DataError::new(format!("message index {i} is out of range (the schema has {n} there)"));
    let (first, rest) = path.split_first().ok_or_else(|| DataError::new("no message index"))?;
    let mut m = usize::try_from(*first).ok().and_then(|i| file.messages.get(i)).ok_or_else(|| out_of_range(*first, file.messages.len()))?;
    let mut name = qualify(&file.package, &m.name);
    for i in rest {
        m = usize::try_from(*i).ok().and_then(|n| m.nested.get(n)).ok_or_else(|| out_of_range(*i, m.nested.len()))?;
        name = format!("{name}.{}", m.name);
    }
    Ok((name, m))
}

fn qualify(scope: &str, name: &str) -> String {
    if scope.is_empty() { name.to_string() } else { format!("{scope}.{name}") }
}

/// Every message and enum of a file by full name.
#[derive(Default)]
struct Index<'f> {
    messages: HashMap<String, &'f Message>,
    enums: HashMap<String, &'f Enum>,
}

impl<'f> Index<'f> {
    fn add(&mut self, file: &'f File) {
        for e in &file.enums {
            self.enums.insert(qualify(&file.package, &e.name), e);
        }
        for m in &file.messages {
            self.add_message(&file.package, m);
        }
    }

    fn add_message(&mut self, scope: &str, m: &'f Message) {
        let name = qualify(scope, &m.name);
        for e in &m.enums {
            self.enums.insert(qualify(&name, &e.name), e);
        }
        for n in &m.nested {
            self.add_message(&name, n);
        }
        self.messages.insert(name, m);
    }

    /// What `name`, written inside the message `scope`, names (protobuf's scoping: the innermost
    /// scope first, then each enclosing one).
    fn resolve(&self, name: &str, scope: &str) -> Option<Named<'f>> {
        if let Some(absolute) = name.strip_prefix('.') {
            return self.lookup(absolute);
        }
        let mut scope = Some(scope);
        while let Some(s) = scope {
            if let Some(found) = self.lookup(&qualify(s, name)) {
                return Some(found);
            }
            scope = s.rfind('.').map(|i| &s[..i]).or(if s.is_empty() { None } else { Some("") });
        }
        None
    }

    fn lookup(&self, full: &str) -> Option<Named<'f>> {
        if let Some(m) = self.messages.get(full) {
            return Some(Named::Message(full.to_string(), m));
        }
        if let Some(e) = self.enums.get(full) {
            return Some(Named::Enum(full.to_string(), e));
        }
        Some(Named::Known(match full {
            known::TIMESTAMP => CKind::Timestamp,
            known::DATE => CKind::Date,
            known::TIME_OF_DAY => CKind::Time,
            known::DECIMAL => CKind::Decimal,
            other => {
                let wrapper = other.strip_prefix("google.protobuf.")?;
                CKind::Wrapper(known::WRAPPERS.iter().find(|(n, _)| *n == wrapper)?.1)
            }
        }))
    }
}
