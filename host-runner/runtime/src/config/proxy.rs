//! The `snow.proxy.*` section: the forward proxy every request of the connector goes out through
//! (the instance, its OAuth token endpoint, a schema registry), unless its host is on the
//! no-proxy list. The password is a secret like the others; none of these keys reaches the guest.

use std::collections::BTreeMap;
use std::sync::Arc;

use snow_core::error::ConfigError;

use crate::transport::proxy::{Proxy, ProxyPart};

/// The section's keys.
pub const KEYS: [&str; 4] = ["snow.proxy.url", "snow.proxy.username", "snow.proxy.password", "snow.proxy.no.proxy"];

/// The key holding a secret.
pub const SECRET_KEY: &str = "snow.proxy.password";

/// Reads the section: `None` when no proxy is set.
pub fn read(entries: &BTreeMap<String, String>, errors: &mut Vec<ConfigError>) -> Option<Arc<Proxy>> {
    let get = |k: &str| super::value(entries, k);
    let password = entries.get(SECRET_KEY).filter(|v| !v.is_empty());
    let Some(url) = get("snow.proxy.url") else {
        for key in &KEYS[1..] {
            if entries.get(*key).is_some_and(|v| !v.trim().is_empty()) {
                errors.push(ConfigError::new(*key, "is set without snow.proxy.url"));
            }
        }
        return None;
    };
    let credentials = match (get("snow.proxy.username"), password) {
        (Some(user), Some(password)) => Some((user, password.clone())),
        (None, None) => None,
        (Some(_), None) => {
            errors.push(ConfigError::missing(SECRET_KEY, "is required with snow.proxy.username"));
            return None;
        }
        (None, Some(_)) => {
            errors.push(ConfigError::missing("snow.proxy.username", "is required with snow.proxy.password"));
            return None;
        }
    };
    let no_proxy = get("snow.proxy.no.proxy").unwrap_or_default();
    match Proxy::new(&url, credentials.as_ref().map(|(u, p)| (u.as_str(), p.as_str())), &no_proxy) {
        Ok(proxy) => Some(Arc::new(proxy.named("snow.proxy"))),
        Err((part, message)) => {
            let key = match part {
                ProxyPart::Url => "snow.proxy.url",
                ProxyPart::Credentials => "snow.proxy.username",
                ProxyPart::NoProxy => "snow.proxy.no.proxy",
            };
            errors.push(ConfigError::new(key, message));
            None
        }
    }
}
