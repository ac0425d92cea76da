//! Configuration providers, Kafka Connect style: a value `${env:NAME}` is replaced by the
//! environment variable `NAME`, and `${file:PATH:KEY}` by the key `KEY` of the properties file
//! `PATH`. Resolution happens in the host before anything is validated; a guest never sees the
//! reference nor the value of a secret key.
//!
//! What may be resolved depends on who wrote the configuration ([`ProviderPolicy`]): the
//! operator's own files may use providers anywhere; a REST caller or a writer of the configuration
//! topic only in secret keys and the keys the operator lists, only from files under
//! `config.providers.file.allowed.paths` and environment variables the operator lists, and never in
//! a key that picks a destination (a resolved value would be sent to a host the caller chose).
//! Every file read is capped and must be a regular file. Errors name the key and the reference,
//! never a resolved value.

use snow_core::error::ConfigError;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Largest file a `${file:…}` reference reads: a properties file of credentials is a few hundred
/// bytes; the cap keeps `/dev/zero` or a log file from filling the worker's memory.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Keys whose value picks where data or credentials go: a reference there could send a worker's
/// secret to a host the caller chose, so callers give them literally.
pub const DESTINATION_KEYS: [&str; 6] = [
    "snow.instance.url",
    "snow.proxy.url",
    "kafka.bootstrap.servers",
    "snow.auth.token.url",
    "key.converter.schema.registry.url",
    "value.converter.schema.registry.url",
];

/// The connector keys in which a caller's references resolve without the operator listing them:
/// the credentials.
pub const CREDENTIAL_KEYS: [&str; 21] = [
    "snow.auth.username",
    "snow.auth.password",
    "snow.auth.client.id",
    "snow.auth.client.secret",
    "snow.proxy.username",
    "snow.proxy.password",
    "snow.instance.ssl.truststore.password",
    "snow.instance.ssl.keystore.password",
    "snow.instance.ssl.key.password",
    "snow.instance.ssl.keystore.key",
    "key.converter.schema.registry.ssl.truststore.password",
    "value.converter.schema.registry.ssl.truststore.password",
    "key.converter.schema.registry.ssl.keystore.password",
    "value.converter.schema.registry.ssl.keystore.password",
    "key.converter.basic.auth.user.info",
    "value.converter.basic.auth.user.info",
    "key.converter.bearer.auth.token",
    "value.converter.bearer.auth.token",
    "key.converter.schema.registry.ssl.keystore.key",
    "value.converter.schema.registry.ssl.keystore.key",
    "snow.push.secret",
];

/// What references a configuration may resolve.
#[derive(Debug, Clone, Default)]
pub struct ProviderPolicy {
    /// References are checked for their key and left as written, never read (a standalone run's
    /// validate route reads nothing of the process's for a caller).
    pub unread: bool,
    /// Keys in which references are resolved (`None`: every key).
    pub keys: Option<BTreeSet<String>>,
    /// Directories `${file:…}` may read under (`None`: any file).
    pub file_dirs: Option<Vec<PathBuf>>,
    /// Environment variables `${env:…}` may read; a trailing `*` matches a prefix (`None`: any).
    pub env_names: Option<Vec<String>>,
}

impl ProviderPolicy {
    /// The operator's own files: references resolve anywhere.
    pub fn operator() -> Self {
        Self::default()
    }

    /// A caller's configuration: references only in [`CREDENTIAL_KEYS`] and `extra_keys`, from
    /// `file_dirs` and `env_names`; never in [`DESTINATION_KEYS`].
    pub fn caller(extra_keys: impl IntoIterator<Item = String>, file_dirs: Vec<PathBuf>, env_names: Vec<String>) -> Self {
        let keys = CREDENTIAL_KEYS
            .iter()
            .map(|k| k.to_string())
            .chain(extra_keys)
            .filter(|k| !DESTINATION_KEYS.contains(&k.as_str()))
            .collect::<BTreeSet<String>>();
        Self { unread: false, keys: Some(keys), file_dirs: Some(file_dirs), env_names: Some(env_names) }
    }

    /// A caller's configuration checked without reading anything: references allowed only in
    /// [`CREDENTIAL_KEYS`], left as written.
    pub fn caller_unread() -> Self {
        Self { unread: true, ..Self::caller(Vec::new(), Vec::new(), Vec::new()) }
    }

    fn allows_env(&self, name: &str) -> bool {
        self.env_names.as_ref().is_none_or(|names| {
            names.iter().any(|n| match n.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => n == name,
            })
        })
    }
}

/// Replaces every provider reference in `entries` as `policy` allows; returns the resolved values
/// (so that a caller's answers can be scrubbed of them). Errors name the key and the reference.
pub fn resolve(
    entries: &mut BTreeMap<String, String>,
    policy: &ProviderPolicy,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Vec<String>, Vec<ConfigError>> {
    let mut errors = Vec::new();
    let mut resolved_values = Vec::new();
    for (key, value) in entries.iter_mut() {
        // A worker's named credentials list the references they cover: names, not values.
        if !is_reference(value) || (key.starts_with("credentials.") && key.ends_with(".references")) {
            continue;
        }
        if let Some(keys) = &policy.keys
            && !keys.contains(key)
        {
            let why = if DESTINATION_KEYS.contains(&key.as_str()) {
                "picks a destination, so it is given literally (a reference here could send a worker's secret to any host)".to_string()
            } else {
                format!(
                    "a configuration provider is resolved only in secret keys and the keys the operator lists in \
                     config.providers.allowed.keys (worker.properties); give {key} literally"
                )
            };
            errors.push(ConfigError::refused(key.clone(), why));
            continue;
        }
        if policy.unread {
            continue;
        }
        match resolve_value(value, policy, &env) {
            Ok(resolved) => {
                resolved_values.push(resolved.clone());
                *value = resolved;
            }
            Err(message) => errors.push(ConfigError::new(key.clone(), message)),
        }
    }
    if errors.is_empty() { Ok(resolved_values) } else { Err(errors) }
}

/// Whether `value` is a provider reference.
pub fn is_reference(value: &str) -> bool {
    let v = value.trim();
    v.starts_with("${") && v.ends_with('}')
}

/// The resolved value of reference `value`; an error says what could not be read (never a value).
fn resolve_value(value: &str, policy: &ProviderPolicy, env: &impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let inner = value.trim().strip_prefix("${").and_then(|v| v.strip_suffix('}')).unwrap_or_default();
    if let Some(name) = inner.strip_prefix("env:") {
        if !policy.allows_env(name) {
            return Err(format!(
                "${{env:{name}}}: the environment variable {name} is not one a connector may read (the operator lists them in \
                 config.providers.env.allowed.names)"
            ));
        }
        return env(name).ok_or_else(|| format!("${{env:{name}}}: the environment variable {name} is not set"));
    }
    if let Some(rest) = inner.strip_prefix("file:") {
        let (path, key) = rest.rsplit_once(':').ok_or_else(|| format!("${{file:{rest}}}: expected ${{file:PATH:KEY}}"))?;
        let reference = format!("${{file:{path}:{key}}}");
        let text = read_capped(Path::new(path), policy.file_dirs.as_deref()).map_err(|e| format!("{reference}: {e}"))?;
        let mut map = super::properties::parse(&text).map_err(|e| format!("{reference}: {path}: {e}"))?;
        return map.remove(key).ok_or_else(|| format!("{reference}: {path} has no key {key}"));
    }
    Err(format!("{value}: unknown provider (use ${{env:NAME}} or ${{file:PATH:KEY}})"))
}

/// The text of regular file `path`, at most [`MAX_FILE_BYTES`], if it lies under one of `dirs`
/// (`None`: anywhere). Symbolic links and `..` are resolved before the check.
fn read_capped(path: &Path, dirs: Option<&[PathBuf]>) -> Result<String, String> {
    let real = path.canonicalize().map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if let Some(dirs) = dirs {
        let allowed = dirs.iter().filter_map(|d| d.canonicalize().ok()).any(|d| real.starts_with(&d));
        if !allowed {
            return Err(format!(
                "{} is not under config.providers.file.allowed.paths (the directories the operator lets connectors read)",
                path.display()
            ));
        }
    }
    // Opened without blocking (a FIFO would hold the worker forever) and without following a
    // link put in the resolved path's place after the check; what is open is then checked.
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(&real)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let metadata = file.metadata().map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !metadata.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if metadata.len() > MAX_FILE_BYTES {
        return Err(format!("{} is larger than {MAX_FILE_BYTES} bytes", path.display()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("{} is larger than {MAX_FILE_BYTES} bytes", path.display()));
    }
    String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn temp_dir(label: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("snow-providers-{label}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn env_and_file_providers() {
        let dir = temp_dir("op");
        let file = dir.join("creds.properties");
        std::fs::write(&file, "password = s3cr3t\n").unwrap();
        let mut entries = map(&[("a", "${env:SNOW_A}"), ("b", &format!("${{file:{}:password}}", file.display())), ("c", "plain")]);
        let resolved = resolve(&mut entries, &ProviderPolicy::operator(), |n| (n == "SNOW_A").then(|| "from-env".to_string())).unwrap();
        assert_eq!((entries["a"].as_str(), entries["b"].as_str(), entries["c"].as_str()), ("from-env", "s3cr3t", "plain"));
        assert_eq!(resolved, ["from-env", "s3cr3t"]);

        let mut bad = map(&[("x", "${env:MISSING}"), ("y", "${file:/nope:k}"), ("z", "${vault:k}")]);
        let errors = resolve(&mut bad, &ProviderPolicy::operator(), |_| None).unwrap_err();
        assert!(errors[0].to_string().starts_with("x: ${env:MISSING}: the environment variable MISSING is not set"), "{errors:?}");
        assert!(errors[1].to_string().starts_with("y: ${file:/nope:k}: cannot read /nope"), "{errors:?}");
        assert!(errors[2].to_string().contains("unknown provider"), "{errors:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_device_or_a_huge_file_is_refused_without_reading_it_whole() {
        let mut entries = map(&[("snow.auth.password", "${file:/dev/zero:k}")]);
        let errors = resolve(&mut entries, &ProviderPolicy::operator(), |_| None).unwrap_err();
        assert!(errors[0].to_string().contains("/dev/zero is not a regular file"), "{errors:?}");
        let dir = temp_dir("big");
        let big = dir.join("big.properties");
        std::fs::write(&big, vec![b'a'; MAX_FILE_BYTES as usize + 1]).unwrap();
        let mut entries = map(&[("snow.auth.password", &format!("${{file:{}:k}}", big.display()))]);
        let errors = resolve(&mut entries, &ProviderPolicy::operator(), |_| None).unwrap_err();
        assert!(errors[0].to_string().contains("is larger than 1048576 bytes"), "{errors:?}");
        // A FIFO nobody writes to is refused at once instead of holding the reader forever.
        let fifo = dir.join("fifo.properties");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let mut entries = map(&[("snow.auth.password", &format!("${{file:{}:k}}", fifo.display()))]);
        let errors = resolve(&mut entries, &ProviderPolicy::operator(), |_| None).unwrap_err();
        assert!(errors[0].to_string().contains("is not a regular file"), "{errors:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_caller_resolves_only_listed_keys_names_and_paths() {
        let allowed = temp_dir("allowed");
        let outside = temp_dir("outside");
        std::fs::write(allowed.join("c.properties"), "pw=ok-secret\n").unwrap();
        std::fs::write(outside.join("c.properties"), "pw=worker-only\n").unwrap();
        std::os::unix::fs::symlink(outside.join("c.properties"), allowed.join("link.properties")).unwrap();
        let policy = ProviderPolicy::caller(["snow.instance.url".to_string()], vec![allowed.clone()], vec!["SNOW_*".to_string()]);
        let env = |n: &str| Some(format!("value-of-{n}"));
        let mut ok = map(&[("snow.auth.password", &format!("${{file:{}/c.properties:pw}}", allowed.display()))]);
        assert_eq!(resolve(&mut ok, &policy, env).unwrap(), ["ok-secret"]);
        let mut ok = map(&[("snow.auth.password", "${env:SNOW_PW}")]);
        assert_eq!(resolve(&mut ok, &policy, env).unwrap(), ["value-of-SNOW_PW"]);
        for (key, value, expected) in [
            (
                "snow.auth.password",
                format!("${{file:{}/c.properties:pw}}", outside.display()),
                "is not under config.providers.file.allowed.paths",
            ),
            (
                "snow.auth.password",
                format!("${{file:{}/link.properties:pw}}", allowed.display()),
                "is not under config.providers.file.allowed.paths",
            ),
            ("snow.auth.password", format!("${{file:{}/../outside-x/c.properties:pw}}", allowed.display()), "cannot read"),
            ("snow.auth.password", "${env:HOME}".to_string(), "is not one a connector may read"),
            ("snow.tables", "${env:SNOW_T}".to_string(), "resolved only in secret keys"),
            ("snow.instance.url", "${env:SNOW_URL}".to_string(), "picks a destination"),
            ("kafka.bootstrap.servers", "${env:SNOW_B}".to_string(), "picks a destination"),
        ] {
            let mut entries = map(&[(key, &value)]);
            let errors = resolve(&mut entries, &policy, env).unwrap_err();
            assert!(
                errors[0].to_string().starts_with(&format!("{key}: ")) && errors[0].to_string().contains(expected),
                "{value}: {errors:?}"
            );
            assert!(
                !errors[0].to_string().contains("worker-only") && !errors[0].to_string().contains("value-of"),
                "never a resolved value: {errors:?}"
            );
        }
        std::fs::remove_dir_all(&allowed).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }
}
