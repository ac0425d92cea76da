//! A source unit's converters: what turns the component's record (the sys_id and the row's JSON
//! as read) into the key and value bytes the user's converters write. The table's schema arrives
//! in a batch's `value-schema` (ADR 0027); it is registered (value and key) before any record
//! under it is produced, and each row is typed by it ([`snow_data::snow_text::row`]).

use std::collections::BTreeSet;

use serde_json::Value as Json;
use snow_data::json_text::{self, Decimals};
use snow_data::transform::Record;
use snow_data::{Schema, Value, avro, connect_json, json_schema, protobuf, snow_text, wire};

use super::Converters;
use super::registry::{Registry, RegistryError};
use super::spec::{ConverterSpec, Format};

/// Why a record could not be converted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowProblem {
    /// The row does not fit the table's schema (a bad row: `snow.bad.row.behavior` decides).
    Bad(String),
    /// Nothing can be converted until this is fixed (no schema yet, a converter error).
    Stop(String),
    /// The registry could not be reached: the table tries again from its stored offset.
    Retry(String),
}

/// Why a table's schema could not be registered or read: `retry` when the registry was out of
/// reach (the unit reopens at its stored offset and tries again, as a sink holds its partition),
/// else the table stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableFailure {
    /// What happened, naming the subject.
    pub message: String,
    /// True when trying again later may succeed.
    pub retry: bool,
}

impl std::fmt::Display for TableFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for TableFailure {
    fn from(message: String) -> Self {
        Self { message, retry: false }
    }
}

impl From<&str> for TableFailure {
    fn from(message: &str) -> Self {
        Self { message: message.to_string(), retry: false }
    }
}

impl TableFailure {
    /// The registry's failure `e`, said as `what`.
    fn registry(what: String, e: &RegistryError) -> Self {
        Self { message: format!("{what}: {e}"), retry: e.is_transient() }
    }
}

/// A record's key and value bytes, and the row's fields its schema left out (first seen now).
pub type ConvertedRow = (Option<Vec<u8>>, Option<Vec<u8>>, Vec<String>);

/// The registered forms of the table's value schema.
struct Registered {
    schema: Schema,
    /// The subject's latest schema records are written with (`use.latest.version`).
    writer: Option<Schema>,
    /// The registry id of the value schema (formats with a registry).
    value_id: Option<u32>,
    /// The schema as `JsonConverter`'s envelope carries it, written once.
    envelope_schema: String,
}

/// One unit's converters and the table schema it last registered.
pub struct SourceConverters {
    converters: Converters,
    table: Option<Registered>,
    /// The registry id of the key schema, per topic.
    key_id: Option<(String, u32)>,
    /// Fields rows carried that the schema does not have (reported once each).
    dropped_seen: BTreeSet<String>,
    /// Registry ids of the schemas transformed records carried, by key or value, topic and schema
    /// (a transform may reshape the schema or route the record: each pair is registered once),
    /// with the subject's latest schema under `use.latest.version`.
    transformed_ids: Vec<(Subject, Writes)>,
}

/// A transformed record's part: key or value, topic and schema.
type Subject = (bool, String, Schema);
/// Its registry id, and the subject's latest schema under `use.latest.version`.
type Writes = (u32, Option<Schema>);

/// Most transformed schemas remembered per unit.
const MAX_TRANSFORMED_IDS: usize = 64;

impl SourceConverters {
    /// The unit's converters.
    pub fn new(converters: Converters) -> Self {
        Self { converters, table: None, key_id: None, dropped_seen: BTreeSet::new(), transformed_ids: Vec::new() }
    }

    /// A row as Connect data for transforms: typed by the table's schema when the value converter
    /// needs types, else schemaless (the row's JSON as `JsonConverter` reads it without schemas);
    /// and the row's fields the schema does not have that were not reported before.
    pub fn connect_value(&mut self, value: Option<&[u8]>) -> Result<(Option<Schema>, Value, Vec<String>), RowProblem> {
        let Some(v) = value else { return Ok((None, Value::Null, Vec::new())) };
        if !self.converters.spec.typed_value() {
            let (schema, value) = connect_json::decode(Some(v), false).map_err(|e| RowProblem::Bad(format!("the row is not JSON: {e}")))?;
            return Ok((schema, value, Vec::new()));
        }
        let (typed, dropped) = self.typed_row(v)?;
        let schema = self.table.as_ref().map(|t| t.schema.clone());
        Ok((schema, typed, self.newly_dropped(dropped)))
    }

    /// The row's JSON typed by the table's schema, and the row's fields the schema lacks.
    fn typed_row(&self, v: &[u8]) -> Result<(Value, Vec<String>), RowProblem> {
        let table = self.table.as_ref().ok_or_else(|| RowProblem::Stop("no value schema arrived before the records".into()))?;
        snow_text::row(v, &table.schema).map_err(|e| RowProblem::Bad(e.to_string()))
    }

    /// Of `dropped`, the fields not reported before (each is reported once).
    fn newly_dropped(&mut self, dropped: Vec<String>) -> Vec<String> {
        dropped.into_iter().filter(|f| self.dropped_seen.insert(f.clone())).collect()
    }

    /// A transformed record's key and value bytes in the converters' formats; a schema the
    /// registry has not seen for the record's topic is registered first.
    pub async fn encode_record(&mut self, record: &Record) -> Result<(Option<Vec<u8>>, Option<Vec<u8>>), RowProblem> {
        let key = self.encode_part(true, &record.topic, record.key_schema.as_ref(), &record.key).await?;
        let value = self.encode_part(false, &record.topic, record.value_schema.as_ref(), &record.value).await?;
        Ok((key, value))
    }

    async fn encode_part(
        &mut self,
        is_key: bool,
        topic: &str,
        schema: Option<&Schema>,
        value: &Value,
    ) -> Result<Option<Vec<u8>>, RowProblem> {
        let spec = if is_key { self.converters.spec.key.clone() } else { self.converters.spec.value.clone() };
        let plain = |value: &Value| -> Result<Option<Vec<u8>>, RowProblem> {
            Ok(match value {
                Value::Null => None,
                Value::String(s) => Some(s.clone().into_bytes()),
                other => {
                    let mut text = String::new();
                    json_text::write(other, Decimals::Base64, &mut text).map_err(|e| RowProblem::Bad(e.to_string()))?;
                    Some(text.into_bytes())
                }
            })
        };
        let Some(spec) = spec.filter(|s| s.format != Format::AsIs) else { return plain(value) };
        match (spec.format, schema) {
            (Format::Json, _) => connect_json::encode(schema, value, spec.schemas_enable).map_err(|e| RowProblem::Bad(e.to_string())),
            (_, None) if value.is_null() => Ok(None),
            (_, None) => Err(RowProblem::Stop(format!(
                "{} needs a schema; a transform left the record's {} without one",
                spec.class,
                if is_key { "key" } else { "value" }
            ))),
            (_, Some(schema)) => {
                let (id, writer) = self
                    .transformed_id(&spec, is_key, topic, schema)
                    .await
                    .map_err(|f| if f.retry { RowProblem::Retry(f.message) } else { RowProblem::Stop(f.message) })?;
                match writer {
                    Some(writer) => encode(&spec, &writer, Some(id), &project(value, &writer)),
                    None => encode(&spec, schema, Some(id), value),
                }
                .map(Some)
                .map_err(RowProblem::Bad)
            }
        }
    }

    /// The registry id of `schema` for `topic`, registered (or looked up) once; under
    /// `use.latest.version`, the subject's latest schema and its id.
    async fn transformed_id(
        &mut self,
        spec: &ConverterSpec,
        is_key: bool,
        topic: &str,
        schema: &Schema,
    ) -> Result<(u32, Option<Schema>), TableFailure> {
        if let Some((_, found)) = self.transformed_ids.iter().find(|((k, t, s), _)| *k == is_key && t == topic && s == schema) {
            return Ok(found.clone());
        }
        let registry = if is_key { self.converters.key_registry.clone() } else { self.converters.value_registry.clone() };
        let registry = registry.ok_or_else(|| format!("no registry for {}", spec.class))?;
        let subject = spec.subject.subject(topic, is_key, schema.name.as_deref());
        let found = if spec.use_latest {
            let (id, writer) = latest_writer(&registry, spec, &subject).await?;
            (id, Some(writer))
        } else {
            let text = registry_text(spec, schema)?;
            let id = register(&registry, spec, &subject, &text).await.map_err(|e| {
                let part = if is_key { "key" } else { "value" };
                TableFailure::registry(format!("registering the transformed {part} schema under subject {subject} failed"), &e)
            })?;
            (id, None)
        };
        if self.transformed_ids.len() >= MAX_TRANSFORMED_IDS {
            self.transformed_ids.remove(0);
        }
        self.transformed_ids.push(((is_key, topic.to_string(), schema.clone()), found.clone()));
        Ok(found)
    }

    /// True when records are converted (a key or value converter other than the bytes as they are).
    pub fn active(&self) -> bool {
        self.converters.spec.key.as_ref().is_some_and(|k| k.format != Format::AsIs) || self.converters.spec.typed_value()
    }

    /// Takes the table's schema `text` for records to `topic`: parses it and registers what the
    /// converters need. The error names what the registry refused and the fields that changed.
    pub async fn schema(&mut self, topic: &str, text: &str) -> Result<(), TableFailure> {
        let json: Json = serde_json::from_str(text).map_err(|e| format!("the component sent a value schema that is not JSON: {e}"))?;
        let mut schema =
            connect_json::schema_from_json(&json).map_err(|e| format!("the component sent a value schema Connect cannot read: {e}"))?;
        let mut writer = None;
        let value_id = match &self.converters.spec.value {
            Some(spec) if spec.use_latest => {
                let registry = self.converters.value_registry.as_ref().ok_or("no registry for value.converter")?;
                let subject = spec.subject.subject(topic, false, schema.name.as_deref());
                let (id, latest) = latest_writer(registry, spec, &subject).await?;
                writer = Some(latest);
                Some(id)
            }
            Some(spec) if spec.format.schema_type().is_some() => {
                let registry = self.converters.value_registry.as_ref().ok_or("no registry for value.converter")?;
                let subject = spec.subject.subject(topic, false, schema.name.as_deref());
                if spec.format == Format::Protobuf {
                    schema = with_kept_numbers(registry, &subject, schema).await?;
                }
                let text = registry_text(spec, &schema)?;
                match register(registry, spec, &subject, &text).await {
                    Ok(id) => Some(id),
                    Err(e) => {
                        let changed = self.table.as_ref().map(|old| changes(&old.schema, &schema)).filter(|c| !c.is_empty());
                        let what = changed.map(|c| format!(" (the table's dictionary changed: {c})")).unwrap_or_default();
                        return Err(TableFailure::registry(
                            format!("registering the value schema under subject {subject} failed{what}"),
                            &e,
                        ));
                    }
                }
            }
            _ => None,
        };
        let envelope_schema = connect_json::schema_to_json(&schema).to_string();
        self.table = Some(Registered { schema, writer, value_id, envelope_schema });
        Ok(())
    }

    /// Registers the key schema for `topic` when the key converter uses a registry and has not yet.
    pub async fn key_schema(&mut self, topic: &str) -> Result<(), TableFailure> {
        let Some(spec) = self.converters.spec.key.as_ref().filter(|k| k.format.schema_type().is_some()) else { return Ok(()) };
        if self.key_id.as_ref().is_some_and(|(t, _)| t == topic) {
            return Ok(());
        }
        let registry = self.converters.key_registry.as_ref().ok_or("no registry for key.converter")?;
        let subject = spec.subject.subject(topic, true, None);
        let id = if spec.use_latest {
            let (id, writer) = latest_writer(registry, spec, &subject).await?;
            if writer.kind != snow_data::Kind::String {
                return Err(
                    format!("use.latest.version: the latest key schema of subject {subject} is not a string, which a sys_id is").into()
                );
            }
            id
        } else {
            let text = registry_text(spec, &Schema::new(snow_data::Kind::String))?;
            register(registry, spec, &subject, &text)
                .await
                .map_err(|e| TableFailure::registry(format!("registering the key schema under subject {subject} failed"), &e))?
        };
        self.key_id = Some((topic.to_string(), id));
        Ok(())
    }

    /// The key and value bytes of one record (`key` the sys_id, `value` the row's JSON as read),
    /// and the row's fields the schema does not have that were not reported before.
    pub fn record(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) -> Result<ConvertedRow, RowProblem> {
        let key_out = match (key, &self.converters.spec.key) {
            (Some(k), Some(spec)) => Some(self.key(spec, k)?),
            (k, _) => k.map(<[u8]>::to_vec),
        };
        let (value_out, dropped) = match (value, &self.converters.spec.value) {
            (Some(v), Some(spec)) if spec.format != Format::AsIs => {
                let (typed, dropped) = self.typed_row(v)?;
                let table = self.table.as_ref().ok_or_else(|| RowProblem::Stop("no value schema arrived before the records".into()))?;
                (Some(encode_row(spec, table, &typed).map_err(RowProblem::Bad)?), dropped)
            }
            (v, _) => (v.map(<[u8]>::to_vec), Vec::new()),
        };
        Ok((key_out, value_out, self.newly_dropped(dropped)))
    }

    fn key(&self, spec: &ConverterSpec, sys_id: &[u8]) -> Result<Vec<u8>, RowProblem> {
        let text = std::str::from_utf8(sys_id).map_err(|_| RowProblem::Bad("the key is not UTF-8".into()))?;
        let id = self.key_id.as_ref().map(|(_, id)| *id);
        encode(spec, &Schema::new(snow_data::Kind::String), id, &Value::String(text.to_string())).map_err(RowProblem::Stop)
    }
}

/// The schema text the registry is given for `schema` in `spec`'s format.
fn registry_text(spec: &ConverterSpec, schema: &Schema) -> Result<String, String> {
    match spec.format {
        Format::Avro => {
            avro::from_connect(schema).map(|j| j.to_string()).map_err(|e| format!("the table's schema cannot be written as Avro: {e}"))
        }
        Format::JsonSchema => Ok(json_schema::from_connect(schema).to_string()),
        Format::Protobuf => protobuf::from_connect(schema, spec.protobuf)
            .map(|w| w.text)
            .map_err(|e| format!("the schema cannot be written as Protobuf: {e}")),
        other => Err(format!("{other:?} has no registry schema here")),
    }
}

/// `use.latest.version`: the latest schema of `subject` and its id, read as the Connect schema
/// records are written under. It must be of the converter's format and one this runtime writes
/// exactly (an Avro schema Connect would not write, a Protobuf message of other shapes, is refused
/// naming what differs).
async fn latest_writer(registry: &Registry, spec: &ConverterSpec, subject: &str) -> Result<(u32, Schema), TableFailure> {
    use super::registry::SchemaType;
    let latest = registry
        .latest(subject)
        .await
        .map_err(|e| TableFailure::registry(format!("reading the latest schema of subject {subject} failed"), &e))?;
    let (id, kind, text) = latest.ok_or_else(|| format!("use.latest.version: subject {subject} has no schema registered"))?;
    let unusable =
        |why: String| format!("use.latest.version: the latest schema of subject {subject} (id {id}) cannot be written with: {why}");
    let schema = match (spec.format, kind) {
        (Format::Avro, SchemaType::Avro) => {
            let (node, schema) = avro::parse(&text).map_err(|e| unusable(e.to_string()))?;
            let ours = avro::from_connect(&schema).and_then(|j| avro::parse(&j.to_string())).map_err(|e| unusable(e.to_string()))?;
            if ours.0 != node {
                return Err(unusable("its shape is not one Connect's AvroData writes (union order, enums, fixed...)".into()).into());
            }
            schema
        }
        (Format::JsonSchema, SchemaType::Json) => {
            let json: Json = serde_json::from_str(&text).map_err(|e| unusable(format!("not JSON: {e}")))?;
            json_schema::to_connect(&json).map_err(|e| unusable(e.to_string()))?
        }
        (Format::Protobuf, SchemaType::Protobuf) => {
            let file = protobuf::parse(&text).map_err(|e| unusable(e.to_string()))?;
            let schema = protobuf::Decoder::new(&file, &[0]).map_err(|e| unusable(e.to_string()))?.schema().clone();
            if let Some(message) = file.messages.first().filter(|_| file.package != "google.protobuf") {
                protobuf::connect::writes_as(&schema, message).map_err(|e| unusable(e.to_string()))?;
            }
            schema
        }
        (format, kind) => return Err(unusable(format!("it is a {} schema, not {format:?}", kind.wire_name())).into()),
    };
    Ok((id, schema))
}

/// A struct `value` with exactly `writer`'s fields, by name (a field the value lacks is null).
fn project(value: &Value, writer: &Schema) -> Value {
    match (value, &writer.kind) {
        (Value::Struct(_), snow_data::Kind::Struct(fields)) => {
            Value::Struct(fields.iter().map(|f| (f.name.clone(), value.get(&f.name).cloned().unwrap_or(Value::Null))).collect())
        }
        _ => value.clone(),
    }
}

/// A table schema for Protobuf with its fields' numbers kept from the message `subject` last
/// registered ([`protobuf::connect::keep_numbers`]), so that a dictionary change adds fields
/// without renumbering the others.
async fn with_kept_numbers(registry: &Registry, subject: &str, schema: Schema) -> Result<Schema, TableFailure> {
    let latest = registry
        .latest(subject)
        .await
        .map_err(|e| TableFailure::registry(format!("reading the latest schema of subject {subject} failed"), &e))?;
    let Some((_, super::registry::SchemaType::Protobuf, text)) = latest else { return Ok(schema) };
    let file = protobuf::parse(&text).map_err(|e| format!("the latest schema of subject {subject} cannot be read: {e}"))?;
    let name = schema.name.as_deref().and_then(|n| n.rsplit('.').next()).unwrap_or_default();
    Ok(match file.messages.iter().find(|m| m.name == name) {
        Some(previous) => protobuf::connect::keep_numbers(&schema, previous),
        None => schema,
    })
}

async fn register(registry: &Registry, spec: &ConverterSpec, subject: &str, text: &str) -> Result<u32, RegistryError> {
    let kind = spec.format.schema_type().unwrap_or(super::registry::SchemaType::Avro);
    if spec.auto_register { registry.register(subject, kind, text).await } else { registry.lookup(subject, kind, text).await }
}

/// A row typed by the table's schema in `spec`'s format. The JSON formats write the value
/// straight to text (the row was typed by this very schema), the envelope's schema written once.
fn encode_row(spec: &ConverterSpec, table: &Registered, row: &Value) -> Result<Vec<u8>, String> {
    let mut text = String::with_capacity(2048);
    match spec.format {
        Format::Json if spec.schemas_enable => {
            text.push_str("{\"schema\":");
            text.push_str(&table.envelope_schema);
            text.push_str(",\"payload\":");
            json_text::write(row, Decimals::Base64, &mut text).map_err(|e| e.to_string())?;
            text.push('}');
            Ok(text.into_bytes())
        }
        Format::Json => {
            json_text::write(row, Decimals::Base64, &mut text).map_err(|e| e.to_string())?;
            Ok(text.into_bytes())
        }
        _ => match &table.writer {
            Some(writer) => encode(spec, writer, table.value_id, &project(row, writer)),
            None => encode(spec, &table.schema, table.value_id, row),
        },
    }
}

/// `value` under `schema` in `spec`'s format (`id`: the registry id of `schema`).
fn encode(spec: &ConverterSpec, schema: &Schema, id: Option<u32>, value: &Value) -> Result<Vec<u8>, String> {
    match spec.format {
        Format::AsIs => Ok(match value {
            Value::String(s) => s.clone().into_bytes(),
            other => connect_json::value_to_json(other, Some(schema)).map_err(|e| e.to_string())?.to_string().into_bytes(),
        }),
        Format::Json => {
            connect_json::encode(Some(schema), value, spec.schemas_enable).map(Option::unwrap_or_default).map_err(|e| e.to_string())
        }
        Format::Avro => {
            let id = id.ok_or("no registry id for the schema")?;
            let mut payload = Vec::with_capacity(256);
            avro::encode(schema, value, &mut payload).map_err(|e| e.to_string())?;
            Ok(wire::frame(id, &payload))
        }
        Format::JsonSchema => {
            let id = id.ok_or("no registry id for the schema")?;
            let mut text = String::with_capacity(256);
            json_schema::encode(value, &mut text).map_err(|e| e.to_string())?;
            Ok(wire::frame(id, text.as_bytes()))
        }
        Format::Protobuf => {
            let id = id.ok_or("no registry id for the schema")?;
            let mut payload = Vec::with_capacity(256);
            protobuf::encode(schema, value, spec.protobuf, &mut payload).map_err(|e| e.to_string())?;
            Ok(wire::frame(id, &payload))
        }
    }
}

/// What changed between two table schemas, by field: added, removed, and changed types.
fn changes(old: &Schema, new: &Schema) -> String {
    let mut out = Vec::new();
    for f in new.fields() {
        match old.field(&f.name) {
            None => out.push(format!("field {} added", f.name)),
            Some(o) if o.schema != f.schema => out.push(format!(
                "field {} changed from {} to {}",
                f.name,
                connect_json::type_label(&o.schema),
                connect_json::type_label(&f.schema)
            )),
            Some(_) => {}
        }
    }
    out.extend(old.fields().iter().filter(|f| new.field(&f.name).is_none()).map(|f| format!("field {} removed", f.name)));
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use snow_data::{Field, Kind};

    #[test]
    fn changes_name_each_field() {
        let old = Schema::record(
            "t",
            vec![Field::new("a", Schema::new(Kind::String).optional()), Field::new("b", Schema::new(Kind::Int32).optional())],
        );
        let new = Schema::record(
            "t",
            vec![Field::new("a", Schema::new(Kind::Int32).optional()), Field::new("c", Schema::new(Kind::String).optional())],
        );
        assert_eq!(changes(&old, &new), "field a changed from string to int32, field c added, field b removed");
    }
}
