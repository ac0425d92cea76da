//! A herder's validation in Kafka Connect's shape (`ConfigInfos`): what
//! `PUT /connector-plugins/{plugin}/config/validate` answers and what `POST /connectors` and
//! `PUT …/config` refuse with. The checks are the herder's ([`crate::herder::validate`]).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use snow_runtime::config::ConfigError;

/// The errors of a configuration as Connect shows them: by key, each `key: reason` (a key with no
/// error is absent).
pub type Errors = BTreeMap<String, Vec<String>>;

/// `errors` by key, each message once, each reason redacted. Only the reason: redacting
/// `snow.auth.password: must be given …` whole would mask the first word as if it were the value.
pub fn by_key(errors: &[ConfigError]) -> Errors {
    let mut keyed = Errors::new();
    for error in snow_runtime::config::redacted_errors(errors) {
        let shown = keyed.entry(error.key.clone()).or_default();
        let message = format!("{}: {}", error.key, error.message);
        if !shown.contains(&message) {
            shown.push(message);
        }
    }
    keyed
}

/// How many errors.
pub fn count(errors: &Errors) -> usize {
    errors.values().map(Vec::len).sum()
}

/// Connect's answer to a refused create or update (400).
pub fn refusal_message(errors: &[ConfigError]) -> String {
    let errors = by_key(errors);
    let lines: Vec<&str> = errors.values().flatten().map(String::as_str).collect();
    format!(
        "Connector configuration is invalid and contains the following {} error(s):\n{}\nYou can also find the above list of errors at the endpoint `/connector-plugins/{{connectorType}}/config/validate`",
        lines.len(),
        lines.join("\n")
    )
}

/// Connect's `ConfigInfos` for `properties` and their `errors`, as plugin `class`.
pub fn config_infos(class: &str, properties: &BTreeMap<String, String>, errors: &[ConfigError]) -> Value {
    let errors = &by_key(errors);
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
    fn errors_are_shown_on_the_keys_they_name() {
        let errors = [
            ConfigError::unknown("kafka.typo", "unknown key (check the spelling)"),
            ConfigError::missing("snow.auth.username", "are required"),
            ConfigError::missing("snow.auth.password", "are required"),
            ConfigError::refused("component.path", "component /x.wasm refused: unsigned"),
        ];
        let keyed = by_key(&errors);
        assert_eq!(keyed["kafka.typo"], ["kafka.typo: unknown key (check the spelling)"]);
        assert!(keyed.contains_key("snow.auth.username") && keyed.contains_key("snow.auth.password"));
        assert_eq!(keyed["component.path"], ["component.path: component /x.wasm refused: unsigned"]);
        let props: BTreeMap<String, String> =
            [("kafka.typo", "1"), ("snow.auth.password", "hunter2")].into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let infos = config_infos("io.snowconnect.ServiceNowSourceConnector", &props, &errors);
        assert_eq!(infos["error_count"], 4);
        assert!(!infos.to_string().contains("hunter2"), "a secret's value is never answered");
        assert!(refusal_message(&errors).starts_with("Connector configuration is invalid and contains the following 4 error(s):\n"));
    }

    #[test]
    fn a_reason_on_a_secret_key_is_read_whole_and_a_secret_inside_it_is_still_masked() {
        let errors = [
            ConfigError::refused("snow.auth.password", "must be given as a provider reference"),
            ConfigError::new("snow.push.secret", "was read as token=abc123 (not a reference)"),
        ];
        let message = refusal_message(&errors);
        assert!(message.contains("snow.auth.password: must be given as a provider reference"), "{message}");
        assert!(message.contains("snow.push.secret: was read as token=***"), "{message}");
        assert!(!message.contains("abc123"), "{message}");
    }
}
