//! `worker.properties`: what a worker of a fleet needs — its group, the state topics, the work
//! slots, its REST listener — read once with every problem named by its key. Keys follow Kafka
//! Connect's distributed worker where one exists (`group.id`, `bootstrap.servers`,
//! `config.storage.topic`, `offset.storage.topic`, `status.storage.topic`, `listeners`,
//! `rest.advertised.host.name`); the rest are ours (`work.*`, `rest.basic.auth.file`,
//! `rest.tls.*`). `docs/configuration.md` lists them. Each section has its reader beside this file:
//! the state topics ([`topics`]), the REST listener ([`rest`]) and what callers may reach
//! ([`callers`]); this one reads the group and membership and puts them together.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use snow_runtime::config::ConfigError;
pub use snow_runtime::listener::TlsFiles;
use snow_runtime::state::{Clients, TopicSpec};

mod callers;
mod rest;
mod topics;

/// A worker's settings.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// `group.id`: the fleet.
    pub group: String,
    /// `bootstrap.servers`.
    pub bootstrap: String,
    /// `config.storage.topic` (one partition: configurations are read in the order written).
    pub configs: TopicSpec,
    /// `offset.storage.topic`.
    pub offsets: TopicSpec,
    /// `status.storage.topic`.
    pub status: TopicSpec,
    /// `work.slots.topic` and `work.slots`: the topic whose partitions are the work slots.
    pub slots: TopicSpec,
    /// `component.storage.topic`: components pushed to the fleet, by digest.
    pub components: TopicSpec,
    /// `push.storage.topic`: push notifications' wake-ups, for the table's owner (ADR 0032).
    pub push: TopicSpec,
    /// `session.timeout.ms`: how long a silent worker keeps its slots.
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms`.
    pub heartbeat_interval: Duration,
    /// Where the REST API listens (`listeners`, or `rest.host.name` and `rest.port`).
    pub listen: String,
    /// Whether the REST listener speaks TLS (`listeners=https://…`).
    pub tls: Option<TlsFiles>,
    /// `rest.basic.auth.file`: a properties file of `user=password`; without it the API is open.
    pub basic_auth_file: Option<PathBuf>,
    /// The worker's id in status answers: `rest.advertised.host.name:rest.advertised.port`.
    pub worker_id: String,
    /// `status.listen`: the operator endpoint (`/status`, `/metrics`), if any.
    pub status_listen: Option<String>,
    /// Connector keys every connector gets unless it sets them (`component.trusted.keys`,
    /// `component.trusted.root`, `component.allow.unsigned`), and `kafka.bootstrap.servers`.
    pub connector_defaults: BTreeMap<String, String>,
    /// `key.converter`, `value.converter`, `header.converter` and their settings: the converters
    /// of connectors that name none of their own (as Connect's worker configuration).
    pub converters: BTreeMap<String, String>,
    /// The Kafka connection's security (librdkafka settings), for every client of the worker
    /// and of its connectors ([`snow_runtime::kafka::security`]).
    pub security: BTreeMap<String, String>,
    /// `plugin.path`: the directories whose components a connector may name by `component.path`.
    pub plugin_path: Vec<PathBuf>,
    /// `component.registry.*`: the registries connectors may name by `component.ref=oci://…`
    /// (`component.registry.hosts`; none unless listed), and how they are reached (snow-oci).
    pub registries: BTreeMap<String, String>,
    /// `config.providers.*`: where a connector's references may resolve.
    pub providers: snow_runtime::config::providers::ProviderPolicy,
    /// `destinations.*`, `credentials.*`: where a caller's connector may send requests and credentials.
    pub destinations: snow_runtime::config::destinations::DestinationPolicy,
    /// `exactly.once.source.support` (Kafka Connect's worker key, KIP-618): whether the fleet's
    /// source connectors may run exactly once.
    pub exactly_once_source: ExactlyOnceSource,
}

/// `exactly.once.source.support`, as Connect's distributed worker reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExactlyOnceSource {
    /// `disabled` (Connect's default): a connector's `exactly.once.support=required` is refused,
    /// `requested` runs at least once with a warning.
    #[default]
    Disabled,
    /// `preparing`: the step of a rolling upgrade before `enabled`; connectors as with `disabled`
    /// (every work slot is fenced by its transactional writer whatever the setting).
    Preparing,
    /// `enabled`: a connector's `exactly.once.support` is honoured.
    Enabled,
}

/// Every key this file reads.
const KEYS: &[&str] = &[
    "component.storage.topic",
    "component.storage.replication.factor",
    "push.storage.topic",
    "push.storage.replication.factor",
    "group.id",
    "bootstrap.servers",
    "config.storage.topic",
    "config.storage.replication.factor",
    "offset.storage.topic",
    "offset.storage.partitions",
    "offset.storage.replication.factor",
    "status.storage.topic",
    "status.storage.partitions",
    "status.storage.replication.factor",
    "work.slots.topic",
    "work.slots",
    "work.slots.replication.factor",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "listeners",
    "rest.host.name",
    "rest.port",
    "rest.advertised.host.name",
    "rest.advertised.port",
    "rest.basic.auth.file",
    "rest.tls.certificate.file",
    "rest.tls.key.file",
    "status.listen",
    "plugin.path",
    "config.providers",
    "config.providers.file.class",
    "config.providers.env.class",
    "config.providers.file.allowed.paths",
    "config.providers.env.allowed.names",
    "config.providers.allowed.keys",
    "exactly.once.source.support",
];

/// Keys passed on to connectors as defaults (besides `bootstrap.servers`).
const CONNECTOR_DEFAULTS: &[&str] = &[
    "component.trusted.keys",
    "component.trusted.root",
    "component.allow.unsigned",
    "component.memory.max.bytes",
    "snow.instance.max.in.flight",
    "snow.instance.requests.per.hour",
    "snow.instance.requests.per.minute",
];

/// The trimmed value of `key`, if given and not empty.
fn value(entries: &BTreeMap<String, String>, key: &str) -> Option<String> {
    entries.get(key).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

/// `key` as a whole number from `min` to `max`, `default` when absent; an error names the key.
fn number(entries: &BTreeMap<String, String>, key: &str, default: i64, min: i64, max: i64, errors: &mut Vec<ConfigError>) -> i64 {
    match value(entries, key).map(|v| v.parse::<i64>()) {
        None => default,
        Some(Ok(v)) if (min..=max).contains(&v) => v,
        Some(_) => {
            errors.push(ConfigError::new(key, format!("must be a whole number from {min} to {max}")));
            default
        }
    }
}

impl WorkerConfig {
    /// Reads `path` (Java properties; `${env:…}` and `${file:…}` references resolved).
    pub fn load(path: &Path) -> Result<Self> {
        let entries = snow_runtime::config::read_operator_properties(path)?;
        Self::from_entries(&entries).with_context(|| format!("in {}", path.display()))
    }

    /// Validates `entries`; every problem names its key.
    pub fn from_entries(entries: &BTreeMap<String, String>) -> Result<Self> {
        let mut errors = Vec::new();
        let get = |k: &str| value(entries, k);
        let number =
            |k: &str, default: i64, min: i64, max: i64, errors: &mut Vec<ConfigError>| number(entries, k, default, min, max, errors);
        let group = get("group.id").unwrap_or_else(|| {
            errors.push(ConfigError::missing("group.id", "is required: the name of the fleet (every worker of one fleet has the same)"));
            String::new()
        });
        let bootstrap = get("bootstrap.servers").unwrap_or_else(|| {
            errors.push(ConfigError::missing("bootstrap.servers", "is required: the Kafka brokers, e.g. 127.0.0.1:9092"));
            String::new()
        });
        let topics::Topics { configs, offsets, status, slots, components, push } = topics::read(entries, &group, &mut errors);
        let session_timeout = Duration::from_millis(number("session.timeout.ms", 10_000, 1_000, 3_600_000, &mut errors) as u64);
        let heartbeat_interval = Duration::from_millis(number("heartbeat.interval.ms", 3_000, 100, 600_000, &mut errors) as u64);
        if heartbeat_interval >= session_timeout {
            errors.push(ConfigError::new("heartbeat.interval.ms", "must be below session.timeout.ms (a third of it is usual)"));
        }
        let rest::Rest { listen, tls, worker_id } = rest::read(entries, &mut errors);
        let exactly_once_source = match get("exactly.once.source.support").as_deref() {
            None | Some("disabled") => ExactlyOnceSource::Disabled,
            Some("preparing") => ExactlyOnceSource::Preparing,
            Some("enabled") => ExactlyOnceSource::Enabled,
            Some(other) => {
                errors.push(ConfigError::new(
                    "exactly.once.source.support",
                    format!("must be disabled, preparing or enabled, got {other:?}"),
                ));
                ExactlyOnceSource::Disabled
            }
        };
        let basic_auth_file = rest::basic_auth_file(entries, &mut errors);
        let mut connector_defaults: BTreeMap<String, String> =
            CONNECTOR_DEFAULTS.iter().filter_map(|k| get(k).map(|v| (k.to_string(), v))).collect();
        connector_defaults.insert("kafka.bootstrap.servers".into(), bootstrap.clone());
        // A sink's lanes fail over with the worker's slots: its consumer's session follows the
        // worker's unless the connector sets its own.
        connector_defaults.insert("kafka.consumer.session.timeout.ms".into(), session_timeout.as_millis().to_string());
        connector_defaults.insert("kafka.consumer.heartbeat.interval.ms".into(), heartbeat_interval.as_millis().to_string());
        let security = snow_runtime::kafka::security::read(entries, "", &mut errors);
        snow_runtime::kafka::security::check_client_prefixes(entries, &mut errors);
        for (k, v) in &security {
            connector_defaults.insert(format!("kafka.{k}"), v.clone());
        }
        let callers::Callers { plugin_path, providers } = callers::read(entries, &mut errors);
        let mut own_listeners = vec![listen.as_str()];
        let status_listen = get("status.listen");
        own_listeners.extend(status_listen.as_deref());
        let destinations = snow_runtime::config::destinations::DestinationPolicy::read(entries, &own_listeners, &mut errors);
        for key in entries.keys() {
            let security_key =
                snow_runtime::kafka::security::is_security_key(key) || snow_runtime::kafka::security::is_client_prefixed_security_key(key);
            if !KEYS.contains(&key.as_str())
                && !CONNECTOR_DEFAULTS.contains(&key.as_str())
                && !security_key
                && !snow_runtime::convert::spec::is_converter_key(key)
                && !snow_runtime::config::destinations::is_key(key)
                && !snow_oci::settings::is_key(key)
            {
                errors.push(ConfigError::new(key, "unknown worker key (check the spelling and docs/configuration.md)"));
            }
        }
        let mut registries: BTreeMap<String, String> =
            entries.iter().filter(|(k, _)| snow_oci::settings::is_key(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
        // A fleet lets connectors name no registry unless the operator lists it.
        registries.entry("component.registry.hosts".into()).or_default();
        let _ = snow_oci::Settings::read(&registries, PathBuf::new(), &mut errors);
        let converters: BTreeMap<String, String> =
            entries.iter().filter(|(k, _)| snow_runtime::convert::spec::is_converter_key(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
        // Checked here, so that a wrong class stops the worker, not each connector that inherits it.
        let _ = snow_runtime::convert::spec::ConvertSpec::from_entries(&converters, &mut errors);
        if !errors.is_empty() {
            bail!("the worker configuration is invalid:\n  {}", snow_runtime::config::error_lines(&errors).join("\n  "));
        }
        Ok(Self {
            group,
            bootstrap,
            configs,
            offsets,
            status,
            slots,
            components,
            push,
            session_timeout,
            heartbeat_interval,
            listen,
            tls,
            basic_auth_file,
            worker_id,
            status_listen,
            connector_defaults,
            converters,
            security,
            plugin_path,
            registries,
            providers,
            destinations,
            exactly_once_source,
        })
    }

    /// The Kafka clients' settings of the state topics (and slots, fences).
    pub fn clients(&self) -> Clients {
        Clients { bootstrap: self.bootstrap.clone(), common: self.security.clone() }
    }

    /// Where and how the worker's REST API listens.
    pub fn listener(&self) -> crate::rest::Listener {
        crate::rest::Listener { address: self.listen.clone(), tls: self.tls.clone(), basic_auth_file: self.basic_auth_file.clone() }
    }

    /// What a connector configuration written by a caller may ask for on this worker.
    pub fn caller_rules(&self) -> snow_runtime::config::caller::CallerRules {
        snow_runtime::config::caller::CallerRules {
            providers: self.providers.clone(),
            component_paths: self.plugin_path.clone(),
            defaults: self.connector_defaults.clone(),
            converters: self.converters.clone(),
            destinations: self.destinations.clone(),
            reserved_topics: self.state_topics(),
            // A connector may ask for less memory than the operator's default, never more.
            memory_ceiling: Some(
                self.connector_defaults
                    .get("component.memory.max.bytes")
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(snow_runtime::config::component::default_memory_max_bytes() as u64),
            ),
        }
    }

    /// The fleet's own topics: no connector reads or writes them.
    pub fn state_topics(&self) -> Vec<String> {
        [&self.configs, &self.offsets, &self.status, &self.slots, &self.components, &self.push].iter().map(|t| t.name.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_follow_the_group_and_every_problem_names_its_key() {
        let config = WorkerConfig::from_entries(&entries(&[("group.id", "fleet"), ("bootstrap.servers", "127.0.0.1:9092")])).unwrap();
        assert_eq!(
            (config.configs.name.as_str(), config.offsets.name.as_str(), config.status.name.as_str(), config.slots.name.as_str()),
            ("fleet-configs", "fleet-offsets", "fleet-status", "fleet-slots")
        );
        assert_eq!((config.configs.partitions, config.offsets.partitions, config.slots.partitions), (1, 25, 32));
        assert_eq!((config.listen.as_str(), config.worker_id.as_str()), ("127.0.0.1:8083", "127.0.0.1:8083"));
        assert_eq!((config.push.name.as_str(), config.exactly_once_source), ("fleet-push", ExactlyOnceSource::Disabled), "as Connect");
        let enabled = WorkerConfig::from_entries(&entries(&[
            ("group.id", "fleet"),
            ("bootstrap.servers", "127.0.0.1:9092"),
            ("exactly.once.source.support", "enabled"),
        ]))
        .unwrap();
        assert_eq!(enabled.exactly_once_source, ExactlyOnceSource::Enabled);
        let sessions = WorkerConfig::from_entries(&entries(&[
            ("group.id", "fleet"),
            ("bootstrap.servers", "127.0.0.1:9092"),
            ("session.timeout.ms", "6000"),
            ("heartbeat.interval.ms", "1000"),
        ]))
        .unwrap();
        let default = |k: &str| sessions.connector_defaults.get(k).map(String::as_str);
        assert_eq!(
            (default("kafka.consumer.session.timeout.ms"), default("kafka.consumer.heartbeat.interval.ms")),
            (Some("6000"), Some("1000")),
            "a sink's consumer session follows the worker's"
        );
        let err = WorkerConfig::from_entries(&entries(&[
            ("listeners", "ftp://x"),
            ("work.slots", "0"),
            ("heartbeat.interval.ms", "20000"),
            ("rest.tls.key.file", "k.pem"),
            ("group.idd", "typo"),
            ("exactly.once.source.support", "yes"),
        ]))
        .unwrap_err()
        .to_string();
        for key in [
            "group.id: is required",
            "bootstrap.servers: is required",
            "listeners: ",
            "work.slots: ",
            "heartbeat.interval.ms: ",
            "rest.tls.certificate.file, rest.tls.key.file",
            "group.idd: unknown",
            "exactly.once.source.support: must be disabled, preparing or enabled",
        ] {
            assert!(err.contains(key), "missing {key:?} in {err}");
        }
    }

    #[test]
    fn the_workers_converters_are_read_and_checked() {
        let base = [("group.id", "fleet"), ("bootstrap.servers", "127.0.0.1:9092")];
        let with = |extra: &[(&str, &str)]| {
            let mut all = base.to_vec();
            all.extend_from_slice(extra);
            WorkerConfig::from_entries(&entries(&all))
        };
        let config =
            with(&[("value.converter", "org.apache.kafka.connect.json.JsonConverter"), ("value.converter.schemas.enable", "false")])
                .unwrap();
        assert_eq!(config.caller_rules().converters.len(), 2);
        let err = format!("{:#}", with(&[("value.converter", "com.example.Mine")]).unwrap_err());
        assert!(err.contains("value.converter") && err.contains("com.example.Mine"), "{err}");
    }
}
