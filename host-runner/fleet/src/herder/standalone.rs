//! A standalone run as the REST API sees it: the connector files it was started with, its status
//! board and offset stores. Read-only: it has no [`Writer`], so writes answer `405` naming what to
//! do instead.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use snow_runtime::config::{ConfigError, ConnectorSpec, InvalidConfig};
use snow_runtime::runner::{Plan, Runner};
use snow_runtime::status::UnitState;

use super::validate::{self, Checks};
use super::{ConnectorRecord, Herder, Pending, Published, TargetState, Writer, connect_state};

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
    /// One validation at a time: the listener asks no credentials, and a validation runs the
    /// component (CPU and memory), so unauthenticated callers cannot run many at once.
    validations: tokio::sync::Semaphore,
}

/// How long a validation waits for the one running before it is refused.
const VALIDATION_WAIT: Duration = Duration::from_secs(30);

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
        Self { runner, connectors, worker_id: std::sync::OnceLock::new(), components, validations: tokio::sync::Semaphore::new(1) }
    }
}

impl Herder for Standalone {
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

    fn planned<'a>(&'a self, name: &'a str, within: Duration) -> Pending<'a, Option<Plan>> {
        Box::pin(self.runner.planned(name, within))
    }

    fn validate<'a>(&'a self, name: &'a str, properties: &'a BTreeMap<String, String>) -> Pending<'a, Vec<ConfigError>> {
        Box::pin(async move {
            let Ok(Ok(_one)) = tokio::time::timeout(VALIDATION_WAIT, self.validations.acquire()).await else {
                return vec![ConfigError::refused("(validation)", "another validation is running on this standalone run; try again later")];
            };
            validate::check(self, name, properties).await
        })
    }

    fn writer(&self) -> Option<&dyn Writer> {
        None
    }
}

impl Checks for Standalone {
    fn stores_configurations(&self) -> bool {
        false
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
                destinations: Default::default(),
                reserved_topics: Vec::new(),
                memory_ceiling: None,
            };
            let applied = rules.apply(properties).map_err(|errors| InvalidConfig::new(name, errors))?;
            let mut entries = applied.entries;
            entries.insert("name".into(), name.to_string());
            ConnectorSpec::from_entries(entries)
        })
    }
}
