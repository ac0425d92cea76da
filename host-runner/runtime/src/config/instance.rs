//! The instance a connector reaches and how hard it may be used: `snow.instance.url` (the only
//! host the gate lets the guest reach), the TLS settings for it (`snow.instance.ssl.*`: a private
//! CA, a client certificate), the in-flight cap, the request budget (ADR 0034) and the tables'
//! priorities in it. The URL itself is also the guest's (it builds requests on it).

use std::collections::BTreeMap;

use snow_core::config::instance::{INSTANCE_URL_KEY, parse_base_url};
use snow_core::error::ConfigError;

use crate::outbound::DEFAULT_PRIORITY;

/// The prefix of the instance's TLS settings (the keys after it: [`crate::transport::tls::KEYS`]).
pub const TLS_PREFIX: &str = "snow.instance.ssl";

/// Whether `key` is one of the instance's TLS settings.
pub fn is_tls_key(key: &str) -> bool {
    key.strip_prefix(TLS_PREFIX).and_then(|k| k.strip_prefix('.')).is_some_and(|k| crate::transport::tls::KEYS.contains(&k))
}

/// The request budget's keys (ADR 0034).
pub(super) const BUDGET_KEYS: [&str; 2] = ["snow.instance.requests.per.hour", "snow.instance.requests.per.minute"];

/// ServiceNow nodes serve a handful of concurrent integration requests per user comfortably.
fn default_max_in_flight() -> usize {
    8
}

/// The table `key` sets the budget priority of (`snow.table.<t>.priority`).
pub(super) fn priority_table(key: &str) -> Option<&str> {
    key.strip_prefix("snow.table.")?.strip_suffix(".priority").filter(|t| !t.is_empty() && !t.contains('.'))
}

/// The section as read.
pub struct Instance {
    /// The instance's URL as given (empty when missing).
    pub url: String,
    /// Its scheme.
    pub scheme: String,
    /// Its authority.
    pub authority: String,
    /// `snow.instance.max.in.flight`.
    pub max_in_flight: usize,
    /// `snow.instance.requests.per.hour`.
    pub requests_per_hour: Option<u64>,
    /// `snow.instance.requests.per.minute`.
    pub requests_per_minute: Option<u64>,
    /// `snow.table.<t>.priority`, by table.
    pub priorities: BTreeMap<String, u32>,
    /// `snow.instance.ssl.*`, when set.
    pub tls: Option<crate::transport::tls::TlsProfile>,
}

/// Reads the section.
pub fn read(entries: &BTreeMap<String, String>, errors: &mut Vec<ConfigError>) -> Instance {
    let url = super::required(entries, INSTANCE_URL_KEY, "the instance URL, e.g. https://acme.service-now.com", errors);
    let number = |k: &str, default: u64, min: u64, max: u64, errors: &mut Vec<ConfigError>| {
        super::whole_number(entries, k, default, min, max, errors)
    };
    let max_in_flight = number("snow.instance.max.in.flight", default_max_in_flight() as u64, 1, 256, errors) as usize;
    let budget = |k: &str, errors: &mut Vec<ConfigError>| entries.contains_key(k).then(|| number(k, 1, 1, 100_000_000, errors));
    let requests_per_hour = budget(BUDGET_KEYS[0], errors);
    let requests_per_minute = budget(BUDGET_KEYS[1], errors);
    let priorities: BTreeMap<String, u32> = entries
        .keys()
        .filter_map(|k| priority_table(k).map(|t| (t.to_string(), number(k, u64::from(DEFAULT_PRIORITY), 1, 100, errors) as u32)))
        .collect();
    let (scheme, authority) = match parse_base_url(&url) {
        Ok(parts) => parts,
        Err(message) if !url.is_empty() => {
            errors.push(ConfigError::new(INSTANCE_URL_KEY, message));
            Default::default()
        }
        Err(_) => Default::default(),
    };
    let ssl: BTreeMap<&str, &str> = entries
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(TLS_PREFIX)?.strip_prefix('.')?, v.as_str())))
        .filter(|(k, _)| crate::transport::tls::KEYS.contains(k))
        .collect();
    let tls = crate::transport::tls::read(&ssl, TLS_PREFIX, errors);
    if tls.is_some() && scheme == "http" {
        errors.push(ConfigError::new(
            format!("{TLS_PREFIX}.*"),
            format!("TLS settings are set but {INSTANCE_URL_KEY} is http://: use https:// or leave them out"),
        ));
    }
    Instance { url, scheme, authority, max_in_flight, requests_per_hour, requests_per_minute, priorities, tls }
}
