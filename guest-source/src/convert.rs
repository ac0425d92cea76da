//! Conversions between the WIT `types` interface and snow-core values, shared by both guests.
//!
//! Each guest generates its own copy of the WIT types, so a shared crate cannot name them;
//! `guest-sink` includes this same file by path instead (`#[path = ...] mod convert;`).

use snow_core::config::Entries;
use snow_core::config::reader::entries_from_pairs;
use snow_core::error::{ErrorClass, SnowError};
use snow_core::record::Header;

use crate::bindings::snow::connector::host;
use crate::bindings::snow::connector::types as wit;

/// WIT configuration to entries; a duplicated key is a configuration error.
pub fn entries(config: wit::Config) -> Result<Entries, SnowError> {
    entries_from_pairs(config.into_iter().map(|e| (e.key, e.value)))
}

/// Entries to WIT configuration.
#[allow(dead_code)] // only the source guest plans tasks
pub fn config(entries: Entries) -> wit::Config {
    entries.into_iter().map(|(key, value)| wit::ConfigEntry { key, value }).collect()
}

/// The configuration problems an error holds (or the error itself under the key `*`).
pub fn config_errors(error: SnowError) -> Vec<wit::ConfigError> {
    match error {
        SnowError::Config(list) => list.into_iter().map(|e| wit::ConfigError { key: e.key, message: e.message }).collect(),
        other => vec![wit::ConfigError { key: "*".into(), message: other.to_string() }],
    }
}

fn class(class: ErrorClass) -> wit::ErrorClass {
    match class {
        ErrorClass::Transient => wit::ErrorClass::Transient,
        ErrorClass::Fatal => wit::ErrorClass::Fatal,
        ErrorClass::Ambiguous => wit::ErrorClass::Ambiguous,
    }
}

/// A snow-core error as the WIT `snow-error` variant.
pub fn error(error: SnowError) -> wit::SnowError {
    let failure = |f: snow_core::error::Failure| wit::Failure { message: f.message, class: class(f.class) };
    match error {
        SnowError::Config(_) => wit::SnowError::Config(config_errors(error)),
        SnowError::Http(h) => wit::SnowError::Http(wit::HttpFailure {
            status: h.status,
            message: h.message,
            detail: h.detail,
            request_id: h.request_id,
            class: class(h.class),
        }),
        SnowError::Transport(f) => wit::SnowError::Transport(failure(f)),
        SnowError::Denied(m) => wit::SnowError::Denied(m),
        SnowError::Data(f) => wit::SnowError::Data(failure(f)),
    }
}

/// WIT headers to snow-core headers.
#[allow(dead_code)] // the source guest only sends headers
pub fn headers_in(headers: Vec<wit::Header>) -> Vec<Header> {
    headers.into_iter().map(|h| Header { key: h.key, value: h.value }).collect()
}

/// snow-core headers to WIT headers.
#[allow(dead_code)] // the sink guest only receives headers
pub fn headers_out(headers: Vec<Header>) -> Vec<wit::Header> {
    headers.into_iter().map(|h| wit::Header { key: h.key, value: h.value }).collect()
}

/// Reports ServiceNow's rate-limit headers of `table` as gauges through the host.
pub fn report_rate_limit(table: &str, limit: Option<&snow_core::http::retry::RateLimit>) {
    let Some(limit) = limit else { return };
    let labels = [host::Label { name: "table".into(), value: table.into() }];
    for (name, value) in [("snow_ratelimit_limit", limit.limit), ("snow_ratelimit_remaining", limit.remaining)] {
        if let Some(v) = value {
            host::gauge_set(name, v as f64, &labels);
        }
    }
    if let Some(reset) = limit.reset {
        host::gauge_set("snow_ratelimit_reset_seconds", reset as f64, &labels);
    }
}

/// Adds `value` to the counter `name` of `table` through the host (nothing when zero).
pub fn count(table: &str, name: &str, value: u64) {
    if value > 0 {
        host::counter_add(name, value, &[host::Label { name: "table".into(), value: table.into() }]);
    }
}

/// Sets the gauge `name` of `table` through the host.
#[allow(dead_code)] // only the source guest has gauges of its own so far
pub fn gauge(table: &str, name: &str, value: f64) {
    host::gauge_set(name, value, &[host::Label { name: "table".into(), value: table.into() }]);
}

/// Writes a log line through the host.
pub fn log(level: host::Level, message: &str) {
    host::log(level, message);
}
