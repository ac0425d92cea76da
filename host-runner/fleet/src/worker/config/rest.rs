//! The worker's REST listener in `worker.properties`: where it listens (`listeners`, or Connect's
//! older `rest.host.name`/`rest.port`), its TLS files, the id other workers and clients know it by
//! (`rest.advertised.*`), and the users file of HTTP Basic.

use std::collections::BTreeMap;
use std::path::PathBuf;

use snow_runtime::config::ConfigError;
use snow_runtime::listener::TlsFiles;

/// The listener as read.
pub struct Rest {
    /// `HOST:PORT`.
    pub listen: String,
    /// Its TLS files (`listeners=https://…`).
    pub tls: Option<TlsFiles>,
    /// `HOST:PORT` as advertised.
    pub worker_id: String,
}

/// Reads the section.
pub fn read(entries: &BTreeMap<String, String>, errors: &mut Vec<ConfigError>) -> Rest {
    let get = |k: &str| super::value(entries, k);
    let (listen, https) = match get("listeners") {
        Some(listener) => {
            let (scheme, address) = listener.split_once("://").unwrap_or(("", &listener));
            match scheme {
                "http" | "https" if address.contains(':') => (address.to_string(), scheme == "https"),
                _ => {
                    errors.push(ConfigError::new(
                        "listeners",
                        format!("{listener:?} must be http://HOST:PORT or https://HOST:PORT (one listener)"),
                    ));
                    (String::new(), false)
                }
            }
        }
        None => {
            let port = super::number(entries, "rest.port", 8083, 0, 65_535, errors);
            (format!("{}:{port}", get("rest.host.name").unwrap_or_else(|| "127.0.0.1".into())), false)
        }
    };
    let tls = match (get("rest.tls.certificate.file"), get("rest.tls.key.file")) {
        (Some(certificate), Some(key)) => Some(TlsFiles { certificate: certificate.into(), key: key.into() }),
        (None, None) => None,
        _ => {
            for key in ["rest.tls.certificate.file", "rest.tls.key.file"] {
                errors.push(ConfigError::new(key, "give both (PEM files) or neither"));
            }
            None
        }
    };
    if https && tls.is_none() {
        errors.push(ConfigError::new("listeners", "https:// needs rest.tls.certificate.file and rest.tls.key.file"));
    }
    if !https && tls.is_some() {
        errors.push(ConfigError::new("rest.tls.certificate.file", "is set but listeners is not https://"));
    }
    let port_of = |address: &str| address.rsplit_once(':').map(|(_, p)| p.to_string()).unwrap_or_default();
    let host_of = |address: &str| address.rsplit_once(':').map(|(h, _)| h.to_string()).unwrap_or_default();
    let worker_id = format!(
        "{}:{}",
        get("rest.advertised.host.name").unwrap_or_else(|| host_of(&listen)),
        get("rest.advertised.port").unwrap_or_else(|| port_of(&listen))
    );
    Rest { listen, tls: if https { tls } else { None }, worker_id }
}

/// `rest.basic.auth.file`, which must exist when given.
pub fn basic_auth_file(entries: &BTreeMap<String, String>, errors: &mut Vec<ConfigError>) -> Option<PathBuf> {
    let file = super::value(entries, "rest.basic.auth.file").map(PathBuf::from);
    if let Some(file) = file.as_ref().filter(|f| !f.is_file()) {
        errors.push(ConfigError::new("rest.basic.auth.file", format!("{} does not exist", file.display())));
    }
    file
}
