//! A transform component as a stage of a connector's chain (world `transform`,
//! docs/transforms.md): the host hands it each record as Connect's JSON forms and reads back what
//! it made. Instances are pooled: a source unit or sink lane takes an idle one for a call (or
//! instantiates and opens a new one) and gives it back, so calls never share a store and a busy
//! connector has as many instances as calls in flight, no more. A store has the stage's memory
//! and time limits and a gate that refuses every request; an instance that trapped is dropped
//! (the next call gets a fresh one), and the trap is the record's failure at Connect's
//! `TRANSFORMATION` stage.
//!
//! An instance whose memory grew past half the stage's limit is recycled after its call (a fresh
//! one serves the next), so a component that leaks a little on every call (ComponentizeJS 0.22
//! does) runs on instead of trapping at its limit.
//!
//! A new version is hot-swapped at record boundaries ([`TransformComponent::publish`], SIGHUP):
//! calls already running finish on the version they started with, their instances are dropped
//! when given back, and every later call opens the new version.

use std::sync::Mutex;

use anyhow::{Result, anyhow};
use snow_data::connect_json::{schema_from_json, schema_to_json, value_from_json};
use snow_data::json_text::{self, Decimals};
use snow_data::transform::{External, Header, Pending, Record};
use snow_data::{Kind, Schema, Value};
use wasmtime::component::ResourceAny;
use wasmtime::{Engine, Store};

use super::bindings::transform::exports::snow::connector::transform_api::{ConnectRecord, RecordHeader};
use super::bindings::transform::{Transform, TransformPre};
use super::bindings::types::ConfigEntry;
use super::state::{HostState, StoreOptions};
use crate::metrics::{Metrics, labels};
use crate::outbound::Gate;

/// Most idle instances kept per stage (more calls at once instantiate more; the extra ones are
/// dropped when given back).
const MAX_IDLE: usize = 64;

/// Where a stage runs and with what: its connector and alias, its own keys, its store limits.
#[derive(Clone)]
pub struct Stage {
    /// The connector's name.
    pub connector: String,
    /// The stage's alias.
    pub alias: String,
    /// The component's own keys (without `transforms.<alias>.`).
    pub config: Vec<ConfigEntry>,
    /// Memory and per-record time limits of each instance.
    pub options: StoreOptions,
}

/// One transform component stage of one connector.
pub struct TransformComponent {
    version: Mutex<Version>,
    engine: Engine,
    stage: Stage,
    metrics: Metrics,
    idle: Mutex<Vec<Instance>>,
}

/// The version calls open.
#[derive(Clone)]
struct Version {
    pre: TransformPre<HostState>,
    digest: String,
    /// Counts publications: an instance of an older one is not given back.
    generation: u64,
}

/// An instance with its configured transformer.
struct Instance {
    store: Store<HostState>,
    bindings: Transform,
    transformer: ResourceAny,
    generation: u64,
}

impl TransformComponent {
    /// `stage`, running `pre` (of `digest`).
    pub fn new(pre: TransformPre<HostState>, digest: &str, engine: Engine, stage: Stage, metrics: Metrics) -> Self {
        Self {
            version: Mutex::new(Version { pre, digest: digest.to_string(), generation: 0 }),
            engine,
            stage,
            metrics,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// The digest of the version calls open now.
    pub fn digest(&self) -> String {
        self.current().digest
    }

    fn current(&self) -> Version {
        self.version.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Makes `pre` (of `digest`) the version every later call opens; idle instances of the old
    /// one are dropped now, busy ones when their call ends.
    pub fn publish(&self, pre: TransformPre<HostState>, digest: &str) {
        {
            let mut version = self.version.lock().unwrap_or_else(|e| e.into_inner());
            let generation = version.generation + 1;
            *version = Version { pre, digest: digest.to_string(), generation };
        }
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// The same stage running `pre` instead, with nothing shared: to validate a new version
    /// before it is published.
    pub fn with(&self, pre: TransformPre<HostState>, digest: &str) -> Self {
        Self::new(pre, digest, self.engine.clone(), self.stage.clone(), self.metrics.clone())
    }

    fn store(&self) -> Store<HostState> {
        let unit = format!("transform {}", self.stage.alias);
        HostState::new_store(
            &self.engine,
            &self.stage.connector,
            &unit,
            Gate::closed(&self.stage.connector),
            self.metrics.clone(),
            self.stage.options,
        )
    }

    /// Asks the component to check its configuration: every problem, one per line naming its key
    /// (`transforms.<alias>.<key>`), or a trap.
    pub async fn validate(&self) -> Result<Vec<snow_core::error::ConfigError>> {
        let mut store = self.store();
        let bindings = self.current().pre.instantiate_async(&mut store).await.map_err(|e| anyhow!("instantiating: {e:#}"))?;
        store.data_mut().begin_call();
        let answer = bindings
            .snow_connector_transform_api()
            .call_validate(&mut store, &self.stage.config)
            .await
            .map_err(|e| anyhow!("the component trapped in validate: {e:#}"))?;
        Ok(match answer {
            Ok(()) => Vec::new(),
            Err(errors) => super::bindings::config_errors(&errors, &format!("transforms.{}.", self.stage.alias)),
        })
    }

    async fn open(&self) -> Result<Instance, String> {
        let version = self.current();
        let mut store = self.store();
        let bindings = version.pre.instantiate_async(&mut store).await.map_err(|e| format!("instantiating the component: {e:#}"))?;
        store.data_mut().begin_call();
        let transformer = bindings
            .snow_connector_transform_api()
            .transformer()
            .call_open(&mut store, &self.stage.config)
            .await
            .map_err(|e| format!("the component trapped in open: {e:#}"))?
            .map_err(|e| format!("the component refused its configuration: {}", crate::redact::clean(&e)))?;
        tracing::debug!(
            connector = self.stage.connector,
            transform = self.stage.alias,
            "transform component instance opened (version {})",
            short(&version.digest)
        );
        Ok(Instance { store, bindings, transformer, generation: version.generation })
    }

    async fn call(&self, record: Record) -> Result<Vec<Record>, String> {
        let input = to_wit(&record)?;
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut instance = match idle {
            Some(instance) => instance,
            None => self.open().await?,
        };
        instance.store.data_mut().begin_call();
        let answer = instance
            .bindings
            .snow_connector_transform_api()
            .transformer()
            .call_apply(&mut instance.store, instance.transformer, &input)
            .await;
        let made = match answer {
            Err(trap) => {
                self.metrics.counter_add(
                    "snow_transform_traps_total",
                    1,
                    &labels(&[("connector", &self.stage.connector), ("transform", &self.stage.alias)]),
                );
                // The instance is dropped: the next call gets a fresh one.
                return Err(format!("the component trapped: {}", crate::component::trap::one_line(&trap)));
            }
            Ok(made) => made,
        };
        let generation = self.version.lock().unwrap_or_else(|e| e.into_inner()).generation;
        // An instance past half its memory limit is not reused: a component that leaks (some
        // JavaScript runtimes do, on every call) is recycled before it reaches the limit and traps.
        let grown = instance.store.data().memory_bytes() > self.stage.options.memory_max_bytes / 2;
        if grown {
            tracing::debug!(
                connector = self.stage.connector,
                transform = self.stage.alias,
                "a transform component instance grew to {} MiB (more than half of memory.max.bytes): replaced by a fresh one",
                instance.store.data().memory_bytes() >> 20
            );
            self.metrics.counter_add(
                "snow_transform_recycled_total",
                1,
                &labels(&[("connector", &self.stage.connector), ("transform", &self.stage.alias)]),
            );
        }
        if !grown && instance.generation == generation {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            if idle.len() < MAX_IDLE {
                idle.push(instance);
            }
        }
        let made = made.map_err(|e| crate::redact::clean(&e))?;
        made.iter().enumerate().map(|(i, r)| from_wit(r).map_err(|e| format!("record {i} it made: {e}"))).collect()
    }
}

impl External for TransformComponent {
    fn apply(&self, record: Record) -> Pending<'_> {
        Box::pin(self.call(record))
    }
}

fn short(digest: &str) -> &str {
    &digest[..12.min(digest.len())]
}

/// A record as the component reads it.
fn to_wit(record: &Record) -> Result<ConnectRecord, String> {
    let side = |schema: Option<&Schema>, value: &Value, what: &str| -> Result<(Option<String>, Option<String>), String> {
        if value.is_null() {
            return Ok((schema.map(|s| schema_to_json(s).to_string()), None));
        }
        let mut text = String::new();
        json_text::write(value, Decimals::Number, &mut text).map_err(|e| format!("the record's {what} cannot be written as JSON: {e}"))?;
        Ok((schema.map(|s| schema_to_json(s).to_string()), Some(text)))
    };
    let (key_schema, key) = side(record.key_schema.as_ref(), &record.key, "key")?;
    let (value_schema, value) = side(record.value_schema.as_ref(), &record.value, "value")?;
    let headers = record
        .headers
        .iter()
        .map(|h| {
            let value = match &h.value {
                Value::Null => None,
                Value::String(s) => Some(s.clone()),
                other => Some(snow_data::snow_text::to_json(other).to_string()),
            };
            RecordHeader { key: h.key.clone(), value }
        })
        .collect();
    Ok(ConnectRecord {
        topic: record.topic.clone(),
        partition: record.partition,
        offset: record.offset,
        timestamp: record.timestamp,
        key_schema,
        key,
        value_schema,
        value,
        headers,
    })
}

/// A record the component made, read back (its key and value checked against their schemas).
fn from_wit(r: &ConnectRecord) -> Result<Record, String> {
    let side = |schema: &Option<String>, text: &Option<String>, what: &str| -> Result<(Option<Schema>, Value), String> {
        let schema = match schema {
            None => None,
            Some(s) => {
                let json: serde_json::Value = serde_json::from_str(s).map_err(|e| format!("its {what} schema is not JSON: {e}"))?;
                Some(schema_from_json(&json).map_err(|e| format!("its {what} schema: {e}"))?)
            }
        };
        let value = match text {
            None => Value::Null,
            Some(t) => {
                let json: serde_json::Value = serde_json::from_str(t).map_err(|e| format!("its {what} is not JSON: {e}"))?;
                value_from_json(&json, schema.as_ref()).map_err(|e| format!("its {what}: {e}"))?
            }
        };
        Ok((schema, value))
    };
    let (key_schema, key) = side(&r.key_schema, &r.key, "key")?;
    let (value_schema, value) = side(&r.value_schema, &r.value, "value")?;
    if r.topic.is_empty() {
        return Err("its topic is empty".into());
    }
    Ok(Record {
        topic: r.topic.clone(),
        partition: r.partition,
        offset: r.offset,
        key_schema,
        key,
        value_schema,
        value,
        timestamp: r.timestamp,
        headers: r
            .headers
            .iter()
            .map(|h| Header {
                key: h.key.clone(),
                schema: Some(Schema::new(Kind::String).optional()),
                value: h.value.clone().map_or(Value::Null, Value::String),
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use snow_data::Field;

    #[test]
    fn a_record_goes_to_the_component_and_back_unchanged() {
        let schema = Schema::record(
            "incident",
            vec![
                Field::new("number", Schema::new(Kind::String).optional()),
                Field::new("opened_at", Schema::timestamp().optional()),
                Field::new("cost", Schema::decimal(2).optional()),
                Field::new("active", Schema::new(Kind::Boolean).optional()),
            ],
        );
        let value = Value::Struct(vec![
            ("number".into(), Value::String("INC0001".into())),
            ("opened_at".into(), Value::Timestamp(1_700_000_000_000)),
            ("cost".into(), Value::Decimal(snow_data::decimal::Decimal::parse("12.50", 2).unwrap())),
            ("active".into(), Value::Null),
        ]);
        let record = Record {
            topic: "servicenow.incident".into(),
            partition: None,
            offset: None,
            key_schema: Some(Schema::new(Kind::String)),
            key: Value::String("abc".into()),
            value_schema: Some(schema),
            value,
            timestamp: Some(1_700_000_000_123),
            headers: vec![Header { key: "snow.table".into(), schema: None, value: Value::String("incident".into()) }],
        };
        let wit = to_wit(&record).unwrap();
        assert_eq!(wit.key.as_deref(), Some("\"abc\""));
        assert!(wit.value.as_deref().unwrap().contains("\"cost\":12.50"), "decimals are numbers: {:?}", wit.value);
        let back = from_wit(&wit).unwrap();
        assert_eq!((back.key, back.value, back.topic), (record.key, record.value, record.topic));
    }

    #[test]
    fn what_the_component_made_is_checked_against_its_schema() {
        let wit = ConnectRecord {
            topic: "t".into(),
            partition: None,
            offset: None,
            timestamp: None,
            key_schema: None,
            key: None,
            value_schema: Some(r#"{"type":"struct","fields":[{"field":"n","type":"int32","optional":false}]}"#.into()),
            value: Some(r#"{"n":"x"}"#.into()),
            headers: vec![],
        };
        let e = from_wit(&wit).unwrap_err();
        assert!(e.contains("its value") && e.contains("field n"), "{e}");
        let tomb = from_wit(&ConnectRecord { value: None, ..wit }).unwrap();
        assert_eq!(tomb.value, Value::Null);
    }

    /// A transform component loaded as the runner loads it, with the runtime it lives in.
    async fn loaded(
        path: &str,
        config: &[(&str, &str)],
        options: StoreOptions,
    ) -> (TransformComponent, crate::component::ComponentRuntime) {
        let runtime = crate::component::ComponentRuntime::new().unwrap();
        let checked = crate::artefact::Checked::inspect(std::path::Path::new(path), &crate::artefact::TrustPolicy::unsigned()).unwrap();
        let crate::component::Loaded::Transform(pre) = runtime.load(&checked).await.unwrap() else { panic!("not a transform") };
        let config = config.iter().map(|(k, v)| ConfigEntry { key: k.to_string(), value: v.to_string() }).collect();
        let stage = Stage { connector: "c".into(), alias: "t".into(), config, options };
        (TransformComponent::new(pre, "test", runtime.engine().clone(), stage, Metrics::default()), runtime)
    }

    /// The Rust example component.
    async fn explode(config: &[(&str, &str)]) -> TransformComponent {
        let options = StoreOptions { memory_max_bytes: 32 << 20, call_timeout: std::time::Duration::from_secs(5) };
        loaded(guest_artifacts::TRANSFORM_EXPLODE, config, options).await.0
    }

    fn asking(what: &str) -> Record {
        Record { value_schema: None, value: Value::String(what.into()), ..watched("") }
    }

    fn seen(records: &[Record]) -> Option<&Value> {
        records.first().and_then(|r| r.headers.iter().find(|h| h.key == "seen")).map(|h| &h.value)
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_transform_that_spins_grows_or_traps_fails_its_record_and_the_next_one_gets_a_fresh_instance() {
        let options = StoreOptions { memory_max_bytes: 24 << 20, call_timeout: std::time::Duration::from_millis(300) };
        let (t, _runtime) = loaded(guest_artifacts::ROGUE_TRANSFORM, &[], options).await;
        assert_eq!(seen(&t.apply(asking("ok")).await.unwrap()), Some(&Value::String("1".into())));
        assert_eq!(seen(&t.apply(asking("ok")).await.unwrap()), Some(&Value::String("2".into())), "the instance is reused");
        let started = std::time::Instant::now();
        let e = t.apply(asking("loop")).await.unwrap_err();
        assert!(e.starts_with("the component trapped") && e.contains("interrupt"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "stopped by its call timeout: {:?}", started.elapsed());
        assert_eq!(seen(&t.apply(asking("ok")).await.unwrap()), Some(&Value::String("1".into())), "a fresh instance after a trap");
        let e = t.apply(asking("grow")).await.unwrap_err();
        assert!(e.starts_with("the component trapped"), "{e}");
        let e = t.apply(asking("trap")).await.unwrap_err();
        assert!(e.starts_with("the component trapped") && e.contains("unreachable"), "{e}");
        assert_eq!(seen(&t.apply(asking("ok")).await.unwrap()), Some(&Value::String("1".into())));
        // A component leaking 1 MiB a call runs on: its instance is recycled past half the limit.
        let mut fresh = 0;
        for _ in 0..60 {
            let out = t.apply(asking("leak")).await.expect("recycled before it reaches the limit");
            fresh += usize::from(seen(&out) == Some(&Value::String("1".into())));
        }
        assert!(fresh >= 3, "60 MiB leaked by instances limited to 24 MiB: {fresh} fresh instances");
    }

    fn watched(list: &str) -> Record {
        Record {
            topic: "servicenow.incident".into(),
            partition: None,
            offset: None,
            key_schema: Some(Schema::new(Kind::String)),
            key: Value::String("abc".into()),
            value_schema: None,
            value: Value::Map(vec![
                (Value::String("number".into()), Value::String("INC1".into())),
                (Value::String("watch_list".into()), Value::String(list.into())),
            ]),
            timestamp: Some(1),
            headers: vec![],
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_rust_example_makes_a_record_per_item_and_reports_bad_keys() {
        let t = explode(&[("field", "watch_list"), ("into", "watcher"), ("key.suffix", "true")]).await;
        assert!(t.validate().await.unwrap().is_empty());
        let out = t.apply(watched("u1, u2,u3")).await.unwrap();
        let keys: Vec<_> = out.iter().map(|r| r.key.clone()).collect();
        assert_eq!(keys, ["abc:u1", "abc:u2", "abc:u3"].map(|k| Value::String(k.into())));
        assert_eq!(out[1].value.get("watcher"), Some(&Value::String("u2".into())));
        assert!(t.apply(watched("")).await.unwrap().is_empty(), "an empty list makes no record");
        let bad = explode(&[("fields", "x")]).await;
        let problems = bad.validate().await.unwrap();
        assert!(problems.iter().any(|p| p.key == "transforms.t.field" && p.message.starts_with("is required")), "{problems:?}");
        assert!(problems.iter().any(|p| p.key == "transforms.t.fields" && p.message.starts_with("unknown key")), "{problems:?}");
        let e = bad.apply(watched("u1")).await.unwrap_err();
        assert!(e.starts_with("the component refused its configuration: field: is required"), "{e}");
    }
}
