//! Hot-swap: one connector's component version, replaceable while its units run.
//!
//! The runner publishes a new version into the connector's [`Versions`] once it is verified, compiled,
//! pre-instantiated and has validated the connector's configuration, all off the units' path.
//! Each unit holds a [`VersionWatch`] and looks for a newer version only at its batch boundary (a
//! source table right after its offset was stored, a sink lane right after a put's outcomes were
//! committed), then opens the new version at exactly that offset. A unit whose new version traps
//! in its open or its first calls ([`PROBATION_CALLS`]) rejects it, and the connector goes back to the version
//! before it for every unit. Instance state is never carried over: everything a unit needs to
//! continue lives in the host (offsets).

use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// Successful calls after a swap (polls or puts; the open before them is on probation too) until
/// which a trap of the new version rolls the connector back to the version before it, instead of
/// counting against the trap budget.
pub const PROBATION_CALLS: u32 = 3;

/// One published version of a connector's component.
pub struct Version<P> {
    /// The pre-instantiated component.
    pub pre: P,
    /// SHA-256 of the `.wasm` it was compiled from.
    pub digest: String,
    /// Where it was read from.
    pub path: String,
    /// Counts publications (rollbacks included), from 0 for the version the connector started with.
    pub generation: u64,
}

impl<P> Version<P> {
    /// The digest's first 12 characters, as logs show it.
    pub fn short(&self) -> &str {
        &self.digest[..self.digest.len().min(12)]
    }
}

struct History<P> {
    /// The version before the current one, to go back to.
    previous: Option<Arc<Version<P>>>,
    generation: u64,
}

/// A connector's current version, shared by the runner (who publishes) and its units.
pub struct Versions<P> {
    tx: watch::Sender<Arc<Version<P>>>,
    history: Mutex<History<P>>,
}

impl<P> Versions<P> {
    /// A versions holding the version the connector starts with.
    pub fn new(pre: P, digest: &str, path: &str) -> Arc<Self> {
        let first = Arc::new(Version { pre, digest: digest.to_string(), path: path.to_string(), generation: 0 });
        let (tx, _) = watch::channel(first);
        Arc::new(Self { tx, history: Mutex::new(History { previous: None, generation: 0 }) })
    }

    /// The current version.
    pub fn current(&self) -> Arc<Version<P>> {
        self.tx.borrow().clone()
    }

    /// Makes `pre` the current version; every unit takes it at its next batch boundary.
    pub fn publish(&self, pre: P, digest: &str, path: &str) -> Arc<Version<P>> {
        let mut history = self.history.lock().unwrap_or_else(|e| e.into_inner());
        history.generation += 1;
        let version = Arc::new(Version { pre, digest: digest.to_string(), path: path.to_string(), generation: history.generation });
        history.previous = Some(self.tx.send_replace(version.clone()));
        version
    }

    /// A unit found that `rejected` traps: unless something newer was published meanwhile, the
    /// version before it becomes current again (as a new generation) and is returned.
    pub fn reject(&self, rejected: &Version<P>) -> Option<Arc<Version<P>>>
    where
        P: Clone,
    {
        let mut history = self.history.lock().unwrap_or_else(|e| e.into_inner());
        if self.tx.borrow().generation != rejected.generation {
            return None;
        }
        let back = history.previous.take()?;
        history.generation += 1;
        let restored = Arc::new(Version {
            pre: back.pre.clone(),
            digest: back.digest.clone(),
            path: back.path.clone(),
            generation: history.generation,
        });
        self.tx.send_replace(restored.clone());
        Some(restored)
    }

    /// A follower starting at the current version.
    pub fn watch(self: &Arc<Self>) -> VersionWatch<P> {
        let mut rx = self.tx.subscribe();
        let current = rx.borrow_and_update().clone();
        VersionWatch { versions: self.clone(), rx, current, probation: 0 }
    }
}

/// A unit's view of its connector's version.
pub struct VersionWatch<P> {
    versions: Arc<Versions<P>>,
    rx: watch::Receiver<Arc<Version<P>>>,
    current: Arc<Version<P>>,
    /// Calls left in which a trap rejects the current version (after a swap).
    probation: u32,
}

impl<P: Clone> VersionWatch<P> {
    /// The version the unit runs.
    pub fn current(&self) -> &Arc<Version<P>> {
        &self.current
    }

    /// At a batch boundary: the version published since the unit took its current one, which it
    /// now runs (on probation for its first calls); none when there is none.
    pub fn newer(&mut self) -> Option<Arc<Version<P>>> {
        if !self.rx.has_changed().unwrap_or(false) {
            return None;
        }
        let next = self.rx.borrow_and_update().clone();
        if next.generation == self.current.generation {
            return None;
        }
        self.current = next.clone();
        self.probation = PROBATION_CALLS;
        Some(next)
    }

    /// A call of the current version succeeded.
    pub fn succeeded(&mut self) {
        self.probation = self.probation.saturating_sub(1);
    }

    /// The current version trapped: while on probation, it is rejected for the whole connector and
    /// the version the unit should run now is returned (the one before it, or a newer one).
    pub fn trapped(&mut self) -> Option<Arc<Version<P>>> {
        if self.probation == 0 {
            return None;
        }
        self.probation = 0;
        self.versions.reject(&self.current);
        self.newer()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn followers_take_a_new_version_once_and_a_trap_on_probation_rolls_every_unit_back() {
        let versions = Versions::new("a", "aaaa", "a.wasm");
        let (mut one, mut two) = (versions.watch(), versions.watch());
        assert!(one.newer().is_none(), "nothing published yet");
        versions.publish("b", "bbbb", "b.wasm");
        assert_eq!(one.newer().map(|v| v.pre), Some("b"));
        assert!(one.newer().is_none(), "taken once");
        assert_eq!(two.newer().map(|v| v.pre), Some("b"));
        // Unit one's calls on b: one success, then a trap while still on probation.
        one.succeeded();
        let back = one.trapped().expect("rolled back");
        assert_eq!((back.pre, back.generation), ("a", 2));
        assert_eq!(two.newer().map(|v| v.pre), Some("a"), "the other unit follows the rollback");
        assert!(two.trapped().is_none(), "the restored version has nothing before it to go back to");
        assert_eq!(versions.current().pre, "a");
    }

    #[test]
    fn a_trap_after_probation_is_the_trap_budgets_and_a_stale_rejection_changes_nothing() {
        let versions = Versions::new("a", "aaaa", "a.wasm");
        let mut unit = versions.watch();
        versions.publish("b", "bbbb", "b.wasm");
        unit.newer();
        for _ in 0..PROBATION_CALLS {
            unit.succeeded();
        }
        assert!(unit.trapped().is_none(), "b survived its probation");
        let b = versions.current();
        versions.publish("c", "cccc", "c.wasm");
        assert!(versions.reject(&b).is_none(), "b is no longer current: rejecting it does nothing");
        assert_eq!(versions.current().pre, "c");
    }
}
