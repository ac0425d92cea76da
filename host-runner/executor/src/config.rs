//! What a connector runs with inside Kafka Connect: the operator's settings of the plugin (its
//! installation's `snow-connect.properties`: the signing policy, the component files connectors
//! may name, the compile cache) and a connector configuration as Connect hands it over, narrowed
//! to what the executor owns.
//!
//! A Connect connector configuration is a caller's ([`snow_runtime::config::caller`]): it cannot set the
//! signing policy or name a file outside the plugin's allowed component paths. Connect owns the
//! Kafka side — converters, transforms, `errors.*`, topic creation, exactly-once, client
//! overrides — so those keys are left to it and never reach the executor's spec.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use snow_runtime::config::ConnectorSpec;
use snow_runtime::config::caller::CallerRules;
use snow_runtime::config::providers::ProviderPolicy;
use snow_runtime::config::{ConfigError, InvalidConfig};

/// The operator's file in the plugin directory.
pub const OPERATOR_FILE: &str = "snow-connect.properties";

/// Keys the operator's file may hold.
const OPERATOR_KEYS: [&str; 8] = [
    "component.trusted.keys",
    "component.trusted.root",
    "component.allow.unsigned",
    "component.paths",
    "component.cache",
    "snow.instance.max.in.flight",
    "snow.instance.requests.per.hour",
    "snow.instance.requests.per.minute",
];

/// The operator's keys every connector of the plugin gets as they are: the instance's shared limits.
const SHARED_LIMITS: [&str; 3] = ["snow.instance.max.in.flight", "snow.instance.requests.per.hour", "snow.instance.requests.per.minute"];

/// The Kafka cluster the executor's spec names: none is ever connected to (Connect does Kafka I/O).
const NO_KAFKA: &str = "connect.invalid:9092";

/// Whether `key` is Kafka Connect's to apply (the executor never sees it).
pub fn is_connect_key(key: &str) -> bool {
    const PREFIXES: [&str; 14] = [
        "key.converter",
        "value.converter",
        "header.converter",
        "transforms",
        "predicates",
        "errors.deadletterqueue.",
        "errors.retry.",
        "errors.log.",
        "topic.creation.",
        "transaction.boundary",
        "producer.override.",
        "consumer.override.",
        "admin.override.",
        "offsets.storage.topic",
    ];
    PREFIXES.iter().any(|p| key.starts_with(p)) || matches!(key, "exactly.once.support" | "config.action.reload" | "task.class")
}

/// Why our runtime's `key` (set to `value`) has no place inside Kafka Connect, if it has none.
fn not_in_connect(key: &str, value: &str) -> Option<&'static str> {
    if key.starts_with("kafka.") || key.starts_with("offset.storage.") {
        return Some(
            "Connect's worker owns the Kafka clients and the offsets (producer.override.*, consumer.override.* where its policy allows)",
        );
    }
    if key.starts_with("reporter.") {
        return Some(
            "our runtime's success and error topics; inside Connect a failed record goes to Connect's dead letter queue \
             (errors.tolerance=all, errors.deadletterqueue.topic.name)",
        );
    }
    if key.starts_with("snow.push.") {
        return Some("push notifications are taken on our runtime's listener; inside Connect tables are polled (snow.poll.interval.ms)");
    }
    let mode = key == "snow.mode" || key.strip_prefix("snow.table.").is_some_and(|k| k.ends_with(".mode"));
    let snapshot = mode && value.trim() == "snapshot";
    if snapshot {
        return Some(
            "a snapshot table reads its keys back from its topic at every start, which only our runtime does (snow-connect \
             run or worker, ADR 0035); inside Connect a table is read along its cursor",
        );
    }
    None
}

/// The plugin installation's settings.
#[derive(Debug, Clone)]
pub struct Plugin {
    /// The plugin directory (`components/`, `bin/`, the operator's file).
    pub dir: PathBuf,
    /// The operator's connector keys (the signing policy), added to every connector's.
    defaults: BTreeMap<String, String>,
    /// Component files (or directories of them) a connector may name.
    component_paths: Vec<PathBuf>,
    /// Where compiled components are kept (`None`: not kept).
    pub cache: Option<PathBuf>,
}

impl Plugin {
    /// Reads `dir`'s operator file (absent: the defaults). Unknown keys are refused by name.
    pub fn load(dir: &Path) -> Result<Self> {
        let file = dir.join(OPERATOR_FILE);
        let entries = if file.is_file() { snow_runtime::config::read_operator_properties(&file)? } else { BTreeMap::new() };
        if let Some(unknown) = entries.keys().find(|k| !OPERATOR_KEYS.contains(&k.as_str())) {
            anyhow::bail!("{}: {unknown}: unknown key (known: {})", file.display(), OPERATOR_KEYS.join(", "));
        }
        let get = |k: &str| entries.get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let relative = |p: &str| if Path::new(p).is_absolute() { PathBuf::from(p) } else { dir.join(p) };
        let component_paths = get("component.paths")
            .map(|list| list.split(',').map(str::trim).filter(|p| !p.is_empty()).map(relative).collect())
            .unwrap_or_else(|| vec![dir.join("components")]);
        let mut defaults = BTreeMap::new();
        for key in snow_runtime::config::TRUST_KEYS.iter().filter(|k| **k != "component.bundle.path") {
            if let Some(value) = get(key) {
                let value = match *key {
                    "component.trusted.keys" => {
                        value.split(',').map(|p| relative(p.trim()).display().to_string()).collect::<Vec<_>>().join(",")
                    }
                    "component.trusted.root" => relative(&value).display().to_string(),
                    _ => value,
                };
                defaults.insert(key.to_string(), value);
            }
        }
        for key in SHARED_LIMITS {
            if let Some(value) = get(key) {
                defaults.insert(key.to_string(), value);
            }
        }
        defaults.insert("kafka.bootstrap.servers".into(), NO_KAFKA.into());
        let cache = match get("component.cache").as_deref() {
            Some("off") => None,
            Some(path) => Some(relative(path)),
            None => snow_runtime::component::cache::CompileCache::default_dir(),
        };
        Ok(Self { dir: dir.to_path_buf(), defaults, component_paths, cache })
    }

    /// The component a connector of `kind` (`source`, `sink`) runs when it names none.
    fn default_component(&self, kind: &str) -> PathBuf {
        self.dir.join("components").join(format!("guest_{kind}.wasm"))
    }

    /// The spec a Connect connector configuration `config` of `kind` runs with: Connect's keys
    /// left out, the default component filled in, then the caller's rules applied. Errors name
    /// the key (and never a value a reference resolved to).
    pub fn spec(&self, kind: &str, config: &BTreeMap<String, String>) -> Result<ConnectorSpec, Vec<ConfigError>> {
        let refused: Vec<ConfigError> = config
            .iter()
            .filter_map(|(k, v)| {
                not_in_connect(k, v).map(|why| ConfigError::refused(k.clone(), format!("not inside Kafka Connect: {why}")))
            })
            .collect();
        if !refused.is_empty() {
            return Err(refused);
        }
        let mut properties: BTreeMap<String, String> =
            config.iter().filter(|(k, _)| !is_connect_key(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
        if !properties.contains_key("component.path") {
            properties.insert("component.path".into(), self.default_component(kind).display().to_string());
        }
        let rules = CallerRules {
            providers: ProviderPolicy::caller(Vec::new(), Vec::new(), Vec::new()),
            component_paths: self.component_paths.clone(),
            defaults: self.defaults.clone(),
            converters: BTreeMap::new(),
            destinations: Default::default(),
            reserved_topics: Vec::new(),
            memory_ceiling: None,
        };
        let applied = rules.apply(&properties)?;
        // Whatever a reference resolved to stays out of every error.
        ConnectorSpec::from_entries(applied.entries.clone()).map_err(|e| match e.downcast::<InvalidConfig>() {
            Ok(refused) => {
                refused.errors.into_iter().map(|error| ConfigError { message: applied.scrub(&error.message), ..error }).collect()
            }
            Err(e) => vec![ConfigError::new("name", applied.scrub(&format!("{e:#}")))],
        })
    }
}

/// `errors` as the plugin's JSON: `[{"key", "message"}]`, the message without its key (the plugin
/// attaches it to the key, as Connect shows it).
pub fn keyed(errors: &[ConfigError]) -> serde_json::Value {
    errors.iter().map(|e| serde_json::json!({"key": e.key, "message": e.message})).collect()
}

/// Reads the plugin directory given on the command line.
pub fn plugin_dir(arg: Option<&str>) -> Result<PathBuf> {
    let dir = arg.context("task-executor needs --plugin-dir DIR (the plugin's directory)")?;
    PathBuf::from(dir).canonicalize().with_context(|| format!("--plugin-dir {dir}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn plugin_dir(name: &str, operator: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("snow-plugin-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("components")).unwrap();
        std::fs::write(dir.join("components/guest_source.wasm"), b"x").unwrap();
        std::fs::write(dir.join(OPERATOR_FILE), operator).unwrap();
        dir
    }

    #[test]
    fn a_connect_configuration_leaves_connects_keys_to_it_and_cannot_reach_the_plugins_policy() {
        let dir = plugin_dir("rules", "component.allow.unsigned=true\ncomponent.cache=off\n");
        let plugin = Plugin::load(&dir).unwrap();
        assert_eq!(plugin.cache, None);
        let base = [
            ("name", "c"),
            ("connector.class", "io.snowconnect.ServiceNowSourceConnector"),
            ("task.class", "io.snowconnect.ServiceNowSourceTask"),
            ("snow.instance.url", "https://acme.service-now.com"),
            ("snow.tables", "incident"),
            ("snow.auth.type", "none"),
            ("value.converter", "io.confluent.connect.avro.AvroConverter"),
            ("transforms", "mask"),
            ("transforms.mask.type", "org.apache.kafka.connect.transforms.MaskField$Value"),
            ("errors.deadletterqueue.topic.name", "dlq"),
            ("errors.tolerance", "all"),
            ("exactly.once.support", "required"),
        ];
        let spec = plugin.spec("source", &map(&base)).unwrap();
        assert_eq!(spec.component_path, dir.join("components/guest_source.wasm"), "the plugin's own component by default");
        assert!(spec.transforms.is_none() && !spec.convert.spec.typed_value(), "transforms and converters are Connect's");
        assert!(spec.sink.dlq_topic.is_none() && spec.sink.tolerate_record_errors, "the DLQ is Connect's, the tolerance read by both");
        assert_eq!(spec.exactly_once, snow_runtime::config::exactly_once::ExactlyOnce::Off, "exactly-once is Connect's");
        for (key, value, expected) in [
            ("component.allow.unsigned", "false", "signing policy is the worker's"),
            ("component.trusted.keys", "/tmp/mine.pub", "signing policy is the worker's"),
            ("component.path", "/etc/passwd", "is not a component this worker lets"),
            ("kafka.bootstrap.servers", "evil:9092", "Connect's worker owns the Kafka clients"),
            ("reporter.result.topic.name", "results", "Connect's dead letter queue"),
            ("snow.push.secret", "s", "tables are polled"),
            ("snow.table.incident.mode", "snapshot", "only our runtime does"),
        ] {
            let mut config = map(&base);
            config.insert(key.into(), value.into());
            let errors = plugin.spec("source", &config).unwrap_err();
            assert!(errors.iter().any(|e| e.key == key && e.message.contains(expected)), "{key}={value}: {errors:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_operators_file_is_checked_by_key_and_its_paths_are_the_plugins() {
        let dir = plugin_dir("operator", "component.trusted.key=keys/release.pub\n");
        let err = format!("{:#}", Plugin::load(&dir).unwrap_err());
        assert!(err.contains("component.trusted.key: unknown key"), "{err}");
        let dir = plugin_dir("paths", "component.trusted.keys=keys/release.pub\ncomponent.paths=components,/opt/more\n");
        let plugin = Plugin::load(&dir).unwrap();
        assert_eq!(plugin.component_paths, vec![dir.join("components"), PathBuf::from("/opt/more")]);
        assert_eq!(plugin.defaults["component.trusted.keys"], dir.join("keys/release.pub").display().to_string());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn errors_are_attached_to_their_keys() {
        let keyed = keyed(&[ConfigError::missing("snow.tables", "is required"), ConfigError::new("a.b", "goes with c.d")]);
        assert_eq!(keyed[0], serde_json::json!({"key": "snow.tables", "message": "is required"}));
        assert_eq!(keyed[1], serde_json::json!({"key": "a.b", "message": "goes with c.d"}));
    }
}
