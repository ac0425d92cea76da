//! Validation, the herder's: a configuration is checked the way this process would run it —
//! secrets must be provider references where configurations are stored, then the host's keys
//! ([`snow_runtime::config::ConnectorSpec`]), then the component's own validation and plan. Every
//! error is attached to the key it names. How an answer shows them (Connect's `ConfigInfos`) is
//! the REST API's (`crate::rest::validate`).

use std::collections::{BTreeMap, HashMap};

use anyhow::Result;
use snow_runtime::config::{ConnectorSpec, check_secrets};
use snow_runtime::runner::Runner;

use super::Pending;

/// What a runtime lends validation: how it reads a caller's configuration, and its runner.
pub trait Checks: Send + Sync {
    /// Whether configurations are stored (a fleet's topic), so secrets must be references.
    fn stores_configurations(&self) -> bool;
    /// The spec `properties` of connector `name` would run with here.
    fn spec<'a>(&'a self, name: &'a str, properties: &'a BTreeMap<String, String>) -> Pending<'a, Result<ConnectorSpec>>;
    /// The engine that validates components and plans.
    fn runner(&self) -> &Runner;
}

/// The errors of a configuration, by key (a key with no error is absent).
pub type Errors = BTreeMap<String, Vec<String>>;

/// Checks `properties` of connector `name` as `runtime` would run them.
pub async fn check(runtime: &dyn Checks, name: &str, properties: &BTreeMap<String, String>) -> Errors {
    let mut errors = Errors::new();
    // A fleet stores the configuration: a secret must be a reference there.
    for (key, message) in check_secrets(properties).into_iter().filter(|_| runtime.stores_configurations()) {
        errors.entry(key).or_default().push(message);
    }
    if !errors.is_empty() {
        return errors;
    }
    // The host's checks first; the keys they refuse are left out so that the component still
    // checks the rest, and every error is answered at once, as Connect does.
    let mut checked = properties.clone();
    let spec = match runtime.spec(name, properties).await {
        Ok(spec) => spec,
        Err(e) => {
            attach(&mut errors, &format!("{e:#}"));
            checked.retain(|k, _| !errors.contains_key(k));
            // Stand-ins for what the host refused, so that the component still checks its own
            // keys (a misspelled one is named even when the instance URL is missing).
            if errors.contains_key(snow_core::config::instance::INSTANCE_URL_KEY) {
                checked.insert(snow_core::config::instance::INSTANCE_URL_KEY.into(), "https://validation.invalid".into());
            }
            if errors.keys().any(|k| k.starts_with("snow.auth.")) {
                checked.retain(|k, _| !k.starts_with("snow.auth."));
                checked.insert("snow.auth.type".into(), "none".into());
            }
            match runtime.spec(name, &checked).await {
                Ok(spec) => spec,
                Err(_) => return errors,
            }
        }
    };
    if let Err(e) = runtime.runner().ready(&spec, &mut HashMap::new()).await {
        // What the component says of a key the host already refused (or stood in for) adds nothing.
        let mut more = Errors::new();
        attach(&mut more, &format!("{e:#}"));
        for (key, messages) in more {
            if !errors.contains_key(&key) || properties.get(&key) == checked.get(&key) {
                for message in messages {
                    add(&mut errors, &key, message);
                }
            }
        }
    }
    errors
}

/// Splits an error text of `key: message` lines (as the host and components write them) into
/// `errors`; a line naming no key belongs to `component.path` when it is about the component,
/// else to `name`.
pub(crate) fn attach(errors: &mut Errors, text: &str) {
    let text = snow_runtime::redact::clean(text);
    let mut attached = false;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with("connector ") && line.ends_with(':') {
            continue;
        }
        let keyed = line.split_once(": ").filter(|(keys, _)| {
            keys.split(", ").all(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '*')))
        });
        match keyed {
            Some((keys, message)) => {
                for key in keys.split(", ") {
                    add(errors, key, format!("{key}: {message}"));
                }
            }
            None => {
                let key = if line.contains("component") { "component.path" } else { "name" };
                errors.entry(key.to_string()).or_default().push(line.to_string());
            }
        }
        attached = true;
    }
    if !attached {
        errors.entry("name".into()).or_default().push(text);
    }
}

/// Adds `message` to `key`'s errors unless it is there already.
pub fn add(errors: &mut Errors, key: &str, message: String) {
    let known = errors.entry(key.to_string()).or_default();
    if !known.contains(&message) {
        known.push(message);
    }
}
