//! snow-connect's host: runs ServiceNow connector components (WASI 0.2) under wasmtime and owns
//! everything outside the connector logic.
//!
//! What it owns: configuration of connectors ([`config`]), signed artefacts ([`artefact`]), loading and
//! sandboxing components ([`component`]), the outbound gate every guest request passes ([`outbound`]), Kafka I/O
//! ([`kafka`], [`source`], [`sink`]), source offset storage ([`offsets`]), metrics ([`metrics`]),
//! units' states and the operator's endpoint ([`status`], [`admin`]), redaction of secrets
//! ([`redact`]), the files it writes for itself ([`files`]) and the process lifecycle ([`runner`], [`reload`], [`shutdown`]). In a fleet
//! ([`worker`]): state in Kafka topics ([`state`]), work slots by Kafka's group protocol, and
//! Kafka Connect's REST API ([`rest`]).
//! What it does not own: what to ask ServiceNow and how a record maps to a write; that is the
//! guests' (snow-core).

pub mod admin;
pub mod artefact;
pub mod auth;
pub mod backoff;
pub mod component;
pub mod config;
pub mod connector;
pub mod convert;
pub mod executor;
pub mod files;
pub mod herder;
pub mod kafka;
pub mod listener;
pub mod logging;
pub mod metrics;
pub mod migrate;
pub mod offsets;
pub mod outbound;
pub mod push;
pub mod redact;
pub mod reload;
pub mod rest;
pub mod runner;
pub mod shutdown;
pub mod sink;
pub mod source;
pub mod state;
pub mod status;
pub mod transport;
pub mod worker;
