//! OAuth tokens for the whole process: one [`TokenProvider`] per credential — token endpoint,
//! client id, user, a SHA-256 digest of the client secret and password (never the secrets
//! themselves), and the route to the endpoint (proxy, TLS settings) — shared by every task and connector that uses that same credential. Two
//! connectors with the same client and user but different secrets get providers of their own, so
//! a wrong secret is refused for the connector that has it and never borrows the other's token.
//!
//! Single-flight: a provider holds snow-core's [`TokenCache`] behind an async mutex that stays
//! locked while a token is fetched, so however many callers need a token at once, one request
//! goes to the endpoint and the others receive its token. A 401 invalidates only the token that
//! failed (by generation), so a caller holding a stale token cannot throw away a newer one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use snow_core::auth::oauth::{AccessToken, Grant, NextGrant, OAuthConfig, TokenCache};
use snow_core::error::{ErrorClass, Failure, SnowError};
use snow_core::http::Timeouts;
use snow_core::http::retry::{RetryPolicy, RetrySchedule, classify_transport};

use super::OAuthSpec;
use crate::metrics::{Metrics, labels};
use crate::transport::plain as plain_http;

/// Token requests are retried for at most a minute before the caller sees the error.
const TOKEN_RETRY: RetryPolicy = RetryPolicy {
    max_attempts: 5,
    max_elapsed: Duration::from_secs(60),
    initial: Duration::from_millis(500),
    max_backoff: Duration::from_secs(15),
};

/// Timeouts of token requests.
const TOKEN_TIMEOUTS: Timeouts = Timeouts { connect_ms: 10_000, first_byte_ms: 30_000, body_ms: 30_000 };

/// The tokens of one client.
pub struct TokenProvider {
    cache: tokio::sync::Mutex<TokenCache>,
    origin: Instant,
    metrics: Metrics,
    endpoint: String,
    route: crate::transport::Route,
}

impl TokenProvider {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    /// A valid token, fetched if needed (one fetch at a time per provider).
    pub async fn token(&self) -> Result<AccessToken, SnowError> {
        let mut cache = self.cache.lock().await;
        if let Some(token) = cache.valid(self.now()) {
            return Ok(token);
        }
        let mut schedule = RetrySchedule::new(TOKEN_RETRY, self.now(), self.origin.elapsed().as_nanos() as u64);
        loop {
            let grant = cache.next_grant();
            let request = cache.request(grant);
            let grant_label = match grant {
                NextGrant::Refresh => "refresh_token",
                NextGrant::Primary => "primary",
            };
            self.metrics.counter_add(
                "snow_oauth_token_requests_total",
                1,
                &labels(&[("endpoint", &self.endpoint), ("grant", grant_label)]),
            );
            let error = match plain_http::send(&request, &self.route).await {
                Ok(response) => match cache.accept(grant, &response, self.now()) {
                    Ok(token) => {
                        crate::redact::register_issued(token.value.expose());
                        if let Some(refresh) = cache.refresh_token() {
                            crate::redact::register_issued(refresh.expose());
                        }
                        tracing::info!(endpoint = %self.endpoint, grant = %grant_label, "obtained an OAuth access token");
                        return Ok(token);
                    }
                    // A refused refresh token falls back to the primary grant at once.
                    Err(e) if grant == NextGrant::Refresh && cache.next_grant() == NextGrant::Primary => {
                        tracing::warn!(endpoint = %self.endpoint, "the refresh token was refused, using the primary grant: {e}");
                        continue;
                    }
                    Err(e) => e,
                },
                Err(e) => {
                    let verdict = classify_transport(e.kind, request.method);
                    SnowError::Transport(Failure {
                        message: format!("token endpoint {}: {} ({})", self.endpoint, e.message, verdict.reason),
                        class: verdict.class,
                    })
                }
            };
            if error.class() != ErrorClass::Transient {
                tracing::error!(endpoint = %self.endpoint, "OAuth token request failed: {error}");
                return Err(error);
            }
            match schedule.next_delay(self.now(), None) {
                Ok(delay) => {
                    tracing::warn!(endpoint = %self.endpoint, "OAuth token request failed, retrying in {} ms: {error}", delay.as_millis());
                    tokio::time::sleep(delay).await;
                }
                Err(bound) => return Err(SnowError::transport(format!("{}: {error}", bound.describe()), ErrorClass::Transient)),
            }
        }
    }

    /// Drops the token of `generation` if it is still the current one.
    pub async fn invalidate(&self, generation: u64) {
        if self.cache.lock().await.invalidate(generation) {
            tracing::info!(endpoint = %self.endpoint, "an OAuth access token was refused (401); it will be replaced");
        }
    }
}

/// What identifies a credential: endpoint, client id, user, and a digest of its secrets.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct CredentialKey {
    token_url: String,
    client_id: String,
    user: String,
    secrets_sha256: [u8; 32],
    /// The route's ids (proxy, TLS profile): another way to the endpoint is another provider.
    route: (u64, u64),
}

impl CredentialKey {
    fn of(spec: &OAuthSpec) -> Self {
        use sha2::{Digest, Sha256};
        let mut digest = Sha256::new();
        // Each secret with its length first, so no two pairs of secrets digest alike.
        let mut add = |secret: &str| {
            digest.update((secret.len() as u64).to_be_bytes());
            digest.update(secret.as_bytes());
        };
        add(spec.client_secret.expose());
        let user = match &spec.grant {
            Grant::Password { username, password } => {
                add(password.expose());
                username.clone()
            }
            Grant::ClientCredentials => String::new(),
        };
        Self {
            token_url: spec.token_url.clone(),
            client_id: spec.client_id.clone(),
            user,
            secrets_sha256: digest.finalize().into(),
            route: spec.route.id(),
        }
    }
}

/// Every provider of the process, by credential.
#[derive(Default)]
pub struct TokenRegistry {
    providers: Mutex<HashMap<CredentialKey, Arc<TokenProvider>>>,
    metrics: Metrics,
}

impl TokenRegistry {
    /// A registry reporting to `metrics`.
    pub fn new(metrics: Metrics) -> Self {
        Self { providers: Mutex::default(), metrics }
    }

    /// The provider of `spec`'s credential, created on first use.
    pub fn provider(&self, spec: &OAuthSpec) -> Arc<TokenProvider> {
        let key = CredentialKey::of(spec);
        let mut providers = self.providers.lock().unwrap_or_else(|e| e.into_inner());
        providers
            .entry(key)
            .or_insert_with(|| {
                let config = OAuthConfig {
                    token_url: spec.token_url.clone(),
                    client_id: spec.client_id.clone(),
                    client_secret: spec.client_secret.clone(),
                    grant: spec.grant.clone(),
                    refresh_margin: spec.refresh_margin,
                    timeouts: TOKEN_TIMEOUTS,
                };
                Arc::new(TokenProvider {
                    cache: tokio::sync::Mutex::new(TokenCache::new(config)),
                    origin: Instant::now(),
                    metrics: self.metrics.clone(),
                    endpoint: spec.token_url.split('?').next().unwrap_or_default().to_string(),
                    route: spec.route.clone(),
                })
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use snow_core::auth::Secret;

    fn spec(secret: &str, password: &str) -> OAuthSpec {
        OAuthSpec {
            token_url: "https://acme.service-now.com/oauth_token.do".into(),
            client_id: "client".into(),
            client_secret: Secret::new(secret),
            grant: Grant::Password { username: "u".into(), password: Secret::new(password) },
            refresh_margin: Duration::from_secs(60),
            route: Default::default(),
        }
    }

    #[test]
    fn one_provider_per_credential_secrets_included() {
        let registry = TokenRegistry::default();
        let a = registry.provider(&spec("right", "pw"));
        assert!(Arc::ptr_eq(&a, &registry.provider(&spec("right", "pw"))), "the same credential shares one provider");
        assert!(!Arc::ptr_eq(&a, &registry.provider(&spec("wrong", "pw"))), "another client secret is another credential");
        assert!(!Arc::ptr_eq(&a, &registry.provider(&spec("right", "pw2"))), "another password is another credential");
        let proxy = crate::transport::proxy::Proxy::new("proxy.corp:3128", None, "").unwrap();
        let proxied =
            OAuthSpec { route: crate::transport::Route { proxy: Some(Arc::new(proxy)), ..Default::default() }, ..spec("right", "pw") };
        assert!(!Arc::ptr_eq(&a, &registry.provider(&proxied)), "another way to the endpoint is another provider");
        assert_ne!(CredentialKey::of(&spec("ab", "c")), CredentialKey::of(&spec("a", "bc")), "no secret boundary can be forged");
        assert!(!format!("{:?}", CredentialKey::of(&spec("right", "pw"))).contains("right"));
    }
}
