//! The process's HTTP client: keep-alive connections to instances shared by every request of the
//! process ([`pool`], with the TLS profiles a schema registry may ask for), and the host's own
//! requests (OAuth tokens, the schema registry, the migration's REST calls) sent on it whole
//! ([`plain`]). What may be sent where is not decided here: guest requests pass the outbound gate
//! first ([`crate::outbound`]).

pub mod plain;
pub mod pool;
