//! The versions already emitted, so the overlap re-read does not emit them again.
//!
//! A version is `(timestamp, sys_id, sys_mod_count)`. Keys are kept exactly (a hash collision would
//! suppress a row that was never emitted, which is a lost row). The window forgets versions older
//! than the overlap ([`DedupWindow::forget_before`]) and holds at most `capacity` versions: when
//! full it drops the oldest, which can only cause a duplicate, never a loss.
//!
//! Versions are kept sorted in a ring buffer: rows arrive in cursor order, so a new version is
//! almost always the greatest and is appended in constant time; a re-read one is found by binary
//! search. Only a version that became visible late (stamped before one already emitted) is
//! inserted in the middle, which moves the versions after it.

use std::collections::VecDeque;

use crate::time::Timestamp;

/// A sys_id or mod count kept without allocating when it has the usual shape (32 lowercase hex
/// digits, or a decimal number), and as text otherwise. Distinct texts give distinct keys.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Compact {
    Number(u128),
    Text(Box<str>),
}

impl Compact {
    fn id(text: &str) -> Self {
        let hex = text.len() == 32 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        match u128::from_str_radix(text, 16) {
            Ok(n) if hex => Self::Number(n),
            _ => Self::Text(text.into()),
        }
    }

    /// The text this was made from (`width`: the hex digits of a numeric id, 0 for a count).
    fn text(&self, width: usize) -> String {
        match self {
            Self::Number(n) if width > 0 => format!("{n:0width$x}"),
            Self::Number(n) => n.to_string(),
            Self::Text(t) => t.to_string(),
        }
    }

    fn count(text: &str) -> Self {
        // No leading zeros, so "01" and "1" stay distinct.
        let plain =
            !text.is_empty() && text.len() <= 38 && text.bytes().all(|b| b.is_ascii_digit()) && (text == "0" || !text.starts_with('0'));
        match text.parse() {
            Ok(n) if plain => Self::Number(n),
            _ => Self::Text(text.into()),
        }
    }
}

/// One version: `(timestamp, sys_id, sys_mod_count)`.
type Version = (Timestamp, Compact, Compact);

/// Bytes one remembered version takes (ids and counts of the usual shape allocate nothing more).
pub const VERSION_BYTES: usize = std::mem::size_of::<Version>();

/// A bounded set of emitted row versions, ordered by timestamp.
#[derive(Debug, Clone)]
pub struct DedupWindow {
    /// Sorted, without repeats.
    seen: VecDeque<Version>,
    capacity: usize,
    evicted: u64,
}

impl DedupWindow {
    /// An empty window holding at most `capacity` versions.
    pub fn new(capacity: usize) -> Self {
        Self { seen: VecDeque::new(), capacity: capacity.max(1), evicted: 0 }
    }

    /// Records a version; returns false if it was already there (a duplicate to suppress).
    pub fn insert(&mut self, ts: Timestamp, sys_id: &str, mod_count: &str) -> bool {
        let version = (ts, Compact::id(sys_id), Compact::count(mod_count));
        if self.seen.back().is_none_or(|last| *last < version) {
            self.seen.push_back(version);
        } else {
            match self.seen.binary_search(&version) {
                Ok(_) => return false,
                Err(at) => self.seen.insert(at, version),
            }
        }
        while self.seen.len() > self.capacity {
            self.seen.pop_front();
            self.evicted += 1;
        }
        true
    }

    /// Whether a version is held (without recording it).
    pub fn contains(&self, ts: Timestamp, sys_id: &str, mod_count: &str) -> bool {
        self.seen.binary_search(&(ts, Compact::id(sys_id), Compact::count(mod_count))).is_ok()
    }

    /// Forgets every version stamped before `ts` (they cannot be read again).
    pub fn forget_before(&mut self, ts: Timestamp) {
        let old = self.seen.partition_point(|(at, _, _)| *at < ts);
        self.seen.drain(..old);
    }

    /// Versions held.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// The versions held, oldest first, as the texts they were inserted with.
    pub fn versions(&self) -> impl DoubleEndedIterator<Item = (Timestamp, String, String)> + '_ {
        self.seen.iter().map(|(ts, id, count)| (*ts, id.text(32), count.text(0)))
    }

    /// The newest `max` versions held, oldest first: what a stored position carries so that a
    /// restart's re-read suppresses them without reading the topic back.
    pub fn recent(&self, max: usize) -> Vec<super::SeenVersion> {
        let mut seen: Vec<super::SeenVersion> =
            self.versions().rev().take(max).map(|(ts, id, mod_count)| super::SeenVersion { ts, id, mod_count }).collect();
        seen.reverse();
        seen
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

    #[test]
    fn compact_keys_keep_distinct_texts_distinct() {
        let mut w = DedupWindow::new(100);
        let id = "0123456789abcdef0123456789abcdef";
        assert!(w.insert(Timestamp(1), id, "7"));
        assert!(!w.insert(Timestamp(1), id, "7"));
        assert!(w.insert(Timestamp(1), &id.to_ascii_uppercase(), "7"), "an upper-case id is another text");
        assert!(w.insert(Timestamp(1), id, "07"), "a leading zero is another text");
        assert!(w.insert(Timestamp(1), id, ""));
        w.forget_before(Timestamp(1));
        assert_eq!(w.len(), 4, "forgetting before a timestamp keeps everything at it");
        let texts: Vec<(String, String)> = w.versions().map(|(_, id, count)| (id, count)).collect();
        for (text_id, count) in [(id, "7"), (id, "07"), (id, ""), (&*id.to_ascii_uppercase(), "7")] {
            assert!(texts.contains(&(text_id.to_string(), count.to_string())), "{text_id} {count} in {texts:?}");
        }
    }

    #[test]
    fn a_late_version_lands_in_order_and_is_found_again() {
        let mut w = DedupWindow::new(100);
        for (ts, id) in [(1, "a"), (3, "c"), (5, "e")] {
            assert!(w.insert(Timestamp(ts), id, "0"));
        }
        assert!(w.insert(Timestamp(2), "b", "0"), "stamped before the last one emitted: new");
        assert!(w.insert(Timestamp(4), "d", "0"));
        for (ts, id) in [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e")] {
            assert!(!w.insert(Timestamp(ts), id, "0"), "{id} is a duplicate wherever it sits");
        }
        w.forget_before(Timestamp(3));
        assert_eq!(w.len(), 3);
        assert!(w.insert(Timestamp(2), "b", "0"), "forgotten versions are not suppressed");
    }
}
