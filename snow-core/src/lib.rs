//! ServiceNow connector logic shared by the guest components and the host.
//!
//! `snow-core` is a plain library: no async runtime, no threads, no clock of its own. It builds
//! natively and for `wasm32-wasip2`. HTTP goes through [`http::Transport`] (wasi-http in guests,
//! a scripted one in tests), so the same cursor and Table API code runs in every host.
//!
//! What it owns: configuration parsing and validation ([`config`]), the Table API client and the
//! encoded-query builder ([`table`]), the keyset cursor ([`cursor`]), the source task that turns
//! pages into records ([`source`]), the sink task that turns records into writes ([`sink`]), the
//! error taxonomy ([`error`]) and ServiceNow time ([`time`]).
//! What it does not own: Kafka, offset storage, credentials, concurrency; those are the host's.

pub mod auth;
pub mod clock;
pub mod config;
pub mod cursor;
pub mod error;
pub mod http;
pub mod record;
pub mod redact;
pub mod sink;
pub mod source;
pub mod table;
pub mod time;

pub use error::{ConfigError, ErrorClass, SnowError};
