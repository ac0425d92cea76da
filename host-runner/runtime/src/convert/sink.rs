//! A sink connector's converters: what turns a Kafka record in the user's format back into what
//! the sink component reads (ADR 0027), before each `put`. A typed value (Avro, JSON Schema or
//! Protobuf by registry id, Connect's JSON envelope) becomes the JSON object of a Table API write, each field in
//! ServiceNow's text form ([`snow_data::snow_text::body`]); a typed key becomes the sys_id text (a
//! string key) or a JSON object (a struct key). Formats that carry no types pass through as they
//! are: the component reads JSON itself. Writer schemas are fetched by id once and kept parsed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use snow_data::avro::Node;
use snow_data::transform::{Chain, Header, Record};
use snow_data::{Kind, Schema, Value, avro, connect_json, json_schema, protobuf, snow_text, wire};

use super::Converters;
use super::registry::{Registry, RegistryError, SchemaType};
use super::spec::{ConverterSpec, Format};
use crate::component::bindings::types::{Header as ComponentHeader, SinkRecord};

/// Why a record could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreadable {
    /// The record's own bytes are wrong (a record error: `errors.tolerance` decides).
    Record {
        /// What is wrong, naming the record.
        message: String,
        /// Where, as Connect names it: `KEY_CONVERTER`, `VALUE_CONVERTER` or `TRANSFORMATION`.
        stage: &'static str,
        /// The converter or transform that failed.
        class: String,
    },
    /// The registry could not be reached: the partition waits and tries again.
    Retry(String),
    /// The registry refuses this connector (credentials, permissions): nothing can be read.
    Stop(String),
}

/// Most writer schemas kept parsed per connector (a topic's schema history is far smaller).
const MAX_PARSED: usize = 1024;

/// A sink connector's converters and the writer schemas they have parsed; shared by its lanes.
pub struct SinkConverters {
    converters: Converters,
    parsed: Mutex<HashMap<u32, Arc<Writer>>>,
    /// Envelope schemas (`JsonConverter`, `schemas.enable=true`) by their JSON text, parsed.
    envelopes: Mutex<HashMap<String, Option<Arc<Schema>>>>,
    /// The connector's transforms (`transforms=`), run after the converters as in Connect.
    chain: Option<Arc<Chain>>,
}

/// A writer's schema from the registry, parsed.
enum Writer {
    /// Avro: the node tree the decoder walks, and its Connect schema.
    Avro(Node, Arc<Schema>),
    /// JSON Schema, as the Connect schema it reads as.
    Json(Arc<Schema>),
    /// Protobuf: the writer's file, and a decoder per message the records name (most name one).
    Protobuf(protobuf::descriptor::File, Mutex<Vec<(Vec<i32>, Arc<ProtobufReader>)>>),
}

/// A protobuf message of a writer's file, compiled, with the Connect schema it reads as.
struct ProtobufReader {
    decoder: protobuf::Decoder,
    schema: Arc<Schema>,
}

/// Most messages of one writer's file kept compiled.
const MAX_MESSAGES: usize = 64;

impl Writer {
    /// The compiled message at `path` of a protobuf writer's `file`, compiled once.
    fn protobuf_message(
        file: &protobuf::descriptor::File,
        compiled: &Mutex<Vec<(Vec<i32>, Arc<ProtobufReader>)>>,
        path: &[i32],
    ) -> Result<Arc<ProtobufReader>, snow_data::DataError> {
        if let Some((_, found)) = compiled.lock().expect("protobuf messages").iter().find(|(p, _)| p == path) {
            return Ok(found.clone());
        }
        let decoder = protobuf::Decoder::new(file, path)?;
        let reader = Arc::new(ProtobufReader { schema: Arc::new(decoder.schema().clone()), decoder });
        let mut all = compiled.lock().expect("protobuf messages");
        if all.len() >= MAX_MESSAGES {
            all.clear();
        }
        all.push((path.to_vec(), reader.clone()));
        Ok(reader)
    }
}

impl SinkConverters {
    /// The connector's converters.
    pub fn new(converters: Converters, chain: Option<Arc<Chain>>) -> Self {
        Self {
            converters,
            parsed: Mutex::new(HashMap::new()),
            envelopes: Mutex::new(HashMap::new()),
            chain: chain.filter(|c| !c.is_empty()),
        }
    }

    /// True when a record needs reading before the component gets it (a key or value converter
    /// that carries types, or transforms).
    pub fn active(&self) -> bool {
        self.chain.is_some() || [&self.converters.spec.key, &self.converters.spec.value].into_iter().flatten().any(carries_types)
    }

    /// `record` as the sink component reads it, or `None` when a transform dropped it (Filter).
    /// The error names the record and the stage that failed.
    pub async fn record(&self, record: &SinkRecord) -> Result<Option<SinkRecord>, Unreadable> {
        match &self.chain {
            None => self.converted(record).await.map(Some),
            Some(chain) => self.transformed(record, chain).await,
        }
    }

    /// `record` read by the converters and run through `chain`, then rendered for ServiceNow: a
    /// key without a typed converter is a string, a value without one is schemaless JSON (as
    /// `JsonConverter` with `schemas.enable=false` reads it), headers are strings.
    async fn transformed(&self, record: &SinkRecord, chain: &Chain) -> Result<Option<SinkRecord>, Unreadable> {
        let at = format!("{}-{}@{}", record.topic, record.partition, record.offset);
        let spec = &self.converters.spec;
        let (key_schema, key) = match (&record.key, &spec.key) {
            (Some(bytes), Some(c)) if carries_types(c) => {
                let (v, s) = self.read(c, self.converters.key_registry.as_ref(), bytes).await.map_err(|e| e.of(&at, true, c))?;
                (s.map(|s| (*s).clone()), v)
            }
            (Some(bytes), _) => (Some(Schema::new(Kind::String).optional()), Value::String(String::from_utf8_lossy(bytes).into_owned())),
            (None, _) => (None, Value::Null),
        };
        let (value_schema, value) = match (&record.value, &spec.value) {
            (Some(bytes), Some(c)) if carries_types(c) => {
                let (v, s) = self.read(c, self.converters.value_registry.as_ref(), bytes).await.map_err(|e| e.of(&at, false, c))?;
                (s.map(|s| (*s).clone()), v)
            }
            (Some(bytes), _) => {
                let (s, v) = connect_json::decode(Some(bytes), false).map_err(|e| Unreadable::Record {
                    message: format!("record {at}: the value is not JSON, which transforms need to read it: {e}"),
                    stage: "VALUE_CONVERTER",
                    class: "org.apache.kafka.connect.json.JsonConverter".into(),
                })?;
                (s, v)
            }
            (None, _) => (None, Value::Null),
        };
        let headers = record
            .headers
            .iter()
            .map(|h| Header {
                key: h.key.clone(),
                schema: Some(Schema::new(Kind::String).optional()),
                value: Value::String(String::from_utf8_lossy(&h.value).into_owned()),
            })
            .collect();
        let connect = Record {
            topic: record.topic.clone(),
            partition: Some(record.partition),
            offset: Some(record.offset),
            key_schema,
            key,
            value_schema,
            value,
            timestamp: record.timestamp_ms,
            headers,
        };
        let mut made = chain.apply(connect).await.map_err(|e| Unreadable::Record {
            message: format!("record {at}: transform {} failed: {}", e.alias, e.message),
            stage: "TRANSFORMATION",
            class: e.class,
        })?;
        if made.len() > 1 {
            return Err(Unreadable::Record {
                message: format!(
                    "record {at}: the transforms made {} records of it; a sink writes one row per Kafka record (a transform component may make several only in a source)",
                    made.len()
                ),
                stage: "TRANSFORMATION",
                class: chain.aliases().join(","),
            });
        }
        let Some(out) = made.pop() else { return Ok(None) };
        let text = |v: &Value| match v {
            Value::String(s) => s.clone().into_bytes(),
            other => snow_text::to_json(other).to_string().into_bytes(),
        };
        let value = match &out.value {
            Value::Null => None,
            v => Some(
                serde_json::Value::Object(snow_text::body(v, out.value_schema.as_ref()).map_err(|e| Unreadable::Record {
                    message: format!("record {at}: the transformed value cannot be written: {e}"),
                    stage: "TRANSFORMATION",
                    class: chain.aliases().join(","),
                })?)
                .to_string()
                .into_bytes(),
            ),
        };
        Ok(Some(SinkRecord {
            topic: out.topic.clone(),
            partition: record.partition,
            offset: record.offset,
            key: (!out.key.is_null()).then(|| text(&out.key)),
            value,
            headers: out
                .headers
                .iter()
                .map(|h| ComponentHeader { key: h.key.clone(), value: if h.value.is_null() { Vec::new() } else { text(&h.value) } })
                .collect(),
            timestamp_ms: out.timestamp,
        }))
    }

    /// `record` as the sink component reads it: the same coordinates and headers, the key and
    /// value rendered for ServiceNow. The error names the record and whether its key or value.
    async fn converted(&self, record: &SinkRecord) -> Result<SinkRecord, Unreadable> {
        let at = format!("{}-{}@{}", record.topic, record.partition, record.offset);
        let spec = &self.converters.spec;
        let key = match (&record.key, &spec.key) {
            (Some(bytes), Some(c)) if carries_types(c) => {
                let registry = self.converters.key_registry.as_ref();
                let (value, _) = self.read(c, registry, bytes).await.map_err(|e| e.of(&at, true, c))?;
                Some(match value {
                    Value::String(text) => text.into_bytes(),
                    other => snow_text::to_json(&other).to_string().into_bytes(),
                })
            }
            (key, _) => key.clone(),
        };
        let value = match (&record.value, &spec.value) {
            (Some(bytes), Some(c)) if carries_types(c) => {
                let registry = self.converters.value_registry.as_ref();
                let (value, schema) = self.read(c, registry, bytes).await.map_err(|e| e.of(&at, false, c))?;
                match value {
                    // A null value is a tombstone, as the component reads a record without one.
                    Value::Null => None,
                    value => {
                        let body = snow_text::body(&value, schema.as_deref())
                            .map_err(|e| Problem::Record(format!("read by {}: {e}", c.class)).of(&at, false, c))?;
                        Some(serde_json::Value::Object(body).to_string().into_bytes())
                    }
                }
            }
            (value, _) => value.clone(),
        };
        Ok(SinkRecord { key, value, ..record.clone() })
    }

    /// The value and schema `bytes` hold in `spec`'s format.
    async fn read(&self, spec: &ConverterSpec, registry: Option<&Registry>, bytes: &[u8]) -> Result<(Value, Option<Arc<Schema>>), Problem> {
        let bad = |e: snow_data::DataError| Problem::Record(format!("could not be read by {}: {e}", spec.class));
        match spec.format {
            Format::Json if spec.schemas_enable => {
                let (schema, value) = connect_json::decode_envelope(bytes, |text| self.envelope_schema(text)).map_err(bad)?;
                Ok((value, schema))
            }
            Format::Json => {
                let (schema, value) = connect_json::decode(Some(bytes), false).map_err(bad)?;
                Ok((value, schema.map(Arc::new)))
            }
            Format::Avro | Format::JsonSchema | Format::Protobuf => {
                let (id, payload) = wire::unframe(bytes).map_err(bad)?;
                let registry = registry.ok_or_else(|| Problem::Stop(format!("{} has no registry", spec.class)))?;
                let writer = self.writer_schema(registry, id, spec.format).await?;
                match &*writer {
                    Writer::Avro(node, schema) => {
                        let value = avro::decode(node, payload).map_err(|e| bad(e.at(format!("schema id {id}"))))?;
                        Ok((value, Some(schema.clone())))
                    }
                    Writer::Json(schema) => {
                        let json: serde_json::Value = serde_json::from_slice(payload)
                            .map_err(|e| bad(snow_data::DataError::new(format!("not JSON after the registry framing: {e}"))))?;
                        let value = json_schema::decode(&json, schema).map_err(|e| bad(e.at(format!("schema id {id}"))))?;
                        Ok((value, Some(schema.clone())))
                    }
                    Writer::Protobuf(file, compiled) => {
                        let (path, message) = protobuf::codec::read_indexes(payload).map_err(bad)?;
                        let reader = Writer::protobuf_message(file, compiled, &path)
                            .map_err(|e| Problem::Record(format!("names schema id {id}, message {path:?}, which cannot be read: {e}")))?;
                        let value = reader.decoder.decode(message).map_err(|e| bad(e.at(format!("schema id {id}"))))?;
                        Ok((value, Some(reader.schema.clone())))
                    }
                }
            }
            Format::AsIs => Err(Problem::Stop(format!("{} carries no types to read", spec.class))),
        }
    }

    /// An envelope's schema from its JSON text, parsed once per connector (records of a topic carry
    /// the same schema text, which parsing dominated: docs/benchmarks.md "Value formats").
    fn envelope_schema(&self, text: &str) -> Result<Option<Arc<Schema>>, snow_data::DataError> {
        if let Some(found) = self.envelopes.lock().expect("envelope schema cache").get(text) {
            return Ok(found.clone());
        }
        let schema = connect_json::schema_from_text(text)?.map(Arc::new);
        let mut cache = self.envelopes.lock().expect("envelope schema cache");
        if cache.len() >= MAX_PARSED {
            cache.clear();
        }
        cache.insert(text.to_string(), schema.clone());
        Ok(schema)
    }

    /// The writer's schema with registry id `id`, parsed (once per connector); it must be of the
    /// registry type `format` reads.
    async fn writer_schema(&self, registry: &Registry, id: u32, format: Format) -> Result<Arc<Writer>, Problem> {
        if let Some(found) = self.parsed.lock().expect("schema cache").get(&id) {
            return Ok(found.clone());
        }
        let (kind, text) = registry.schema(id).await.map_err(|e| fetch_failed(id, e))?;
        let unreadable = |e: snow_data::DataError| Problem::Record(format!("names schema id {id}, which cannot be read: {e}"));
        let writer = match (format.schema_type(), kind) {
            (Some(SchemaType::Avro), SchemaType::Avro) => {
                let (node, schema) = avro::parse(&text).map_err(unreadable)?;
                Writer::Avro(node, Arc::new(schema))
            }
            (Some(SchemaType::Json), SchemaType::Json) => {
                let json: serde_json::Value =
                    serde_json::from_str(&text).map_err(|e| unreadable(snow_data::DataError::new(format!("not JSON: {e}"))))?;
                Writer::Json(Arc::new(json_schema::to_connect(&json).map_err(unreadable)?))
            }
            (Some(SchemaType::Protobuf), SchemaType::Protobuf) => {
                Writer::Protobuf(protobuf::parse(&text).map_err(unreadable)?, Mutex::new(Vec::new()))
            }
            (expected, _) => {
                let expected = expected.map_or("?", SchemaType::wire_name);
                return Err(Problem::Record(format!("names schema id {id}, a {} schema, not {expected}", kind.wire_name())));
            }
        };
        let writer = Arc::new(writer);
        let mut cache = self.parsed.lock().expect("schema cache");
        if cache.len() >= MAX_PARSED {
            cache.clear();
        }
        cache.insert(id, writer.clone());
        Ok(writer)
    }
}

/// A problem reading one part of a record, before it is said of which.
enum Problem {
    /// The bytes are wrong.
    Record(String),
    /// Try again later.
    Retry(String),
    /// Nothing can be read.
    Stop(String),
}

impl Problem {
    /// The problem, said of record `at`'s key or value read by `spec`.
    fn of(self, at: &str, key: bool, spec: &ConverterSpec) -> Unreadable {
        let part = if key { "key" } else { "value" };
        match self {
            Problem::Record(m) => Unreadable::Record {
                message: format!("record {at}: the {part} {m}"),
                stage: if key { "KEY_CONVERTER" } else { "VALUE_CONVERTER" },
                class: spec.class.clone(),
            },
            Problem::Retry(m) => Unreadable::Retry(format!("record {at}: the {part}: {m}")),
            Problem::Stop(m) => Unreadable::Stop(format!("record {at}: the {part}: {m}")),
        }
    }
}

/// True for converters whose bytes carry types the component cannot read itself.
fn carries_types(spec: &ConverterSpec) -> bool {
    match spec.format {
        Format::AsIs => false,
        Format::Json => spec.schemas_enable,
        Format::Avro | Format::JsonSchema | Format::Protobuf => true,
    }
}

/// What a failed schema fetch means for the record: an id the registry does not have is the
/// record's (Connect fails the record the same way), a registry out of reach is waited for, and a
/// refusal of this client stops the connector's reading.
fn fetch_failed(id: u32, e: RegistryError) -> Problem {
    match &e {
        RegistryError::Refused { status: 404, .. } => {
            Problem::Record(format!("names schema id {id}, which the registry does not have: {e}"))
        }
        RegistryError::Refused { status, .. } if *status < 500 && *status != 429 => {
            Problem::Stop(format!("fetching schema id {id} was refused: {e}"))
        }
        _ => Problem::Retry(format!("fetching schema id {id}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::spec::ConvertSpec;

    fn converters(pairs: &[(&str, &str)]) -> SinkConverters {
        let entries = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut errors = Vec::new();
        let spec = ConvertSpec::from_entries(&entries, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        SinkConverters::new(Converters::new(spec, None), None)
    }

    fn record(key: Option<&str>, value: Option<&[u8]>) -> SinkRecord {
        SinkRecord {
            topic: "t".into(),
            partition: 0,
            offset: 3,
            key: key.map(|k| k.as_bytes().to_vec()),
            value: value.map(<[u8]>::to_vec),
            headers: Vec::new(),
            timestamp_ms: None,
        }
    }

    #[tokio::test]
    async fn a_connect_envelope_is_written_in_servicenow_text() {
        let c = converters(&[("value.converter", "org.apache.kafka.connect.json.JsonConverter")]);
        assert!(c.active());
        let value = br#"{"schema":{"type":"struct","fields":[
            {"field":"short_description","type":"string","optional":true},
            {"field":"opened_at","type":"int64","name":"org.apache.kafka.connect.data.Timestamp","optional":true},
            {"field":"cost","type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"},"optional":true}]},
            "payload":{"short_description":"Printer","opened_at":1714557600000,"cost":"MDk="}}"#;
        let out = c.record(&record(Some("abc"), Some(value))).await.expect("read").expect("kept");
        let body: serde_json::Value = serde_json::from_slice(out.value.as_deref().expect("value")).expect("json");
        assert_eq!(body, serde_json::json!({"short_description":"Printer","opened_at":"2024-05-01 10:00:00","cost":"123.45"}));
        assert_eq!(out.key.as_deref(), Some(&b"abc"[..]), "a key without a converter is left as it is");
        let tombstone = br#"{"schema":null,"payload":null}"#;
        assert_eq!(c.record(&record(None, Some(tombstone))).await.expect("read").expect("kept").value, None);
    }

    #[tokio::test]
    async fn bad_bytes_are_the_records_error_naming_it() {
        let c = converters(&[("value.converter", "org.apache.kafka.connect.json.JsonConverter")]);
        let Err(Unreadable::Record { message: why, stage: "VALUE_CONVERTER", .. }) = c.record(&record(None, Some(b"{\"a\":1}"))).await
        else {
            panic!("record error")
        };
        assert!(why.starts_with("record t-0@3: the value could not be read by org.apache.kafka.connect.json.JsonConverter: "), "{why}");
        let plain =
            converters(&[("value.converter", "org.apache.kafka.connect.json.JsonConverter"), ("value.converter.schemas.enable", "false")]);
        assert!(!plain.active(), "schemaless JSON is the component's to read");
        let avro = converters(&[
            ("value.converter", "io.confluent.connect.avro.AvroConverter"),
            ("value.converter.schema.registry.url", "http://127.0.0.1:9"),
        ]);
        let Err(Unreadable::Record { message: why, class, .. }) = avro.record(&record(None, Some(b"{}"))).await else {
            panic!("record error")
        };
        assert_eq!(class, "io.confluent.connect.avro.AvroConverter");
        assert!(why.contains("magic byte"), "{why}");
    }
}
