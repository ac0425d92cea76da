//! One connector's host-side configuration ([`ConnectorSpec`]), validated once with every error
//! naming its key. Each section is read by its own reader beside this file (`component`,
//! `kafka`, `instance`, `auth`, `offsets`, `sink`, `push`, `exactly_once`, `topic_creation`,
//! `transform_components`); this one puts them together, hands the guest its `snow.*` keys and
//! refuses the keys nobody reads.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use snow_core::auth::oauth::Grant;
use snow_core::error::ConfigError;

use super::sink::SinkSpec;
use crate::auth::AuthSpec;
use crate::kafka::KafkaSpec;

/// A connector as the host runs it.
#[derive(Debug, Clone)]
pub struct ConnectorSpec {
    /// `name`: unique in the process; the sink's consumer group is `connect-<name>`.
    pub name: String,
    /// `tasks.max`.
    pub tasks_max: u32,
    /// `connector.class`, if given: must name the component's kind (a Kafka Connect habit).
    pub connector_class: Option<String>,
    /// `component.path`: the `.wasm` component to run.
    pub component_path: PathBuf,
    /// `component.digest` (`sha256:<hex>`): the component's bytes must hash to this, or it is
    /// refused (in a fleet, set from `component.ref`).
    pub component_digest: Option<String>,
    /// `component.memory.max.bytes`.
    pub memory_max_bytes: usize,
    /// `component.call.timeout.ms`.
    pub call_timeout: Duration,
    /// `component.trusted.keys`, `.trusted.root`, `.bundle.path`, `.allow.unsigned`: what the
    /// component's signature must be.
    pub trust: std::sync::Arc<crate::artefact::TrustPolicy>,
    /// `component.trap.budget`: traps in a row (without a successful call between them) after
    /// which a unit is parked instead of reopened.
    pub trap_budget: u32,
    /// Kafka settings.
    pub kafka: KafkaSpec,
    /// `topics` (sink only).
    pub topics: Vec<String>,
    /// The sink's host-side settings (a source reads only `errors.tolerance` from them, for its transforms).
    pub sink: SinkSpec,
    /// `offset.storage.file.filename` (source only).
    pub offsets_file: PathBuf,
    /// `offset.storage.topic` with `.partitions` and `.replication.factor` (source only): offsets in
    /// a compacted Kafka topic instead of the file.
    pub offsets_topic: Option<crate::state::TopicSpec>,
    /// Scheme of `snow.instance.url`.
    pub instance_scheme: String,
    /// Authority of `snow.instance.url`: the only host the gate lets the guest reach.
    pub instance_authority: String,
    /// `snow.instance.max.in.flight`: cap on requests in flight to the instance, process-wide.
    pub max_in_flight: usize,
    /// `snow.instance.requests.per.hour` and `.per.minute`: the instance's request budget
    /// (ADR 0034), process-wide (the smallest any connector sets wins).
    pub requests_per_hour: Option<u64>,
    /// See `requests_per_hour`.
    pub requests_per_minute: Option<u64>,
    /// `snow.table.<t>.priority` (1–100, default [`crate::outbound::DEFAULT_PRIORITY`]): a table's weight when the
    /// budget is short.
    pub priorities: BTreeMap<String, u32>,
    /// How the instance is reached: the proxy (`snow.proxy.*`) and TLS (`snow.instance.ssl.*`).
    pub instance_route: crate::transport::Route,
    /// Credentials (`snow.auth.*`).
    pub auth: AuthSpec,
    /// The secrets only the transport reads, for redaction: the proxy's password (and its Basic
    /// value), the instance's store passwords and inline key.
    pub transport_secrets: Vec<snow_core::auth::Secret>,
    /// Everything the guest sees: `snow.*` keys except the credentials, and the memory it gets
    /// (`component.memory.max.bytes`).
    pub guest_config: BTreeMap<String, String>,
    /// `key.converter`, `value.converter` and their settings, with their registry clients.
    pub convert: crate::convert::Converters,
    /// `topic.creation.*`: how a source creates the topics it writes to (none: it does not).
    pub topic_creation: Option<std::sync::Arc<super::topic_creation::TopicCreation>>,
    /// `transforms=` / `predicates=`: Connect's transforms (a source's before its converters, a
    /// sink's after them, as in Connect).
    pub transforms: Option<std::sync::Arc<snow_data::transform::Chain>>,
    /// The transform components among them (`io.snowconnect.transforms.Component` stages).
    pub transform_components: Vec<super::transform_components::TransformComponentSpec>,
    /// `exactly.once.support` (source only, ADR 0030).
    pub exactly_once: super::exactly_once::ExactlyOnce,
    /// `snow.push.*` (source only, ADR 0032): notifications wake the tables' sweeps.
    pub push: Option<std::sync::Arc<super::push::PushSpec>>,
    /// Topics no record of this connector may go to, nor be read from: a fleet's own state
    /// topics (set by the fleet; empty elsewhere).
    pub reserved_topics: std::sync::Arc<std::collections::BTreeSet<String>>,
}

/// Keys read by the host and never given to the guest.
const HOST_ONLY_SNOW_KEYS: [&str; 13] = [
    // Provenance of a translated configuration (`snow-connect migrate`): read by `--apply` only.
    "snow.migrated.from",
    // What the host tells a sink lane when it opens it (sink/instance.rs), never the user's.
    "snow.sink.takeover.below",
    "snow.sink.unknown.through",
    "snow.sink.put.budget.ms",
    "snow.auth.type",
    "snow.auth.username",
    "snow.auth.password",
    "snow.auth.client.id",
    "snow.auth.client.secret",
    "snow.auth.token.url",
    "snow.auth.token.refresh.margin.seconds",
    "snow.instance.max.in.flight",
    "snow.sink.max.in.flight",
];

/// The values of `entries` only the transport reads that are secrets.
fn transport_secrets(entries: &BTreeMap<String, String>) -> Vec<snow_core::auth::Secret> {
    let mut secrets = Vec::new();
    for (key, value) in entries.iter().filter(|(_, v)| !v.is_empty()) {
        if key == super::proxy::SECRET_KEY {
            if let Some(user) = entries.get("snow.proxy.username") {
                let basic = snow_core::auth::basic::authorization(user.trim(), value);
                secrets.push(snow_core::auth::Secret::new(basic.trim_start_matches("Basic ").to_string()));
            }
            secrets.push(snow_core::auth::Secret::new(value.clone()));
        } else if is_instance_tls_secret(key) {
            secrets.push(snow_core::auth::Secret::new(value.clone()));
        }
    }
    secrets
}

/// True for the instance's TLS settings that hold a secret (store passwords, an inline key).
pub fn is_instance_tls_secret(key: &str) -> bool {
    key.strip_prefix(super::instance::TLS_PREFIX)
        .and_then(|k| k.strip_prefix('.'))
        .is_some_and(|k| crate::transport::tls::SECRET_KEYS.contains(&k))
}

/// True for a `snow.*` key the host reads and never gives the guest.
pub fn is_host_only_snow_key(key: &str) -> bool {
    HOST_ONLY_SNOW_KEYS.contains(&key)
        || super::proxy::KEYS.contains(&key)
        || super::instance::is_tls_key(key)
        || super::push::KEYS.contains(&key)
        || super::instance::BUDGET_KEYS.contains(&key)
        || super::instance::priority_table(key).is_some()
}

impl ConnectorSpec {
    /// Validates the host keys of one connector's entries; every problem names its key. A panic
    /// while reading them (a bug: configuration is untrusted input and must never panic) refuses
    /// this configuration alone, so that one poisoned configuration record cannot stop a worker.
    pub fn from_entries(entries: BTreeMap<String, String>) -> Result<Self> {
        let name = entries.get("name").cloned().unwrap_or_default();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Self::read(entries))) {
            Ok(read) => read,
            Err(payload) => Err(super::InvalidConfig::new(
                name,
                vec![ConfigError::refused(
                    "(configuration)",
                    format!(
                        "reading it stopped on an internal error of the host ({}); please report this",
                        crate::supervise::panic_text(payload.as_ref())
                    ),
                )],
            )
            .into()),
        }
    }

    fn read(entries: BTreeMap<String, String>) -> Result<Self> {
        let mut errors: Vec<ConfigError> = Vec::new();
        let get = |k: &str| super::value(&entries, k);
        let name = super::required(&entries, "name", "a unique connector name", &mut errors);
        let component = super::component::read(&entries, &mut errors);
        let kafka = super::kafka::read(&entries, &mut errors);
        let instance = super::instance::read(&entries, &mut errors);
        let tasks_max = super::whole_number(&entries, "tasks.max", 1, 1, 1024, &mut errors) as u32;
        let mut auth = super::auth::read(&entries, &instance.url, &mut errors);
        let proxy = super::proxy::read(&entries, &mut errors);
        let instance_route = crate::transport::Route {
            proxy: proxy.clone(),
            tls: instance.tls.clone(),
            tls_keys: Some(std::sync::Arc::from(super::instance::TLS_PREFIX)),
        };
        if let AuthSpec::OAuth(oauth) = &mut auth {
            // The token endpoint goes through the proxy too; the instance's TLS settings are its
            // own only when it is on the instance's host (ServiceNow's /oauth_token.do).
            let on_instance = oauth.token_url.parse::<http::Uri>().is_ok_and(|uri| {
                uri.scheme_str() == Some(instance.scheme.as_str())
                    && uri.authority().is_some_and(|a| a.as_str().eq_ignore_ascii_case(&instance.authority))
            });
            oauth.route =
                if on_instance { instance_route.clone() } else { crate::transport::Route { proxy: proxy.clone(), ..Default::default() } };
        }
        let topics: Vec<String> =
            get("topics").map(|t| t.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()).unwrap_or_default();
        let sink = SinkSpec::from_entries(&entries, &name, &mut errors);
        let (offsets_file, offsets_topic) = super::offsets::read(&entries, &mut errors);
        let convert = crate::convert::spec::ConvertSpec::from_entries(&entries, &mut errors);
        if convert.typed_value() && entries.contains_key("snow.value.format") {
            errors.push(ConfigError::new(
                "snow.value.format",
                "leave it out when value.converter is set (the converter decides how values are written)",
            ));
        }

        let known_host_key = |k: &str| {
            matches!(
                k,
                "name"
                    | "connector.class"
                    | "tasks.max"
                    | "component.path"
                    | "component.digest"
                    | "component.ref"
                    | "component.memory.max.bytes"
                    | "component.call.timeout.ms"
                    | "component.trap.budget"
                    | "kafka.bootstrap.servers"
                    | "topics"
                    | "offset.storage.file.filename"
                    | "offset.storage.topic"
                    | "offset.storage.partitions"
                    | "offset.storage.replication.factor"
            ) || super::sink::KEYS.contains(&k)
                || super::artefact::KEYS.contains(&k)
                || k.starts_with("kafka.producer.")
                || k.starts_with("kafka.consumer.")
                || k.strip_prefix("kafka.").is_some_and(crate::kafka::security::is_security_key)
                || crate::convert::spec::is_converter_key(k)
                || super::topic_creation::is_topic_creation_key(k)
                || snow_data::transform::config::is_transform_key(k)
                || super::exactly_once::KEYS.contains(&k)
                // How `oci://` components are fetched: read (and checked) by snow-oci, which
                // resolves them before a connector is built.
                || k.starts_with("component.registry.")
        };
        let mut guest_config = BTreeMap::new();
        for (k, v) in &entries {
            if k.starts_with("snow.") {
                if !is_host_only_snow_key(k) {
                    guest_config.insert(k.clone(), v.clone());
                }
            } else if !known_host_key(k) {
                errors.push(ConfigError::unknown(k, "unknown key (check the spelling and docs/configuration.md)"));
            }
        }
        let is_sink = !topics.is_empty() || sink.topics_regex.is_some();
        let topic_creation = super::topic_creation::TopicCreation::from_entries(&entries, &mut errors).map(std::sync::Arc::new);
        if is_sink && topic_creation.is_some() {
            errors.push(ConfigError::refused("topic.creation.*", "creates a source's topics; a sink connector does not create topics"));
        }
        let exactly_once = super::exactly_once::read(&entries, is_sink, &mut errors);
        let push = super::push::read(&entries, is_sink, &mut errors).map(std::sync::Arc::new);
        let transforms = snow_data::transform::Chain::from_entries(&entries, &mut errors);
        let transform_components = super::transform_components::read(&transforms, &mut errors);
        let transforms = (!transforms.is_empty()).then(|| std::sync::Arc::new(transforms));

        // A source's typed value converter needs the table's types: the component reads its
        // dictionary. (A sink's converters read typed records before the component gets them.)
        if convert.typed_value() && !is_sink {
            guest_config.insert("snow.value.schema".to_string(), "dictionary".to_string());
        }
        // The component checks that its settings fit the memory it will get (snow-core's
        // config::memory); another host passes its own limit, or none.
        guest_config.insert(snow_core::config::memory::MEMORY_KEY.to_string(), component.memory_max_bytes.to_string());
        // A sink component stops a batch at the failures that stop the partition here, so that
        // nothing after such a record is written.
        if let Some(halt_on) = sink.halt_on().filter(|_| is_sink) {
            guest_config.insert("snow.sink.halt.on".to_string(), halt_on);
        }
        if !errors.is_empty() {
            return Err(super::InvalidConfig::new(name, errors).into());
        }
        Ok(Self {
            connector_class: get("connector.class"),
            name,
            tasks_max,
            component_path: component.path,
            component_digest: component.digest,
            memory_max_bytes: component.memory_max_bytes,
            call_timeout: component.call_timeout,
            trust: component.trust,
            trap_budget: component.trap_budget,
            kafka,
            topics,
            sink,
            offsets_file,
            offsets_topic,
            instance_scheme: instance.scheme,
            instance_authority: instance.authority,
            max_in_flight: instance.max_in_flight,
            requests_per_hour: instance.requests_per_hour,
            requests_per_minute: instance.requests_per_minute,
            priorities: instance.priorities,
            instance_route,
            auth,
            transport_secrets: transport_secrets(&entries),
            guest_config,
            convert: crate::convert::Converters::new(convert, proxy),
            topic_creation,
            transforms,
            transform_components,
            exactly_once,
            push,
            reserved_topics: Default::default(),
        })
    }
}

impl ConnectorSpec {
    /// Registers the secrets this connector holds for redaction by value ([`crate::redact`]):
    /// called when it starts, never when a configuration is only validated.
    pub fn register_secrets(&self) {
        match &self.auth {
            AuthSpec::None => {}
            AuthSpec::Basic { username, password } => {
                crate::redact::register(password.expose());
                let value = snow_core::auth::basic::authorization(username, password.expose());
                crate::redact::register(value.trim_start_matches("Basic "));
            }
            AuthSpec::OAuth(oauth) => {
                crate::redact::register(oauth.client_secret.expose());
                if let Grant::Password { password, .. } = &oauth.grant {
                    crate::redact::register(password.expose());
                }
            }
        }
        for secret in self.convert.spec.secrets() {
            crate::redact::register(secret);
        }
        for (key, value) in &self.kafka.security {
            if crate::kafka::security::is_secret_key(key) {
                crate::redact::register(value);
            }
        }
        if let Some(push) = &self.push {
            crate::redact::register(push.secret.expose());
        }
        for secret in &self.transport_secrets {
            crate::redact::register(secret.expose());
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
    fn the_request_budget_and_priorities_are_the_hosts_and_checked() {
        let base = [
            ("name", "c"),
            ("component.path", "x.wasm"),
            ("component.allow.unsigned", "true"),
            ("kafka.bootstrap.servers", "127.0.0.1:9092"),
            ("snow.instance.url", "https://acme.service-now.com"),
            ("snow.auth.type", "none"),
            ("snow.tables", "incident,problem"),
        ];
        let mut pairs = base.to_vec();
        pairs.extend([("snow.instance.requests.per.hour", "500"), ("snow.table.incident.priority", "30")]);
        let spec = ConnectorSpec::from_entries(entries(&pairs)).unwrap();
        assert_eq!((spec.requests_per_hour, spec.requests_per_minute), (Some(500), None));
        assert_eq!(spec.priorities, BTreeMap::from([("incident".to_string(), 30)]));
        assert!(spec.guest_config.keys().all(|k| !k.contains("requests.per") && !k.ends_with(".priority")), "never given to the guest");
        let mut bad = base.to_vec();
        bad.extend([("snow.instance.requests.per.minute", "0"), ("snow.table.problem.priority", "500")]);
        let text = format!("{:#}", ConnectorSpec::from_entries(entries(&bad)).unwrap_err());
        assert!(text.contains("snow.instance.requests.per.minute") && text.contains("snow.table.problem.priority"), "{text}");
    }

    #[test]
    fn credentials_stay_with_the_host() {
        let spec = ConnectorSpec::from_entries(entries(&[
            ("name", "c"),
            ("component.path", "x.wasm"),
            ("component.allow.unsigned", "true"),
            ("kafka.bootstrap.servers", "127.0.0.1:9092"),
            ("kafka.producer.linger.ms", "20"),
            ("snow.instance.url", "https://acme.service-now.com"),
            ("snow.auth.username", "u"),
            ("snow.auth.password", "hunter2"),
            ("snow.tables", "incident"),
            ("snow.push.secret", "a-long-random-push-secret"),
            ("snow.push.min.interval.ms", "100"),
        ]))
        .unwrap();
        assert_eq!(spec.guest_config.keys().collect::<Vec<_>>(), ["component.memory.max.bytes", "snow.instance.url", "snow.tables"]);
        assert_eq!(spec.kafka.producer.get("linger.ms").map(String::as_str), Some("20"));
        assert!(!format!("{spec:?}").contains("hunter2"));
        assert!(!format!("{spec:?}").contains("a-long-random-push-secret"), "the push secret neither");
        assert_eq!(spec.push.as_ref().map(|p| p.min_interval), Some(Duration::from_millis(100)));
        let refused = crate::push::listen::check_standalone(std::slice::from_ref(&spec)).unwrap_err().to_string();
        assert!(refused.contains("snow.push.listen: is required with snow.push.secret in a standalone run"), "{refused}");
    }

    #[test]
    fn a_password_is_kept_as_written_trailing_space_included() {
        let spec = ConnectorSpec::from_entries(entries(&[
            ("name", "c"),
            ("component.path", "x.wasm"),
            ("component.trusted.keys", concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/keys/development-only.pub")),
            ("kafka.bootstrap.servers", "127.0.0.1:9092"),
            ("snow.instance.url", "https://acme.service-now.com"),
            ("snow.auth.username", "u"),
            ("snow.auth.password", " pass word "),
        ]))
        .unwrap();
        let AuthSpec::Basic { password, .. } = spec.auth else { panic!("basic") };
        assert_eq!(password.expose(), " pass word ");
    }

    #[test]
    fn a_bootstrap_address_with_terminal_escapes_is_refused() {
        let err = ConnectorSpec::from_entries(entries(&[
            ("name", "c"),
            ("component.path", "x.wasm"),
            ("kafka.bootstrap.servers", "\u{1b}[0m127.0.0.1:9092"),
            ("snow.instance.url", "https://a.service-now.com"),
            ("snow.auth.type", "none"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(err.contains("kafka.bootstrap.servers: \"\\u{1b}[0m127.0.0.1:9092\" is not host:port"), "{err}");
        assert!(
            crate::config::is_host_port("broker-1.internal:9092")
                && crate::config::is_host_port("[::1]:9092")
                && !crate::config::is_host_port("broker")
                && !crate::config::is_host_port("b:0")
        );
    }

    #[test]
    fn errors_name_every_key() {
        let err =
            ConnectorSpec::from_entries(entries(&[("name", "c"), ("tasks.max", "0"), ("kafka.typo", "1"), ("snow.instance.url", "acme")]))
                .unwrap_err()
                .to_string();
        for key in [
            "component.path: is required",
            "kafka.bootstrap.servers: is required",
            "tasks.max: must be",
            "kafka.typo: unknown key",
            "snow.instance.url: must start",
            "snow.auth.username",
            "component.trusted.keys: is required",
        ] {
            assert!(err.contains(key), "missing {key:?} in {err}");
        }
    }

    #[test]
    fn trust_settings_that_cannot_be_used_name_their_key() {
        let err = ConnectorSpec::from_entries(entries(&[
            ("name", "c"),
            ("component.path", "x.wasm"),
            ("component.trusted.keys", "/nonexistent/release.pub"),
            ("component.trusted.root", "/nonexistent/trusted_root.json"),
            ("component.allow.unsigned", "yes"),
            ("kafka.bootstrap.servers", "127.0.0.1:9092"),
            ("snow.instance.url", "https://a.service-now.com"),
            ("snow.auth.type", "none"),
        ]))
        .unwrap_err()
        .to_string();
        for key in [
            "component.trusted.keys: reading the trusted key /nonexistent/release.pub",
            "component.trusted.root: reading /nonexistent/trusted_root.json",
            "component.allow.unsigned: must be true or false",
        ] {
            assert!(err.contains(key), "missing {key:?} in {err}");
        }
    }
}
