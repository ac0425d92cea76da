//! State kept in Kafka: compacted topics read into memory and followed ([`topic`]). Source offsets
//! ([`crate::offsets::kafka`]), and in a fleet the connectors' configurations and the units'
//! status, each live in one.

pub mod topic;

pub use topic::{Clients, StateTopic, TopicSpec};
