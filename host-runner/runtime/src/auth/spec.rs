//! How the host authenticates to an instance, as a connector's configuration reads it
//! ([`AuthSpec`]): no header, HTTP Basic, or an OAuth 2.0 client ([`OAuthSpec`]). Reading the
//! `snow.auth.*` keys is the configuration's ([`crate::config`]).

use std::time::Duration;

use snow_core::auth::Secret;
use snow_core::auth::oauth::Grant;

/// How the host authenticates to the instance.
#[derive(Debug, Clone)]
pub enum AuthSpec {
    /// No `Authorization` header (only for test instances).
    None,
    /// HTTP Basic with a user and password.
    Basic {
        /// User name.
        username: String,
        /// Password.
        password: Secret,
    },
    /// OAuth 2.0 bearer tokens from the token endpoint.
    OAuth(OAuthSpec),
}

/// An OAuth client.
#[derive(Debug, Clone)]
pub struct OAuthSpec {
    /// `snow.auth.token.url` (default `<instance>/oauth_token.do`).
    pub token_url: String,
    /// `snow.auth.client.id`.
    pub client_id: String,
    /// `snow.auth.client.secret`.
    pub client_secret: Secret,
    /// The primary grant: `client_credentials`, or `password` with the user's credentials.
    pub grant: Grant,
    /// `snow.auth.token.refresh.margin.seconds`.
    pub refresh_margin: Duration,
    /// How the token endpoint is reached (the connector's proxy; the instance's TLS settings when
    /// the endpoint is on the instance's host).
    pub route: crate::transport::Route,
}
