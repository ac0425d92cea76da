//! What a caller's connector may reach in `worker.properties`: the component files under
//! `plugin.path`, and the configuration providers (`config.providers.*`) with the keys, files and
//! variables a caller's references may read.

use std::collections::BTreeMap;
use std::path::PathBuf;

use snow_runtime::config::ConfigError;
use snow_runtime::config::providers::ProviderPolicy;

/// The section as read.
pub struct Callers {
    /// `plugin.path`.
    pub plugin_path: Vec<PathBuf>,
    /// The providers a caller's references may use.
    pub providers: ProviderPolicy,
}

/// Reads the section.
pub fn read(entries: &BTreeMap<String, String>, errors: &mut Vec<ConfigError>) -> Callers {
    let get = |k: &str| super::value(entries, k);
    let list = |k: &str| -> Vec<String> {
        get(k).map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()).unwrap_or_default()
    };
    let plugin_path: Vec<PathBuf> = list("plugin.path").into_iter().map(PathBuf::from).collect();
    for dir in plugin_path.iter().filter(|d| !d.is_dir()) {
        errors.push(ConfigError::new("plugin.path", format!("{} is not a directory", dir.display())));
    }
    let enabled = get("config.providers").map(|_| list("config.providers")).unwrap_or_else(|| vec!["env".into(), "file".into()]);
    for (name, class) in [("file", "FileConfigProvider"), ("env", "EnvVarConfigProvider")] {
        let key = format!("config.providers.{name}.class");
        if let Some(given) = get(&key).filter(|c| !c.ends_with(class)) {
            errors.push(ConfigError::new(
                key,
                format!("{given} is not supported; the {name} provider is org.apache.kafka.common.config.provider.{class}"),
            ));
        }
    }
    if let Some(other) = enabled.iter().find(|p| !matches!(p.as_str(), "env" | "file")) {
        errors.push(ConfigError::new("config.providers", format!("{other} is not a provider here (env, file)")));
    }
    let keys = list("config.providers.allowed.keys");
    let file_dirs = if enabled.iter().any(|p| p == "file") {
        list("config.providers.file.allowed.paths").into_iter().map(PathBuf::from).collect()
    } else {
        Vec::new()
    };
    let env_names = if enabled.iter().any(|p| p == "env") { list("config.providers.env.allowed.names") } else { Vec::new() };
    Callers { plugin_path, providers: ProviderPolicy::caller(keys, file_dirs, env_names) }
}
