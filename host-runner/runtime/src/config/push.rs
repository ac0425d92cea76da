//! `snow.push.*`: a source connector's push notifications (ADR 0032). With `snow.push.secret` set
//! the connector takes notifications at `/snow/push/<connector>` — on `snow.push.listen` in a
//! standalone run, on the worker's REST listener in a fleet — and a notification wakes its table's
//! sweep. These keys are the host's: the component never sees them (it only learns a wake-up's
//! stamp through `source-wake`).

use snow_core::error::ConfigError;
use std::collections::BTreeMap;
use std::time::Duration;

use snow_core::auth::Secret;

/// The keys read here (all host-only).
pub const KEYS: [&str; 7] = [
    "snow.push.secret",
    "snow.push.listen",
    "snow.push.max.skew.seconds",
    "snow.push.max.per.second",
    "snow.push.min.interval.ms",
    "snow.push.tls.certificate.file",
    "snow.push.tls.key.file",
];

/// How a source connector takes notifications.
#[derive(Debug, Clone)]
pub struct PushSpec {
    /// `snow.push.secret`: the key of the notifications' HMAC (a provider reference, resolved).
    pub secret: Secret,
    /// `snow.push.listen` (`HOST:PORT`): where a standalone run listens (a fleet uses its REST
    /// listener and refuses this key).
    pub listen: Option<String>,
    /// `snow.push.tls.certificate.file` and `.key.file` (PEM): the standalone listener speaks TLS.
    pub tls: Option<crate::listener::TlsFiles>,
    /// `snow.push.max.skew.seconds`: how far a notification's timestamp may be from the host clock.
    pub max_skew_seconds: i64,
    /// `snow.push.max.per.second`: notifications a table takes a second; more are refused (429).
    pub max_per_second: u32,
    /// `snow.push.min.interval.ms`: the shortest time between the starts of two sweeps of a table
    /// when woken (a burst of notifications is one sweep, at most this often).
    pub min_interval: Duration,
}

/// Five minutes either way, as webhook senders commonly allow for clock skew and retries.
const DEFAULT_MAX_SKEW_SECONDS: u64 = 300;
/// Far above one table's write rate on an instance; a flood past it is refused, not queued.
const DEFAULT_MAX_PER_SECOND: u64 = 100;
/// Two sweeps a second at most: a woken sweep is about two requests, so a table changing all the
/// time costs at most about four requests a second, and a change still waits under a second.
const DEFAULT_MIN_INTERVAL_MS: u64 = 500;

/// Reads the keys of `entries` (`None` without any of them); a problem is pushed to `errors`
/// naming its key. Whether a standalone run has its `snow.push.listen` is checked by the run
/// ([`crate::push::listen::check_standalone`]); a fleet's callers may not set it at all
/// ([`super::caller`]).
pub fn read(entries: &BTreeMap<String, String>, is_sink: bool, errors: &mut Vec<ConfigError>) -> Option<PushSpec> {
    let get = |k: &str| entries.get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let given: Vec<&str> = KEYS.iter().copied().filter(|k| entries.contains_key(*k)).collect();
    if given.is_empty() {
        return None;
    }
    if is_sink {
        for key in &given {
            errors.push(ConfigError::refused(*key, "push notifications wake a source's sweeps; a sink connector takes none"));
        }
        return None;
    }
    let Some(secret) = entries.get("snow.push.secret").filter(|v| !v.is_empty()) else {
        errors.push(ConfigError::missing("snow.push.secret", format!("is required with {} (the HMAC key the business rule signs with; give it as a provider reference, e.g. ${{file:/etc/snow/push.properties:secret}})",
            given.join(", ")
        )));
        return None;
    };
    if secret.len() < 16 {
        errors.push(ConfigError::new("snow.push.secret", "must be at least 16 characters (a random value shared with the business rule)"));
    }
    let number = |k: &str, default: u64, min: u64, max: u64, errors: &mut Vec<ConfigError>| {
        super::whole_number(entries, k, default, min, max, errors)
    };
    let listen = get("snow.push.listen");
    if let Some(address) = listen.as_ref().filter(|a| !super::is_listen_address(a)) {
        errors.push(ConfigError::new("snow.push.listen", format!("{address:?} is not HOST:PORT (e.g. 0.0.0.0:8443)")));
    }
    let tls = match (get("snow.push.tls.certificate.file"), get("snow.push.tls.key.file")) {
        (None, None) => None,
        (Some(certificate), Some(key)) => Some(crate::listener::TlsFiles { certificate: certificate.into(), key: key.into() }),
        _ => {
            for key in ["snow.push.tls.certificate.file", "snow.push.tls.key.file"] {
                errors.push(ConfigError::new(key, "give both (PEM) or neither"));
            }
            None
        }
    };
    Some(PushSpec {
        secret: Secret::new(secret.clone()),
        listen,
        tls,
        max_skew_seconds: number("snow.push.max.skew.seconds", DEFAULT_MAX_SKEW_SECONDS, 1, 3600, errors) as i64,
        max_per_second: number("snow.push.max.per.second", DEFAULT_MAX_PER_SECOND, 1, 100_000, errors) as u32,
        min_interval: Duration::from_millis(number("snow.push.min.interval.ms", DEFAULT_MIN_INTERVAL_MS, 0, 3_600_000, errors)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_pairs(pairs: &[(&str, &str)], is_sink: bool) -> (Option<PushSpec>, Vec<String>) {
        let entries = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut errors = Vec::new();
        (read(&entries, is_sink, &mut errors), snow_core::error::config_lines(&errors))
    }

    const SECRET: (&str, &str) = ("snow.push.secret", "a-long-random-shared-secret");

    #[test]
    fn defaults_and_values() {
        assert!(read_pairs(&[], false).0.is_none(), "no push without its keys");
        assert!(read_pairs(&[SECRET, ("snow.push.listen", "127.0.0.1:0")], false).1.is_empty(), "port 0: any free port");
        let (spec, errors) = read_pairs(&[SECRET, ("snow.push.listen", "127.0.0.1:9443")], false);
        let spec = spec.unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(spec.listen.as_deref(), Some("127.0.0.1:9443"));
        assert_eq!((spec.max_skew_seconds, spec.max_per_second, spec.min_interval), (300, 100, Duration::from_millis(500)));
        let (spec, errors) = read_pairs(&[SECRET, ("snow.push.min.interval.ms", "0"), ("snow.push.max.per.second", "5")], false);
        assert!(errors.is_empty(), "a fleet's connector has no listen key: {errors:?}");
        assert_eq!((spec.as_ref().unwrap().min_interval, spec.unwrap().max_per_second), (Duration::ZERO, 5));
    }

    #[test]
    fn every_refusal_names_its_key() {
        let (_, errors) = read_pairs(&[("snow.push.listen", "127.0.0.1:9443")], false);
        assert!(errors[0].starts_with("snow.push.secret: is required with snow.push.listen"), "{errors:?}");
        let (_, errors) = read_pairs(&[("snow.push.secret", "short"), ("snow.push.listen", "nowhere")], false);
        assert!(errors.iter().any(|e| e.starts_with("snow.push.secret: must be at least 16")), "{errors:?}");
        assert!(errors.iter().any(|e| e.starts_with("snow.push.listen: \"nowhere\" is not HOST:PORT")), "{errors:?}");
        let (_, errors) = read_pairs(&[SECRET, ("snow.push.listen", "0.0.0.0:1"), ("snow.push.max.skew.seconds", "0")], false);
        assert!(errors[0].starts_with("snow.push.max.skew.seconds: must be a whole number"), "{errors:?}");
        let (_, errors) = read_pairs(&[SECRET, ("snow.push.listen", "0.0.0.0:1"), ("snow.push.tls.key.file", "k.pem")], false);
        assert!(errors[0].starts_with("snow.push.tls.certificate.file, snow.push.tls.key.file: give both"), "{errors:?}");
        let (_, errors) = read_pairs(&[SECRET], true);
        assert!(errors[0].starts_with("snow.push.secret: push notifications wake a source's sweeps"), "{errors:?}");
    }
}
