//! One sweep over a table: from the cursor up to a high-water mark fixed when the sweep starts.
//!
//! Two query shapes, both ordered by the cursor:
//! * **drain** the cursor's second: `ts = T ^ id > S ^ ORDERBY id`;
//! * **advance** through later seconds: `ts > T ^ ts <= HWM ^ ORDERBY ts ^ ORDERBY id`.
//!
//! A sweep starts with a drain; its answer's `Date` header fixes `HWM = server clock − lag` for the
//! whole sweep, so rows written during the sweep are read by the next one. A full advance page
//! that spans several seconds is emitted up to the end of its second-to-last second (those seconds
//! are complete: rows come ordered by timestamp) and the sweep advances from there, so its last
//! second is read again whole by the next advance page instead of costing a drain request. A full
//! page inside one second (a bulk second) is drained by sys_id. A short advance page means the
//! table is read up to the HWM and the sweep is done. If the cursor's own
//! second is not yet below the HWM, the drain's rows are dropped unread and the sweep ends: that
//! second is still being written.

use super::position::Cursor;
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

/// What to do with a page after [`Sweep::observe`] checked it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed {
    /// How many of the page's rows to emit (the first `emit`; 0 when the page was dropped).
    pub emit: usize,
    /// True when the sweep is done: wait for the poll interval before the next one.
    pub done: bool,
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
}

impl Sweep {
    /// A sweep state starting at `cursor`, holding the high-water mark `lag_seconds` back.
    pub fn new(cursor: Cursor, lag_seconds: u32) -> Self {
        Self { cursor, step: SweepStep::Drain, high_water: None, read_up_to: None, lag_seconds: i64::from(lag_seconds) }
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

    /// The cursor terms and ordering fields of the next request.
    pub fn next_query(&self, timestamp_field: &str, id_field: &str) -> Result<(Vec<Term>, [String; 2]), String> {
        let ts = self.cursor.ts.to_string();
        match (self.step, self.high_water) {
            (SweepStep::Drain, _) => {
                let mut terms = vec![Term::new(timestamp_field, Op::Eq, &ts)?];
                if !self.cursor.id.is_empty() {
                    terms.push(Term::new(id_field, Op::Gt, &self.cursor.id)?);
                }
                Ok((terms, [id_field.to_string(), String::new()]))
            }
            (SweepStep::Advance, Some(hwm)) => Ok((
                vec![Term::new(timestamp_field, Op::Gt, &ts)?, Term::new(timestamp_field, Op::Le, &hwm.to_string())?],
                [timestamp_field.to_string(), id_field.to_string()],
            )),
            (SweepStep::Advance, None) => Err("advance step without a high-water mark".into()),
        }
    }

    /// Checks a page answered to [`Self::next_query`] and moves the cursor and the step.
    ///
    /// `rows` are the page's cursor keys in page order, `full` says the page held `limit` rows,
    /// `server_time` is the answer's `Date`. Fails if a row breaks the cursor order, which means
    /// ServiceNow did not apply the query as sent (non-UTC user, ignored term or ORDERBY).
    pub fn observe(&mut self, rows: &[(Timestamp, &str)], full: bool, server_time: Option<Timestamp>) -> Result<Observed, String> {
        let hwm = match self.high_water {
            Some(hwm) => hwm,
            None => {
                let now = server_time.ok_or("the answer has no Date header, so the high-water mark cannot be set")?;
                let hwm = now.plus_seconds(-self.lag_seconds);
                self.high_water = Some(hwm);
                hwm
            }
        };
        if self.step == SweepStep::Drain && self.cursor.ts > hwm {
            return Ok(self.finish(0));
        }
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
        let last_second = rows.last().map(|(ts, _)| *ts);
        let in_last_second = rows.iter().rev().take_while(|(ts, _)| Some(*ts) == last_second).count();
        if self.step == SweepStep::Advance && full && in_last_second < rows.len() {
            // Emit the complete seconds; the last one is read again whole by the next advance page.
            let emit = rows.len() - in_last_second;
            let (ts, id) = rows[emit - 1];
            self.cursor = Cursor { ts, id: id.to_string() };
            return Ok(Observed { emit, done: false });
        }
        if let Some(&(ts, id)) = rows.last() {
            self.cursor = Cursor { ts, id: id.to_string() };
        }
        let emit = rows.len();
        Ok(match (self.step, full) {
            (SweepStep::Drain, true) | (SweepStep::Advance, true) => {
                self.step = SweepStep::Drain;
                Observed { emit, done: false }
            }
            (SweepStep::Drain, false) if hwm > self.cursor.ts => {
                self.step = SweepStep::Advance;
                Observed { emit, done: false }
            }
            (SweepStep::Drain, false) | (SweepStep::Advance, false) => self.finish(emit),
        })
    }

    fn finish(&mut self, emit: usize) -> Observed {
        self.step = SweepStep::Drain;
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

    fn query(sweep: &Sweep) -> String {
        let (terms, order) = sweep.next_query("sys_updated_on", "sys_id").unwrap();
        let mut parts: Vec<String> = terms.iter().map(|t| t.as_str().to_string()).collect();
        parts.extend(order.iter().filter(|o| !o.is_empty()).map(|o| format!("ORDERBY{o}")));
        parts.join("^")
    }

    #[test]
    fn drains_then_advances_then_finishes() {
        let mut s = Sweep::new(Cursor::before(ts(0)), 5);
        assert_eq!(query(&s), format!("sys_updated_on={}^ORDERBYsys_id", ts(0)));
        // Drain answer: short page; the clock says now = ts(100), so HWM = ts(95).
        assert_eq!(s.observe(&[(ts(0), "a")], false, Some(ts(100))).unwrap(), Observed { emit: 1, done: false });
        assert_eq!(s.step(), SweepStep::Advance);
        assert_eq!(query(&s), format!("sys_updated_on>{}^sys_updated_on<={}^ORDERBYsys_updated_on^ORDERBYsys_id", ts(0), ts(95)));
        // A full advance page over seconds 3 and 7: second 3 is complete and emitted, second 7 is
        // read again whole by the next advance page (no drain request).
        assert_eq!(s.observe(&[(ts(3), "b"), (ts(7), "a")], true, Some(ts(200))).unwrap(), Observed { emit: 1, done: false });
        assert_eq!(query(&s), format!("sys_updated_on>{}^sys_updated_on<={}^ORDERBYsys_updated_on^ORDERBYsys_id", ts(3), ts(95)));
        // A full page inside one second (a bulk second) is drained by sys_id.
        assert_eq!(s.observe(&[(ts(7), "a"), (ts(7), "c")], true, None).unwrap(), Observed { emit: 2, done: false });
        assert_eq!(query(&s), format!("sys_updated_on={}^sys_id>c^ORDERBYsys_id", ts(7)));
        assert_eq!(s.observe(&[(ts(7), "d")], false, Some(ts(200))).unwrap(), Observed { emit: 1, done: false });
        assert_eq!(s.high_water(), Some(ts(95)), "the HWM stays fixed for the whole sweep");
        assert_eq!(s.observe(&[(ts(9), "z")], false, None).unwrap(), Observed { emit: 1, done: true });
        assert_eq!(s.cursor(), &Cursor { ts: ts(9), id: "z".into() });
        assert_eq!((s.step(), s.high_water()), (SweepStep::Drain, None));
    }

    #[test]
    fn a_second_not_yet_below_the_high_water_mark_is_not_drained() {
        let mut s = Sweep::new(Cursor { ts: ts(98), id: "m".into() }, 5);
        let out = s.observe(&[(ts(98), "n")], false, Some(ts(100))).unwrap();
        assert_eq!(out, Observed { emit: 0, done: true });
        assert_eq!(s.cursor(), &Cursor { ts: ts(98), id: "m".into() });
    }

    #[test]
    fn nothing_newer_than_the_cursor_ends_the_sweep_after_the_drain() {
        let mut s = Sweep::new(Cursor { ts: ts(95), id: "m".into() }, 5);
        assert_eq!(s.observe(&[], false, Some(ts(100))).unwrap(), Observed { emit: 0, done: true });
    }

    #[test]
    fn rows_out_of_order_are_refused() {
        let mut s = Sweep::new(Cursor { ts: ts(0), id: "m".into() }, 0);
        let err = s.observe(&[(ts(0), "n"), (ts(0), "b")], true, Some(ts(10))).unwrap_err();
        assert!(err.contains("out of cursor order") && err.contains("UTC"), "{err}");
        let mut s = Sweep::new(Cursor { ts: ts(0), id: "m".into() }, 0);
        assert!(s.observe(&[(ts(1), "a")], true, Some(ts(10))).is_err(), "a drain row from another second");
        let mut s = Sweep::new(Cursor::before(ts(0)), 0);
        s.observe(&[], false, Some(ts(10))).unwrap();
        assert!(s.observe(&[(ts(11), "a")], false, None).is_err(), "an advance row past the HWM");
    }

    #[test]
    fn missing_date_header_is_an_error() {
        let mut s = Sweep::new(Cursor::before(ts(0)), 0);
        assert!(s.observe(&[], false, None).unwrap_err().contains("Date header"));
    }
}
