//! Runner configuration: connector files (Java properties or JSON, Kafka Connect style) read into
//! [`ConnectorSpec`]s.
//!
//! The host owns `name`, `tasks.max`, `component.*`, `kafka.*`, `topics`, `offset.storage.*`, a
//! sink's `topics.regex`, `errors.*`, `reporter.*`, `behavior.on.api.errors` and
//! `snow.sink.max.in.flight` ([`sink`]), and the credentials under `snow.auth.*`; every other `snow.*` key is handed to the guest, which
//! validates it. Credentials never reach the guest. Values may be `${env:NAME}` or
//! `${file:PATH:KEY}` references, resolved by the host first ([`providers`]).
//! `docs/configuration.md` lists every key.

mod artefact;
mod file;
mod properties;
mod providers;
mod sink;
mod spec;

pub use file::{load_files, load_files_with_entries, string_entries};
pub use properties::parse as parse_properties;
pub use sink::{OnFailure, SinkSpec};
pub use snow_core::auth::Secret;
pub use spec::{AuthSpec, ConnectorSpec, KafkaSpec, OAuthSpec};

/// Replaces the `${env:…}` and `${file:…}` references in `entries` (errors name the key).
pub fn resolve_providers(entries: &mut std::collections::BTreeMap<String, String>) -> Result<(), Vec<String>> {
    providers::resolve(entries, |name| std::env::var(name).ok())
}

/// Whether `value` is a provider reference (`${env:…}`, `${file:…}`): how a fleet stores secrets.
pub fn is_provider_reference(value: &str) -> bool {
    let v = value.trim();
    v.starts_with("${") && v.ends_with('}')
}
