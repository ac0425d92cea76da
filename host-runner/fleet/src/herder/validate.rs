//! Validation, the herder's: a configuration is checked the way this process would run it —
//! secrets must be provider references where configurations are stored, then the host's keys
//! ([`snow_runtime::config::ConnectorSpec`]), then the component's own validation and plan. Every
//! error is attached to the key it names. How an answer shows them (Connect's `ConfigInfos`) is
//! the REST API's (`crate::rest::validate`).

use std::collections::{BTreeMap, HashMap};

use anyhow::Result;
use snow_runtime::config::{ConfigError, ConnectorSpec, InvalidConfig, check_secrets};
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

/// Checks `properties` of connector `name` as `runtime` would run them: every problem, by key.
pub async fn check(runtime: &dyn Checks, name: &str, properties: &BTreeMap<String, String>) -> Vec<ConfigError> {
    // A fleet stores the configuration: a secret must be a reference there.
    let mut errors = if runtime.stores_configurations() { check_secrets(properties) } else { Vec::new() };
    if !errors.is_empty() {
        return errors;
    }
    // The host's checks first; the keys they refuse are left out so that the component still
    // checks the rest, and every error is answered at once, as Connect does.
    let mut checked = properties.clone();
    let spec = match runtime.spec(name, properties).await {
        Ok(spec) => spec,
        Err(e) => {
            errors = problems(&e, "name");
            checked.retain(|k, _| !errors.iter().any(|e| &e.key == k));
            // Stand-ins for what the host refused, so that the component still checks its own
            // keys (a misspelled one is named even when the instance URL is missing).
            if errors.iter().any(|e| e.key == snow_core::config::instance::INSTANCE_URL_KEY) {
                checked.insert(snow_core::config::instance::INSTANCE_URL_KEY.into(), "https://validation.invalid".into());
            }
            if errors.iter().any(|e| e.key.starts_with("snow.auth.")) {
                checked.retain(|k, _| !k.starts_with("snow.auth."));
                checked.insert("snow.auth.type".into(), "none".into());
            }
            match runtime.spec(name, &checked).await {
                Ok(spec) => spec,
                Err(_) => return errors,
            }
        }
    };
    if let Err(e) = runtime.runner().check(&spec, &mut HashMap::new()).await {
        // What the component says of a key the host already refused (or stood in for) adds nothing.
        for more in problems(&e, "component.path") {
            let refused = errors.iter().any(|e| e.key == more.key);
            if (!refused || properties.get(&more.key) == checked.get(&more.key)) && !errors.contains(&more) {
                errors.push(more);
            }
        }
    }
    errors
}

/// The problems `error` holds, redacted: a refused configuration's, each on its key; anything
/// else (the component could not be read, checked, loaded or run) as one problem on `otherwise`.
fn problems(error: &anyhow::Error, otherwise: &str) -> Vec<ConfigError> {
    match error.downcast_ref::<InvalidConfig>() {
        Some(refused) => snow_runtime::config::redacted_errors(&refused.errors),
        None => vec![ConfigError::refused(otherwise, snow_runtime::redact::clean(&format!("{error:#}")))],
    }
}
