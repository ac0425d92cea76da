//! What the REST API reads and writes, in one place ([`View`], what Kafka Connect calls the
//! herder): a fleet (`crate::worker::view`: every answer from its topics, every write to them) or
//! a standalone run ([`Standalone`]: the connector files it was started with, its status board and
//! offset stores; read-only, writes answer `405` naming what to do instead). The API imports no
//! fleet internals; the fleet implements this trait.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use anyhow::Result;

use crate::herder::{ConnectorRecord, Published, TargetState, connect_state};
use snow_runtime::config::ConnectorSpec;
use snow_runtime::runner::{Plan, Runner};
use snow_runtime::status::UnitState;

/// A boxed future of the REST API's.
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the API answers from.
pub trait View: Send + Sync {
    /// Every connector, by name.
    fn connectors(&self) -> BTreeMap<String, ConnectorRecord>;
    /// One connector.
    fn connector(&self, name: &str) -> Option<ConnectorRecord> {
        self.connectors().remove(name)
    }
    /// Its plan, if made.
    fn plan(&self, name: &str) -> Option<Plan>;
    /// Its units' statuses, by unit.
    fn unit_statuses(&self, name: &str) -> Vec<(String, Published)>;
    /// Its own status.
    fn connector_status(&self, name: &str) -> Option<Published>;
    /// Its stored offsets: `(partition, position)`.
    fn offsets(&self, name: &str) -> Vec<(String, String)>;
    /// The topics it used (KIP-558), by name.
    fn topics(&self, name: &str) -> Vec<String>;
    /// Where writes go (a fleet); none in a standalone run, which answers them `405`.
    fn writer(&self) -> Option<&dyn Writer>;
    /// The engine that validates.
    fn runner(&self) -> &Runner;
    /// The Kafka cluster's id, if known.
    fn cluster_id(&self) -> Option<String> {
        None
    }
    /// The push endpoint this listener serves at `/snow/push/<connector>` (a fleet's; a standalone
    /// run takes notifications on `snow.push.listen` instead).
    fn push_endpoint(&self) -> Option<&snow_runtime::push::endpoint::Endpoint> {
        None
    }
    /// The spec `properties` of connector `name` would run with here.
    fn spec<'a>(&'a self, name: &'a str, properties: &'a BTreeMap<String, String>) -> Pending<'a, Result<ConnectorSpec>>;
}

/// What a fleet takes besides reads (a standalone run takes none: its writes answer `405`).
pub trait Writer: Send + Sync {
    /// Stores `properties` as connector `name` (created in `initial` state when new).
    fn put_config<'a>(
        &'a self,
        name: &'a str,
        properties: &'a BTreeMap<String, String>,
        initial: Option<TargetState>,
    ) -> Pending<'a, Result<()>>;
    /// Deletes connector `name`.
    fn delete<'a>(&'a self, name: &'a str) -> Pending<'a, Result<()>>;
    /// Sets what connector `name` should be doing.
    fn set_target<'a>(&'a self, name: &'a str, state: TargetState) -> Pending<'a, Result<()>>;
    /// Asks for a restart of `name` (its units too, or only the failed ones; or one unit).
    fn request_restart<'a>(
        &'a self,
        name: &'a str,
        include_tasks: bool,
        only_failed: bool,
        unit: Option<&'a str>,
    ) -> Pending<'a, Result<()>>;
    /// Writes (a position) or removes (`None`) the stored offsets of `name`'s partitions.
    fn write_offsets<'a>(&'a self, name: &'a str, writes: Vec<(String, Option<String>)>) -> Pending<'a, Result<()>>;
    /// Removes every stored offset of `name`.
    fn reset_offsets<'a>(&'a self, name: &'a str) -> Pending<'a, Result<()>>;
    /// Sets `logger` to `level` on every worker.
    fn set_cluster_logger<'a>(&'a self, logger: &'a str, level: &'a str) -> Pending<'a, Result<()>>;
    /// Empties the active topics of `name`.
    fn reset_topics<'a>(&'a self, name: &'a str) -> Pending<'a, Result<()>>;
}

/// A standalone run as the API sees it.
pub struct Standalone {
    /// The process's runner.
    pub runner: Arc<Runner>,
    /// Each connector's entries as its file gave them (secrets shown as `[hidden]`).
    pub connectors: BTreeMap<String, BTreeMap<String, String>>,
    /// The id status answers name (the REST listener's bound address, set once bound).
    pub worker_id: std::sync::OnceLock<String>,
    /// The components the run's files name, each with its file's signing keys: all that a
    /// caller's configuration may be validated against.
    components: Vec<(std::path::PathBuf, BTreeMap<String, String>)>,
}

impl Standalone {
    /// The view of `specs` (their files' entries) run by `runner`.
    pub fn new(runner: Arc<Runner>, entries: Vec<BTreeMap<String, String>>) -> Self {
        let components = entries
            .iter()
            .filter_map(|e| {
                let path = std::path::PathBuf::from(e.get("component.path")?.trim());
                let trust =
                    e.iter().filter(|(k, _)| snow_runtime::config::TRUST_KEYS.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone()));
                Some((path, trust.collect()))
            })
            .collect();
        let connectors = entries
            .into_iter()
            .filter_map(|mut e| {
                let name = e.remove("name")?;
                for (key, value) in e.iter_mut() {
                    if snow_runtime::config::is_secret_key(key) && !snow_runtime::config::is_provider_reference(value) {
                        *value = "[hidden]".into();
                    }
                }
                Some((name, e))
            })
            .collect();
        Self { runner, connectors, worker_id: std::sync::OnceLock::new(), components }
    }
}

impl View for Standalone {
    fn connectors(&self) -> BTreeMap<String, ConnectorRecord> {
        self.connectors
            .iter()
            .map(|(name, properties)| {
                (name.clone(), ConnectorRecord { properties: properties.clone(), target: TargetState::Started, restart: None })
            })
            .collect()
    }

    fn plan(&self, name: &str) -> Option<Plan> {
        self.runner.plan(name)
    }

    fn unit_statuses(&self, name: &str) -> Vec<(String, Published)> {
        self.runner
            .status()
            .snapshot()
            .into_iter()
            .filter(|s| s.connector == name && s.unit != "connector" && s.unit != "component")
            .map(|s| {
                let state = connect_state(s.state);
                let published = Published {
                    state: state.to_string(),
                    detail: serde_json::to_value(s.state).ok().and_then(|v| v.as_str().map(str::to_string)),
                    message: s.message.clone(),
                    trace: s.message.clone().filter(|_| state == "FAILED"),
                    worker_id: self.worker_id.get().cloned().unwrap_or_default(),
                    since_ms: s.since_ms,
                };
                (s.unit, published)
            })
            .collect()
    }

    fn connector_status(&self, name: &str) -> Option<Published> {
        self.plan(name)?;
        let failed = self.runner.status().in_state(name, UnitState::Parked).into_iter().find(|s| s.unit == "connector");
        Some(Published {
            state: if failed.is_some() { "FAILED" } else { "RUNNING" }.into(),
            detail: None,
            message: failed.as_ref().and_then(|f| f.message.clone()),
            trace: failed.and_then(|f| f.message),
            worker_id: self.worker_id.get().cloned().unwrap_or_default(),
            since_ms: 0,
        })
    }

    fn offsets(&self, name: &str) -> Vec<(String, String)> {
        self.runner.offsets_of(name).map(|store| store.load(name)).unwrap_or_default()
    }

    fn topics(&self, name: &str) -> Vec<String> {
        self.runner.status().topics(name)
    }

    fn writer(&self) -> Option<&dyn Writer> {
        None
    }

    fn runner(&self) -> &Runner {
        &self.runner
    }

    /// A caller's configuration as validate checks it: nothing but a connector (no signing policy
    /// or Kafka security of its own, references left unread), and only a component this run's
    /// files name, checked with the keys its file gives: nothing runs that a start would not run.
    fn spec<'a>(&'a self, name: &'a str, properties: &'a BTreeMap<String, String>) -> Pending<'a, Result<ConnectorSpec>> {
        Box::pin(async move {
            let asked = properties.get("component.path").and_then(|p| std::path::Path::new(p.trim()).canonicalize().ok());
            let trust = self
                .components
                .iter()
                .find(|(path, _)| path.canonicalize().ok().is_some_and(|p| Some(p) == asked))
                .map(|(_, trust)| trust.clone())
                .unwrap_or_default();
            let rules = snow_runtime::config::caller::CallerRules {
                providers: snow_runtime::config::providers::ProviderPolicy::caller_unread(),
                component_paths: self.components.iter().map(|(p, _)| p.clone()).collect(),
                defaults: trust,
                converters: BTreeMap::new(),
            };
            let applied = rules
                .apply(properties)
                .map_err(|errors| anyhow::anyhow!("connector {name} has an invalid configuration:\n  {}", errors.join("\n  ")))?;
            let mut entries = applied.entries;
            entries.insert("name".into(), name.to_string());
            ConnectorSpec::from_entries(entries)
        })
    }
}
