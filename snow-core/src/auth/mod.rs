//! Credentials for ServiceNow, computed where they are held (the host), never inside a sandbox.
//!
//! [`basic`] builds HTTP Basic values; [`oauth`] implements the OAuth 2.0 grants of
//! `/oauth_token.do` (`client_credentials`, `password`, `refresh_token`) and the token cache
//! without doing I/O: it builds the token request and reads the answer, and the caller sends it
//! (the host with its async client, a guest under another host with its transport). [`Secret`]
//! keeps credentials out of `Debug`, `Display` and therefore out of logs and errors.

pub mod basic;
pub mod oauth;
mod secret;

pub use secret::Secret;
