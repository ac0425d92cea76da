//! OAuth 2.0 against ServiceNow's token endpoint, without I/O.
//!
//! [`TokenCache`] holds the current access token and refresh token of one client on one
//! instance. [`TokenCache::next_grant`] says what to ask for (the refresh token first when there is
//! one, the primary grant otherwise or after the refresh token was refused for good);
//! [`TokenCache::request`] builds the form-encoded request; [`TokenCache::accept`] reads the
//! answer. Each token carries a generation number, so [`TokenCache::invalidate`] drops only the
//! token that failed: a caller holding a stale token cannot throw away a newer one.
//!
//! Single-flight (one token request however many callers need one at once) is the caller's
//! concurrency; the host wraps the cache in an async mutex held across the fetch.

use std::time::Duration;

use serde::Deserialize;

use super::Secret;
use crate::error::{ErrorClass, SnowError};
use crate::http::transport::{Method, Request, Response, Timeouts};
use crate::http::url::encode;

/// The primary grant of a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// `client_credentials` (Washington DC and later; off by default on instances).
    ClientCredentials,
    /// `password`: the integration user's name and password.
    Password {
        /// User name.
        username: String,
        /// Password.
        password: Secret,
    },
}

/// One OAuth client on one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthConfig {
    /// The token endpoint (`https://acme.service-now.com/oauth_token.do` by default).
    pub token_url: String,
    /// Client id.
    pub client_id: String,
    /// Client secret.
    pub client_secret: Secret,
    /// The primary grant.
    pub grant: Grant,
    /// Refresh this long before expiry (capped at half the token's lifetime).
    pub refresh_margin: Duration,
    /// Timeouts of token requests.
    pub timeouts: Timeouts,
}

/// What the next token request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextGrant {
    /// `grant_type=refresh_token` with the stored refresh token.
    Refresh,
    /// The client's primary grant.
    Primary,
}

/// An access token with its generation.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct AccessToken {
    /// The bearer value.
    pub value: Secret,
    /// Increases with every token obtained; used to invalidate only this one.
    pub generation: u64,
}

impl AccessToken {
    /// The `Authorization` header value.
    pub fn authorization(&self) -> String {
        format!("Bearer {}", self.value.expose())
    }
}

#[derive(Debug, Clone)]
struct Current {
    token: AccessToken,
    /// Monotonic time after which the token must not be used.
    use_until: Duration,
}

/// The token state of one client on one instance.
#[derive(Debug, Clone)]
pub struct TokenCache {
    config: OAuthConfig,
    current: Option<Current>,
    refresh_token: Option<Secret>,
    generation: u64,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: Option<String>,
    refresh_token: Option<String>,
    expires_in: Option<u64>,
    error: Option<String>,
    error_description: Option<String>,
}

impl TokenCache {
    /// An empty cache for `config`.
    pub fn new(config: OAuthConfig) -> Self {
        Self { config, current: None, refresh_token: None, generation: 0 }
    }

    /// The configuration.
    pub fn config(&self) -> &OAuthConfig {
        &self.config
    }

    /// The current token if it is still good at monotonic time `now`.
    pub fn valid(&self, now: Duration) -> Option<AccessToken> {
        self.current.as_ref().filter(|c| now < c.use_until).map(|c| c.token.clone())
    }

    /// Drops the token of `generation` if it is still the current one (a 401 answered it).
    /// Returns true if it was dropped; false means a newer token already replaced it.
    pub fn invalidate(&mut self, generation: u64) -> bool {
        if self.current.as_ref().is_some_and(|c| c.token.generation == generation) {
            self.current = None;
            true
        } else {
            false
        }
    }

    /// What the next token request should ask for.
    pub fn next_grant(&self) -> NextGrant {
        if self.refresh_token.is_some() { NextGrant::Refresh } else { NextGrant::Primary }
    }

    /// The form-encoded request for `grant`.
    pub fn request(&self, grant: NextGrant) -> Request {
        let c = &self.config;
        let mut form: Vec<(&str, &str)> = vec![("client_id", &c.client_id), ("client_secret", c.client_secret.expose())];
        match (grant, &self.refresh_token, &c.grant) {
            (NextGrant::Refresh, Some(refresh), _) => {
                form.push(("grant_type", "refresh_token"));
                form.push(("refresh_token", refresh.expose()));
            }
            (_, _, Grant::ClientCredentials) => form.push(("grant_type", "client_credentials")),
            (_, _, Grant::Password { username, password }) => {
                form.push(("grant_type", "password"));
                form.push(("username", username));
                form.push(("password", password.expose()));
            }
        }
        let body = form.iter().map(|(k, v)| format!("{}={}", encode(k), encode(v))).collect::<Vec<_>>().join("&");
        Request {
            method: Method::Post,
            url: c.token_url.clone(),
            headers: vec![
                ("content-type".into(), "application/x-www-form-urlencoded".into()),
                ("accept".into(), "application/json".into()),
            ],
            body: body.into_bytes(),
            timeouts: c.timeouts,
            max_response_bytes: 64 * 1024,
        }
    }

    /// Reads the answer to a request for `grant` received at monotonic time `now`.
    ///
    /// A refused refresh token is forgotten, so the next [`Self::next_grant`] is the primary grant;
    /// the error is then [`ErrorClass::Transient`] (asking again with the primary grant can work).
    /// The refresh token held, if any (for the host's redaction of known secrets).
    pub fn refresh_token(&self) -> Option<&Secret> {
        self.refresh_token.as_ref()
    }

    /// A refused primary grant is [`ErrorClass::Fatal`]; 429 and 5xx are transient.
    pub fn accept(&mut self, grant: NextGrant, response: &Response, now: Duration) -> Result<AccessToken, SnowError> {
        let answer: Option<TokenAnswer> = serde_json::from_slice(&response.body).ok();
        let grant_name = match grant {
            NextGrant::Refresh => "refresh_token",
            NextGrant::Primary => match self.config.grant {
                Grant::ClientCredentials => "client_credentials",
                Grant::Password { .. } => "password",
            },
        };
        if response.status == 200 {
            if let Some(TokenAnswer { access_token: Some(access), refresh_token, expires_in, .. }) = answer {
                // The endpoint's number: a lifetime past a year is taken as a year.
                let lifetime = Duration::from_secs(expires_in.unwrap_or(1800).min(365 * 86_400));
                let margin = self.config.refresh_margin.min(lifetime / 2);
                self.generation += 1;
                let token = AccessToken { value: Secret::new(access), generation: self.generation };
                self.current = Some(Current { token: token.clone(), use_until: now.saturating_add(lifetime).saturating_sub(margin) });
                if let Some(refresh) = refresh_token.filter(|r| !r.is_empty()) {
                    self.refresh_token = Some(Secret::new(refresh));
                }
                return Ok(token);
            }
            return Err(token_error(grant_name, response.status, "the answer has no access_token", ErrorClass::Transient));
        }
        let reason = answer.and_then(|a| a.error_description.or(a.error)).unwrap_or_else(|| "no reason given".into());
        // An endpoint may quote what it was sent: this client's secrets never reach the error.
        let mut known = crate::redact::KnownSecrets::new();
        known.add(self.config.client_secret.expose());
        if let Grant::Password { password, .. } = &self.config.grant {
            known.add(password.expose());
        }
        if let Some(refresh) = &self.refresh_token {
            known.add(refresh.expose());
        }
        let reason = known.scrub(&reason).into_owned();
        let permanent = matches!(response.status, 400 | 401 | 403);
        if grant == NextGrant::Refresh && permanent {
            // The refresh token is spent or revoked: fall back to the primary grant.
            self.refresh_token = None;
            return Err(token_error(grant_name, response.status, &reason, ErrorClass::Transient));
        }
        let class = if permanent { ErrorClass::Fatal } else { crate::http::retry::classify_status(response.status, Method::Get).class };
        Err(token_error(grant_name, response.status, &reason, class))
    }
}

fn token_error(grant: &str, status: u16, reason: &str, class: ErrorClass) -> SnowError {
    SnowError::Http(crate::error::HttpFailure {
        status,
        message: format!("OAuth {grant} grant refused: {}", crate::redact::redact(reason)),
        detail: None,
        request_id: None,
        class,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(grant: Grant) -> OAuthConfig {
        OAuthConfig {
            token_url: "https://acme.service-now.com/oauth_token.do".into(),
            client_id: "cid".into(),
            client_secret: Secret::new("c-secret"),
            grant,
            refresh_margin: Duration::from_secs(60),
            timeouts: Timeouts { connect_ms: 1, first_byte_ms: 1, body_ms: 1 },
        }
    }

    fn answer(status: u16, body: &str) -> Response {
        Response { status, headers: vec![], body: body.as_bytes().to_vec() }
    }

    fn body(r: &Request) -> String {
        String::from_utf8(r.body.clone()).unwrap()
    }

    #[test]
    fn password_grant_then_refresh_first_then_fallback() {
        let mut cache = TokenCache::new(config(Grant::Password { username: "u".into(), password: Secret::new("p w") }));
        assert_eq!(cache.next_grant(), NextGrant::Primary);
        let r = cache.request(NextGrant::Primary);
        assert_eq!(r.method, Method::Post);
        assert_eq!(body(&r), "client_id=cid&client_secret=c-secret&grant_type=password&username=u&password=p%20w");
        let t1 = cache
            .accept(NextGrant::Primary, &answer(200, r#"{"access_token":"a1","refresh_token":"r1","expires_in":1800}"#), Duration::ZERO)
            .unwrap();
        assert_eq!(t1.authorization(), "Bearer a1");
        // Valid until expiry minus the 60 s margin.
        assert!(cache.valid(Duration::from_secs(1739)).is_some());
        assert!(cache.valid(Duration::from_secs(1740)).is_none());
        assert_eq!(cache.next_grant(), NextGrant::Refresh);
        assert_eq!(
            body(&cache.request(NextGrant::Refresh)),
            "client_id=cid&client_secret=c-secret&grant_type=refresh_token&refresh_token=r1"
        );
        let refused = cache.accept(NextGrant::Refresh, &answer(401, r#"{"error":"invalid_grant"}"#), Duration::ZERO).unwrap_err();
        assert_eq!(refused.class(), ErrorClass::Transient, "a refused refresh falls back to the primary grant");
        assert_eq!(cache.next_grant(), NextGrant::Primary);
        let fatal = cache.accept(NextGrant::Primary, &answer(401, r#"{"error":"access_denied"}"#), Duration::ZERO).unwrap_err();
        assert_eq!(fatal.class(), ErrorClass::Fatal);
        assert_eq!(fatal.to_string(), "ServiceNow answered 401: OAuth password grant refused: access_denied");
    }

    #[test]
    fn a_stale_holder_cannot_invalidate_a_newer_token() {
        let mut cache = TokenCache::new(config(Grant::ClientCredentials));
        assert!(body(&cache.request(NextGrant::Primary)).ends_with("grant_type=client_credentials"));
        let old = cache.accept(NextGrant::Primary, &answer(200, r#"{"access_token":"a1","expires_in":1800}"#), Duration::ZERO).unwrap();
        assert!(cache.invalidate(old.generation));
        let new = cache.accept(NextGrant::Primary, &answer(200, r#"{"access_token":"a2","expires_in":1800}"#), Duration::ZERO).unwrap();
        assert!(!cache.invalidate(old.generation), "the stale 401 does not drop the newer token");
        assert_eq!(cache.valid(Duration::from_secs(1)), Some(new));
    }

    #[test]
    fn short_lived_tokens_keep_half_their_life_and_errors_hide_secrets() {
        let mut cache = TokenCache::new(config(Grant::ClientCredentials));
        cache.accept(NextGrant::Primary, &answer(200, r#"{"access_token":"a","expires_in":4}"#), Duration::ZERO).unwrap();
        assert!(cache.valid(Duration::from_millis(1999)).is_some());
        assert!(cache.valid(Duration::from_secs(2)).is_none());
        let e = cache
            .accept(NextGrant::Primary, &answer(503, r#"{"error_description":"client_secret=c-secret rejected"}"#), Duration::ZERO)
            .unwrap_err();
        assert_eq!(e.class(), ErrorClass::Transient);
        assert!(!e.to_string().contains("c-secret"), "{e}");
        assert!(!format!("{cache:?}").contains("c-secret"));
    }

    #[test]
    fn an_endpoint_quoting_the_client_secret_back_is_scrubbed() {
        let mut cache = TokenCache::new(config(Grant::ClientCredentials));
        let e = cache
            .accept(NextGrant::Primary, &answer(401, r#"{"error_description":"wrong secret c-secret for cid"}"#), Duration::ZERO)
            .unwrap_err();
        assert!(!e.to_string().contains("c-secret") && e.to_string().contains("wrong secret"), "{e}");
    }

    #[test]
    fn an_endless_lifetime_from_the_endpoint_is_a_year_not_an_overflow() {
        let mut cache = TokenCache::new(config(Grant::ClientCredentials));
        let answer = answer(200, r#"{"access_token":"a","expires_in":18446744073709551615}"#);
        cache.accept(NextGrant::Primary, &answer, Duration::from_secs(10)).unwrap();
        assert!(cache.valid(Duration::from_secs(300 * 86_400)).is_some() && cache.valid(Duration::from_secs(366 * 86_400)).is_none());
    }
}
