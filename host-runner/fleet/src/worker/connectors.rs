//! The connectors one worker manages: each as the configuration topic describes it, loaded and
//! planned on this worker ([`Live`]), with the units it runs here. A source runs the units whose
//! slot this worker holds; a sink runs its consumer on every worker (its lanes are shared by the
//! sink's own consumer group `connect-<name>`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use anyhow::Result;
use rdkafka::producer::FutureProducer;
use tokio::task::JoinHandle;

use snow_runtime::component::HostState;
use snow_runtime::component::bindings::sink::SinkPre;
use snow_runtime::component::bindings::source::SourcePre;
use snow_runtime::component::bindings::types::WorkUnit;
use snow_runtime::component::swap::Versions;
use snow_runtime::config::ConnectorSpec;
use snow_runtime::config::{ConfigError, InvalidConfig, ValueClass};
use snow_runtime::connector::SharedContext;
use snow_runtime::shutdown::ShutdownTrigger;

pub use snow_runtime::connector::{SINK_CLASS, SOURCE_CLASS};

/// A connector loaded and checked on this worker.
pub enum Live {
    /// A source: its plan, producer and allowed topics.
    Source {
        /// Its context.
        ctx: SharedContext,
        /// Its component versions (hot-swap).
        versions: Arc<Versions<SourcePre<HostState>>>,
        /// Its units, in plan order (a unit's task id is its index).
        units: Vec<WorkUnit>,
        /// The producer its units share.
        producer: FutureProducer,
        /// The topics it may produce to.
        topics: Arc<BTreeSet<String>>,
    },
    /// A sink.
    Sink {
        /// Its context.
        ctx: SharedContext,
        /// Its component versions.
        versions: Arc<Versions<SinkPre<HostState>>>,
    },
}

impl Live {
    /// The connector's type in Connect's words.
    pub fn kind(&self) -> &'static str {
        match self {
            Live::Source { .. } => "source",
            Live::Sink { .. } => "sink",
        }
    }
}

/// A unit running here.
pub struct RunningUnit {
    /// Its slot.
    pub slot: i32,
    /// Stops it.
    pub stop: ShutdownTrigger,
    /// Ends when it stopped (its offset stored).
    pub task: JoinHandle<()>,
}

/// One connector as this worker manages it.
pub struct Managed {
    /// Its properties as the configuration topic holds them.
    pub properties: BTreeMap<String, String>,
    /// Loaded and planned, or why it could not be.
    pub live: Result<Live, String>,
    /// Source units running here, by unit name.
    pub units: HashMap<String, RunningUnit>,
    /// The sink's consumer running here.
    pub sink: Option<(ShutdownTrigger, JoinHandle<Result<()>>)>,
    /// Why the sink's consumer ended here, if it ended with an error (the connector is `FAILED`
    /// until it is restarted).
    pub sink_failed: Option<String>,
    /// The restart request last acted on (or seen when this worker started).
    pub restart_seen: Option<u64>,
    /// The connector state this worker last published (as its leader).
    pub published: Option<String>,
}

/// The fleet's properties of a connector as this worker runs it: a caller's configuration
/// ([`snow_runtime::config::caller`]: no signing policy, security, cluster or file of its own; references
/// only where the worker allows), offsets in the fleet's topic, a `component.ref` resolved to a
/// local file pinned to its digest, and the worker's keys added. Errors never hold a value a
/// reference resolved to.
pub async fn fleet_spec(fleet: &super::Fleet, name: &str, properties: &BTreeMap<String, String>) -> Result<ConnectorSpec> {
    let invalid = |key: &str, class: ValueClass, message: String| -> anyhow::Error {
        InvalidConfig::one(name, ConfigError::of(class, key, message)).into()
    };
    for key in ["offset.storage.file.filename", "offset.storage.topic", "offset.storage.partitions", "offset.storage.replication.factor"] {
        if properties.contains_key(key) {
            let why = "a worker keeps offsets in its own offset.storage.topic (worker.properties); remove it";
            return Err(invalid(key, ValueClass::Refused, why.into()));
        }
    }
    let mut rules = fleet.config.caller_rules();
    let mut properties = properties.clone();
    if let Some(key) = properties.keys().find(|k| k.starts_with("component.registry.")) {
        let why = "how registries are reached is the worker's (component.registry.* in worker.properties); remove it";
        return Err(invalid(key, ValueClass::Refused, why.into()));
    }
    resolve_oci(fleet, &mut properties, &mut rules).await.map_err(|errors| anyhow::Error::from(InvalidConfig::new(name, errors)))?;
    if let Some(reference) = properties.remove("component.ref") {
        for key in ["component.path", "component.bundle.path"] {
            if properties.contains_key(key) {
                let why = "a connector names its component by component.ref or by component.path, not both";
                return Err(invalid(key, ValueClass::Invalid, why.into()));
            }
        }
        let hex =
            snow_runtime::artefact::parse_ref(&reference).map_err(|e| invalid("component.ref", ValueClass::Invalid, format!("{e:#}")))?;
        let path = fleet
            .components
            .resolve(&hex, &fleet.resolved)
            .await
            .map_err(|e| invalid("component.ref", ValueClass::Refused, format!("{e:#}")))?;
        rules.component_paths.push(path.clone());
        properties.insert("component.path".into(), path.display().to_string());
        properties.insert("component.digest".into(), format!("sha256:{hex}"));
    }
    // Transform components are named the same way: `transforms.<alias>.component.ref`.
    let transform_refs: Vec<String> =
        properties.keys().filter(|k| k.strip_prefix("transforms.").is_some_and(|k| k.ends_with(".component.ref"))).cloned().collect();
    for key in transform_refs {
        let reference = properties.remove(&key).unwrap_or_default();
        let prefix = key.trim_end_matches("ref");
        if properties.contains_key(&format!("{prefix}path")) {
            let why = format!("a transform names its component by {key} or by {prefix}path, not both");
            return Err(invalid(&format!("{prefix}path"), ValueClass::Invalid, why));
        }
        let hex = snow_runtime::artefact::parse_ref(&reference).map_err(|e| invalid(&key, ValueClass::Invalid, format!("{e:#}")))?;
        let path =
            fleet.components.resolve(&hex, &fleet.resolved).await.map_err(|e| invalid(&key, ValueClass::Refused, format!("{e:#}")))?;
        rules.component_paths.push(path.clone());
        properties.insert(format!("{prefix}path"), path.display().to_string());
        properties.insert(format!("{prefix}digest"), format!("sha256:{hex}"));
    }
    let applied = rules.apply(&properties).map_err(|errors| InvalidConfig::new(name, errors))?;
    let mut entries = applied.entries.clone();
    entries.insert("name".into(), name.to_string());
    // Whatever a reference resolved to stays out of every error (a refused value is shown).
    let mut spec = ConnectorSpec::from_entries(entries).map_err(|e| match e.downcast::<InvalidConfig>() {
        Ok(mut refused) => {
            refused.errors.iter_mut().for_each(|error| error.message = applied.scrub(&error.message));
            anyhow::Error::from(refused)
        }
        Err(e) => anyhow::anyhow!("{}", applied.scrub(&format!("{e:#}"))),
    })?;
    spec.reserved_topics = std::sync::Arc::new(fleet.config.state_topics().into_iter().collect());
    exactly_once_as_the_worker_allows(&mut spec, fleet.config.exactly_once_source)
        .map_err(|why| invalid("exactly.once.support", ValueClass::Refused, why))?;
    Ok(spec)
}

/// Every `oci://` reference of `properties` resolved with the worker's registries and trust
/// policy to a verified local file that the connector may then name (`….component.path`, pinned by
/// `….component.digest`).
async fn resolve_oci(
    fleet: &super::Fleet,
    properties: &mut BTreeMap<String, String>,
    rules: &mut snow_runtime::config::caller::CallerRules,
) -> Result<(), Vec<ConfigError>> {
    let keys = snow_oci::resolve::reference_keys(properties);
    if keys.is_empty() {
        return Ok(());
    }
    // The worker's signing policy with the caller's references (and whatever else it set, so that
    // a path beside a reference is refused).
    let mut scratch = properties.clone();
    for key in snow_runtime::config::TRUST_KEYS {
        match fleet.config.connector_defaults.get(key) {
            Some(value) => scratch.insert(key.to_string(), value.clone()),
            None => scratch.remove(key),
        };
    }
    let files = snow_oci::resolve_entries(&mut scratch, &fleet.oci).await?;
    rules.component_paths.extend(files);
    for key in keys {
        let prefix = key.trim_end_matches("ref");
        properties.remove(&key);
        for which in ["path", "digest"] {
            let k = format!("{prefix}{which}");
            if let Some(v) = scratch.get(&k) {
                properties.insert(k, v.clone());
            }
        }
    }
    Ok(())
}

/// Every `oci://` reference of `properties` that names a tag only, pinned to the digest it names
/// now (`oci://r/repo:tag@sha256:…`), so that every worker runs the same bytes until the
/// configuration is written again.
pub async fn pin_oci(fleet: &super::Fleet, properties: &mut BTreeMap<String, String>) -> Result<(), Vec<ConfigError>> {
    let mut errors = Vec::new();
    for key in snow_oci::resolve::reference_keys(properties) {
        let value = properties.get(&key).cloned().unwrap_or_default();
        let pinned = match snow_oci::Reference::parse(&value) {
            Ok(reference) if reference.digest.is_some() => continue,
            Ok(reference) => fleet.oci.pin(&reference).await.map(|(pinned, _)| pinned),
            Err(e) => Err(e),
        };
        match pinned {
            Ok(pinned) => {
                tracing::info!("{key}: {value} pinned to {pinned}");
                properties.insert(key, pinned.to_string());
            }
            Err(e) => errors.push(ConfigError::of(ValueClass::Refused, &key, format!("{e:#}"))),
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

/// A connector's `exactly.once.support` as the worker's `exactly.once.source.support` allows it,
/// as Connect's distributed herder does: `required` is refused unless the worker is `enabled`;
/// `requested` runs at least once there, with a warning.
fn exactly_once_as_the_worker_allows(spec: &mut ConnectorSpec, worker: super::config::ExactlyOnceSource) -> Result<(), String> {
    use snow_runtime::config::exactly_once::ExactlyOnce;
    if worker == super::config::ExactlyOnceSource::Enabled {
        return Ok(());
    }
    match spec.exactly_once {
        ExactlyOnce::Off => Ok(()),
        ExactlyOnce::Required => Err(format!(
            "required, but this worker's exactly.once.source.support is {}: set it to enabled on \
             every worker (worker.properties; preparing first on a running fleet), or ask for requested",
            if worker == super::config::ExactlyOnceSource::Preparing { "preparing" } else { "disabled" }
        )),
        ExactlyOnce::Requested => {
            tracing::warn!(
                connector = spec.name,
                "exactly.once.support=requested: this worker's exactly.once.source.support is not enabled, so the connector \
                 runs at least once"
            );
            spec.exactly_once = ExactlyOnce::Off;
            Ok(())
        }
    }
}
