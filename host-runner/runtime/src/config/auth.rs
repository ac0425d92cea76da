//! The `snow.auth.*` section: how the host authenticates to the instance ([`AuthSpec`]), Basic by
//! default, or an OAuth 2.0 client. The secrets stay host-side; none of these keys reaches the
//! guest ([`super::is_host_only_snow_key`]).

use std::collections::BTreeMap;
use std::time::Duration;

use snow_core::auth::Secret;
use snow_core::auth::oauth::Grant;
use snow_core::error::ConfigError;

use crate::auth::{AuthSpec, OAuthSpec};

/// Refresh a minute before expiry (never more than half the token's life).
fn default_refresh_margin_seconds() -> u64 {
    60
}

/// Reads the section; `url` is the instance's, whose `/oauth_token.do` is the default token URL.
pub fn read(entries: &BTreeMap<String, String>, url: &str, errors: &mut Vec<ConfigError>) -> AuthSpec {
    let get = |k: &str| super::value(entries, k);
    let secret = |k: &str| entries.get(k).filter(|v| !v.is_empty()).map(|v| Secret::new(v.clone()));
    let user = || match (get("snow.auth.username"), secret("snow.auth.password")) {
        (Some(username), Some(password)) => Some((username, password)),
        _ => None,
    };
    let auth_type = get("snow.auth.type").unwrap_or_else(|| "basic".into());
    match auth_type.as_str() {
        "none" => AuthSpec::None,
        "basic" => match user() {
            Some((username, password)) => AuthSpec::Basic { username, password },
            None => {
                for key in ["snow.auth.username", "snow.auth.password"] {
                    errors.push(ConfigError::missing(
                        key,
                        "are required for snow.auth.type=basic (or set snow.auth.type=none for an open test instance)",
                    ));
                }
                AuthSpec::None
            }
        },
        "oauth_client_credentials" | "oauth_password" => {
            let grant = if auth_type == "oauth_password" {
                match user() {
                    Some((username, password)) => Grant::Password { username, password },
                    None => {
                        for key in ["snow.auth.username", "snow.auth.password"] {
                            errors.push(ConfigError::missing(key, "are required for snow.auth.type=oauth_password"));
                        }
                        Grant::ClientCredentials
                    }
                }
            } else {
                Grant::ClientCredentials
            };
            let client_id =
                super::required(entries, "snow.auth.client.id", "the OAuth client id (System OAuth > Application Registry)", errors);
            let client_secret = secret("snow.auth.client.secret").unwrap_or_else(|| {
                errors.push(ConfigError::missing("snow.auth.client.secret", "is required for OAuth"));
                Secret::default()
            });
            let token_url = get("snow.auth.token.url").unwrap_or_else(|| format!("{}/oauth_token.do", url.trim_end_matches('/')));
            if !token_url.starts_with("https://") && !token_url.starts_with("http://") {
                errors.push(ConfigError::new("snow.auth.token.url", format!("must be an http(s) URL, got {token_url:?}")));
            }
            let margin =
                super::whole_number(entries, "snow.auth.token.refresh.margin.seconds", default_refresh_margin_seconds(), 0, 86_400, errors);
            AuthSpec::OAuth(OAuthSpec {
                token_url,
                client_id,
                client_secret,
                grant,
                refresh_margin: Duration::from_secs(margin),
                route: Default::default(),
            })
        }
        other => {
            errors.push(ConfigError::new(
                "snow.auth.type",
                format!("must be basic, oauth_client_credentials, oauth_password or none, got {other:?}"),
            ));
            AuthSpec::None
        }
    }
}
