//! One sweep over a table: from the cursor up to a high-water mark fixed when the sweep starts.
//!
//! Two query shapes, both ordered by the cursor:
//! * **drain** the cursor's second: `ts = T ^ id > S ^ ORDERBY id`;
//! * **advance** through later seconds: `ts > T ^ ts <= HWM ^ ORDERBY ts ^ ORDERBY id`.
//!
//! A sweep starts with a drain; its answer's `Date` header fixes `HWM = server clock − lag` for the
//! whole sweep, so rows written during the sweep are read by the next one. If the cursor's own
//! second is not yet below the HWM, the drain's rows are dropped unread and the sweep ends: that
//! second is still being written.
//!
//! **Whether rows follow a window.** ServiceNow applies `sysparm_limit` *before* ACLs, so a window
//! can come back short, or empty, while readable rows follow it ([`super::window`]). A window that
//! came back full, or that the answer says rows follow (`X-Total-Count`, `Link`), goes on after its
//! last readable row; one that is known to end the step's range ends the step (drain → advance,
//! advance → the sweep is done). The count costs the instance a count query over the rest of the
//! range, so only the first window of a step, a window asked again after it came back empty, and
//! the windows of a crossing ask for it; windows chained after one that returned rows do not (an
//! empty one is asked again with the count). A full (or followed) advance window
//! that spans several seconds is emitted up to the end of its second-to-last second (those seconds
//! are complete: rows come ordered by timestamp) and the sweep advances from there, so its last
//! second is read again whole by the next advance window instead of costing a drain request; one
//! inside a single second (a bulk second) is drained by sys_id.
//!
//! **Crossing hidden rows.** A window without a readable row while rows follow it is crossed: it
//! grows, then steps on with `sysparm_offset` inside the sweep's frozen bound until a readable row
//! turns up or the range ends. Rows leaving the range meanwhile (an update moves a row past the HWM)
//! shift later rows to earlier positions: a smaller count steps the window back by as many. When the
//! instance says nothing about what follows (no count, no `Link`), one descending keys-only request
//! asks whether any readable row lies above the cursor: if none, the step is done; if one does, the
//! crossing steps on until it is found (or [`WindowSizes::scan_max_rows`] rows are passed).
//! ADR 0012 has the reasoning.
//!
//! Longer than our 600-line mark with its unit tests (the code is ~400 lines): the two query
//! shapes and the boundary cases they must agree on are tested next to them.

use super::position::Cursor;
use super::window::{Window, WindowSizes, rows_follow};
use crate::table::query::{Op, Term};
use crate::time::Timestamp;

/// Which query shape the next request uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepStep {
    /// Rows of the cursor's second after the cursor's id.
    Drain,
    /// Rows of later seconds up to the high-water mark.
    Advance,
}

/// The next request of a sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepRequest {
    /// The cursor terms (ANDed onto the table's query).
    pub terms: Vec<Term>,
    /// Ordering fields, highest priority first; a `DESC` prefix orders descending.
    pub order: Vec<String>,
    /// `sysparm_limit` and `sysparm_offset`.
    pub window: Window,
    /// Ask for `X-Total-Count` and `Link`.
    pub count: bool,
    /// Only the cursor fields are needed (the descending look above the cursor).
    pub keys_only: bool,
}

/// What an answer carried besides its rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Answer {
    /// Rows in the answer, including any the caller could not key (they still filled the window).
    pub returned: usize,
    /// `X-Total-Count`: rows matching the query before ACLs.
    pub total: Option<u64>,
    /// Whether the `Link` header offered a next page (`None`: no `Link` header).
    pub has_next: Option<bool>,
    /// `Date`: ServiceNow's clock.
    pub server_time: Option<Timestamp>,
}

/// What to do with a page after [`Sweep::observe`] checked it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed {
    /// How many of the page's rows to emit (the first `emit`; 0 when the page was dropped).
    pub emit: usize,
    /// True when the sweep is done: wait for the poll interval before the next one.
    pub done: bool,
}

/// What the latest finished sweep found about rows it could not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hidden {
    /// Nothing stopped the cursor.
    None,
    /// Every one of the `n` rows after the cursor up to the high-water mark is hidden from the
    /// integration user (counted by the instance before ACLs).
    Rest(u64),
    /// A readable row lies above the cursor, but none turned up within
    /// [`WindowSizes::scan_max_rows`] rows and the instance says nothing about what follows.
    ScanLimit(u64),
}

/// A crossing of rows hidden from the user: the count of its latest answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Crossing {
    total: Option<u64>,
}

/// The state of the current sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sweep {
    cursor: Cursor,
    step: SweepStep,
    high_water: Option<Timestamp>,
    /// The high-water mark of the latest finished sweep: every row up to it has been read.
    read_up_to: Option<Timestamp>,
    lag_seconds: i64,
    sizes: WindowSizes,
    window: Window,
    /// Ask for the count on the next request.
    count: bool,
    crossing: Option<Crossing>,
    /// The next request looks for readable rows above the cursor (descending, keys only).
    look_above: bool,
    hidden: Hidden,
    /// A later high-water mark the next sweep may use, up to the server clock (a push
    /// notification's stamp: [`Sweep::raise_next_high_water`]).
    raise: Option<Timestamp>,
    /// A fixed high-water mark (a backfill slice's last second): the sweep reads up to it
    /// whatever the server clock says ([`Sweep::bounded`]).
    bound: Option<Timestamp>,
}

impl Sweep {
    /// A sweep state starting at `cursor`, holding the high-water mark `lag_seconds` back, with
    /// windows of `sizes`.
    pub fn new(cursor: Cursor, lag_seconds: u32, sizes: WindowSizes) -> Self {
        Self {
            cursor,
            step: SweepStep::Drain,
            high_water: None,
            read_up_to: None,
            lag_seconds: i64::from(lag_seconds),
            sizes,
            window: Window::first(sizes),
            count: true,
            crossing: None,
            look_above: false,
            hidden: Hidden::None,
            raise: None,
            bound: None,
        }
    }

    /// A sweep from `cursor` up to and including second `to`, whatever the server clock: a
    /// backfill slice, whose end was below the high-water mark when the backfill was planned.
    pub fn bounded(cursor: Cursor, to: Timestamp, sizes: WindowSizes) -> Self {
        Self { bound: Some(to), ..Self::new(cursor, 0, sizes) }
    }

    /// Lowers a bounded sweep's last second to `to` (a slice split in two). The request in
    /// flight, if any, was made with the old bound: its answer must not be observed (ask again).
    pub fn lower_bound(&mut self, to: Timestamp) {
        self.bound = Some(self.bound.map_or(to, |b| b.min(to)));
        if let Some(hwm) = self.high_water {
            self.high_water = Some(hwm.min(to));
        }
    }

    /// A bounded sweep's last second.
    pub fn bound(&self) -> Option<Timestamp> {
        self.bound
    }

    /// Lets the next sweep (or the current one, before its first answer fixed its mark) read up
    /// to `ts` when that is later than the server clock minus the lag, but never past the server
    /// clock: the host learnt that rows up to `ts` were committed (ADR 0032). Rows stamped earlier
    /// that commit later are read by the overlap re-read, as for any sweep.
    pub fn raise_next_high_water(&mut self, ts: Timestamp) {
        self.raise = Some(self.raise.map_or(ts, |r| r.max(ts)));
    }

    /// Starts the next sweep at `cursor` (the overlap start, which may be behind the walk so far).
    /// Only between sweeps: after a page that ended the sweep, or before the first.
    pub fn restart_from(&mut self, cursor: Cursor) {
        debug_assert!(self.step == SweepStep::Drain && self.high_water.is_none(), "restart_from inside a sweep");
        self.cursor = cursor;
    }

    /// Where the walk has got to in the current sweep.
    pub fn cursor(&self) -> &Cursor {
        &self.cursor
    }

    /// The shape of the next request.
    pub fn step(&self) -> SweepStep {
        self.step
    }

    /// The current sweep's high-water mark, once known.
    pub fn high_water(&self) -> Option<Timestamp> {
        self.high_water
    }

    /// The high-water mark of the latest finished sweep (every row up to it has been read).
    pub fn read_up_to(&self) -> Option<Timestamp> {
        self.read_up_to
    }

    /// What the latest finished sweep found about rows it could not read.
    pub fn hidden(&self) -> Hidden {
        self.hidden
    }

    /// The next request: cursor terms, order, window, and whether to ask for the count.
    pub fn next_request(&self, timestamp_field: &str, id_field: &str) -> Result<SweepRequest, String> {
        let ts = self.cursor.ts.to_string();
        let (terms, order) = match (self.step, self.high_water) {
            (SweepStep::Drain, _) => {
                let mut terms = vec![Term::new(timestamp_field, Op::Eq, &ts)?];
                if !self.cursor.id.is_empty() {
                    terms.push(Term::new(id_field, Op::Gt, &self.cursor.id)?);
                }
                (terms, vec![id_field.to_string()])
            }
            (SweepStep::Advance, Some(hwm)) => (
                vec![Term::new(timestamp_field, Op::Gt, &ts)?, Term::new(timestamp_field, Op::Le, &hwm.to_string())?],
                vec![timestamp_field.to_string(), id_field.to_string()],
            ),
            (SweepStep::Advance, None) => return Err("advance step without a high-water mark".into()),
        };
        if self.look_above {
            let order = order.iter().map(|f| format!("DESC{f}")).collect();
            return Ok(SweepRequest { terms, order, window: Window::widest(self.sizes), count: false, keys_only: true });
        }
        Ok(SweepRequest { terms, order, window: self.window, count: self.count, keys_only: false })
    }

    /// Checks a page answered to [`Self::next_request`] and moves the cursor, the step and the
    /// window.
    ///
    /// `rows` are the page's cursor keys in page order. Fails if a row breaks the cursor order,
    /// which means ServiceNow did not apply the query as sent (non-UTC user, ignored term or
    /// ORDERBY).
    pub fn observe(&mut self, rows: &[(Timestamp, &str)], answer: Answer) -> Result<Observed, String> {
        let hwm = match (self.high_water, self.bound) {
            (Some(hwm), _) => hwm,
            (None, Some(bound)) => {
                self.high_water = Some(bound);
                bound
            }
            (None, None) => {
                let now = answer.server_time.ok_or("the answer has no Date header, so the high-water mark cannot be set")?;
                let lagged = now.plus_seconds(-self.lag_seconds);
                let hwm = self.raise.take().map_or(lagged, |raised| lagged.max(raised.min(now)));
                self.high_water = Some(hwm);
                hwm
            }
        };
        if self.step == SweepStep::Drain && self.cursor.ts > hwm {
            return Ok(self.finish(0, Hidden::None));
        }
        if std::mem::take(&mut self.look_above) {
            self.check_order(rows.iter().rev(), hwm)?;
            if rows.is_empty() {
                // No readable row above the cursor: whatever the window held is hidden, or nothing is.
                return Ok(self.step_done(0, Hidden::None));
            }
            self.crossing = Some(Crossing { total: None });
            self.window = self.window.crossed(self.sizes);
            return Ok(Observed { emit: 0, done: false });
        }
        self.check_order(rows.iter(), hwm)?;
        let window = self.window;
        let full = answer.returned >= window.limit as usize;
        if full && rows.is_empty() {
            return Err(format!(
                "a full page of {} rows had no row with a usable id and timestamp after {} {}: the cursor cannot move past them",
                answer.returned, self.cursor.ts, self.cursor.id
            ));
        }
        let asked = self.count;
        let follow = rows_follow(window, answer.total, answer.has_next);
        if let Some(crossing) = &mut self.crossing {
            let before = crossing.total;
            crossing.total = answer.total.or(before);
            if let (Some(before), Some(now)) = (before, answer.total)
                && now < before
                && window.offset > 0
            {
                // Rows before the window left the range: later rows moved to earlier positions.
                self.window = window.back(before - now);
                return Ok(Observed { emit: 0, done: false });
            }
        }
        if !rows.is_empty() && follow != Some(false) {
            // Rows follow the window, or may: go on after its last readable row. The next window
            // skips the count: should it come back empty, it is asked again with the count.
            self.count = false;
            self.window = Window::first(self.sizes);
            self.crossing = None;
            return Ok(self.window_read(rows));
        }
        if let Some(&(ts, id)) = rows.last() {
            // The step's range is read.
            self.cursor = Cursor { ts, id: id.to_string() };
            return Ok(self.step_done(rows.len(), Hidden::None));
        }
        // No readable row in the window.
        match follow {
            Some(false) => {
                let rest = answer.total.unwrap_or(0);
                Ok(self.step_done(0, if rest > 0 { Hidden::Rest(rest) } else { Hidden::None }))
            }
            Some(true) => {
                self.crossing.get_or_insert(Crossing { total: answer.total });
                self.count = true;
                self.window = window.crossed(self.sizes);
                Ok(Observed { emit: 0, done: false })
            }
            // Chained after a window that returned rows, so asked without the count: again, with it.
            None if !asked => {
                self.count = true;
                Ok(Observed { emit: 0, done: false })
            }
            None if self.crossing.is_some() => {
                if window.reach() >= self.sizes.scan_max_rows {
                    let reach = window.reach();
                    return Ok(self.step_done(0, Hidden::ScanLimit(reach)));
                }
                self.window = window.crossed(self.sizes);
                Ok(Observed { emit: 0, done: false })
            }
            // The instance says nothing about what follows: look above the cursor.
            None => {
                self.look_above = true;
                Ok(Observed { emit: 0, done: false })
            }
        }
    }

    /// Fails unless `rows` (in the step's order) are inside the step's range and strictly after
    /// one another and the cursor.
    fn check_order<'a>(&self, rows: impl Iterator<Item = &'a (Timestamp, &'a str)>, hwm: Timestamp) -> Result<(), String> {
        let mut last: (Timestamp, &str) = (self.cursor.ts, self.cursor.id.as_str());
        for &(ts, id) in rows {
            let in_shape = match self.step {
                SweepStep::Drain => ts == self.cursor.ts,
                SweepStep::Advance => ts > self.cursor.ts && ts <= hwm,
            };
            if !in_shape || (ts, id) <= last {
                return Err(format!(
                    "row {id} at {ts} is out of cursor order ({:?} step after {} {}, high-water mark {hwm}): ServiceNow did not apply \
                     the cursor query as sent. Check that the integration user's time zone is UTC and that the instance honours ORDERBY",
                    self.step, last.0, last.1
                ));
            }
            last = (ts, id);
        }
        Ok(())
    }

    /// A window whose rows are followed by more (or may be): emit them and go on after them.
    fn window_read(&mut self, rows: &[(Timestamp, &str)]) -> Observed {
        let last_second = rows.last().map(|(ts, _)| *ts);
        let in_last_second = rows.iter().rev().take_while(|(ts, _)| Some(*ts) == last_second).count();
        if self.step == SweepStep::Advance && in_last_second < rows.len() {
            // Emit the complete seconds; the last one is read again whole by the next advance window.
            let emit = rows.len() - in_last_second;
            let (ts, id) = rows[emit - 1];
            self.cursor = Cursor { ts, id: id.to_string() };
            return Observed { emit, done: false };
        }
        if let Some(&(ts, id)) = rows.last() {
            self.cursor = Cursor { ts, id: id.to_string() };
        }
        // Inside one second: drain it by id.
        self.step = SweepStep::Drain;
        Observed { emit: rows.len(), done: false }
    }

    /// The step's range is read: a drain goes on to advance (when later seconds are below the
    /// high-water mark); an advance ends the sweep.
    fn step_done(&mut self, emit: usize, hidden: Hidden) -> Observed {
        self.window = Window::first(self.sizes);
        self.crossing = None;
        self.count = true;
        match (self.step, self.high_water) {
            (SweepStep::Drain, Some(hwm)) if hwm > self.cursor.ts => {
                self.step = SweepStep::Advance;
                Observed { emit, done: false }
            }
            _ => self.finish(emit, hidden),
        }
    }

    fn finish(&mut self, emit: usize, hidden: Hidden) -> Observed {
        self.step = SweepStep::Drain;
        self.window = Window::first(self.sizes);
        self.crossing = None;
        self.look_above = false;
        self.count = true;
        self.hidden = hidden;
        self.read_up_to = self.high_water.take().or(self.read_up_to);
        Observed { emit, done: true }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: i64) -> Timestamp {
        Timestamp(1_700_000_000 + s)
    }

    fn sizes() -> WindowSizes {
        WindowSizes::new(2, 8, 100)
    }

    fn query(sweep: &Sweep) -> String {
        let r = sweep.next_request("sys_updated_on", "sys_id").unwrap();
        let mut parts: Vec<String> = r.terms.iter().map(|t| t.as_str().to_string()).collect();
        parts.extend(r.order.iter().map(|o| format!("ORDERBY{o}")));
        parts.join("^")
    }

    fn window(sweep: &Sweep) -> (u32, u32, bool) {
        let r = sweep.next_request("sys_updated_on", "sys_id").unwrap();
        (r.window.limit, r.window.offset, r.count)
    }

    /// An answer of `returned` rows, with the count `total` (if any) and the clock at `now`.
    fn answer(returned: usize, total: Option<u64>, now: Option<Timestamp>) -> Answer {
        Answer { returned, total, has_next: None, server_time: now }
    }

    fn observe(s: &mut Sweep, rows: &[(Timestamp, &str)], total: Option<u64>, now: Option<Timestamp>) -> Observed {
        s.observe(rows, answer(rows.len(), total, now)).unwrap()
    }

    #[test]
    fn drains_then_advances_then_finishes() {
        let mut s = Sweep::new(Cursor::before(ts(0)), 5, sizes());
        assert_eq!(query(&s), format!("sys_updated_on={}^ORDERBYsys_id", ts(0)));
        assert_eq!(window(&s), (2, 0, true), "the first request of a sweep asks for the count");
        // Drain answer: short page, nothing follows; the clock says now = ts(100), so HWM = ts(95).
        assert_eq!(observe(&mut s, &[(ts(0), "a")], Some(1), Some(ts(100))), Observed { emit: 1, done: false });
        assert_eq!(s.step(), SweepStep::Advance);
        assert_eq!(query(&s), format!("sys_updated_on>{}^sys_updated_on<={}^ORDERBYsys_updated_on^ORDERBYsys_id", ts(0), ts(95)));
        // A full advance page over seconds 3 and 7: second 3 is complete and emitted, second 7 is
        // read again whole by the next advance page (no drain request), without a count.
        assert_eq!(observe(&mut s, &[(ts(3), "b"), (ts(7), "a")], Some(50), Some(ts(200))), Observed { emit: 1, done: false });
        assert_eq!(query(&s), format!("sys_updated_on>{}^sys_updated_on<={}^ORDERBYsys_updated_on^ORDERBYsys_id", ts(3), ts(95)));
        assert_eq!(window(&s), (2, 0, false), "a request chained after a full window skips the count");
        // A full page inside one second (a bulk second) is drained by sys_id.
        assert_eq!(observe(&mut s, &[(ts(7), "a"), (ts(7), "c")], None, None), Observed { emit: 2, done: false });
        assert_eq!(query(&s), format!("sys_updated_on={}^sys_id>c^ORDERBYsys_id", ts(7)));
        // A short page without a count may still be followed by rows: go on, still without it.
        assert_eq!(observe(&mut s, &[(ts(7), "d")], None, Some(ts(200))), Observed { emit: 1, done: false });
        assert_eq!((s.step(), window(&s)), (SweepStep::Drain, (2, 0, false)));
        // An empty window without a count is asked again, with it.
        assert_eq!(observe(&mut s, &[], None, None), Observed { emit: 0, done: false });
        assert_eq!((s.step(), window(&s)), (SweepStep::Drain, (2, 0, true)));
        assert_eq!(observe(&mut s, &[], Some(0), None), Observed { emit: 0, done: false }, "the second is drained");
        assert_eq!(s.high_water(), Some(ts(95)), "the HWM stays fixed for the whole sweep");
        assert_eq!(s.step(), SweepStep::Advance);
        assert_eq!(observe(&mut s, &[(ts(9), "z")], Some(1), None), Observed { emit: 1, done: true });
        assert_eq!(s.cursor(), &Cursor { ts: ts(9), id: "z".into() });
        assert_eq!((s.step(), s.high_water(), s.hidden()), (SweepStep::Drain, None, Hidden::None));
    }

    #[test]
    fn a_second_not_yet_below_the_high_water_mark_is_not_drained() {
        let mut s = Sweep::new(Cursor { ts: ts(98), id: "m".into() }, 5, sizes());
        let out = observe(&mut s, &[(ts(98), "n")], None, Some(ts(100)));
        assert_eq!(out, Observed { emit: 0, done: true });
        assert_eq!(s.cursor(), &Cursor { ts: ts(98), id: "m".into() });
    }

    #[test]
    fn nothing_newer_than_the_cursor_ends_the_sweep_after_the_drain() {
        let mut s = Sweep::new(Cursor { ts: ts(95), id: "m".into() }, 5, sizes());
        assert_eq!(observe(&mut s, &[], Some(0), Some(ts(100))), Observed { emit: 0, done: true });
    }

    #[test]
    fn a_short_window_followed_by_rows_goes_on_after_its_last_readable_row() {
        // Window of 2 with one row hidden: 1 row back, the count says 5 rows match.
        let mut s = Sweep::new(Cursor::before(ts(0)), 0, sizes());
        assert_eq!(observe(&mut s, &[(ts(0), "b")], Some(5), Some(ts(10))), Observed { emit: 1, done: false });
        assert_eq!((s.step(), s.cursor().id.as_str()), (SweepStep::Drain, "b"), "still draining second 0, after b");
        assert_eq!(window(&s), (2, 0, false), "the next window skips the count");
        // The Link header says the same when there is no count.
        let followed = Answer { returned: 1, total: None, has_next: Some(true), server_time: None };
        assert_eq!(s.observe(&[(ts(0), "d")], followed).unwrap(), Observed { emit: 1, done: false });
        assert_eq!(s.step(), SweepStep::Drain);
        let ended = Answer { returned: 1, total: None, has_next: Some(false), server_time: None };
        assert_eq!(s.observe(&[(ts(0), "f")], ended).unwrap(), Observed { emit: 1, done: false });
        assert_eq!(s.step(), SweepStep::Advance, "nothing follows: the drain is done");
    }

    #[test]
    fn a_window_of_hidden_rows_is_crossed_by_growing_then_stepping() {
        let mut s = Sweep::new(Cursor::before(ts(0)), 0, sizes());
        // 30 rows in second 0, the first 19 hidden.
        observe(&mut s, &[], Some(30), Some(ts(10)));
        assert_eq!(window(&s), (4, 0, true));
        observe(&mut s, &[], Some(30), None);
        assert_eq!(window(&s), (8, 0, true));
        observe(&mut s, &[], Some(30), None);
        assert_eq!(window(&s), (8, 8, true), "the widest window steps on with an offset");
        observe(&mut s, &[], Some(30), None);
        assert_eq!(window(&s), (8, 16, true));
        // Two rows before the window left the range meanwhile: step back by two, read again.
        assert_eq!(observe(&mut s, &[(ts(0), "x")], Some(28), None), Observed { emit: 0, done: false });
        assert_eq!(window(&s), (8, 14, true));
        assert_eq!(observe(&mut s, &[(ts(0), "v"), (ts(0), "x")], Some(28), None), Observed { emit: 2, done: false });
        assert_eq!((s.cursor().id.as_str(), window(&s)), ("x", (2, 0, false)), "found: back to the usual window after them");
    }

    #[test]
    fn hidden_rows_to_the_end_end_the_sweep_and_say_so() {
        let mut s = Sweep::new(Cursor { ts: ts(0), id: "m".into() }, 0, sizes());
        observe(&mut s, &[], Some(0), Some(ts(10)));
        assert_eq!(s.step(), SweepStep::Advance);
        observe(&mut s, &[], Some(5), None);
        observe(&mut s, &[], Some(5), None);
        assert_eq!(window(&s), (8, 0, true));
        assert_eq!(observe(&mut s, &[], Some(5), None), Observed { emit: 0, done: true });
        assert_eq!(s.hidden(), Hidden::Rest(5), "the 5 rows after the cursor are all hidden");
        assert_eq!(s.cursor(), &Cursor { ts: ts(0), id: "m".into() }, "the cursor stays before them");
        observe(&mut s, &[], Some(0), Some(ts(20)));
        observe(&mut s, &[(ts(15), "a")], Some(1), None);
        assert_eq!(s.hidden(), Hidden::None, "a sweep that read to its end clears it");
    }

    #[test]
    fn without_count_or_link_a_look_above_decides() {
        let mut s = Sweep::new(Cursor { ts: ts(0), id: "m".into() }, 0, sizes());
        observe(&mut s, &[], None, Some(ts(10)));
        let r = s.next_request("sys_updated_on", "sys_id").unwrap();
        assert!(r.keys_only && r.order == ["DESCsys_id"] && r.window.limit == 8, "{r:?}");
        // Nothing readable above the cursor in second 0: the drain is done.
        assert_eq!(observe(&mut s, &[], None, None), Observed { emit: 0, done: false });
        assert_eq!(s.step(), SweepStep::Advance);
        observe(&mut s, &[], None, None);
        let r = s.next_request("sys_updated_on", "sys_id").unwrap();
        assert_eq!(r.order, ["DESCsys_updated_on", "DESCsys_id"]);
        // A readable row above, found in descending order: cross until it turns up.
        assert_eq!(observe(&mut s, &[(ts(9), "q"), (ts(4), "b")], None, None), Observed { emit: 0, done: false });
        assert_eq!(window(&s), (4, 0, true));
        observe(&mut s, &[], None, None);
        observe(&mut s, &[], None, None);
        assert_eq!(window(&s), (8, 8, true));
        assert_eq!(observe(&mut s, &[(ts(4), "b")], None, None), Observed { emit: 1, done: false });
        assert_eq!(s.cursor(), &Cursor { ts: ts(4), id: "b".into() });
    }

    #[test]
    fn a_blind_crossing_gives_up_at_the_scan_limit() {
        let mut s = Sweep::new(Cursor { ts: ts(0), id: "m".into() }, 0, WindowSizes::new(2, 4, 12));
        observe(&mut s, &[], Some(0), Some(ts(10)));
        observe(&mut s, &[], None, None);
        observe(&mut s, &[(ts(9), "q")], None, None);
        let mut polls = 0;
        while !observe(&mut s, &[], None, None).done {
            polls += 1;
            assert!(polls < 10, "the crossing must give up");
        }
        assert_eq!(s.hidden(), Hidden::ScanLimit(12));
    }

    #[test]
    fn rows_out_of_order_are_refused() {
        let mut s = Sweep::new(Cursor { ts: ts(0), id: "m".into() }, 0, sizes());
        let err = s.observe(&[(ts(0), "n"), (ts(0), "b")], answer(2, None, Some(ts(10)))).unwrap_err();
        assert!(err.contains("out of cursor order") && err.contains("UTC"), "{err}");
        let mut s = Sweep::new(Cursor { ts: ts(0), id: "m".into() }, 0, sizes());
        assert!(s.observe(&[(ts(1), "a")], answer(1, None, Some(ts(10)))).is_err(), "a drain row from another second");
        let mut s = Sweep::new(Cursor::before(ts(0)), 0, sizes());
        observe(&mut s, &[], Some(0), Some(ts(10)));
        assert!(s.observe(&[(ts(11), "a")], answer(1, None, None)).is_err(), "an advance row past the HWM");
    }

    #[test]
    fn a_full_page_without_a_usable_row_is_an_error_not_a_loop() {
        let mut s = Sweep::new(Cursor::before(ts(0)), 0, sizes());
        let err = s.observe(&[], answer(2, None, Some(ts(10)))).unwrap_err();
        assert!(err.contains("cannot move past them"), "{err}");
    }

    #[test]
    fn missing_date_header_is_an_error() {
        let mut s = Sweep::new(Cursor::before(ts(0)), 0, sizes());
        assert!(s.observe(&[], answer(0, None, None)).unwrap_err().contains("Date header"));
    }

    #[test]
    fn a_bounded_sweep_reads_up_to_its_bound_whatever_the_clock_and_a_lowered_bound_holds_at_once() {
        let mut s = Sweep::bounded(Cursor::before(ts(0)), ts(50), sizes());
        // The drain's answer carries a clock far later: the bound, not the clock, is the mark.
        assert_eq!(observe(&mut s, &[], Some(0), Some(ts(1_000))), Observed { emit: 0, done: false });
        assert_eq!(query(&s), format!("sys_updated_on>{}^sys_updated_on<={}^ORDERBYsys_updated_on^ORDERBYsys_id", ts(0), ts(50)));
        // Split while the advance request is in flight: that request is not observed; the next
        // one stops at the new bound.
        s.lower_bound(ts(20));
        assert_eq!(s.bound(), Some(ts(20)));
        assert_eq!(query(&s), format!("sys_updated_on>{}^sys_updated_on<={}^ORDERBYsys_updated_on^ORDERBYsys_id", ts(0), ts(20)));
        assert!(s.observe(&[(ts(30), "a")], answer(1, Some(1), None)).is_err(), "a row past the lowered bound is out of order");
        assert_eq!(observe(&mut s, &[(ts(10), "a")], Some(1), None), Observed { emit: 1, done: true });
        assert_eq!(s.read_up_to(), Some(ts(20)));
    }
}
