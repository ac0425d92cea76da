//! Source offset storage: the last position Kafka acknowledged, per connector and source
//! partition. [`OffsetStore`] is the seam; [`file::FileOffsetStore`] is the embedded default (a local
//! file replaced atomically); [`kafka::KafkaOffsetStore`] keeps them in a compacted topic
//! (`offset.storage.topic`, and always in a fleet).

pub mod file;
pub mod kafka;

use anyhow::Result;

pub use file::FileOffsetStore;
pub use kafka::KafkaOffsetStore;

/// Where source offsets live.
pub trait OffsetStore: Send + Sync {
    /// Every `(partition, position)` stored for `connector`.
    fn load(&self, connector: &str) -> Vec<(String, String)>;
    /// Records `position` as the last acknowledged one of `partition`, durably, before returning.
    fn commit(&self, connector: &str, partition: &str, position: &str) -> Result<()>;
    /// The Kafka topic offsets live in, when they do (exactly-once needs one: ADR 0030).
    fn offsets_topic(&self) -> Option<std::sync::Arc<crate::state::StateTopic>> {
        None
    }
}
