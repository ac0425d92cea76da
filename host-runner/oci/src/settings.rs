//! `component.registry.*`: how components named `oci://…` are fetched — which registries may be
//! named, which are reached over plain HTTP, where the credentials are, the TLS trust for them —
//! and where fetched artefacts are kept. A standalone connector file sets them for itself; in a
//! fleet they are the worker's (worker.properties), never a caller's.

use std::collections::BTreeMap;
use std::path::PathBuf;

use snow_core::error::ConfigError;
use snow_runtime::transport::Route;

/// The keys this module reads.
pub const KEYS: [&str; 3] = ["component.registry.hosts", "component.registry.plain.http.hosts", "component.registry.auth.file"];

/// The prefix of the TLS keys (`component.registry.ssl.truststore.location`, …).
pub const TLS_PREFIX: &str = "component.registry.ssl";

/// Whether `key` is one of this module's.
pub fn is_key(key: &str) -> bool {
    KEYS.contains(&key) || key.starts_with(&format!("{TLS_PREFIX}."))
}

/// The settings as read.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `component.registry.hosts`: the registries that may be named (`None`: any).
    pub hosts: Option<Vec<String>>,
    /// `component.registry.plain.http.hosts`: registries reached over plain HTTP.
    pub plain_http: Vec<String>,
    /// `component.registry.auth.file`, else the default file ([`crate::auth::default_auth_file`]).
    pub auth_file: Option<PathBuf>,
    /// TLS (`component.registry.ssl.*`) and the proxy (`snow.proxy.*`).
    pub route: Route,
    /// Where fetched manifests, components and bundles are kept.
    pub cache: PathBuf,
}

/// The default cache: `$SNOW_OCI_CACHE`, else `$XDG_CACHE_HOME/snow-connect/oci`, else
/// `~/.cache/snow-connect/oci`, else a directory under the system's temporary directory.
pub fn default_cache() -> PathBuf {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    env("SNOW_OCI_CACHE")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("snow-connect/oci")))
        .or_else(|| env("HOME").map(|h| h.join(".cache/snow-connect/oci")))
        .unwrap_or_else(|| std::env::temp_dir().join("snow-connect-oci"))
}

impl Settings {
    /// Reads the keys of `entries`, problems (named by key) to `errors`; fetched artefacts go to
    /// `cache`.
    pub fn read(entries: &BTreeMap<String, String>, cache: PathBuf, errors: &mut Vec<ConfigError>) -> Self {
        let list = |k: &str| -> Option<Vec<String>> {
            entries.get(k).map(|v| v.split(',').map(|h| h.trim().to_ascii_lowercase()).filter(|h| !h.is_empty()).collect())
        };
        let auth_file = entries.get("component.registry.auth.file").map(|v| PathBuf::from(v.trim())).filter(|p| !p.as_os_str().is_empty());
        if let Some(path) = &auth_file
            && !path.is_file()
        {
            errors.push(ConfigError::new("component.registry.auth.file", format!("{} is not a readable file", path.display())));
        }
        let ssl: BTreeMap<&str, &str> = entries
            .iter()
            .filter_map(|(k, v)| k.strip_prefix(TLS_PREFIX).and_then(|k| k.strip_prefix('.')).map(|k| (k, v.as_str())))
            .collect();
        let tls = snow_runtime::transport::tls::read(&ssl, TLS_PREFIX, errors);
        let proxy = snow_runtime::config::proxy::read(entries, errors);
        let route = Route { proxy, tls, tls_keys: Some(TLS_PREFIX.into()) };
        Self {
            hosts: list("component.registry.hosts"),
            plain_http: list("component.registry.plain.http.hosts").unwrap_or_default(),
            auth_file,
            route,
            cache,
        }
    }

    /// Settings for the command line: any registry, `plain_http` ones over HTTP, `auth_file`.
    pub fn command_line(plain_http: Vec<String>, auth_file: Option<PathBuf>) -> Self {
        Self { hosts: None, plain_http, auth_file, route: Route::default(), cache: default_cache() }
    }

    /// Why `registry` may not be named, if it may not.
    pub fn refuses(&self, registry: &str) -> Option<String> {
        let hosts = self.hosts.as_ref()?;
        (!hosts.iter().any(|h| h == registry)).then(|| {
            if hosts.is_empty() {
                "no registry is allowed here (component.registry.hosts is empty)".to_string()
            } else {
                format!("the registry {registry} is not in component.registry.hosts ({})", hosts.join(", "))
            }
        })
    }
}
