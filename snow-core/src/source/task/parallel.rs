//! A task's parallel backfill (ADR 0033): the poll that plans the slices, and the polls that
//! keep one request in flight per slice and take whichever answer comes first.

use super::*;
use crate::cursor::SweepStep;
use crate::source::backfill::Range;
use crate::table::query::{Op, Term};

impl<T: Transport, C: Clock> SourceTask<T, C> {
    /// Plans the backfill from one keys-only request: the first row at or after the start, the
    /// count of rows, and ServiceNow's clock (whose lagged value ends the backfill). A table with
    /// nothing to backfill goes straight to the single cursor.
    pub(super) fn plan_backfill(&mut self) -> Result<PollBatch, SnowError> {
        let table = &self.table;
        let term = Term::new(&table.timestamp_field, Op::Ge, &self.start.to_string()).map_err(SnowError::data)?;
        let query = table.query.with_cursor(&[term], &[&table.timestamp_field, &table.sys_id_field]);
        let params = ListParams {
            query: &query,
            fields: Some(&self.keys[..]),
            limit: 1,
            offset: 0,
            count: true,
            display_value: DisplayValue::Raw,
            exclude_reference_link: true,
            no_domain: table.query_domain == crate::config::source::QueryDomain::All,
            category: table.query_category.as_deref(),
        };
        let page = self.client.list(&table.name, &params)?;
        let now = page.server_time.ok_or_else(|| {
            SnowError::data(format!("table {}: the answer has no Date header, so the backfill's end cannot be set", table.name))
        })?;
        self.server_now = Some(now);
        let end = now.plus_seconds(-i64::from(self.lag_seconds));
        let rows = parse_page(&page.body, &table.sys_id_field, &table.timestamp_field)
            .map_err(|m| SnowError::transport(format!("table {}: {m}", table.name), ErrorClass::Transient))?;
        // The first readable row; when an ACL hides it (or the count is unknown), the start.
        let first = rows.first().and_then(|row| cursor_key(row, table).ok()).map(|(ts, _)| ts);
        let nothing = page.total == Some(0) || first.is_some_and(|f| f > end);
        let phase = if nothing {
            self.notes.push(Note::info(format!("table {}: nothing to backfill before {end}: the single cursor reads on", table.name)));
            Phase::Cursor { carried: Vec::new(), until: Timestamp::EPOCH }
        } else {
            let range = Range { start: self.start, first: first.unwrap_or(self.start), end };
            let sizes = WindowSizes::new(table.batch_size, table.hidden_window_max_rows, u64::from(table.hidden_scan_max_rows));
            let fields = (table.timestamp_field.clone(), table.sys_id_field.clone());
            let backfill = Backfill::plan(range, table.backfill_parallelism, sizes, self.overlap as u32, fields);
            let rows = page.total.map_or_else(String::new, |t| format!(", {t} rows counted before ACLs"));
            self.notes.push(Note::info(format!(
                "table {}: backfilling {} .. {end} in {} slices at once{rows}",
                table.name,
                range.first,
                backfill.slices().len()
            )));
            Phase::Slices(Box::new(backfill))
        };
        self.backfill = phase;
        Ok(self.batch(Vec::new(), BatchBytes::default(), 0))
    }

    /// One page of the backfill: every slice without a request in flight gets one, and the
    /// first answered is read, emitted and followed by that slice's next request.
    pub(super) fn poll_backfill(&mut self) -> Result<PollBatch, SnowError> {
        let Phase::Slices(backfill) = &mut self.backfill else { unreachable!("polled as a backfill without one") };
        let table = &self.table;
        let requests = backfill
            .reading()
            .iter()
            .map(|s| s.sweep.next_request(&table.timestamp_field, &table.sys_id_field))
            .collect::<Result<Vec<_>, _>>()
            .map_err(SnowError::data)?;
        let queries: Vec<String> = requests.iter().map(|r| request_query(r, table)).collect();
        let params: Vec<ListParams<'_>> = requests.iter().zip(&queries).map(|(r, q)| list_params(table, &self.keys, r, q)).collect();
        for p in &params {
            self.client.start_list(&table.name, p);
        }
        let lists: Vec<(&str, &ListParams<'_>)> = params.iter().map(|p| (table.name.as_str(), p)).collect();
        // The wait for the first answer is request time too.
        let started = self.client.clock().now();
        let i = self.client.first_ready_list(&lists).unwrap_or(0);
        let page = self.client.list(&table.name, &params[i])?;
        let fetched = self.client.clock().now();
        let step = backfill.slices()[i].sweep.step();
        let rows = parse_page(&page.body, &table.sys_id_field, &table.timestamp_field)
            .map_err(|m| SnowError::transport(format!("table {}: {m}", table.name), ErrorClass::Transient))?;
        let new_schema = self.schema_for_page(&rows)?;
        let keyed = self.key_rows(&rows)?;
        let Phase::Slices(backfill) = &mut self.backfill else { unreachable!("the backfill went away in a poll") };
        let table = &self.table;
        let keys: Vec<(Timestamp, &str)> = keyed.iter().map(|(_, ts, id)| (*ts, *id)).collect();
        let answer = Answer { returned: rows.len(), total: page.total, has_next: page.has_next, server_time: page.server_time };
        self.server_now = page.server_time.or(self.server_now);
        let slice = backfill.slice_mut(i);
        let observed = slice.sweep.observe(&keys, answer).map_err(|m| SnowError::data(format!("table {}: {m}", table.name)))?;
        slice.counted(page.total, step == SweepStep::Advance, observed.emit);
        if !observed.done {
            let request = slice.sweep.next_request(&table.timestamp_field, &table.sys_id_field).map_err(SnowError::data)?;
            let query = request_query(&request, table);
            self.client.start_list(&table.name, &list_params(table, &self.keys, &request, &query));
        }
        let parsed = self.client.clock().now();
        let mut out = self.records.page(&page.body);
        // Emitted below, or dropped as older than a version already emitted: either way the
        // slice has passed these rows.
        for (_, ts, id) in &keyed[..observed.emit] {
            slice.emitted(*ts, id);
        }
        for (row, ts, id) in &keyed[..observed.emit] {
            if backfill.tail.admit(*ts, id, row.mod_count.as_deref().unwrap_or("")) {
                out.push(row, *ts, id)?;
            } else {
                self.counters.duplicates_suppressed += 1;
            }
        }
        let (mut records, finished) = out.finish();
        let bytes = if records.is_empty() { BatchBytes::default() } else { finished.into_batch_bytes(page.body, &mut records) };
        if observed.done {
            for split in backfill.finished(i) {
                if let Some(abandoned) = &split.abandoned {
                    let query = request_query(abandoned, table);
                    self.client.abandon_list(&table.name, &list_params(table, &self.keys, abandoned, &query));
                }
                self.notes.push(Note::info(format!(
                    "table {}: a slice finished early: the slice at {} reading up to {} stops at {}, a new one reads the rest",
                    table.name, split.at.ts, split.to, split.mid
                )));
            }
            if backfill.is_done() {
                self.backfill_done();
            }
        }
        let built = self.client.clock().now();
        let micros = |d: std::time::Duration| d.as_micros() as u64;
        self.counters.request_micros += micros(fetched - started);
        self.counters.parse_micros += micros(parsed - fetched);
        self.counters.build_micros += micros(built - parsed);
        let mut batch = self.batch(records, bytes, 0);
        batch.value_schema = new_schema;
        Ok(batch)
    }

    /// Every slice is done: the single cursor goes on after the backfill's end, its first sweep
    /// re-reading the overlap before it with the versions emitted there already known.
    fn backfill_done(&mut self) {
        let Phase::Slices(backfill) = std::mem::replace(&mut self.backfill, Phase::Plan) else { return };
        let end = backfill.end();
        let carried = backfill.tail.versions();
        for v in &carried {
            self.dedup.insert(v.ts, &v.id, &v.mod_count);
        }
        self.notes.push(Note::info(format!(
            "table {}: backfill up to {end} done ({} slices split on the way); the single cursor reads on",
            self.table.name,
            backfill.splits()
        )));
        if !backfill.tail.complete() {
            self.notes.push(Note::warn(format!(
                "table {}: more than {} versions in the overlap before {end}: a restart within the next sweep may emit some again",
                self.table.name,
                crate::source::backfill::TAIL_CAPACITY
            )));
        }
        self.high = Cursor::before(end.plus_seconds(1));
        self.backfill = Phase::Cursor { carried, until: end };
        let start = self.sweep_start();
        self.sweep.restart_from(start);
    }
}
