//! `snow-connect migrate`: translating the configurations of Confluent's five ServiceNow
//! connectors, the open Kafka Connect ServiceNow connector and Kafka Connect's own keys into
//! this runtime's (ADR 0029, docs/migration.md).
//!
//! What it owns: recognising an old connector and its [`product`] ([`input`]), the rules per
//! product as data ([`rules`], [`tables`], with their value [`conversions`]), applying them key by
//! key ([`translate`]), folding one-table sources into one connector ([`fold`]), checking the
//! result with the runtime's own configuration parsers ([`check`]), what one run writes —
//! connector files, the fleet's JSON and the report ([`migration`], [`output`], [`report`]) — and
//! the key reference of docs/migration.md ([`docs`]). Then the three steps that reach a service,
//! only when asked: deploying to a fleet ([`apply`]), starting a source where the old one stopped
//! ([`cutover`]) and checking the topic against the instance ([`verify`]), both reading what a
//! topic holds through [`topic_versions`]. What it does not own:
//! running connectors (the runner's), offsets (the stores').

pub mod apply;
pub mod check;
pub mod conversions;
pub mod cutover;
pub mod docs;
pub mod fold;
pub mod input;
pub mod migration;
pub mod output;
pub mod product;
pub mod report;
pub mod rules;
pub mod tables;
pub mod topic_versions;
pub mod translate;
pub mod verify;

#[cfg(test)]
mod cases;

pub use migration::{DEFAULT_SINK_COMPONENT, DEFAULT_SOURCE_COMPONENT, Migration, Options, translate_paths};
pub use product::Product;
