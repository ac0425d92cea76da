//! The sink consumer's context: it notes the partitions a rebalance assigns and revokes, for the
//! consumer loop to act on (stop the lanes of revoked partitions, make sure assigned ones are not
//! left paused by an earlier assignment).
//!
//! Before a revocation takes effect it also **quiesces** the revoked partitions' lanes: each is
//! told to start no new `put`, and the callback waits (up to [`QUIESCE_LIMIT`]) for a `put` in
//! progress to finish, its reports to be acknowledged and its offset stored. librdkafka then
//! commits the stored offsets as part of the revocation (auto commit), so the partition's next
//! owner — in this process or another — starts right after the last record with an outcome, and
//! never writes the partition while this one still does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// `topic-partition` names of `partitions`, for logs.
pub fn names(partitions: &[(String, i32)]) -> String {
    partitions.iter().map(|(t, p)| format!("{t}-{p}")).collect::<Vec<_>>().join(", ")
}

/// Longest a revocation waits for a lane's `put` in progress (a put is at most 200 writes).
pub const QUIESCE_LIMIT: Duration = Duration::from_secs(60);

/// What a revocation needs of a lane: a flag that keeps it from starting another `put`, and
/// whether one is in progress (from the `put` to its offset stored).
#[derive(Debug, Default)]
pub struct LaneControl {
    revoked: AtomicBool,
    busy: AtomicBool,
}

impl LaneControl {
    /// Whether the partition was revoked from this consumer.
    pub fn is_revoked(&self) -> bool {
        self.revoked.load(Ordering::SeqCst)
    }

    /// Marks a `put` as started; none when the partition was revoked (nothing may be written).
    pub fn enter(self: &Arc<Self>) -> Option<Busy> {
        self.busy.store(true, Ordering::SeqCst);
        if self.revoked.load(Ordering::SeqCst) {
            self.busy.store(false, Ordering::SeqCst);
            return None;
        }
        Some(Busy(self.clone()))
    }
}

/// A `put` in progress; dropping it ends it.
pub struct Busy(Arc<LaneControl>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::SeqCst);
    }
}

/// Collects assignment changes as they happen (inside the consumer's poll) and quiesces revoked
/// lanes.
#[derive(Debug, Default)]
pub struct SinkContext {
    /// The connector, for logs.
    connector: String,
    changes: Mutex<Vec<Change>>,
    lanes: Mutex<HashMap<(String, i32), Arc<LaneControl>>>,
}

impl SinkContext {
    /// The context of `connector`'s consumer.
    pub fn new(connector: &str) -> Self {
        Self { connector: connector.to_string(), ..Self::default() }
    }

    /// Registers the lane of `topic`-`partition` (replacing an earlier one of the partition).
    pub fn register(&self, topic: &str, partition: i32, control: Arc<LaneControl>) {
        self.lanes.lock().unwrap_or_else(|e| e.into_inner()).insert((topic.to_string(), partition), control);
    }

    /// Stops the lanes of `partitions` from starting another `put` and waits for the ones in
    /// progress (blocking this thread: it runs inside the consumer's poll).
    fn quiesce(&self, partitions: &[(String, i32)]) {
        let controls: Vec<Arc<LaneControl>> = {
            let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
            partitions.iter().filter_map(|key| lanes.remove(key)).collect()
        };
        for c in &controls {
            c.revoked.store(true, Ordering::SeqCst);
        }
        tracing::info!(
            connector = %self.connector,
            "revoking {} partition(s): {}; waiting for their puts in progress",
            partitions.len(),
            names(partitions)
        );
        let wait = || {
            let started = Instant::now();
            while controls.iter().any(|c| c.busy.load(Ordering::SeqCst)) {
                if started.elapsed() > QUIESCE_LIMIT {
                    tracing::warn!(connector = %self.connector, "a revoked lane was still writing after {QUIESCE_LIMIT:?}; its records may be written twice");
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        // Other tasks (the lanes) move off this worker while it waits.
        match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(wait),
            _ => wait(),
        }
    }

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
            let partitions: Vec<(String, i32)> = list.elements().iter().map(|e| (e.topic().to_string(), e.partition())).collect();
            self.quiesce(&partitions);
            self.note(Change::Revoked(partitions));
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(list) => {
                self.note(Change::Assigned(list.elements().iter().map(|e| (e.topic().to_string(), e.partition())).collect()));
            }
            Rebalance::Error(e) => tracing::warn!(connector = %self.connector, "a consumer group rebalance failed: {e}"),
            Rebalance::Revoke(_) => {}
        }
    }
}
