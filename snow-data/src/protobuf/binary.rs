//! A `FileDescriptorProto` (protobuf's own description of a `.proto` file), as Confluent's Python
//! and .NET serializers register it: base64 text in the registry. Read with [`super::codec`] into
//! the same [`File`] the text reader makes.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::error::DataError;

use super::codec::Reader;
use super::descriptor::{Enum, FieldDef, File, Label, Message, Scalar, Type};

/// Deepest nesting of messages read.
const MAX_DEPTH: usize = 32;

/// True when `text` looks like a base64 descriptor rather than `.proto` text.
pub fn is_base64(text: &str) -> bool {
    let t = text.trim();
    !t.is_empty() && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=')
}

/// Reads a base64 `FileDescriptorProto`.
pub fn parse_base64(text: &str) -> Result<File, DataError> {
    let bytes = STANDARD.decode(text.trim()).map_err(|e| DataError::new(format!("the schema is not base64: {e}")))?;
    parse(&bytes)
}

/// Reads a serialized `FileDescriptorProto`.
pub fn parse(bytes: &[u8]) -> Result<File, DataError> {
    let mut file = File::default();
    let mut raw_messages = Vec::new();
    let mut syntax = String::new();
    let mut r = Reader::new(bytes);
    while !r.done() {
        match r.key()? {
            (2, 2) => file.package = text(r.delimited()?)?,
            (3, 2) => file.imports.push(text(r.delimited()?)?),
            (4, 2) => raw_messages.push(r.delimited()?),
            (5, 2) => file.enums.push(enumeration(r.delimited()?)?),
            (12, 2) => syntax = text(r.delimited()?)?,
            (_, wire) => r.skip(wire)?,
        }
    }
    let proto3 = syntax == "proto3" || syntax == "editions";
    for m in raw_messages {
        file.messages.push(message(m, proto3, 0)?);
    }
    Ok(file)
}

fn text(bytes: &[u8]) -> Result<String, DataError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| DataError::new("a name in the descriptor is not UTF-8"))
}

fn message(bytes: &[u8], proto3: bool, depth: usize) -> Result<Message, DataError> {
    if depth >= MAX_DEPTH {
        return Err(DataError::new(format!("messages nested deeper than {MAX_DEPTH}")));
    }
    let mut m = Message::default();
    let mut r = Reader::new(bytes);
    while !r.done() {
        match r.key()? {
            (1, 2) => m.name = text(r.delimited()?)?,
            (2, 2) => m.fields.push(field(r.delimited()?, proto3)?),
            (3, 2) => m.nested.push(message(r.delimited()?, proto3, depth + 1)?),
            (4, 2) => m.enums.push(enumeration(r.delimited()?)?),
            (7, 2) => {
                let mut o = Reader::new(r.delimited()?);
                while !o.done() {
                    match o.key()? {
                        (7, 0) => m.map_entry = o.varint()? != 0,
                        (_, wire) => o.skip(wire)?,
                    }
                }
            }
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok(m)
}

fn field(bytes: &[u8], proto3: bool) -> Result<FieldDef, DataError> {
    let (mut name, mut number, mut label, mut kind, mut type_name) = (String::new(), 0i64, 1u64, 0u64, String::new());
    let (mut in_oneof, mut proto3_optional, mut params) = (false, false, Vec::new());
    let mut r = Reader::new(bytes);
    while !r.done() {
        match r.key()? {
            (1, 2) => name = text(r.delimited()?)?,
            (3, 0) => number = r.varint()? as i64,
            (4, 0) => label = r.varint()?,
            (5, 0) => kind = r.varint()?,
            (6, 2) => type_name = text(r.delimited()?)?,
            (9, 0) => {
                r.varint()?;
                in_oneof = true;
            }
            (17, 0) => proto3_optional = r.varint()? != 0,
            (8, 2) => params = field_meta(r.delimited()?)?,
            (_, wire) => r.skip(wire)?,
        }
    }
    let number =
        u32::try_from(number).ok().filter(|n| *n > 0).ok_or_else(|| DataError::new(format!("field {name} has number {number}")))?;
    let ty = match kind {
        10 => return Err(DataError::new(format!("field {name} is a group, which is not supported"))),
        11 | 14 => Type::Named(type_name),
        n => Type::Scalar(
            i32::try_from(n).ok().and_then(Scalar::numbered).ok_or_else(|| DataError::new(format!("field {name} has unknown type {n}")))?,
        ),
    };
    let label = match label {
        3 => Label::Repeated,
        _ if in_oneof || proto3_optional => Label::Optional,
        2 => Label::Singular,
        _ if proto3 => Label::Singular,
        _ => Label::Optional,
    };
    Ok(FieldDef { name, number, label, ty, params })
}

/// Confluent's `(confluent.field_meta)` (extension 1088 of `FieldOptions`): its `params` map.
fn field_meta(options: &[u8]) -> Result<Vec<(String, String)>, DataError> {
    let mut params = Vec::new();
    let mut r = Reader::new(options);
    while !r.done() {
        match r.key()? {
            (1088, 2) => {
                let mut meta = Reader::new(r.delimited()?);
                while !meta.done() {
                    match meta.key()? {
                        (2, 2) => {
                            let mut entry = Reader::new(meta.delimited()?);
                            let (mut k, mut v) = (String::new(), String::new());
                            while !entry.done() {
                                match entry.key()? {
                                    (1, 2) => k = text(entry.delimited()?)?,
                                    (2, 2) => v = text(entry.delimited()?)?,
                                    (_, wire) => entry.skip(wire)?,
                                }
                            }
                            params.push((k, v));
                        }
                        (_, wire) => meta.skip(wire)?,
                    }
                }
            }
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok(params)
}

fn enumeration(bytes: &[u8]) -> Result<Enum, DataError> {
    let mut e = Enum::default();
    let mut r = Reader::new(bytes);
    while !r.done() {
        match r.key()? {
            (1, 2) => e.name = text(r.delimited()?)?,
            (2, 2) => {
                let mut v = Reader::new(r.delimited()?);
                let (mut name, mut number) = (String::new(), 0i32);
                while !v.done() {
                    match v.key()? {
                        (1, 2) => name = text(v.delimited()?)?,
                        (2, 0) => number = v.varint()? as i32,
                        (_, wire) => v.skip(wire)?,
                    }
                }
                e.values.push((name, number));
            }
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pythons_registered_descriptor_reads() {
        // What confluent-kafka 2.16.1's ProtobufSerializer registers for
        // `package servicenow; import "google/protobuf/timestamp.proto";
        //  message incident { string sys_id = 1; google.protobuf.Timestamp opened_at = 2; }`.
        let b64 = "Cgd0LnByb3RvEgpzZXJ2aWNlbm93Gh9nb29nbGUvcHJvdG9idWYvdGltZXN0YW1wLnByb3RvIkkKCGluY2lkZW50Eg4KBnN5c19pZBgBIAEoCRItCglvcGVuZWRfYXQYAiABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wYgZwcm90bzM=";
        assert!(is_base64(b64) && !is_base64("syntax = \"proto3\";"));
        let file = parse_base64(b64).expect("parse");
        assert_eq!((file.package.as_str(), file.imports.as_slice()), ("servicenow", &["google/protobuf/timestamp.proto".to_string()][..]));
        let m = &file.messages[0];
        assert_eq!(m.name, "incident");
        assert_eq!(
            (m.fields[0].name.as_str(), m.fields[0].label, &m.fields[0].ty),
            ("sys_id", Label::Singular, &Type::Scalar(Scalar::String))
        );
        assert_eq!(m.fields[1].ty, Type::Named(".google.protobuf.Timestamp".into()));
        assert!(parse(&[0x22, 0x06, 0x12, 0x04, 0x18, 0x01, 0x28, 0x0a]).expect_err("group").to_string().contains("group"));
    }
}
