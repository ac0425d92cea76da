//! An example transform component in Rust (world `transform`, docs/transforms.md): **explode**
//! makes one record per item of a list field, something Connect's transforms cannot do (each of
//! them makes at most one record). An incident whose `watch_list` is `"u1,u2,u3"` becomes three
//! records, each with `watch_list` set to one user (or to the field `into` names), so that a
//! topic of "who watches what" can be compacted by user downstream.
//!
//! Keys (under `transforms.<alias>.`): `field` (required: the value field holding a
//! comma-separated list), `into` (the field each record gets its item in; default: `field`),
//! `key.suffix` (`true`: the key gets `:<item>` appended so each record has its own key). A value
//! with an empty or missing list makes no record; a tombstone passes unchanged. Values may be
//! schemaless or typed: the item goes into a string field (added to the schema when `into` is
//! new).
#![cfg(all(target_arch = "wasm32", target_os = "wasi"))]

mod bindings;

use bindings::exports::snow::connector::transform_api::{ConnectRecord, Guest, GuestTransformer, Transformer};
use bindings::snow::connector::types::{ConfigEntry, ConfigError};
use serde_json::{Value, json};

pub(crate) struct Component;

/// The configured transform.
pub(crate) struct Explode {
    field: String,
    into: String,
    key_suffix: bool,
}

fn read(config: &[ConfigEntry]) -> Result<Explode, Vec<ConfigError>> {
    let get = |k: &str| config.iter().find(|e| e.key == k).map(|e| e.value.trim().to_string()).filter(|v| !v.is_empty());
    let mut errors = Vec::new();
    let field = get("field").unwrap_or_else(|| {
        errors.push(ConfigError { key: "field".into(), message: "is required: the value field holding a comma-separated list".into() });
        String::new()
    });
    let key_suffix = match get("key.suffix").as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            errors.push(ConfigError { key: "key.suffix".into(), message: format!("must be true or false, got {other:?}") });
            false
        }
    };
    for entry in config {
        if !matches!(entry.key.as_str(), "field" | "into" | "key.suffix") {
            errors
                .push(ConfigError { key: entry.key.clone(), message: "unknown key (this transform reads field, into, key.suffix)".into() });
        }
    }
    let into = get("into").unwrap_or_else(|| field.clone());
    if errors.is_empty() { Ok(Explode { field, into, key_suffix }) } else { Err(errors) }
}

impl Guest for Component {
    type Transformer = Explode;

    fn validate(config: Vec<ConfigEntry>) -> Result<(), Vec<ConfigError>> {
        read(&config).map(|_| ())
    }
}

impl GuestTransformer for Explode {
    fn open(config: Vec<ConfigEntry>) -> Result<Transformer, String> {
        read(&config)
            .map(Transformer::new)
            .map_err(|errors| errors.iter().map(|e| format!("{}: {}", e.key, e.message)).collect::<Vec<_>>().join("; "))
    }

    fn apply(&self, input: ConnectRecord) -> Result<Vec<ConnectRecord>, String> {
        let Some(text) = input.value.as_deref() else { return Ok(vec![input]) };
        let value: Value = serde_json::from_str(text).map_err(|e| format!("the value is not JSON: {e}"))?;
        let Value::Object(object) = &value else { return Err(format!("the value is not an object, so it has no field {}", self.field)) };
        let list = match object.get(&self.field) {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::String(s)) => s.clone(),
            Some(other) => return Err(format!("field {} is not a string: {other}", self.field)),
        };
        let value_schema = input.value_schema.as_deref().map(|s| self.schema(s)).transpose()?;
        let mut out = Vec::new();
        for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let mut object = object.clone();
            object.insert(self.into.clone(), json!(item));
            let key = match (&input.key, self.key_suffix) {
                (Some(key), true) => Some(suffixed(key, item)?),
                (key, _) => key.clone(),
            };
            out.push(ConnectRecord {
                key,
                key_schema: input.key_schema.clone(),
                value: Some(Value::Object(object).to_string()),
                value_schema: value_schema.clone(),
                ..input.clone()
            });
        }
        Ok(out)
    }
}

impl Explode {
    /// The value schema with `into` as an optional string field (added when it is new).
    fn schema(&self, text: &str) -> Result<String, String> {
        let mut schema: Value = serde_json::from_str(text).map_err(|e| format!("the value schema is not JSON: {e}"))?;
        let fields = schema.get_mut("fields").and_then(Value::as_array_mut).ok_or("the value schema is not a struct")?;
        if !fields.iter().any(|f| f["field"] == json!(self.into)) {
            fields.push(json!({ "field": self.into, "type": "string", "optional": true }));
        }
        Ok(schema.to_string())
    }
}

/// A string key (JSON text) with `:<item>` appended.
fn suffixed(key: &str, item: &str) -> Result<String, String> {
    match serde_json::from_str::<Value>(key) {
        Ok(Value::String(k)) => Ok(json!(format!("{k}:{item}")).to_string()),
        _ => Err("key.suffix=true needs a string key".into()),
    }
}
