//! Runner configuration: connector files (Java properties or JSON, Kafka Connect style) read into
//! [`ConnectorSpec`]s.
//!
//! The host owns `name`, `tasks.max`, `component.*`, `kafka.*`, `topics`, `offset.storage.*`, a
//! sink's `topics.regex`, `errors.*`, `reporter.*`, `behavior.on.api.errors` and
//! `snow.sink.max.in.flight` ([`sink`]), the credentials under `snow.auth.*`, the proxy
//! (`snow.proxy.*`) and the instance's TLS settings (`snow.instance.ssl.*`); every other `snow.*` key is handed to the guest, which
//! validates it. Credentials never reach the guest. Values may be `${env:NAME}` or
//! `${file:PATH:KEY}` references, resolved by the host first ([`providers`]). A configuration
//! written by a caller rather than the operator passes [`caller`] first.
//! `docs/configuration.md` lists every key.

pub mod artefact;
mod auth;
pub mod caller;
pub mod component;
pub mod destinations;
pub mod exactly_once;
mod file;
mod instance;
mod invalid;
mod kafka;
mod offsets;
mod properties;
pub mod providers;
pub mod proxy;
pub mod push;
mod sink;
mod spec;
pub mod topic_creation;
pub mod transform_components;

pub use artefact::KEYS as TRUST_KEYS;
pub use file::{Entries, ReadConnector, build_specs, load_files, load_files_with_entries, read_entries, read_files, string_entries};
pub use invalid::{ConfigError, InvalidConfig, ValueClass, lines as error_lines, redacted as redacted_errors, shown};
pub use properties::parse as parse_properties;
pub use sink::{OnFailure, OnRefused, SinkSpec};
pub use snow_core::auth::Secret;
pub use spec::{ConnectorSpec, is_host_only_snow_key};

/// Replaces the `${env:…}` and `${file:…}` references in the operator's own `entries` (a
/// connector or worker file): anywhere, files capped. Errors name the key.
pub fn resolve_providers(entries: &mut std::collections::BTreeMap<String, String>) -> Result<(), Vec<ConfigError>> {
    providers::resolve(entries, &providers::ProviderPolicy::operator(), |name| std::env::var(name).ok()).map(drop)
}

/// Reads the operator's own Java properties file at `path` (a worker file, a tool's
/// `--command-config`), its references resolved as [`resolve_providers`] does; errors name the file.
pub fn read_operator_properties(path: &std::path::Path) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    use anyhow::Context as _;
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut entries = parse_properties(&text).map_err(anyhow::Error::msg).with_context(|| format!("reading {}", path.display()))?;
    resolve_providers(&mut entries).map_err(|e| anyhow::anyhow!("in {}: {}", path.display(), error_lines(&e).join("; ")))?;
    Ok(entries)
}

/// Whether `value` is a provider reference (`${env:…}`, `${file:…}`): how a fleet stores secrets.
pub fn is_provider_reference(value: &str) -> bool {
    providers::is_reference(value)
}

/// Whether connector key `key` holds a secret: never shown, and a provider reference in a fleet.
pub fn is_secret_key(key: &str) -> bool {
    matches!(key, "snow.auth.password" | "snow.auth.client.secret" | "snow.push.secret" | proxy::SECRET_KEY)
        || spec::is_instance_tls_secret(key)
        || ["key.converter.", "value.converter."].iter().filter_map(|p| key.strip_prefix(p)).any(|k| {
            matches!(k, "basic.auth.user.info" | "bearer.auth.token")
                || k.strip_prefix("schema.registry.ssl.").is_some_and(|k| crate::transport::tls::SECRET_KEYS.contains(&k))
        })
        || key.strip_prefix("kafka.").is_some_and(crate::kafka::security::is_secret_key)
}

/// Refuses a secret given as a value: a fleet stores configurations in a Kafka topic, so a secret
/// must be a provider reference each worker resolves. The errors name the key, never the value.
pub fn check_secrets(properties: &std::collections::BTreeMap<String, String>) -> Vec<ConfigError> {
    properties
        .iter()
        .filter(|(k, v)| is_secret_key(k) && !v.trim().is_empty() && !is_provider_reference(v))
        .map(|(k, _)| {
            ConfigError::refused(
                k.clone(),
                "must be given as a provider reference, ${env:NAME} or ${file:PATH:KEY}, resolved by each worker: a fleet \
                 never stores a secret's value in its configuration topic",
            )
        })
        .collect()
}

/// `host:port` with a plain host name or address and a port number.
pub(crate) fn is_host_port(text: &str) -> bool {
    split_host_port(text).is_some_and(|(_, port)| port > 0)
}

/// An address to listen on: `host:port`, port 0 meaning any free port.
pub(crate) fn is_listen_address(text: &str) -> bool {
    split_host_port(text).is_some()
}

fn split_host_port(text: &str) -> Option<(&str, u16)> {
    let (host, port) = text.rsplit_once(':')?;
    let plain = !host.is_empty() && host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '[' | ']' | ':'));
    plain.then_some(())?;
    Some((host, port.parse::<u16>().ok()?))
}

/// The whole number `entries` give `key` (trimmed), `default` when absent or empty; a value that is
/// not a whole number within `min..=max` is pushed to `errors` naming the key, and `default` used.
/// The trimmed value of `key`, if given and not empty.
pub(crate) fn value(entries: &std::collections::BTreeMap<String, String>, key: &str) -> Option<String> {
    entries.get(key).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

/// The value of `key`; when absent, an error saying it is required for `what` (and an empty value).
pub(crate) fn required(
    entries: &std::collections::BTreeMap<String, String>,
    key: &str,
    what: &str,
    errors: &mut Vec<ConfigError>,
) -> String {
    value(entries, key).unwrap_or_else(|| {
        errors.push(ConfigError::missing(key, format!("is required: {what}")));
        String::new()
    })
}

pub(crate) fn whole_number(
    entries: &std::collections::BTreeMap<String, String>,
    key: &str,
    default: u64,
    min: u64,
    max: u64,
    errors: &mut Vec<ConfigError>,
) -> u64 {
    match entries.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()).map(str::parse::<u64>) {
        None => default,
        Some(Ok(v)) if (min..=max).contains(&v) => v,
        Some(_) => {
            errors.push(ConfigError::new(key, format!("must be a whole number between {min} and {max}")));
            default
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every credential a connector can carry is a secret key: refused as a value in a fleet (named,
    /// never shown), accepted as a reference, and masked by the standalone REST answers, which use
    /// the same predicate. Registry credentials and store passwords were not, before issue 35.
    #[test]
    fn every_credential_key_is_secret_and_refused_as_a_value() {
        let secret = [
            "snow.auth.password",
            "snow.auth.client.secret",
            "snow.push.secret",
            "snow.proxy.password",
            "snow.instance.ssl.truststore.password",
            "snow.instance.ssl.keystore.password",
            "snow.instance.ssl.key.password",
            "snow.instance.ssl.keystore.key",
            "value.converter.basic.auth.user.info",
            "key.converter.bearer.auth.token",
            "value.converter.schema.registry.ssl.keystore.password",
            "key.converter.schema.registry.ssl.truststore.password",
            "value.converter.schema.registry.ssl.keystore.key",
            "kafka.sasl.password",
            "kafka.sasl.jaas.config",
            "kafka.ssl.truststore.password",
        ];
        for key in secret {
            assert!(is_secret_key(key), "{key} is not a secret key");
            let literal = std::collections::BTreeMap::from([(key.to_string(), "s3cr3t-value".to_string())]);
            let errors = check_secrets(&literal);
            assert_eq!(errors.len(), 1, "{key}: {errors:?}");
            assert_eq!(errors[0].key, key);
            assert!(!errors[0].message.contains("s3cr3t-value"), "{key}: the message shows the value");
            let reference = std::collections::BTreeMap::from([(key.to_string(), "${env:TEAM_A_SECRET}".to_string())]);
            assert!(check_secrets(&reference).is_empty(), "{key}: a reference is refused");
        }
        for key in [
            "snow.auth.username",
            "snow.instance.url",
            "value.converter.schema.registry.url",
            "value.converter.basic.auth.credentials.source",
            "snow.instance.ssl.truststore.location",
            "snow.proxy.username",
        ] {
            assert!(!is_secret_key(key), "{key} is taken for a secret");
        }
    }
}
