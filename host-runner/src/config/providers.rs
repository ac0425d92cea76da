//! Configuration providers, Kafka Connect style: a value `${env:NAME}` is replaced by the
//! environment variable `NAME`, and `${file:PATH:KEY}` by the key `KEY` of the properties file
//! `PATH`. Resolution happens in the host before anything is validated; a guest never sees the
//! reference nor the value of a secret key.

use std::collections::BTreeMap;
use std::path::Path;

/// Replaces every provider reference in `entries`; errors name the key and the reference.
pub fn resolve(entries: &mut BTreeMap<String, String>, env: impl Fn(&str) -> Option<String>) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    for (key, value) in entries.iter_mut() {
        match resolve_value(value, &env) {
            Ok(Some(resolved)) => *value = resolved,
            Ok(None) => {}
            Err(message) => errors.push(format!("{key}: {message}")),
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

/// The resolved value if `value` is a provider reference; an error says what could not be read
/// (never the secret itself).
fn resolve_value(value: &str, env: &impl Fn(&str) -> Option<String>) -> Result<Option<String>, String> {
    let Some(inner) = value.trim().strip_prefix("${").and_then(|v| v.strip_suffix('}')) else { return Ok(None) };
    if let Some(name) = inner.strip_prefix("env:") {
        return env(name).map(Some).ok_or_else(|| format!("${{env:{name}}}: the environment variable {name} is not set"));
    }
    if let Some(rest) = inner.strip_prefix("file:") {
        let (path, key) = rest.rsplit_once(':').ok_or_else(|| format!("${{file:{rest}}}: expected ${{file:PATH:KEY}}"))?;
        let text = std::fs::read_to_string(Path::new(path)).map_err(|e| format!("${{file:{path}:{key}}}: cannot read {path}: {e}"))?;
        let mut map = super::properties::parse(&text).map_err(|e| format!("${{file:{path}:{key}}}: {path}: {e}"))?;
        return map.remove(key).map(Some).ok_or_else(|| format!("${{file:{path}:{key}}}: {path} has no key {key}"));
    }
    Err(format!("{value}: unknown provider (use ${{env:NAME}} or ${{file:PATH:KEY}})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_and_file_providers() {
        let dir = std::env::temp_dir().join(format!("snow-providers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("creds.properties");
        std::fs::write(&file, "password = s3cr3t\n").unwrap();
        let mut entries: BTreeMap<String, String> =
            [("a", "${env:SNOW_A}".to_string()), ("b", format!("${{file:{}:password}}", file.display())), ("c", "plain".to_string())]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
        resolve(&mut entries, |n| (n == "SNOW_A").then(|| "from-env".to_string())).unwrap();
        assert_eq!((entries["a"].as_str(), entries["b"].as_str(), entries["c"].as_str()), ("from-env", "s3cr3t", "plain"));

        let mut bad: BTreeMap<String, String> = [("x", "${env:MISSING}"), ("y", "${file:/nope:k}"), ("z", "${vault:k}")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let errors = resolve(&mut bad, |_| None).unwrap_err();
        assert!(errors[0].starts_with("x: ${env:MISSING}: the environment variable MISSING is not set"), "{errors:?}");
        assert!(errors[1].starts_with("y: ${file:/nope:k}: cannot read /nope"), "{errors:?}");
        assert!(errors[2].contains("unknown provider"), "{errors:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
