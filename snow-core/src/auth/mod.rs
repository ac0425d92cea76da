//! Credentials for ServiceNow, computed where they are held (the host), never inside a sandbox.
//!
//! [`basic`] builds HTTP Basic values. OAuth grants and token caching join it here.

pub mod basic;
