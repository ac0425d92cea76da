//! The sink consumer's context: it notes the partitions a rebalance assigns and revokes, for the
//! consumer loop to act on (stop the lanes of revoked partitions, make sure assigned ones are not
//! left paused by an earlier assignment). librdkafka commits the stored offsets itself before a
//! revocation takes effect (auto commit), so what the lanes stored is kept.

use std::sync::Mutex;

use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, ConsumerContext, Rebalance};

/// A change of assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// These partitions are now this consumer's.
    Assigned(Vec<(String, i32)>),
    /// These partitions are no longer this consumer's.
    Revoked(Vec<(String, i32)>),
}

/// Collects assignment changes as they happen (inside the consumer's poll).
#[derive(Debug, Default)]
pub struct SinkContext {
    changes: Mutex<Vec<Change>>,
}

impl SinkContext {
    /// The changes since the last call, oldest first.
    pub fn take_changes(&self) -> Vec<Change> {
        std::mem::take(&mut *self.changes.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn note(&self, change: Change) {
        self.changes.lock().unwrap_or_else(|e| e.into_inner()).push(change);
    }
}

impl ClientContext for SinkContext {}

impl ConsumerContext for SinkContext {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(list) = rebalance {
            self.note(Change::Revoked(list.elements().iter().map(|e| (e.topic().to_string(), e.partition())).collect()));
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(list) => {
                self.note(Change::Assigned(list.elements().iter().map(|e| (e.topic().to_string(), e.partition())).collect()));
            }
            Rebalance::Error(e) => tracing::warn!("a consumer group rebalance failed: {e}"),
            Rebalance::Revoke(_) => {}
        }
    }
}
