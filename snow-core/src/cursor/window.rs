//! The window of the next list request, and how it moves past rows the integration user cannot
//! read.
//!
//! ServiceNow reads a window of `sysparm_limit` rows from `sysparm_offset` *before* ACLs, domain
//! separation or before-query rules drop the rows the user may not see. So an answer can hold
//! fewer rows than its limit — or none — while readable rows follow it. What follows the window is
//! known from the answer's `X-Total-Count` (the count before ACLs) or its `Link` header
//! (`rel="next"`); [`rows_follow`] reads either.
//!
//! A window that came back without a readable row while rows follow is *crossed*
//! ([`Window::crossed`]): its limit doubles up to the largest window, then it steps on by that
//! window with `sysparm_offset`. Offsets are used only inside one sweep, whose upper bound is
//! frozen, and never to page readable rows (ADR 0012).

/// How large windows may be, for one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSizes {
    /// The usual window: `batch.size`.
    pub batch: u32,
    /// The largest window a crossing grows to (`snow.hidden.window.max.rows`).
    pub max: u32,
    /// When the instance says nothing about the rows past a window (no `X-Total-Count`, no `Link`),
    /// a crossing gives up this many rows past the cursor (`snow.hidden.scan.max.rows`).
    pub scan_max_rows: u64,
}

impl WindowSizes {
    /// Windows of `batch` rows growing up to `max` (at least `batch`), giving up blind crossings
    /// after `scan_max_rows`.
    pub fn new(batch: u32, max: u32, scan_max_rows: u64) -> Self {
        let batch = batch.max(1);
        Self { batch, max: max.max(batch), scan_max_rows }
    }
}

/// One request's window: `limit` rows from `offset` past the cursor, counted before ACLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// `sysparm_limit`.
    pub limit: u32,
    /// `sysparm_offset` (0 except while crossing hidden rows).
    pub offset: u32,
}

impl Window {
    /// The usual window: `batch` rows right after the cursor.
    pub fn first(sizes: WindowSizes) -> Self {
        Self { limit: sizes.batch, offset: 0 }
    }

    /// The largest window, right after the cursor.
    pub fn widest(sizes: WindowSizes) -> Self {
        Self { limit: sizes.max, offset: 0 }
    }

    /// The window after this one came back without a readable row while rows follow it: twice as
    /// large (up to the largest window), then the next largest window along.
    pub fn crossed(self, sizes: WindowSizes) -> Self {
        if self.limit < sizes.max {
            Self { limit: self.limit.saturating_mul(2).min(sizes.max), offset: self.offset }
        } else {
            Self { limit: self.limit, offset: self.offset.saturating_add(self.limit) }
        }
    }

    /// This window moved back by `rows` (rows before it left the range, so later rows moved to
    /// earlier positions).
    pub fn back(self, rows: u64) -> Self {
        Self { limit: self.limit, offset: u32::try_from(u64::from(self.offset).saturating_sub(rows)).unwrap_or(0) }
    }

    /// How many rows past the cursor the window reaches: `offset + limit`.
    pub fn reach(self) -> u64 {
        u64::from(self.offset) + u64::from(self.limit)
    }
}

/// Whether rows matching the query follow `window`, counted before ACLs: from `X-Total-Count`
/// when the answer has it, else from its `Link` header; `None` when it has neither.
pub fn rows_follow(window: Window, total: Option<u64>, has_next: Option<bool>) -> Option<bool> {
    total.map(|t| t > window.reach()).or(has_next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crossing_doubles_then_steps_by_the_widest_window() {
        let sizes = WindowSizes::new(1000, 10_000, 1_000_000);
        let mut w = Window::first(sizes);
        let mut seen = Vec::new();
        for _ in 0..6 {
            w = w.crossed(sizes);
            seen.push((w.limit, w.offset));
        }
        assert_eq!(seen, [(2000, 0), (4000, 0), (8000, 0), (10_000, 0), (10_000, 10_000), (10_000, 20_000)]);
        assert_eq!(w.reach(), 30_000);
        assert_eq!(w.back(15_000), Window { limit: 10_000, offset: 5000 });
        assert_eq!(w.back(u64::MAX), Window { limit: 10_000, offset: 0 });
        assert_eq!(WindowSizes::new(5000, 2000, 1).max, 5000, "the widest window is never below the batch");
    }

    #[test]
    fn what_follows_comes_from_the_count_else_the_link() {
        let w = Window { limit: 100, offset: 200 };
        assert_eq!(rows_follow(w, Some(301), Some(false)), Some(true), "the count wins");
        assert_eq!(rows_follow(w, Some(300), None), Some(false));
        assert_eq!(rows_follow(w, None, Some(true)), Some(true));
        assert_eq!(rows_follow(w, None, None), None);
    }
}
