//! What every connector needs to reach a ServiceNow instance: its URL, HTTP timeouts, the
//! largest answer accepted, and how requests are retried.

use std::time::Duration;

use super::reader::ConfigReader;
use crate::http::retry::RetryPolicy;

/// The ServiceNow instance a connector talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceConfig {
    /// `https://acme.service-now.com` (no trailing slash, no path).
    pub base_url: String,
    /// `https` or `http`.
    pub scheme: String,
    /// `host[:port]`, which the host's outbound gate allows.
    pub authority: String,
    /// Connect timeout (`snow.http.connect.timeout.ms`).
    pub connect_timeout_ms: u32,
    /// Time to the first response byte (`snow.http.request.timeout.ms`).
    pub first_byte_timeout_ms: u32,
    /// Longest time to receive a whole response body (`snow.http.body.timeout.ms`).
    pub body_timeout_ms: u32,
    /// Largest response body accepted (`snow.http.max.response.bytes`).
    pub max_response_bytes: usize,
    /// Retries of requests that failed transiently (`snow.retry.*`).
    pub retry: RetryPolicy,
}

/// The key naming the instance URL.
pub const INSTANCE_URL_KEY: &str = "snow.instance.url";

/// Connecting to a healthy instance takes well under a second; 10 s rides out a slow handshake.
fn default_connect_timeout_ms() -> u32 {
    10_000
}

/// ServiceNow cancels Table API transactions after 60 s; waiting a little longer lets its own
/// error answer arrive instead of a blind timeout.
fn default_first_byte_timeout_ms() -> u32 {
    65_000
}

/// A 10,000-row page of wide rows is tens of MB; two minutes covers it on a slow link, and a
/// stalled transfer is a broken one.
fn default_body_timeout_ms() -> u32 {
    120_000
}

/// 10,000 wide rows with display values stay well under 256 MiB; anything bigger is a mistake.
fn default_max_response_bytes() -> u32 {
    256 << 20
}

/// Six attempts ride out a node restart or a short rate-limit window without hiding an outage.
fn default_retry_max_attempts() -> u32 {
    6
}

/// Five minutes: longer than ServiceNow's usual Retry-After, shorter than an operator's patience.
fn default_retry_max_elapsed_ms() -> u32 {
    300_000
}

/// Half a second, then doubling (with full jitter).
fn default_retry_initial_ms() -> u32 {
    500
}

/// A minute between attempts at most.
fn default_retry_max_backoff_ms() -> u32 {
    60_000
}

impl InstanceConfig {
    /// Reads the instance keys; problems are recorded in `r`.
    pub fn read(r: &mut ConfigReader<'_>) -> Option<Self> {
        let url = r.required(INSTANCE_URL_KEY, "the instance URL, e.g. https://acme.service-now.com")?;
        let connect_timeout_ms = r.bounded_u32("snow.http.connect.timeout.ms", default_connect_timeout_ms(), 100, 600_000);
        let first_byte_timeout_ms = r.bounded_u32("snow.http.request.timeout.ms", default_first_byte_timeout_ms(), 100, 600_000);
        let body_timeout_ms = r.bounded_u32("snow.http.body.timeout.ms", default_body_timeout_ms(), 100, 3_600_000);
        let max_response_bytes = r.bounded_u32("snow.http.max.response.bytes", default_max_response_bytes(), 1024, u32::MAX) as usize;
        let retry = RetryPolicy {
            max_attempts: r.bounded_u32("snow.retry.max.attempts", default_retry_max_attempts(), 1, 1000),
            max_elapsed: Duration::from_millis(u64::from(r.bounded_u32(
                "snow.retry.max.elapsed.ms",
                default_retry_max_elapsed_ms(),
                0,
                86_400_000,
            ))),
            initial: Duration::from_millis(u64::from(r.bounded_u32(
                "snow.retry.backoff.initial.ms",
                default_retry_initial_ms(),
                1,
                3_600_000,
            ))),
            max_backoff: Duration::from_millis(u64::from(r.bounded_u32(
                "snow.retry.backoff.max.ms",
                default_retry_max_backoff_ms(),
                1,
                3_600_000,
            ))),
        };
        match parse_base_url(&url) {
            Ok((scheme, authority)) => Some(Self {
                base_url: format!("{scheme}://{authority}"),
                scheme,
                authority,
                connect_timeout_ms,
                first_byte_timeout_ms,
                body_timeout_ms,
                max_response_bytes,
                retry,
            }),
            Err(message) => {
                r.error(INSTANCE_URL_KEY, message);
                None
            }
        }
    }
}

/// Splits `scheme://authority[/]` into its parts; anything else is refused with a reason.
pub fn parse_base_url(url: &str) -> Result<(String, String), String> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| format!("must start with https:// or http://, got {url:?}"))?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "https" && scheme != "http" {
        return Err(format!("scheme must be https or http, got {scheme:?}"));
    }
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() || authority.contains(['/', '?', '#', '@', ' ']) {
        return Err(format!("must be the instance root (scheme://host[:port]) without path, query or user info, got {url:?}"));
    }
    Ok((scheme, authority.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_forms() {
        assert_eq!(parse_base_url("https://Acme.service-now.com/").unwrap(), ("https".into(), "acme.service-now.com".into()));
        assert_eq!(parse_base_url("http://127.0.0.1:8080").unwrap(), ("http".into(), "127.0.0.1:8080".into()));
        assert!(parse_base_url("acme.service-now.com").is_err());
        assert!(parse_base_url("https://acme.service-now.com/api").is_err());
        assert!(parse_base_url("https://user:pw@acme.service-now.com").is_err());
        assert!(parse_base_url("ftp://x").is_err());
    }
}
