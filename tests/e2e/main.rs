//! Every end-to-end test in one binary, so the host links once: the real `snow-connect` binary
//! and the real components against the fake ServiceNow (`fake-snow`) and a real Kafka broker.
//!
//! One module per area. Tests of this process share one broker ([`kafka_harness::shared`]) and
//! the components signed once ([`support::signed`]); a test that must own its broker (stopping it,
//! securing it) starts its own. Each test works in its own directory ([`support::work_dir`]),
//! topics and connector names made unique ([`support::unique`]), so tests run at once without
//! seeing each other. Run one area with `cargo test -p snow-connect --test e2e <module>::`.
#![allow(clippy::unwrap_used)] // a panic is how a test fails

mod support;

mod artefact;
mod attachments;
mod auth;
mod backfill;
mod cli;
mod connect;
mod cursor;
mod deletes;
mod enterprise;
mod exactly_once;
mod fleet;
mod gate;
mod hidden;
mod hosts;
mod journal;
mod kafka_failures;
mod migrate;
mod oci;
mod push;
mod registry;
mod release;
mod secure;
mod sink;
mod sink_batch;
mod sink_lanes;
mod snapshot;
mod source;
mod swap;
mod trust;
