//! The versions already emitted, so the overlap re-read does not emit them again.
//!
//! A version is `(timestamp, sys_id, sys_mod_count)`. Keys are kept exactly (a hash collision would
//! suppress a row that was never emitted, which is a lost row). The window forgets versions older
//! than the overlap ([`DedupWindow::forget_before`]) and holds at most `capacity` versions: when
//! full it drops the oldest, which can only cause a duplicate, never a loss.

use std::collections::BTreeSet;

use crate::time::Timestamp;

/// A bounded set of emitted row versions, ordered by timestamp.
#[derive(Debug, Clone)]
pub struct DedupWindow {
    seen: BTreeSet<(Timestamp, String, String)>,
    capacity: usize,
    evicted: u64,
}

impl DedupWindow {
    /// An empty window holding at most `capacity` versions.
    pub fn new(capacity: usize) -> Self {
        Self { seen: BTreeSet::new(), capacity: capacity.max(1), evicted: 0 }
    }

    /// Records a version; returns false if it was already there (a duplicate to suppress).
    pub fn insert(&mut self, ts: Timestamp, sys_id: &str, mod_count: &str) -> bool {
        let key = (ts, sys_id.to_string(), mod_count.to_string());
        if self.seen.contains(&key) {
            return false;
        }
        self.seen.insert(key);
        while self.seen.len() > self.capacity {
            self.seen.pop_first();
            self.evicted += 1;
        }
        true
    }

    /// Forgets every version stamped before `ts` (they cannot be read again).
    pub fn forget_before(&mut self, ts: Timestamp) {
        self.seen = self.seen.split_off(&(ts, String::new(), String::new()));
    }

    /// Versions held.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// Versions dropped because the window was full (each may be emitted twice).
    pub fn evicted(&self) -> u64 {
        self.evicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suppresses_repeats_forgets_old_and_stays_bounded() {
        let mut w = DedupWindow::new(3);
        assert!(w.insert(Timestamp(10), "a", "0"));
        assert!(!w.insert(Timestamp(10), "a", "0"), "the same version is a duplicate");
        assert!(w.insert(Timestamp(10), "a", "1"), "a new version is not");
        assert!(w.insert(Timestamp(12), "b", "0"));
        assert!(w.insert(Timestamp(13), "c", "0"));
        assert_eq!((w.len(), w.evicted()), (3, 1), "the oldest version was dropped");
        assert!(w.insert(Timestamp(10), "a", "0"), "once dropped it may be emitted again (a bounded duplicate)");
        w.forget_before(Timestamp(12));
        assert_eq!(w.len(), 2);
        assert!(!w.insert(Timestamp(13), "c", "0"));
    }
}
