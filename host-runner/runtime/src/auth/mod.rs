//! Credentials the host attaches to guest requests: nothing, HTTP Basic, or an OAuth bearer token
//! from a [`tokens::TokenProvider`] shared by every connector of the process that uses the same
//! client on the same token endpoint; made from a connector's [`AuthSpec`].

mod spec;
pub mod tokens;

pub use spec::{AuthSpec, OAuthSpec};

use std::sync::Arc;

use anyhow::{Context, Result};
use http::HeaderValue;
use snow_core::error::SnowError;

use tokens::{TokenProvider, TokenRegistry};

/// What a connector's gate attaches.
#[derive(Clone)]
pub enum Credentials {
    /// Nothing (test instances).
    None,
    /// A fixed Basic value.
    Basic(HeaderValue),
    /// Bearer tokens, refreshed as needed.
    OAuth(Arc<TokenProvider>),
}

/// An `Authorization` value and, for a token, its generation (to invalidate exactly it on 401).
pub struct Authorization {
    /// The header value (marked sensitive).
    pub value: HeaderValue,
    /// The token's generation; `None` for Basic.
    pub generation: Option<u64>,
}

impl Credentials {
    /// The credentials `spec` asks for; OAuth providers come from the process-wide `registry`.
    /// Their secrets are registered for redaction when a connector starts
    /// ([`crate::config::ConnectorSpec::register_secrets`]), not here: validating a caller's
    /// configuration registers nothing.
    pub fn from_spec(spec: &AuthSpec, registry: &TokenRegistry) -> Result<Self> {
        Ok(match spec {
            AuthSpec::None => Credentials::None,
            AuthSpec::Basic { username, password } => {
                let value = snow_core::auth::basic::authorization(username, password.expose());
                Credentials::Basic(sensitive(&value).context("snow.auth.username/password contain characters not allowed in a header")?)
            }
            AuthSpec::OAuth(oauth) => Credentials::OAuth(registry.provider(oauth)),
        })
    }

    /// The value to attach now, fetching a token if needed.
    pub async fn authorization(&self) -> Result<Option<Authorization>, SnowError> {
        match self {
            Credentials::None => Ok(None),
            Credentials::Basic(value) => Ok(Some(Authorization { value: value.clone(), generation: None })),
            Credentials::OAuth(provider) => {
                let token = provider.token().await?;
                let value = sensitive(&token.authorization())
                    .map_err(|_| SnowError::data("the token endpoint returned a token that is not a valid header value"))?;
                Ok(Some(Authorization { value, generation: Some(token.generation) }))
            }
        }
    }

    /// After a 401 answered a request sent with `authorization`: true when re-sending with fresh
    /// credentials can help (a token, now invalidated unless a newer one already replaced it).
    pub async fn rejected(&self, authorization: &Authorization) -> bool {
        match (self, authorization.generation) {
            (Credentials::OAuth(provider), Some(generation)) => {
                provider.invalidate(generation).await;
                true
            }
            _ => false,
        }
    }
}

fn sensitive(value: &str) -> Result<HeaderValue, http::header::InvalidHeaderValue> {
    let mut value = HeaderValue::from_str(value)?;
    value.set_sensitive(true);
    Ok(value)
}
