//! A parallel backfill (ADR 0033): a table read from its start in time slices at once, each a
//! bounded keyset sweep with its own cursor, stored together in the table's position
//! ([`BackfillPosition`]). The range is `[start, end]`, `end` being the high-water mark when the
//! backfill was planned; the streaming cursor goes on after it once every slice is done. A slice
//! that finishes while others still read takes the later half of the one with the most rows left
//! (the instance's count, before ACLs), so skewed tables keep every slice busy.
//!
//! **Per-key order.** The Table API returns a row only as it is now, so a slice reads an old
//! version of a row only from a request the instance answered before the update committed. An
//! update during the backfill stamps the row at or after its commit, above `end` (which was held
//! the safety lag below the instance's clock at the plan): only the streaming cursor reads it, and
//! that starts after every slice is done, through the same pipeline. The one exception is a
//! transaction committed more than the safety lag after its stamp, whose new version lands in the
//! last seconds before `end` while an older version may sit in another slice, both in requests
//! in flight at once: the [`Tail`] remembers the versions emitted in the overlap before `end` and
//! drops an older version of one of those rows that a slower slice brings later. (A commit later
//! than the overlap is a late row any sweep may miss; docs/delivery.md states the bound.)

use std::collections::BTreeMap;

use crate::cursor::position::{BackfillPosition, SeenVersion, SlicePosition};
use crate::cursor::{Cursor, Sweep, SweepRequest, WindowSizes};
use crate::time::Timestamp;

/// A slice being read.
pub struct Slice {
    /// Everything in the slice at or before this was emitted: where a restart resumes.
    pub high: Cursor,
    /// The slice's bounded sweep.
    pub sweep: Sweep,
    /// Rows left in the slice by the latest count (before ACLs), less those read since.
    remaining: Option<u64>,
}

impl Slice {
    fn new(high: Cursor, to: Timestamp, sizes: WindowSizes) -> Self {
        Self { sweep: Sweep::bounded(high.clone(), to, sizes), high, remaining: None }
    }

    /// The slice's last second.
    pub fn to(&self) -> Timestamp {
        self.sweep.bound().expect("a slice's sweep is bounded")
    }

    /// Takes what a page said: `total` (the count of the step's rows, when asked for an advance
    /// step's first window) and how many rows it held.
    pub fn counted(&mut self, total: Option<u64>, advance: bool, rows: usize) {
        self.remaining = match total.filter(|_| advance) {
            Some(total) => Some(total.saturating_sub(rows as u64)),
            None => self.remaining.map(|r| r.saturating_sub(rows as u64)),
        };
    }

    /// Moves the slice's position to `(ts, id)` when that is further.
    pub fn emitted(&mut self, ts: Timestamp, id: &str) {
        if (ts, id) > (self.high.ts, self.high.id.as_str()) {
            self.high = Cursor { ts, id: id.to_string() };
        }
    }
}

/// A slice split in two while its request was in flight: that request (made with the old bound)
/// must be abandoned.
pub struct Split {
    /// The request the slice had in flight, if it had made one.
    pub abandoned: Option<SweepRequest>,
    /// The slice split, as it was: where it had got to and its last second.
    pub at: Cursor,
    /// Its last second before the split.
    pub to: Timestamp,
    /// Its new last second (the new slice reads from the next one).
    pub mid: Timestamp,
}

/// The versions emitted in the overlap before the backfill's end: the order guard during the
/// backfill, and what the first streaming sweep (and, carried in the position, a restart's)
/// must not emit again.
pub struct Tail {
    from: Timestamp,
    /// sys_id → the latest version emitted `(ts, mod_count)`.
    versions: BTreeMap<String, (Timestamp, String)>,
    capacity: usize,
    /// Versions not remembered because the tail was full.
    overflowed: u64,
}

impl Tail {
    /// Whether the version `(ts, id, mod_count)` may be emitted: not when a newer version of the
    /// row was (it came from a slice's request answered before the row's update). Remembers it
    /// when it lies in the tail.
    pub fn admit(&mut self, ts: Timestamp, id: &str, mod_count: &str) -> bool {
        if let Some((seen_ts, seen_count)) = self.versions.get(id)
            && (*seen_ts, count(seen_count)) >= (ts, count(mod_count))
        {
            return false;
        }
        if ts >= self.from {
            if self.versions.len() >= self.capacity && !self.versions.contains_key(id) {
                self.overflowed += 1;
            } else {
                self.versions.insert(id.to_string(), (ts, mod_count.to_string()));
            }
        }
        true
    }

    /// The versions remembered, for the streaming cursor's dedup window.
    pub fn versions(&self) -> Vec<SeenVersion> {
        self.versions.iter().map(|(id, (ts, mod_count))| SeenVersion { ts: *ts, id: id.clone(), mod_count: mod_count.clone() }).collect()
    }

    /// Whether every version of the tail was remembered.
    pub fn complete(&self) -> bool {
        self.overflowed == 0
    }
}

/// A mod count as a number when it is one (so 10 follows 9), else 0.
fn count(text: &str) -> u64 {
    text.parse().unwrap_or(0)
}

/// What a backfill reads: `[start, end]`, its rows beginning at second `first`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// The table's start.
    pub start: Timestamp,
    /// The first row's second (rows before it, should any commit late, go to the first slice).
    pub first: Timestamp,
    /// The high-water mark when the backfill was planned.
    pub end: Timestamp,
}

/// A backfill in progress.
pub struct Backfill {
    end: Timestamp,
    slices: Vec<Slice>,
    parallelism: usize,
    sizes: WindowSizes,
    /// The guard and dedup seed of the overlap before `end`.
    pub tail: Tail,
    /// Slices split so far.
    splits: u64,
    /// The cursor fields (timestamp, id): what a slice's request is made of.
    fields: (String, String),
}

/// Most versions the tail remembers (about 60 bytes each in a stored position).
pub const TAIL_CAPACITY: usize = 5_000;

impl Backfill {
    /// Plans the backfill of `[start, end]` in `parallelism` slices of equal time from `first` (the
    /// first row's second; rows before it go to the first slice). `overlap`: the seconds before
    /// `end` the streaming cursor reads again.
    pub fn plan(range: Range, parallelism: u32, sizes: WindowSizes, overlap: u32, fields: (String, String)) -> Self {
        let Range { start, first, end } = range;
        let first = first.max(start).min(end);
        let span = end.0 - first.0 + 1;
        let n = i64::from(parallelism.max(1)).min(span);
        let mut slices = Vec::with_capacity(n as usize);
        for k in 0..n {
            let from = if k == 0 { start } else { Timestamp(first.0 + k * span / n) };
            let to = Timestamp(first.0 + (k + 1) * span / n - 1);
            slices.push(Slice::new(Cursor::before(from), to, sizes));
        }
        Self::with(end, slices, parallelism, sizes, overlap, fields)
    }

    /// Resumes a stored backfill.
    pub fn resume(position: &BackfillPosition, parallelism: u32, sizes: WindowSizes, overlap: u32, fields: (String, String)) -> Self {
        let slices = position.slices.iter().map(|s| Slice::new(s.cursor.clone(), s.to, sizes)).collect();
        let mut backfill = Self::with(position.end, slices, parallelism, sizes, overlap, fields);
        // The tail emitted by earlier runs: the guard and the hand-over's dedup seed need it.
        for v in &position.seen {
            backfill.tail.admit(v.ts, &v.id, &v.mod_count);
        }
        // Fewer slices left than allowed: split at once.
        while backfill.split().is_some() {}
        backfill
    }

    fn with(end: Timestamp, slices: Vec<Slice>, parallelism: u32, sizes: WindowSizes, overlap: u32, fields: (String, String)) -> Self {
        let tail =
            Tail { from: end.plus_seconds(1 - i64::from(overlap)), versions: BTreeMap::new(), capacity: TAIL_CAPACITY, overflowed: 0 };
        Self { end, slices, parallelism: parallelism.max(1) as usize, sizes, tail, splits: 0, fields }
    }

    /// The last second the backfill reads.
    pub fn end(&self) -> Timestamp {
        self.end
    }

    /// The slices still reading, in time order.
    pub fn slices(&self) -> &[Slice] {
        &self.slices
    }

    /// The slices a request is kept in flight for: the first `backfill.parallelism` in time order
    /// (a backfill resumed with a lower parallelism than it stored reads its earliest slices first,
    /// the others as those finish).
    pub fn reading(&self) -> &[Slice] {
        &self.slices[..self.slices.len().min(self.parallelism)]
    }

    /// Slice `i`.
    pub fn slice_mut(&mut self, i: usize) -> &mut Slice {
        &mut self.slices[i]
    }

    /// Slices split so far.
    pub fn splits(&self) -> u64 {
        self.splits
    }

    /// Whether every slice is done.
    pub fn is_done(&self) -> bool {
        self.slices.is_empty()
    }

    /// The furthest position every row before which was surely read: the first slice's.
    pub fn low(&self) -> Cursor {
        self.slices.first().map_or_else(|| Cursor::before(self.end.plus_seconds(1)), |s| s.high.clone())
    }

    /// Slice `i` read its range: it goes, and a slice with many rows left is split for the
    /// parallelism freed. Returns the splits made (their requests in flight to abandon).
    pub fn finished(&mut self, i: usize) -> Vec<Split> {
        self.slices.remove(i);
        let mut splits = Vec::new();
        while let Some(split) = self.split() {
            splits.push(split);
        }
        splits
    }

    /// Splits the slice with the most rows left (unknown counts as many), when fewer slices read
    /// than allowed and it spans at least two seconds and more than two pages.
    fn split(&mut self) -> Option<Split> {
        if self.slices.len() >= self.parallelism {
            return None;
        }
        let pages = 2 * u64::from(self.sizes.batch);
        let (i, _) = self
            .slices
            .iter()
            .enumerate()
            .filter(|(_, s)| s.to().0 - s.sweep.cursor().ts.0 >= 2 && s.remaining.is_none_or(|r| r > pages))
            .max_by_key(|(_, s)| (s.remaining.unwrap_or(u64::MAX), s.to().0 - s.sweep.cursor().ts.0))?;
        let slice = &mut self.slices[i];
        let at = slice.sweep.cursor().ts;
        let to = slice.to();
        let mid = Timestamp(at.0 + (to.0 - at.0) / 2);
        let abandoned = slice.sweep.next_request(&self.fields.0, &self.fields.1).ok();
        slice.sweep.lower_bound(mid);
        slice.remaining = slice.remaining.map(|r| r / 2);
        let mut later = Slice::new(Cursor::before(mid.plus_seconds(1)), to, self.sizes);
        later.remaining = slice.remaining;
        self.slices.insert(i + 1, later);
        self.splits += 1;
        Some(Split { abandoned, at: self.slices[i].high.clone(), to, mid })
    }

    /// The stored form of where the backfill is.
    pub fn position(&self) -> BackfillPosition {
        BackfillPosition {
            end: self.end,
            slices: self.slices.iter().map(|s| SlicePosition { cursor: s.high.clone(), to: s.to() }).collect(),
            seen: self.tail.versions(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes() -> WindowSizes {
        WindowSizes::new(10, 10, 100)
    }

    fn fields() -> (String, String) {
        ("sys_updated_on".into(), "sys_id".into())
    }

    fn plan(start: i64, first: i64, end: i64, n: u32) -> Backfill {
        Backfill::plan(Range { start: Timestamp(start), first: Timestamp(first), end: Timestamp(end) }, n, sizes(), 30, fields())
    }

    #[test]
    fn a_plan_covers_the_range_once_in_equal_slices_from_the_first_row() {
        let b = plan(0, 1_000, 1_999, 4);
        let ranges: Vec<(Cursor, Timestamp)> = b.slices().iter().map(|s| (s.high.clone(), s.to())).collect();
        assert_eq!(
            ranges,
            vec![
                (Cursor::before(Timestamp(0)), Timestamp(1_249)),
                (Cursor::before(Timestamp(1_250)), Timestamp(1_499)),
                (Cursor::before(Timestamp(1_500)), Timestamp(1_749)),
                (Cursor::before(Timestamp(1_750)), Timestamp(1_999)),
            ]
        );
        let narrow = plan(0, 10, 11, 8);
        assert_eq!(narrow.slices().len(), 2, "no more slices than seconds");
    }

    #[test]
    fn a_finished_slice_splits_the_one_with_most_rows_left_and_positions_round_trip() {
        let mut b = plan(0, 0, 399, 2);
        b.slice_mut(1).counted(Some(500), true, 10);
        let splits = b.finished(0);
        assert_eq!(splits.len(), 1, "the slice freed reads half of the other");
        assert_eq!(b.slices().len(), 2);
        assert_eq!(
            (b.slices()[0].to(), b.slices()[1].high.clone(), b.slices()[1].to()),
            (Timestamp(299), Cursor::before(Timestamp(300)), Timestamp(399))
        );
        let stored = crate::cursor::position::Position::parse(&b.position().to_position()).unwrap();
        let crate::cursor::position::Position::Backfill(position) = stored else { panic!("a backfill position") };
        assert_eq!(position, b.position());
        let resumed = Backfill::resume(&position, 2, sizes(), 30, fields());
        assert_eq!(resumed.position(), b.position(), "resumed as stored: already as many slices as allowed");
        let mut tailed = b.position();
        tailed.seen.push(SeenVersion { ts: Timestamp(390), id: "r".into(), mod_count: "2".into() });
        let text = tailed.to_position();
        let crate::cursor::position::Position::Backfill(back) = crate::cursor::position::Position::parse(&text).unwrap() else { panic!() };
        let mut resumed_tail = Backfill::resume(&back, 2, sizes(), 30, fields());
        assert!(!resumed_tail.tail.admit(Timestamp(5), "r", "1"), "the tail of an earlier run guards and seeds this one");
        assert_eq!(resumed_tail.position().seen, tailed.seen);
        let wider = Backfill::resume(&position, 4, sizes(), 30, fields());
        assert_eq!(wider.slices().len(), 4, "more parallelism on resume splits at once");
        let narrower = Backfill::resume(&position, 1, sizes(), 30, fields());
        assert_eq!((narrower.slices().len(), narrower.reading().len()), (2, 1), "less parallelism: the stored slices read one at a time");
        assert_eq!(narrower.reading()[0].to(), Timestamp(299), "the earliest first");
    }

    #[test]
    fn the_tail_drops_an_older_version_of_a_row_already_emitted_newer() {
        let mut b = plan(0, 0, 100, 2);
        assert!(b.tail.admit(Timestamp(95), "r", "3"), "a version in the tail");
        assert!(!b.tail.admit(Timestamp(10), "r", "2"), "an older version brought later by a slower slice");
        assert!(b.tail.admit(Timestamp(10), "other", "0"));
        assert!(b.tail.admit(Timestamp(96), "r", "4"), "a newer one goes");
        assert_eq!(b.tail.versions().len(), 1, "only versions in the overlap before the end are remembered");
        assert!(b.tail.complete());
    }
}
