//! The transforms that reshape a key or value: InsertField, ReplaceField, MaskField, ValueToKey,
//! ExtractField, HoistField and SetSchemaMetadata, each with Connect 4.1.1's keys, schema
//! building (field order, which basics are kept, optionality) and null handling.

use crate::decimal::Decimal;
use crate::error::DataError;
use crate::schema::{Field, Kind, Schema};
use crate::value::Value;

use super::support::{Conf, check_put, copy_basics, field_value, invalid, java_class, map_get, map_put, require_map, require_struct};
use super::{Record, Side, Transform};

/// One field InsertField adds: its name and whether it is optional (`?`, the default) or
/// required (`!`).
#[derive(Debug, Clone)]
struct Insertion {
    name: String,
    optional: bool,
}

fn insertion(spec: Option<&str>) -> Option<Insertion> {
    let spec = spec?;
    Some(match spec.chars().last() {
        Some('?') => Insertion { name: spec[..spec.len() - 1].to_string(), optional: true },
        Some('!') => Insertion { name: spec[..spec.len() - 1].to_string(), optional: false },
        _ => Insertion { name: spec.to_string(), optional: true },
    })
}

/// `InsertField$Key` / `$Value`.
pub struct InsertField {
    side: Side,
    topic: Option<Insertion>,
    partition: Option<Insertion>,
    offset: Option<Insertion>,
    timestamp: Option<Insertion>,
    static_field: Option<(Insertion, String)>,
    with_default: bool,
}

impl InsertField {
    /// From its keys.
    pub fn new(side: Side, conf: &Conf<'_>) -> Result<Self, String> {
        let static_field = match (insertion(conf.string("static.field")), conf.string("static.value")) {
            (Some(f), Some(v)) => Some((f, v.to_string())),
            (Some(_), None) => {
                return Err(invalid("null", "static.value", "No value specified for static field"));
            }
            (None, _) => None,
        };
        let t = Self {
            side,
            topic: insertion(conf.string("topic.field")),
            partition: insertion(conf.string("partition.field")),
            offset: insertion(conf.string("offset.field")),
            timestamp: insertion(conf.string("timestamp.field")),
            static_field,
            with_default: conf.replace_null_with_default()?,
        };
        if t.topic.is_none() && t.partition.is_none() && t.offset.is_none() && t.timestamp.is_none() && t.static_field.is_none() {
            return Err("No field insertion configured".into());
        }
        Ok(t)
    }

    /// The fields to add with their schemas and values, in Connect's order.
    fn additions(&self, record: &Record) -> Result<Vec<(String, Schema, Value)>, DataError> {
        let mut out = Vec::new();
        let schema = |kind: Kind, i: &Insertion| if i.optional { Schema::new(kind).optional() } else { Schema::new(kind) };
        if let Some(i) = &self.topic {
            out.push((i.name.clone(), schema(Kind::String, i), Value::String(record.topic.clone())));
        }
        if let Some(i) = &self.partition {
            out.push((i.name.clone(), schema(Kind::Int32, i), record.partition.map_or(Value::Null, Value::Int32)));
        }
        if let Some(i) = &self.offset {
            let offset = record.offset.ok_or_else(|| {
                DataError::new("Only SinkRecord supported for [field insertion], found: org.apache.kafka.connect.source.SourceRecord")
            })?;
            out.push((i.name.clone(), schema(Kind::Int64, i), Value::Int64(offset)));
        }
        if let Some(i) = &self.timestamp {
            let s = if i.optional { Schema::timestamp().optional() } else { Schema::timestamp() };
            out.push((i.name.clone(), s, record.timestamp.map_or(Value::Null, Value::Timestamp)));
        }
        if let Some((i, v)) = &self.static_field {
            out.push((i.name.clone(), schema(Kind::String, i), Value::String(v.clone())));
        }
        Ok(out)
    }
}

impl Transform for InsertField {
    fn apply(&self, record: Record) -> Result<Option<Record>, DataError> {
        let (schema, value) = record.operating(self.side);
        if value.is_null() {
            return Ok(Some(record));
        }
        let additions = self.additions(&record)?;
        let (schema, value) = match schema {
            None => {
                let mut entries = require_map(value, "field insertion")?.to_vec();
                for (name, _, v) in additions {
                    // Schemaless, a timestamp is the raw long.
                    let v = if let Value::Timestamp(ms) = v { Value::Int64(ms) } else { v };
                    map_put(&mut entries, &name, v);
                }
                (None, Value::Map(entries))
            }
            Some(schema) => {
                let fields = require_struct(value, "field insertion")?;
                let mut new_fields: Vec<Field> = schema.fields().to_vec();
                let mut values: Vec<(String, Value)> =
                    schema.fields().iter().map(|f| (f.name.clone(), field_value(fields, schema, &f.name, self.with_default))).collect();
                for (name, s, v) in additions {
                    if new_fields.iter().any(|f| f.name == name) {
                        return Err(DataError::new(format!("Cannot create field because of field name duplication {name}")));
                    }
                    new_fields.push(Field::new(&name, s));
                    values.push((name, v));
                }
                (Some(copy_basics(schema, Kind::Struct(new_fields))), Value::Struct(values))
            }
        };
        Ok(Some(record.with(self.side, schema, value)))
    }
}

/// `ReplaceField$Key` / `$Value`.
pub struct ReplaceField {
    side: Side,
    exclude: Vec<String>,
    include: Vec<String>,
    renames: Vec<(String, String)>,
    with_default: bool,
}

impl ReplaceField {
    /// From its keys.
    pub fn new(side: Side, conf: &Conf<'_>) -> Result<Self, String> {
        let raw = conf.list("renames");
        let mut renames = Vec::with_capacity(raw.len());
        for mapping in &raw {
            let parts: Vec<&str> = java_split(mapping, ':');
            match parts.as_slice() {
                [from, to] => renames.push((from.to_string(), to.to_string())),
                _ => return Err(invalid(&format!("[{}]", raw.join(", ")), "renames", &format!("Invalid rename mapping: {mapping}"))),
            }
        }
        Ok(Self {
            side,
            exclude: conf.list("exclude"),
            include: conf.list("include"),
            renames,
            with_default: conf.replace_null_with_default()?,
        })
    }

    fn keeps(&self, name: &str) -> bool {
        !self.exclude.iter().any(|e| e == name) && (self.include.is_empty() || self.include.iter().any(|i| i == name))
    }

    fn renamed<'n>(&'n self, name: &'n str) -> &'n str {
        self.renames.iter().find(|(from, _)| from == name).map_or(name, |(_, to)| to.as_str())
    }
}

/// Java's `String.split(char)`: trailing empty parts are dropped.
fn java_split(text: &str, sep: char) -> Vec<&str> {
    let mut parts: Vec<&str> = text.split(sep).collect();
    while parts.len() > 1 && parts.last() == Some(&"") {
        parts.pop();
    }
    if parts == [""] && !text.is_empty() {
        parts.clear();
    }
    parts
}

impl Transform for ReplaceField {
    fn apply(&self, record: Record) -> Result<Option<Record>, DataError> {
        let (schema, value) = record.operating(self.side);
        if value.is_null() {
            return Ok(Some(record));
        }
        let (schema, value) = match schema {
            None => {
                let entries = require_map(value, "field replacement")?;
                let mut out = Vec::with_capacity(entries.len());
                for (k, v) in entries {
                    if let Some(name) = k.as_str().filter(|n| self.keeps(n)) {
                        map_put(&mut out, self.renamed(name), v.clone());
                    }
                }
                (None, Value::Map(out))
            }
            Some(schema) => {
                let fields = require_struct(value, "field replacement")?;
                let mut new_fields: Vec<Field> = Vec::new();
                let mut values = Vec::new();
                for f in schema.fields().iter().filter(|f| self.keeps(&f.name)) {
                    let name = self.renamed(&f.name);
                    if new_fields.iter().any(|n| n.name == name) {
                        return Err(DataError::new(format!("Cannot create field because of field name duplication {name}")));
                    }
                    new_fields.push(Field::new(name, f.schema.clone()));
                    values.push((name.to_string(), field_value(fields, schema, &f.name, self.with_default)));
                }
                (Some(copy_basics(schema, Kind::Struct(new_fields))), Value::Struct(values))
            }
        };
        Ok(Some(record.with(self.side, schema, value)))
    }
}

/// `MaskField$Key` / `$Value`.
pub struct MaskField {
    side: Side,
    fields: Vec<String>,
    replacement: Option<String>,
    with_default: bool,
}

impl MaskField {
    /// From its keys.
    pub fn new(side: Side, conf: &Conf<'_>) -> Result<Self, String> {
        let replacement = match conf.string("replacement") {
            Some("") => return Err(invalid("", "replacement", "String may not be empty")),
            r => r.map(str::to_string),
        };
        Ok(Self { side, fields: conf.non_empty_list("fields")?, replacement, with_default: conf.replace_null_with_default()? })
    }

    fn masked(&self, value: &Value) -> Result<Value, DataError> {
        if value.is_null() {
            return Ok(Value::Null);
        }
        match &self.replacement {
            None => Ok(match value {
                Value::Boolean(_) => Value::Boolean(false),
                Value::Int8(_) => Value::Int8(0),
                Value::Int16(_) => Value::Int16(0),
                Value::Int32(_) => Value::Int32(0),
                Value::Int64(_) => Value::Int64(0),
                Value::Float32(_) => Value::Float32(0.0),
                Value::Float64(_) => Value::Float64(0.0),
                Value::Decimal(_) => Value::Decimal(Decimal { unscaled: 0, scale: 0 }),
                Value::Date(_) => Value::Date(0),
                Value::Time(_) => Value::Time(0),
                Value::Timestamp(_) => Value::Timestamp(0),
                Value::String(_) => Value::String(String::new()),
                Value::Array(_) => Value::Array(Vec::new()),
                Value::Map(_) => Value::Map(Vec::new()),
                other => return Err(DataError::new(format!("Cannot mask value of type: class {}", java_class(other)))),
            }),
            Some(r) => {
                let number = || -> Result<f64, DataError> {
                    r.trim()
                        .parse::<f64>()
                        .map_err(|_| DataError::new(format!("Unable to convert {r} (class java.lang.String) to a number")))
                };
                // Values.convertToX: through BigDecimal, truncated toward zero, then narrowed (wrapping).
                let whole = || -> Result<i64, DataError> { Ok(number()?.trunc() as i64) };
                Ok(match value {
                    Value::Int8(_) => Value::Int8(whole()? as i8),
                    Value::Int16(_) => Value::Int16(whole()? as i16),
                    Value::Int32(_) => Value::Int32(whole()? as i32),
                    Value::Int64(_) => Value::Int64(whole()?),
                    Value::Float32(_) => Value::Float32(number()? as f32),
                    Value::Float64(_) => Value::Float64(number()?),
                    Value::String(_) => Value::String(r.clone()),
                    Value::Decimal(_) => {
                        let scale = r.split_once('.').map_or(0, |(_, f)| f.len() as i32);
                        Value::Decimal(
                            Decimal::parse(r, scale)
                                .map_err(|_| DataError::new(format!("Unable to convert {r} (class java.lang.String) to number")))?,
                        )
                    }
                    other => {
                        return Err(DataError::new(format!(
                            "Cannot mask value of type class {} with custom replacement.",
                            java_class(other)
                        )));
                    }
                })
            }
        }
    }
}

impl Transform for MaskField {
    fn apply(&self, record: Record) -> Result<Option<Record>, DataError> {
        let (schema, value) = record.operating(self.side);
        let (schema, value) = match schema {
            None => {
                let entries = require_map(value, "mask fields")?;
                let mut out = entries.to_vec();
                for f in &self.fields {
                    let masked = self.masked(map_get(entries, f).unwrap_or(&Value::Null))?;
                    map_put(&mut out, f, masked);
                }
                (None, Value::Map(out))
            }
            Some(schema) => {
                let fields = require_struct(value, "mask fields")?;
                let mut out = Vec::with_capacity(schema.fields().len());
                for f in schema.fields() {
                    let v = field_value(fields, schema, &f.name, self.with_default);
                    let v = if self.fields.contains(&f.name) { self.masked(&v)? } else { v };
                    check_put(&f.name, &f.schema, &v)?;
                    out.push((f.name.clone(), v));
                }
                (Some(schema.clone()), Value::Struct(out))
            }
        };
        Ok(Some(record.with(self.side, schema, value)))
    }
}

/// `ValueToKey`.
pub struct ValueToKey {
    fields: Vec<String>,
    with_default: bool,
}

impl ValueToKey {
    /// From its keys.
    pub fn new(conf: &Conf<'_>) -> Result<Self, String> {
        Ok(Self { fields: conf.non_empty_list("fields")?, with_default: conf.replace_null_with_default()? })
    }
}

impl Transform for ValueToKey {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, DataError> {
        match &record.value_schema {
            None => {
                let entries = require_map(&record.value, "copying fields from value to key")?;
                let key: Vec<(Value, Value)> =
                    self.fields.iter().map(|f| (Value::String(f.clone()), map_get(entries, f).cloned().unwrap_or(Value::Null))).collect();
                record.key_schema = None;
                record.key = Value::Map(key);
            }
            Some(schema) => {
                let fields = require_struct(&record.value, "copying fields from value to key")?;
                let mut key_fields: Vec<Field> = Vec::new();
                let mut key = Vec::new();
                for name in &self.fields {
                    let f = schema.field(name).ok_or_else(|| DataError::new(format!("Field does not exist: {name}")))?;
                    if key_fields.iter().any(|k| &k.name == name) {
                        return Err(DataError::new(format!("Cannot create field because of field name duplication {name}")));
                    }
                    key_fields.push(f.clone());
                    key.push((name.clone(), field_value(fields, schema, name, self.with_default)));
                }
                record.key_schema = Some(Schema::new(Kind::Struct(key_fields)));
                record.key = Value::Struct(key);
            }
        }
        Ok(Some(record))
    }
}

/// `ExtractField$Key` / `$Value` (a top-level field, or a dotted path with
/// `field.syntax.version=V2`).
pub struct ExtractField {
    side: Side,
    original: String,
    path: Vec<String>,
    with_default: bool,
}

impl ExtractField {
    /// From its keys.
    pub fn new(side: Side, conf: &Conf<'_>) -> Result<Self, String> {
        let field = conf.required("field")?;
        let version = conf.string("field.syntax.version").unwrap_or("V1");
        let path = if version.eq_ignore_ascii_case("V1") {
            vec![field.to_string()]
        } else if version.eq_ignore_ascii_case("V2") {
            path_v2(field)?
        } else {
            return Err(invalid(version, "field.syntax.version", "String must be one of (case insensitive): V1, V2"));
        };
        Ok(Self { side, original: field.to_string(), path, with_default: conf.replace_null_with_default()? })
    }
}

/// KIP-821's dotted path: steps split at `.`, a step in backticks may hold dots.
fn path_v2(path: &str) -> Result<Vec<String>, String> {
    let chars: Vec<char> = path.chars().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    loop {
        if chars.get(i) == Some(&'`') {
            // Runs to the next backtick followed by `.` or the end; `\` before it escapes it.
            let mut j = i + 1;
            let mut step = String::new();
            loop {
                match chars.get(j) {
                    None => {
                        return Err(format!(
                            "Incomplete backtick pair in path: [{path}], consider adding a backslash before backtick at position {i} to escape it"
                        ));
                    }
                    Some('\\') if chars.get(j + 1) == Some(&'`') && matches!(chars.get(j + 2), None | Some('.')) => {
                        step.push('`');
                        j += 2;
                    }
                    Some('`') if matches!(chars.get(j + 1), None | Some('.')) => break,
                    Some(c) => {
                        step.push(*c);
                        j += 1;
                    }
                }
            }
            steps.push(step);
            i = j + 1;
        } else {
            let end = (i..chars.len()).find(|k| chars[*k] == '.').unwrap_or(chars.len());
            steps.push(chars[i..end].iter().collect());
            i = end;
        }
        match chars.get(i) {
            Some('.') => i += 1,
            _ => break,
        }
        if i == chars.len() {
            steps.push(String::new());
            break;
        }
    }
    Ok(steps)
}

impl Transform for ExtractField {
    fn apply(&self, record: Record) -> Result<Option<Record>, DataError> {
        let (schema, value) = record.operating(self.side);
        let (schema, value) = match schema {
            None => {
                let mut current = value.clone();
                for step in &self.path {
                    current = match &current {
                        Value::Null => Value::Null,
                        Value::Map(entries) => map_get(entries, step).cloned().unwrap_or(Value::Null),
                        other => {
                            let purpose = if step == &self.path[0] { "field extraction" } else { "nested field access" };
                            return Err(DataError::new(format!(
                                "Only Map objects supported in absence of schema for [{purpose}], found: {}",
                                java_class(other)
                            )));
                        }
                    };
                }
                (None, current)
            }
            Some(schema) => {
                if !value.is_null() {
                    require_struct(value, "field extraction")?;
                }
                let mut field_schema = schema;
                for step in &self.path {
                    if !matches!(field_schema.kind, Kind::Struct(_)) {
                        return Err(DataError::new("Cannot look up fields on non-struct type"));
                    }
                    field_schema = match field_schema.field(step) {
                        Some(f) => &f.schema,
                        None => return Err(DataError::new(format!("Unknown field: {}", self.original))),
                    };
                }
                let mut current = value.clone();
                let mut parent = schema;
                for (i, step) in self.path.iter().enumerate() {
                    let last = i + 1 == self.path.len();
                    current = match &current {
                        Value::Struct(fields) => field_value(fields, parent, step, !last || self.with_default),
                        _ => Value::Null,
                    };
                    if let Some(f) = parent.field(step) {
                        parent = &f.schema;
                    }
                }
                (Some(field_schema.clone()), current)
            }
        };
        Ok(Some(record.with(self.side, schema, value)))
    }
}

/// `HoistField$Key` / `$Value`.
pub struct HoistField {
    side: Side,
    field: String,
}

impl HoistField {
    /// From its keys.
    pub fn new(side: Side, conf: &Conf<'_>) -> Result<Self, String> {
        Ok(Self { side, field: conf.required("field")?.to_string() })
    }
}

impl Transform for HoistField {
    fn apply(&self, record: Record) -> Result<Option<Record>, DataError> {
        let (schema, value) = record.operating(self.side);
        let (schema, value) = match schema {
            None => (None, Value::Map(vec![(Value::String(self.field.clone()), value.clone())])),
            Some(schema) => {
                check_put(&self.field, schema, value)?;
                (
                    Some(Schema::new(Kind::Struct(vec![Field::new(&self.field, schema.clone())]))),
                    Value::Struct(vec![(self.field.clone(), value.clone())]),
                )
            }
        };
        Ok(Some(record.with(self.side, schema, value)))
    }
}

/// `SetSchemaMetadata$Key` / `$Value`.
pub struct SetSchemaMetadata {
    side: Side,
    name: Option<String>,
    version: Option<i32>,
    with_default: bool,
}

impl SetSchemaMetadata {
    /// From its keys.
    pub fn new(side: Side, conf: &Conf<'_>) -> Result<Self, String> {
        let version = match conf.string("schema.version") {
            None => None,
            Some(v) => Some(v.trim().parse::<i32>().map_err(|_| invalid(v, "schema.version", "Not a number of type INT"))?),
        };
        let name = conf.string("schema.name").map(str::to_string);
        if name.is_none() && version.is_none() {
            return Err("Neither schema name nor version configured".into());
        }
        Ok(Self { side, name, version, with_default: conf.replace_null_with_default()? })
    }
}

impl Transform for SetSchemaMetadata {
    fn apply(&self, record: Record) -> Result<Option<Record>, DataError> {
        let (schema, value) = record.operating(self.side);
        let Some(schema) = schema else {
            if value.is_null() {
                return Ok(Some(record));
            }
            return Err(DataError::new("Schema required for [updating schema metadata]"));
        };
        let mut updated = schema.clone();
        if let Some(n) = &self.name {
            updated.name = Some(n.clone());
        }
        if let Some(v) = self.version {
            updated.version = Some(v);
        }
        let value = match value {
            Value::Struct(fields) => Value::Struct(
                schema.fields().iter().map(|f| (f.name.clone(), field_value(fields, schema, &f.name, self.with_default))).collect(),
            ),
            other => other.clone(),
        };
        Ok(Some(record.with(self.side, Some(updated), value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_paths_split_at_dots_outside_backticks() {
        assert_eq!(path_v2("a.b").expect("path"), ["a", "b"]);
        assert_eq!(path_v2("`a.b`.c").expect("path"), ["a.b", "c"]);
        assert_eq!(path_v2("`foo`bar`.baz").expect("path"), ["foo`bar", "baz"]);
        assert_eq!(path_v2("a.").expect("path"), ["a", ""]);
        assert!(path_v2("`a.b").expect_err("open").starts_with("Incomplete backtick pair in path: [`a.b]"));
    }

    #[test]
    fn java_split_drops_trailing_empties() {
        assert_eq!(java_split("a:b", ':'), ["a", "b"]);
        assert_eq!(java_split("a:", ':'), ["a"]);
        assert_eq!(java_split("a:b:c", ':'), ["a", "b", "c"]);
    }
}
