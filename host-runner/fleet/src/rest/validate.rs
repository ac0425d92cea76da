//! Configuration validation in Kafka Connect's shape (`ConfigInfos`): what
//! `PUT /connector-plugins/{plugin}/config/validate` answers and what `POST /connectors` and
//! `PUT …/config` refuse with. A configuration is checked the way a worker will run it: secrets
//! must be provider references, the host's keys ([`snow_runtime::config::ConnectorSpec`]), then the
//! component's own validation and plan. Every error is attached to the key it names.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

use super::view::View;
use snow_runtime::config::check_secrets;

/// The errors of a configuration, by key (a key with no error is absent).
pub type Errors = BTreeMap<String, Vec<String>>;

/// Checks `properties` of connector `name` as `view`'s process would run them.
pub async fn check(view: &dyn View, name: &str, properties: &BTreeMap<String, String>) -> Errors {
    let mut errors = Errors::new();
    // A fleet stores the configuration: a secret must be a reference there.
    for (key, message) in check_secrets(properties).into_iter().filter(|_| view.writer().is_some()) {
        errors.entry(key).or_default().push(message);
    }
    if !errors.is_empty() {
        return errors;
    }
    // The host's checks first; the keys they refuse are left out so that the component still
    // checks the rest, and every error is answered at once, as Connect does.
    let mut checked = properties.clone();
    let spec = match view.spec(name, properties).await {
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
            match view.spec(name, &checked).await {
                Ok(spec) => spec,
                Err(_) => return errors,
            }
        }
    };
    if let Err(e) = view.runner().ready(&spec, &mut HashMap::new()).await {
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
fn attach(errors: &mut Errors, text: &str) {
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

/// How many errors.
pub fn count(errors: &Errors) -> usize {
    errors.values().map(Vec::len).sum()
}

/// Connect's answer to a refused create or update (400).
pub fn refusal_message(errors: &Errors) -> String {
    let lines: Vec<&str> = errors.values().flatten().map(String::as_str).collect();
    format!(
        "Connector configuration is invalid and contains the following {} error(s):\n{}\nYou can also find the above list of errors at the endpoint `/connector-plugins/{{connectorType}}/config/validate`",
        lines.len(),
        lines.join("\n")
    )
}

/// Connect's `ConfigInfos` for `properties` and their `errors`, as plugin `class`.
pub fn config_infos(class: &str, properties: &BTreeMap<String, String>, errors: &Errors) -> Value {
    let mut keys: Vec<&String> = properties.keys().collect();
    for key in errors.keys() {
        if !properties.contains_key(key) {
            keys.push(key);
        }
    }
    let configs: Vec<Value> = keys
        .iter()
        .enumerate()
        .map(|(order, key)| {
            let secret = snow_runtime::config::is_secret_key(key);
            let value = properties
                .get(*key)
                .map(|v| if secret && !snow_runtime::config::is_provider_reference(v) { "[hidden]".to_string() } else { v.clone() });
            json!({
                "definition": {
                    "name": key,
                    "type": if secret { "PASSWORD" } else { "STRING" },
                    "required": matches!(key.as_str(), "name" | "component.path" | "snow.instance.url"),
                    "default_value": null,
                    "importance": "MEDIUM",
                    "documentation": "See docs/configuration.md",
                    "group": group_of(key),
                    "width": "NONE",
                    "display_name": key,
                    "dependents": [],
                    "order": order,
                },
                "value": {
                    "name": key,
                    "value": value,
                    "recommended_values": [],
                    "errors": errors.get(*key).cloned().unwrap_or_default(),
                    "visible": true,
                }
            })
        })
        .collect();
    let mut groups: Vec<&str> = keys.iter().map(|k| group_of(k)).collect();
    groups.sort_unstable();
    groups.dedup();
    json!({ "name": class, "error_count": count(errors), "groups": groups, "configs": configs })
}

/// The group a key is shown in.
fn group_of(key: &str) -> &'static str {
    match key.split('.').next().unwrap_or_default() {
        "component" => "Component",
        "kafka" | "topics" | "offset" => "Kafka",
        "snow" if key.starts_with("snow.auth.") => "Authentication",
        "snow" => "ServiceNow",
        "errors" | "reporter" | "behavior" => "Error Handling",
        _ => "Common",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_attached_to_the_keys_they_name() {
        let mut errors = Errors::new();
        attach(
            &mut errors,
            "connector c has an invalid configuration:\n  kafka.typo: unknown key (check the spelling)\n  snow.auth.username, snow.auth.password: are required\n  component /x.wasm refused: unsigned",
        );
        assert_eq!(errors["kafka.typo"], ["kafka.typo: unknown key (check the spelling)"]);
        assert!(errors.contains_key("snow.auth.username") && errors.contains_key("snow.auth.password"));
        assert_eq!(errors["component.path"], ["component /x.wasm refused: unsigned"]);
        let props: BTreeMap<String, String> =
            [("kafka.typo", "1"), ("snow.auth.password", "hunter2")].into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let infos = config_infos("io.snowconnect.ServiceNowSourceConnector", &props, &errors);
        assert_eq!(infos["error_count"], 4);
        assert!(!infos.to_string().contains("hunter2"), "a secret's value is never answered");
        assert!(refusal_message(&errors).starts_with("Connector configuration is invalid and contains the following 4 error(s):\n"));
    }
}
