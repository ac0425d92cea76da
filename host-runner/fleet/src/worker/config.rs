//! `worker.properties`: what a worker of a fleet needs — its group, the state topics, the work
//! slots, its REST listener — read once with every problem named by its key. Keys follow Kafka
//! Connect's distributed worker where one exists (`group.id`, `bootstrap.servers`,
//! `config.storage.topic`, `offset.storage.topic`, `status.storage.topic`, `listeners`,
//! `rest.advertised.host.name`); the rest are ours (`work.*`, `rest.basic.auth.file`,
//! `rest.tls.*`). `docs/configuration.md` lists them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use snow_runtime::config::ConfigError;
pub use snow_runtime::listener::TlsFiles;
use snow_runtime::state::{Clients, TopicSpec};

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
    /// `config.providers.*`: where a connector's references may resolve.
    pub providers: snow_runtime::config::providers::ProviderPolicy,
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
const CONNECTOR_DEFAULTS: &[&str] = &["component.trusted.keys", "component.trusted.root", "component.allow.unsigned"];

impl WorkerConfig {
    /// Reads `path` (Java properties; `${env:…}` and `${file:…}` references resolved).
    pub fn load(path: &Path) -> Result<Self> {
        let entries = snow_runtime::config::read_operator_properties(path)?;
        Self::from_entries(&entries).with_context(|| format!("in {}", path.display()))
    }

    /// Validates `entries`; every problem names its key.
    pub fn from_entries(entries: &BTreeMap<String, String>) -> Result<Self> {
        let mut errors = Vec::new();
        let get = |k: &str| entries.get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let number = |k: &str, default: i64, min: i64, max: i64, errors: &mut Vec<ConfigError>| -> i64 {
            match get(k).map(|v| v.parse::<i64>()) {
                None => default,
                Some(Ok(v)) if (min..=max).contains(&v) => v,
                Some(_) => {
                    errors.push(ConfigError::new(k, format!("must be a whole number from {min} to {max}")));
                    default
                }
            }
        };
        let group = get("group.id").unwrap_or_else(|| {
            errors.push(ConfigError::missing("group.id", "is required: the name of the fleet (every worker of one fleet has the same)"));
            String::new()
        });
        let bootstrap = get("bootstrap.servers").unwrap_or_else(|| {
            errors.push(ConfigError::missing("bootstrap.servers", "is required: the Kafka brokers, e.g. 127.0.0.1:9092"));
            String::new()
        });
        let replication = |k: &str, errors: &mut Vec<ConfigError>| -> i32 {
            match get(k).map(|v| v.parse::<i32>()) {
                None => -1,
                Some(Ok(r)) if r == -1 || (1..=32).contains(&r) => r,
                Some(_) => {
                    errors.push(ConfigError::new(k, "must be -1 (the broker's default.replication.factor) or a whole number from 1 to 32"));
                    -1
                }
            }
        };
        let topic = |key: &'static str, suffix: &str, partitions: i32, replication: i32| TopicSpec {
            name: get(key).unwrap_or_else(|| format!("{group}-{suffix}")),
            partitions,
            replication,
            key,
        };
        let configs = topic("config.storage.topic", "configs", 1, replication("config.storage.replication.factor", &mut errors));
        let offsets = topic(
            "offset.storage.topic",
            "offsets",
            number("offset.storage.partitions", 25, 1, 10_000, &mut errors) as i32,
            replication("offset.storage.replication.factor", &mut errors),
        );
        let status = topic(
            "status.storage.topic",
            "status",
            number("status.storage.partitions", 5, 1, 10_000, &mut errors) as i32,
            replication("status.storage.replication.factor", &mut errors),
        );
        let slots = topic(
            "work.slots.topic",
            "slots",
            number("work.slots", 32, 1, 4096, &mut errors) as i32,
            replication("work.slots.replication.factor", &mut errors),
        );
        let components =
            topic("component.storage.topic", "components", 1, replication("component.storage.replication.factor", &mut errors));
        let push = topic("push.storage.topic", "push", 1, replication("push.storage.replication.factor", &mut errors));
        let session_timeout = Duration::from_millis(number("session.timeout.ms", 10_000, 1_000, 3_600_000, &mut errors) as u64);
        let heartbeat_interval = Duration::from_millis(number("heartbeat.interval.ms", 3_000, 100, 600_000, &mut errors) as u64);
        if heartbeat_interval >= session_timeout {
            errors.push(ConfigError::new("heartbeat.interval.ms", "must be below session.timeout.ms (a third of it is usual)"));
        }
        let (listen, https) = match get("listeners") {
            Some(listener) => {
                let (scheme, address) = listener.split_once("://").unwrap_or(("", &listener));
                match scheme {
                    "http" | "https" if address.contains(':') => (address.to_string(), scheme == "https"),
                    _ => {
                        errors.push(ConfigError::new(
                            "listeners",
                            format!("{listener:?} must be http://HOST:PORT or https://HOST:PORT (one listener)"),
                        ));
                        (String::new(), false)
                    }
                }
            }
            None => {
                let port = number("rest.port", 8083, 0, 65_535, &mut errors);
                (format!("{}:{port}", get("rest.host.name").unwrap_or_else(|| "127.0.0.1".into())), false)
            }
        };
        let tls = match (get("rest.tls.certificate.file"), get("rest.tls.key.file")) {
            (Some(certificate), Some(key)) => Some(TlsFiles { certificate: certificate.into(), key: key.into() }),
            (None, None) => None,
            _ => {
                for key in ["rest.tls.certificate.file", "rest.tls.key.file"] {
                    errors.push(ConfigError::new(key, "give both (PEM files) or neither"));
                }
                None
            }
        };
        if https && tls.is_none() {
            errors.push(ConfigError::new("listeners", "https:// needs rest.tls.certificate.file and rest.tls.key.file"));
        }
        if !https && tls.is_some() {
            errors.push(ConfigError::new("rest.tls.certificate.file", "is set but listeners is not https://"));
        }
        let port_of = |address: &str| address.rsplit_once(':').map(|(_, p)| p.to_string()).unwrap_or_default();
        let host_of = |address: &str| address.rsplit_once(':').map(|(h, _)| h.to_string()).unwrap_or_default();
        let worker_id = format!(
            "{}:{}",
            get("rest.advertised.host.name").unwrap_or_else(|| host_of(&listen)),
            get("rest.advertised.port").unwrap_or_else(|| port_of(&listen))
        );
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
        let basic_auth_file = get("rest.basic.auth.file").map(PathBuf::from);
        if let Some(file) = basic_auth_file.as_ref().filter(|f| !f.is_file()) {
            errors.push(ConfigError::new("rest.basic.auth.file", format!("{} does not exist", file.display())));
        }
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
        let list = |k: &str| -> Vec<String> {
            get(k).map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()).unwrap_or_default()
        };
        let plugin_path: Vec<PathBuf> = list("plugin.path").into_iter().map(PathBuf::from).collect();
        for dir in plugin_path.iter().filter(|d| !d.is_dir()) {
            errors.push(ConfigError::new("plugin.path", format!("{} is not a directory", dir.display())));
        }
        let enabled = get("config.providers").map(|_| list("config.providers")).unwrap_or_else(|| vec!["env".into(), "file".into()]);
        for (name, class) in [("file", "FileConfigProvider"), ("env", "EnvVarConfigProvider")] {
            let key = format!("config.providers.{name}.class");
            if let Some(given) = get(&key).filter(|c| !c.ends_with(class)) {
                errors.push(ConfigError::new(
                    key,
                    format!("{given} is not supported; the {name} provider is org.apache.kafka.common.config.provider.{class}"),
                ));
            }
        }
        if let Some(other) = enabled.iter().find(|p| !matches!(p.as_str(), "env" | "file")) {
            errors.push(ConfigError::new("config.providers", format!("{other} is not a provider here (env, file)")));
        }
        let keys = list("config.providers.allowed.keys");
        let file_dirs = if enabled.iter().any(|p| p == "file") {
            list("config.providers.file.allowed.paths").into_iter().map(PathBuf::from).collect()
        } else {
            Vec::new()
        };
        let env_names = if enabled.iter().any(|p| p == "env") { list("config.providers.env.allowed.names") } else { Vec::new() };
        let providers = snow_runtime::config::providers::ProviderPolicy::caller(keys, file_dirs, env_names);
        for key in entries.keys() {
            let security_key =
                snow_runtime::kafka::security::is_security_key(key) || snow_runtime::kafka::security::is_client_prefixed_security_key(key);
            if !KEYS.contains(&key.as_str())
                && !CONNECTOR_DEFAULTS.contains(&key.as_str())
                && !security_key
                && !snow_runtime::convert::spec::is_converter_key(key)
            {
                errors.push(ConfigError::new(key, "unknown worker key (check the spelling and docs/configuration.md)"));
            }
        }
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
            tls: if https { tls } else { None },
            basic_auth_file,
            worker_id,
            status_listen: get("status.listen"),
            connector_defaults,
            converters,
            security,
            plugin_path,
            providers,
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
        }
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
