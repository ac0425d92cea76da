//! Source offset storage: the last position Kafka acknowledged, per connector and source
//! partition. [`OffsetStore`] is the seam; [`file::FileOffsetStore`] is the embedded default (a local
//! file replaced atomically); a Kafka compacted-topic store plugs in behind the same trait.

pub mod file;

use anyhow::Result;

pub use file::FileOffsetStore;

/// Where source offsets live.
pub trait OffsetStore: Send + Sync {
    /// Every `(partition, position)` stored for `connector`.
    fn load(&self, connector: &str) -> Vec<(String, String)>;
    /// Records `position` as the last acknowledged one of `partition`, durably, before returning.
    fn commit(&self, connector: &str, partition: &str, position: &str) -> Result<()>;
}
