//! snow-connect's runtime: runs ServiceNow connector components (WASI 0.2) under wasmtime and owns
//! everything outside the connector logic, for every front end (a standalone run, a fleet worker,
//! the Kafka Connect executor).
//!
//! What it owns: configuration of connectors ([`config`]), signed artefacts ([`artefact`]), loading and
//! sandboxing components ([`component`]), the outbound gate every guest request passes
//! ([`outbound`]) and the HTTP client under it ([`transport`]), credentials ([`auth`]), Kafka
//! clients ([`kafka`]), the record pipeline's converters ([`convert`]), the units of a source
//! ([`source`], exactly-once in [`source::exactly_once`]) and the lanes of a sink ([`sink`]),
//! source offset storage ([`offsets`]) and compacted state topics ([`state`]), push wake-ups
//! ([`push`]), metrics ([`metrics`]), units' states and the operator's endpoint ([`status`],
//! [`admin`], [`listener`]), redaction of secrets ([`redact`]), the files it writes for itself
//! ([`files`]) and the process lifecycle ([`runner`], [`reload`], [`shutdown`]).
//! What it does not own: what to ask ServiceNow and how a record maps to a write (the guests',
//! snow-core); a fleet's workers, herder and REST API (snow-fleet); the Kafka Connect executor
//! (snow-executor); the migration tool (snow-migrate); the command line (snow-connect).

pub mod admin;
pub mod artefact;
pub mod auth;
pub mod backoff;
pub mod component;
pub mod config;
pub mod connector;
pub mod convert;
pub mod files;
pub mod kafka;
pub mod listener;
pub mod logging;
pub mod metrics;
pub mod offsets;
pub mod outbound;
pub mod push;
pub mod redact;
pub mod reload;
pub mod runner;
pub mod shutdown;
pub mod sink;
pub mod source;
pub mod state;
pub mod status;
pub mod supervise;
pub mod transport;
