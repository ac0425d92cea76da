//! A connector configuration written by a caller — a REST client, a writer of a fleet's
//! configuration topic, the validate route of a standalone run — gets no more than a connector
//! (design §6): its tables, its instance, its topics. [`CallerRules`] is what the operator lets
//! such a configuration ask for, and [`CallerRules::apply`] turns the caller's properties into the
//! entries a connector runs with:
//!
//! - the signing policy (`component.trusted.keys`, `.trusted.root`, `.bundle.path`,
//!   `.allow.unsigned`) and the Kafka connection's security (`kafka.security.protocol`,
//!   `kafka.sasl.*`, `kafka.ssl.*`) are the operator's: a caller setting them to anything but the
//!   operator's own value is refused;
//! - `snow.push.listen` and `snow.push.tls.*` are the operator's: a fleet takes notifications on
//!   the worker's own REST listener;
//! - TLS stores by file (a schema registry's `*.converter.schema.registry.ssl.truststore.location`
//!   and `.keystore.location`, the instance's `snow.instance.ssl.truststore.location` and
//!   `.keystore.location`) are the operator's too (inline certificates are the caller's own);
//! - `component.path` must name a file under the directories (or be one of the files) the
//!   operator allows; whether any other file exists is never told;
//! - `kafka.bootstrap.servers` is the worker's cluster (its credentials go nowhere else);
//! - the instance, token endpoint, registries and proxy are destinations the worker allows, and a
//!   credential goes only where the worker bound it ([`super::destinations`]);
//! - `${env:…}` / `${file:…}` resolve only where [`super::providers::ProviderPolicy::caller`] allows;
//! - then the operator's keys are added.
//!
//! Errors name the key; the values a reference resolved to are returned so that any answer built
//! from the entries can be scrubbed of them ([`Applied::scrub`]).

use snow_core::error::ConfigError;
use std::collections::BTreeMap;
use std::path::PathBuf;

use super::providers::{self, ProviderPolicy};

/// What the operator lets a caller's configuration ask for.
#[derive(Debug, Clone, Default)]
pub struct CallerRules {
    /// Where references may resolve.
    pub providers: ProviderPolicy,
    /// Component files a caller may name by `component.path`: files, or directories holding them.
    pub component_paths: Vec<PathBuf>,
    /// The operator's connector keys (signing policy, Kafka cluster and security, defaults),
    /// added to what the caller wrote.
    pub defaults: BTreeMap<String, String>,
    /// The worker's converters (`key.converter`, `value.converter`, `header.converter` and their
    /// settings): a connector that names none of a kind runs with the worker's, settings and all,
    /// as in Connect; one that names its own takes none of the worker's settings for it.
    pub converters: BTreeMap<String, String>,
    /// Where the connector may send requests and credentials.
    pub destinations: super::destinations::DestinationPolicy,
    /// Topics a connector may neither write nor read: the fleet's own state topics.
    pub reserved_topics: Vec<String>,
    /// The largest `component.memory.max.bytes` a connector may ask for (the operator's).
    pub memory_ceiling: Option<u64>,
}

/// A caller's configuration made ready to run.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The entries the connector runs with.
    pub entries: BTreeMap<String, String>,
    /// The values references resolved to.
    resolved: Vec<String>,
}

impl Applied {
    /// `text` without any value a reference resolved to (answers to a caller never echo one).
    pub fn scrub(&self, text: &str) -> String {
        scrub(text, &self.resolved)
    }
}

/// `text` without `values` (each in every encoding the redaction knows, and as written).
pub fn scrub(text: &str, values: &[String]) -> String {
    let mut known = snow_core::redact::KnownSecrets::new();
    for value in values {
        known.add(value);
    }
    let mut out = known.scrub(text).into_owned();
    for value in values.iter().filter(|v| v.len() >= 3) {
        out = out.replace(value.as_str(), "[hidden]");
    }
    out
}

/// Whether `key` belongs to the operator alone.
fn operator_only(key: &str) -> Option<&'static str> {
    if super::artefact::KEYS.contains(&key) {
        return Some("the signing policy is the worker's (worker.properties); a connector configuration may not set it");
    }
    let tls_file = ["key.converter.schema.registry.ssl.", "value.converter.schema.registry.ssl.", "snow.instance.ssl."]
        .iter()
        .filter_map(|p| key.strip_prefix(p))
        .any(|k| crate::transport::tls::FILE_KEYS.contains(&k));
    if tls_file {
        return Some(
            "names a file of the worker: TLS stores by file are the operator's (the worker's converters in worker.properties, \
             the worker's connector defaults); a connector configuration may give certificates inline (.truststore.certificates, \
             .keystore.certificate.chain with .keystore.key)",
        );
    }
    if key == "snow.instance.max.in.flight" || super::instance::BUDGET_KEYS.contains(&key) {
        return Some(
            "the instance's in-flight cap and request budget are the operator's (worker.properties): shared by every \
             connector on the instance, a connector may not lower them for the others",
        );
    }
    if matches!(key, "snow.push.listen" | "snow.push.tls.certificate.file" | "snow.push.tls.key.file") {
        return Some(
            "a worker takes push notifications on its REST listener, at /snow/push/<connector> (listeners and rest.tls.* in \
             worker.properties); a connector configuration may not open a listener or name the worker's files",
        );
    }
    if key.strip_prefix("kafka.").is_some_and(crate::kafka::security::is_security_key) {
        return Some("the Kafka connection's security is the worker's (worker.properties); a connector configuration may not set it");
    }
    None
}

impl CallerRules {
    /// Refusals of `properties` naming a reserved topic to write to or read from (a topic key, a
    /// pattern matching one, a transform's literal topic).
    fn reserved_topics_named(&self, properties: &BTreeMap<String, String>) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        if self.reserved_topics.is_empty() {
            return errors;
        }
        let writes_to = |key: &str| {
            matches!(key, "topics" | "errors.deadletterqueue.topic.name" | "reporter.result.topic.name" | "reporter.error.topic.name")
                || (key.starts_with("snow.") && key.ends_with("topic"))
                || (key.starts_with("transforms.") && (key.ends_with(".replacement") || key.ends_with(".topic.format")))
        };
        for (key, value) in properties {
            let named = if key == "topics.regex" {
                let pattern = regex::Regex::new(&format!("^(?:{})$", value.trim())).ok();
                self.reserved_topics.iter().find(|t| pattern.as_ref().is_some_and(|p| p.is_match(t)))
            } else if writes_to(key) {
                self.reserved_topics.iter().find(|t| value.split(',').any(|v| v.trim() == t.as_str()))
            } else {
                None
            };
            if let Some(topic) = named {
                errors.push(ConfigError::refused(key.clone(), format!("names {topic}, one of the fleet's own state topics")));
            }
        }
        errors
    }

    /// The entries a caller's `properties` run with, or every reason they may not (by key).
    pub fn apply(&self, properties: &BTreeMap<String, String>) -> Result<Applied, Vec<ConfigError>> {
        let mut errors = Vec::new();
        for (key, value) in properties {
            // Repeating the operator's own setting asks for nothing more.
            let repeated = self.defaults.get(key).is_some_and(|own| own.trim() == value.trim());
            if let Some(why) = operator_only(key).filter(|_| !repeated) {
                errors.push(ConfigError::refused(key, why));
            }
        }
        if let (Some(asked), Some(worker)) = (properties.get("kafka.bootstrap.servers"), self.defaults.get("kafka.bootstrap.servers"))
            && asked.trim() != worker.trim()
        {
            errors.push(ConfigError::refused(
                "kafka.bootstrap.servers",
                "a connector runs on the worker's Kafka cluster (bootstrap.servers in worker.properties); remove it",
            ));
        }
        // The connector's component and its transform components alike.
        let is_transform = |key: &str| key.strip_prefix("transforms.").is_some_and(|k| k.ends_with(".component.path"));
        for (key, path) in properties.iter().filter(|(k, _)| k.as_str() == "component.path" || is_transform(k)) {
            let allowed = PathBuf::from(path.trim())
                .canonicalize()
                .ok()
                .filter(|real| real.is_file())
                .is_some_and(|real| self.component_paths.iter().filter_map(|p| p.canonicalize().ok()).any(|p| real.starts_with(p)));
            if !allowed {
                let reference = key.replace("component.path", "component.ref");
                errors.push(ConfigError::refused(
                    key,
                    format!(
                        "{path} is not a component this worker lets connectors run (files under plugin.path in \
                     worker.properties); push it with `snow-connect component push` and name it by {reference}"
                    ),
                ));
            }
        }
        for key in properties.keys().filter(|k| k.strip_prefix("transforms.").is_some_and(|k| k.ends_with(".component.bundle.path"))) {
            errors.push(ConfigError::refused(
                key,
                "a transform component's bundle is the one stored with it (or beside its file); remove it",
            ));
        }
        errors.extend(self.destinations.check(properties));
        errors.extend(self.reserved_topics_named(properties));
        if let (Some(ceiling), Some(asked)) = (self.memory_ceiling, properties.get("component.memory.max.bytes"))
            && asked.trim().parse::<u64>().is_ok_and(|asked| asked > ceiling)
        {
            errors.push(ConfigError::refused(
                "component.memory.max.bytes",
                format!("at most {ceiling} on this worker (its operator's component.memory.max.bytes)"),
            ));
        }
        let mut entries = properties.clone();
        let resolved = match providers::resolve(&mut entries, &self.providers, |name| std::env::var(name).ok()) {
            Ok(resolved) => resolved,
            Err(more) => {
                errors.extend(more);
                Vec::new()
            }
        };
        if !errors.is_empty() {
            return Err(errors);
        }
        for (k, v) in &self.defaults {
            entries.entry(k.clone()).or_insert_with(|| v.clone());
        }
        // A converter kind's settings come from one side only, as in Kafka Connect: a connector
        // naming its own converter gets only the settings it wrote; one naming none runs the
        // worker's, with the worker's settings alone — its own `value.converter.*` keys are not
        // the worker's converter's (they would send the worker's registry credentials to a
        // registry URL of the caller's choosing).
        for kind in ["key.converter", "value.converter", "header.converter"] {
            let of_kind = |k: &String| k == kind || k.strip_prefix(kind).is_some_and(|r| r.starts_with('.'));
            if properties.contains_key(kind) {
                entries.retain(|k, _| !of_kind(k) || properties.contains_key(k));
                continue;
            }
            entries.retain(|k, _| !of_kind(k));
            entries.extend(self.converters.iter().filter(|(k, _)| of_kind(k)).map(|(k, v)| (k.clone(), v.clone())));
        }
        Ok(Applied { entries, resolved })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_caller_cannot_set_the_signing_policy_security_or_cluster_nor_name_any_file() {
        let dir = std::env::temp_dir().join(format!("snow-caller-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("plugins")).unwrap();
        std::fs::write(dir.join("plugins/c.wasm"), b"x").unwrap();
        std::fs::write(dir.join("elsewhere.wasm"), b"x").unwrap();
        let rules = CallerRules {
            component_paths: vec![dir.join("plugins")],
            defaults: map(&[("kafka.bootstrap.servers", "b:9092"), ("component.trusted.keys", "/etc/keys/release.pub")]),
            providers: ProviderPolicy::caller(Vec::new(), Vec::new(), Vec::new()),
            converters: BTreeMap::new(),
            destinations: Default::default(),
            reserved_topics: Vec::new(),
            memory_ceiling: None,
        };
        let ok = rules.apply(&map(&[("component.path", &format!("{}/plugins/c.wasm", dir.display()))])).unwrap();
        assert_eq!(ok.entries["component.trusted.keys"], "/etc/keys/release.pub", "the operator's policy is added");
        assert!(rules.apply(&map(&[("component.trusted.keys", "/etc/keys/release.pub")])).is_ok(), "repeating it is no change");
        for (key, value, expected) in [
            ("component.allow.unsigned", "true".to_string(), "signing policy is the worker's"),
            ("component.trusted.keys", "/tmp/mine.pub".to_string(), "signing policy is the worker's"),
            ("component.bundle.path", "/etc/passwd".to_string(), "signing policy is the worker's"),
            ("kafka.sasl.password", "x".to_string(), "security is the worker's"),
            ("value.converter.schema.registry.ssl.truststore.location", "/etc/passwd".to_string(), "names a file of the worker"),
            ("key.converter.schema.registry.ssl.keystore.location", "/etc/ssl/k.pem".to_string(), "names a file of the worker"),
            ("kafka.bootstrap.servers", "evil:9092".to_string(), "the worker's Kafka cluster"),
            ("component.path", format!("{}/elsewhere.wasm", dir.display()), "is not a component this worker lets"),
            ("component.path", format!("{}/plugins/../elsewhere.wasm", dir.display()), "is not a component this worker lets"),
            ("component.path", "/no/such/file.wasm".to_string(), "is not a component this worker lets"),
            ("transforms.t.component.path", format!("{}/elsewhere.wasm", dir.display()), "name it by transforms.t.component.ref"),
            ("transforms.t.component.bundle.path", "/etc/passwd".to_string(), "the one stored with it"),
            ("snow.push.listen", "0.0.0.0:22".to_string(), "may not open a listener"),
            ("snow.instance.requests.per.hour", "1".to_string(), "request budget are the operator's"),
            ("snow.instance.max.in.flight", "1".to_string(), "in-flight cap and request budget are the operator's"),
            ("snow.push.tls.key.file", "/etc/ssl/private/worker.key".to_string(), "may not open a listener or name the worker's files"),
        ] {
            let errors = rules.apply(&map(&[(key, &value)])).unwrap_err();
            assert!(
                errors[0].to_string().starts_with(&format!("{key}: ")) && errors[0].to_string().contains(expected),
                "{key}={value}: {errors:?}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_connector_without_converters_of_its_own_takes_the_workers_and_one_with_them_takes_none_of_its_settings() {
        let rules = CallerRules {
            component_paths: Vec::new(),
            defaults: BTreeMap::new(),
            providers: ProviderPolicy::caller(Vec::new(), Vec::new(), Vec::new()),
            converters: map(&[
                ("value.converter", "io.confluent.connect.avro.AvroConverter"),
                ("value.converter.schema.registry.url", "http://registry:8081"),
                ("key.converter", "org.apache.kafka.connect.storage.StringConverter"),
            ]),
            destinations: Default::default(),
            reserved_topics: Vec::new(),
            memory_ceiling: None,
        };
        let inherited = rules.apply(&map(&[])).unwrap().entries;
        assert_eq!(inherited.get("value.converter.schema.registry.url").map(String::as_str), Some("http://registry:8081"));
        assert_eq!(inherited.get("key.converter").map(String::as_str), Some("org.apache.kafka.connect.storage.StringConverter"));
        let own = rules
            .apply(&map(&[("value.converter", "org.apache.kafka.connect.json.JsonConverter"), ("value.converter.schemas.enable", "false")]))
            .unwrap()
            .entries;
        assert_eq!(own["value.converter"], "org.apache.kafka.connect.json.JsonConverter");
        assert!(!own.contains_key("value.converter.schema.registry.url"), "the worker's value converter settings stay the worker's");
        assert_eq!(own.get("key.converter").map(String::as_str), Some("org.apache.kafka.connect.storage.StringConverter"));
        // Settings of a converter the caller did not name are not taken with the worker's: the
        // worker's credentials never go to the caller's registry.
        let rules = CallerRules {
            converters: map(&[
                ("value.converter", "io.confluent.connect.avro.AvroConverter"),
                ("value.converter.schema.registry.url", "https://registry.internal:8081"),
                ("value.converter.basic.auth.credentials.source", "USER_INFO"),
                ("value.converter.basic.auth.user.info", "${file:/etc/snow/registry.properties:user.info}"),
            ]),
            ..rules
        };
        let borrowed = rules
            .apply(&map(&[("value.converter.schema.registry.url", "https://attacker.example"), ("value.converter.bearer.auth.token", "x")]))
            .unwrap()
            .entries;
        assert_eq!(borrowed["value.converter.schema.registry.url"], "https://registry.internal:8081", "the worker's converter, whole");
        assert!(!borrowed.contains_key("value.converter.bearer.auth.token"));
        assert!(borrowed.values().all(|v| !v.contains("attacker")));
    }

    #[test]
    fn a_caller_may_not_name_the_fleets_state_topics_nor_ask_for_more_memory_than_the_worker_gives() {
        let rules = CallerRules {
            reserved_topics: vec!["fleet-configs".into(), "fleet-offsets".into()],
            memory_ceiling: Some(256 << 20),
            ..CallerRules::default()
        };
        for (key, value) in [
            ("topics", "orders, fleet-configs"),
            ("topics.regex", "fleet-.*"),
            ("errors.deadletterqueue.topic.name", "fleet-offsets"),
            ("snow.table.incident.topic", "fleet-configs"),
            ("transforms.r.replacement", "fleet-offsets"),
        ] {
            let errors = rules.apply(&map(&[(key, value)])).unwrap_err();
            assert!(errors[0].to_string().starts_with(&format!("{key}: names fleet-")), "{key}: {errors:?}");
        }
        let errors = rules.apply(&map(&[("component.memory.max.bytes", "4294967296")])).unwrap_err();
        assert!(errors[0].to_string().contains("at most 268435456 on this worker"), "{errors:?}");
        assert!(rules.apply(&map(&[("component.memory.max.bytes", "67108864"), ("topics", "orders")])).is_ok(), "less, and other topics");
    }

    #[test]
    fn resolved_values_are_scrubbed_from_answers() {
        let values = vec!["Worker-Secret/9".to_string()];
        assert_eq!(scrub("x Worker-Secret/9 y Worker-Secret%2F9", &values), "x *** y ***");
    }
}
