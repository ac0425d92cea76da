//! One table's stream: open it at its stored offset, then each `poll` makes one request and
//! returns the page's rows as records, each with the offset to store once Kafka has it. When the
//! sweep goes on at once, the next page's request is started before this page's records are
//! built (read-ahead), so ServiceNow works on it while the host produces them.
//!
//! Every sweep starts `overlap.seconds` before the furthest position emitted so far, so rows that
//! became visible late are read; versions already emitted are suppressed by the [`DedupWindow`].
//! The offset carried by a record is the furthest position emitted up to it, so a stored offset
//! never moves back. The first poll is the startup probe when it is enabled.
//!
//! At our 600-line mark: one table stream's open and poll, the one place the cursor, the sweep and
//! the followers meet; each of them lives in its own module.

use crate::clock::Clock;
use crate::config::source::{BadRowBehavior, TableMode, ValueSchema};
use crate::config::{Entries, SourceConfig, TableConfig};
use crate::cursor::dedup::DedupWindow;
use crate::cursor::position::Position;
use crate::cursor::{Answer, Cursor, Hidden, Partition, Sweep, SweepRequest, WindowSizes};
use crate::error::{ErrorClass, SnowError};
use crate::http::Transport;
use crate::record::{BatchBytes, PollBatch, SourceOffset, SourceRecord};
use crate::table::{DisplayValue, ListParams, PageRow, TableClient, parse_page};
use crate::time::Timestamp;

pub use super::note::Note;

use super::attachments::AttachmentStream;
use super::backfill::Backfill;
use super::deletes::DeleteStream;
use super::follower::{FollowerSettings, Follows};
use super::journal::JournalStream;
use super::record::RecordBuilder;
use super::snapshot::SnapshotStream;

/// Counters of one task.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskCounters {
    /// Row versions read again by the overlap and not emitted.
    pub duplicates_suppressed: u64,
    /// Rows skipped for lacking their id or timestamp (`snow.bad.row.behavior=skip`).
    pub bad_rows_skipped: u64,
    /// Time spent in requests (sending, waiting, reading the body), in microseconds.
    pub request_micros: u64,
    /// Time spent parsing pages and checking the cursor, in microseconds.
    pub parse_micros: u64,
    /// Time spent building records, in microseconds.
    pub build_micros: u64,
}

/// Reads one table along its keyset cursor.
pub struct SourceTask<T, C> {
    client: TableClient<T, C>,
    table: TableConfig,
    partition_key: String,
    /// The cursor fields (id, timestamp): what a keys-only request reads.
    keys: [String; 2],
    records: RecordBuilder,
    sweep: Sweep,
    high: Cursor,
    start: Timestamp,
    overlap: i64,
    dedup: DedupWindow,
    bad_rows: BadRowBehavior,
    probe_pending: bool,
    counters: TaskCounters,
    notes: Vec<Note>,
    /// ServiceNow's clock at the latest answer (its `Date`).
    server_now: Option<Timestamp>,
    /// The table's value schema, when the host asked for it (`snow.value.schema=dictionary`).
    schema: Option<SchemaState>,
    /// The table's deletes, when they are captured (`snow.table.<t>.deletes=true`).
    deletes: Option<DeleteStream>,
    /// The table's journal entries, when read (`snow.table.<t>.journal`).
    journal: Option<JournalStream>,
    /// The table's attachments, when read (`snow.table.<t>.attachments=true`).
    attachments: Option<AttachmentStream>,
    /// Where the backfill stands: to be planned, in progress, or done (ADR 0033).
    backfill: Phase,
    /// `snow.safety.lag.seconds`.
    lag_seconds: u32,
    /// The table's snapshots, when it is read by them (`mode=snapshot`, ADR 0035): then they make
    /// every request but the probe's and the dictionary's, and the cursor stays unused.
    snapshot: Option<SnapshotStream>,
}

/// Whether the table is backfilled in parallel slices.
enum Phase {
    /// A fresh start with `backfill.parallelism` above 1: the next poll plans the slices.
    Plan,
    /// The slices are reading.
    Slices(Box<Backfill>),
    /// The single cursor reads; after a parallel backfill it carries the versions emitted in the
    /// overlap before the backfill's end in its stored position while a restart's re-read can
    /// reach them (`until`: that end).
    Cursor { carried: Vec<crate::cursor::SeenVersion>, until: Timestamp },
}

/// The value schema a task derives from its table's dictionary and when it last read it.
struct SchemaState {
    /// `snow.schema.refresh.interval.ms`.
    refresh: std::time::Duration,
    /// The schema last sent to the host.
    sent: Option<String>,
    /// When the dictionary was last read (the task clock).
    read_at: Option<std::time::Duration>,
    /// The dictionary's elements as last read, and the fields rows carry that no dictionary read
    /// listed (`sys_tags`, dot-walked fields): a row with a field in neither has the dictionary
    /// read again before its page is emitted, so a new column's values are never left out.
    known: std::collections::BTreeSet<String>,
    /// Of `known`, the fields rows carried that a read just before did not list.
    not_in_dictionary: std::collections::BTreeSet<String>,
}

impl<T: Transport, C: Clock> SourceTask<T, C> {
    /// Opens the stream of the single table in `entries`, resuming from its offset in `offsets`
    /// (the host passes every offset stored for the connector). Retries sleep on `clock`.
    pub fn open(entries: &Entries, offsets: &[SourceOffset], transport: T, clock: C) -> Result<Self, SnowError> {
        let config = SourceConfig::parse(entries)?;
        let count = config.tables.len();
        let Ok([table]) = <[TableConfig; 1]>::try_from(config.tables) else {
            return Err(SnowError::config(
                "snow.tables",
                format!("a source task reads exactly one table, this configuration lists {count}; use plan() to split tables over tasks"),
            ));
        };
        let partition = Partition::of(&config.instance.authority, &table);
        let partition_key = partition.key();
        let stored = offsets.iter().rev().find(|o| o.partition == partition_key);
        let unreadable = |m: String| SnowError::config(format!("snow.table.{}", table.name), m);
        let sizes = WindowSizes::new(table.batch_size, table.hidden_window_max_rows, u64::from(table.hidden_scan_max_rows));
        let fields = (table.timestamp_field.clone(), table.sys_id_field.clone());
        let cursor_phase = Phase::Cursor { carried: Vec::new(), until: Timestamp::EPOCH };
        let parsed = stored.map(|s| Position::parse(&s.position));
        let snapshot_finished = match (table.mode, parsed.as_ref()) {
            (TableMode::Cursor, _) => None,
            (TableMode::Snapshot, None) => Some(None),
            (TableMode::Snapshot, Some(Ok(Position::Snapshot(finished)))) => Some(*finished),
            (TableMode::Snapshot, Some(Ok(_))) => return Err(unreadable("the stored position is not a snapshot's".into())),
            // Unreadable: refused below, naming what is wrong with it.
            (TableMode::Snapshot, Some(Err(_))) => None,
        };
        let ((high, seen), backfill) = match parsed {
            Some(Ok(Position::Cursor(cursor, seen))) => {
                // Versions a restart's re-read could reach (a parallel backfill's tail, a cutover's
                // seed, a read-back's finds) stay in the stored position until the re-read has
                // passed them, whichever run wrote them.
                let until = seen.iter().map(|v| v.ts).max().unwrap_or(Timestamp::EPOCH);
                let mut carried = seen.clone();
                carried.sort_by_key(|v| v.ts);
                let phase = Phase::Cursor { carried, until };
                ((cursor, seen), phase)
            }
            Some(Ok(Position::Backfill(position))) => {
                let backfill = Backfill::resume(&position, table.backfill_parallelism, sizes, config.overlap_seconds, fields);
                ((Cursor::before(table.start), Vec::new()), Phase::Slices(Box::new(backfill)))
            }
            // A snapshot table's position is read by its snapshots below.
            Some(Ok(Position::Snapshot(_))) => ((Cursor::before(table.start), Vec::new()), cursor_phase),
            Some(Err(message)) => return Err(unreadable(message)),
            None => {
                refuse_foreign_offset(&partition, offsets)?;
                let phase = if table.backfill_parallelism > 1 { Phase::Plan } else { cursor_phase };
                ((Cursor::before(table.start), Vec::new()), phase)
            }
        };
        // A cutover's seed: the versions the old connector already wrote are suppressed by the
        // first re-read as this connector's own would be.
        let mut dedup = DedupWindow::new(config.dedup_window_size as usize);
        for v in &seen {
            dedup.insert(v.ts, &v.id, &v.mod_count);
        }
        let overlap = i64::from(config.overlap_seconds);
        let settings = FollowerSettings {
            instance: &config.instance.authority,
            lag_seconds: config.safety_lag_seconds,
            overlap_seconds: config.overlap_seconds,
            dedup_window_size: config.dedup_window_size,
            probe: config.startup_probe,
        };
        let deletes = DeleteStream::open(&table, &settings, offsets)?;
        let journal = JournalStream::open(&table, &settings, offsets)?;
        let attachments = AttachmentStream::open(&table, &settings, &config.instance.base_url, offsets)?;
        let records = RecordBuilder::new(&table, &config.instance.authority, config.value_format);
        let snapshot = snapshot_finished
            .map(|finished| SnapshotStream::open(&table, &partition_key, &records, finished, offsets, config.bad_row_behavior))
            .transpose()?;
        if let Some(s) = &snapshot {
            let pages = crate::config::memory::estimate(0, table.batch_size);
            crate::config::memory::check_snapshot_keys(entries, &table.name, s.held(), pages)?;
        }
        let schema = (config.value_schema == ValueSchema::Dictionary).then(|| SchemaState {
            refresh: std::time::Duration::from_millis(u64::from(config.schema_refresh_ms)),
            sent: None,
            read_at: None,
            known: Default::default(),
            not_in_dictionary: Default::default(),
        });
        let mut task = Self {
            client: TableClient::new(&config.instance, transport, clock),
            records: if schema.is_some() { records.passing_rows_as_read() } else { records },
            schema,
            sweep: Sweep::new(high.clone(), config.safety_lag_seconds, sizes),
            start: table.start,
            high,
            overlap,
            dedup,
            bad_rows: config.bad_row_behavior,
            probe_pending: config.startup_probe,
            counters: TaskCounters::default(),
            notes: Vec::new(),
            server_now: None,
            keys: [table.sys_id_field.clone(), table.timestamp_field.clone()],
            table,
            partition_key,
            deletes,
            journal,
            attachments,
            backfill,
            lag_seconds: config.safety_lag_seconds,
            snapshot,
        };
        task.sweep.restart_from(task.sweep_start());
        Ok(task)
    }

    /// The partition key offsets of this stream are stored under.
    pub fn partition_key(&self) -> &str {
        &self.partition_key
    }

    /// The table this task reads.
    pub fn table(&self) -> &str {
        &self.table.name
    }

    /// The furthest position emitted (or stored, before the first record): what a restart resumes
    /// from. During a parallel backfill, the first slice's (every row before it was read).
    pub fn cursor(&self) -> Cursor {
        match &self.backfill {
            Phase::Slices(backfill) => backfill.low(),
            _ => self.high.clone(),
        }
    }

    /// The slices of a parallel backfill still reading (0 once it is done, or without one).
    pub fn backfill_slices(&self) -> usize {
        match &self.backfill {
            Phase::Slices(backfill) => backfill.slices().len(),
            _ => 0,
        }
    }

    /// The host learnt that a row of the table stamped `updated_on` was committed (a push
    /// notification, ADR 0032): the next sweep may read up to it (never past ServiceNow's clock)
    /// instead of stopping the safety lag short. A stamp that cannot be read is refused, naming it.
    pub fn wake(&mut self, updated_on: &str) -> Result<(), SnowError> {
        let ts = Timestamp::parse(updated_on)
            .map_err(|e| SnowError::data(format!("table {}: a wake-up's sys_updated_on: {e}", self.table.name)))?;
        self.sweep.raise_next_high_water(ts);
        if let Some(deletes) = self.deletes.as_mut() {
            deletes.wake(ts);
        }
        Ok(())
    }

    /// The table's snapshots, when it is read by them.
    pub fn snapshots(&self) -> Option<&SnapshotStream> {
        self.snapshot.as_ref()
    }

    /// The table's attachment stream, when attachments are read.
    pub fn attachments(&self) -> Option<&AttachmentStream> {
        self.attachments.as_ref()
    }

    /// The table's journal stream, when journal entries are read.
    pub fn journal(&self) -> Option<&JournalStream> {
        self.journal.as_ref()
    }

    /// The table's delete stream, when deletes are captured.
    pub fn deletes(&self) -> Option<&DeleteStream> {
        self.deletes.as_ref()
    }

    /// The `X-RateLimit-*` headers of the latest answer that carried them.
    pub fn rate_limit(&self) -> Option<&crate::http::retry::RateLimit> {
        self.client.rate_limit()
    }

    /// How far behind ServiceNow's clock this table's stream is, in seconds: the latest `Date`
    /// minus what has surely been read (the furthest row emitted, or the high-water mark of the
    /// latest finished sweep when that is later). About `snow.safety.lag.seconds` once caught up;
    /// none before the first answer, and none for a table read by snapshots.
    pub fn lag_seconds(&self) -> Option<i64> {
        if self.snapshot.is_some() {
            return None;
        }
        let high = self.cursor();
        let read = self.sweep.read_up_to().map_or(high.ts, |r| r.max(high.ts));
        Some((self.server_now?.as_millis() - read.as_millis()) / 1000)
    }

    /// Counters since the task was opened.
    pub fn counters(&self) -> TaskCounters {
        self.counters
    }

    /// Notes gathered since the last call.
    pub fn take_notes(&mut self) -> Vec<Note> {
        std::mem::take(&mut self.notes)
    }

    /// Where a sweep starts: `overlap.seconds` before the furthest position emitted, never before
    /// the table's start, and exactly at the start when nothing was read yet.
    fn sweep_start(&self) -> Cursor {
        self.high.overlap_start(self.start, self.overlap)
    }

    /// Makes one request and returns its rows as records.
    pub fn poll(&mut self) -> Result<PollBatch, SnowError> {
        if self.probe_pending {
            super::probe::probe(&mut self.client, &self.table)?;
            self.probe_pending = false;
            return Ok(self.batch(Vec::new(), BatchBytes::default(), 0));
        }
        if let Some(batch) = self.poll_followers()? {
            return Ok(batch);
        }
        if let Some(schema) = self.schema_changed()? {
            let mut batch = self.batch(Vec::new(), BatchBytes::default(), 0);
            batch.value_schema = Some(schema);
            return Ok(batch);
        }
        if let Some(snapshot) = self.snapshot.as_mut() {
            let batch = snapshot.poll(&mut self.client, &self.records);
            self.notes.extend(snapshot.take_notes());
            return batch;
        }
        match self.backfill {
            Phase::Plan => return self.plan_backfill(),
            Phase::Slices(_) => return self.poll_backfill(),
            Phase::Cursor { .. } => {}
        }
        let table = &self.table;
        let request = self.sweep.next_request(&table.timestamp_field, &table.sys_id_field).map_err(SnowError::data)?;
        let query = request_query(&request, table);
        let started = self.client.clock().now();
        let page = self.client.list(&table.name, &list_params(table, &self.keys, &request, &query))?;
        let fetched = self.client.clock().now();
        let rows = parse_page(&page.body, &table.sys_id_field, &table.timestamp_field)
            .map_err(|m| SnowError::transport(format!("table {}: {m}", table.name), ErrorClass::Transient))?;
        // Before anything of the page is emitted or the next page requested: a field the schema
        // does not know yet has the dictionary read again, and a new schema goes with this batch.
        let new_schema = self.schema_for_page(&rows)?;
        let keyed = self.key_rows(&rows)?;
        let table = &self.table;
        let keys: Vec<(Timestamp, &str)> = keyed.iter().map(|(_, ts, id)| (*ts, *id)).collect();
        let answer = Answer { returned: rows.len(), total: page.total, has_next: page.has_next, server_time: page.server_time };
        let observed = self.sweep.observe(&keys, answer).map_err(|m| SnowError::data(format!("table {}: {m}", table.name)))?;
        self.server_now = page.server_time.or(self.server_now);
        if !observed.done {
            // The sweep goes on at once: have ServiceNow answer the next page while this one's
            // records are built and produced.
            let request = self.sweep.next_request(&table.timestamp_field, &table.sys_id_field).map_err(SnowError::data)?;
            let query = request_query(&request, table);
            self.client.start_list(&table.name, &list_params(table, &self.keys, &request, &query));
        }
        let parsed = self.client.clock().now();
        let mut out = self.records.page(&page.body);
        let mut furthest: Option<(Timestamp, &str)> = None;
        for (row, ts, id) in &keyed[..observed.emit] {
            if !self.dedup.insert(*ts, id, row.mod_count.as_deref().unwrap_or("")) {
                self.counters.duplicates_suppressed += 1;
                continue;
            }
            out.push(row, *ts, id)?;
            if furthest.is_none_or(|f| (*ts, *id) > f) {
                furthest = Some((*ts, *id));
            }
        }
        if let Some((ts, id)) = furthest.filter(|&(ts, id)| (ts, id) > (self.high.ts, self.high.id.as_str())) {
            self.high = Cursor { ts, id: id.to_string() };
        }
        let (mut records, finished) = out.finish();
        let bytes = if records.is_empty() { BatchBytes::default() } else { finished.into_batch_bytes(page.body, &mut records) };
        // Versions older than the next overlap start cannot be read again.
        self.dedup.forget_before(self.high.ts.plus_seconds(-self.overlap));
        let built = self.client.clock().now();
        let micros = |d: std::time::Duration| d.as_micros() as u64;
        self.counters.request_micros += micros(fetched - started);
        self.counters.parse_micros += micros(parsed - fetched);
        self.counters.build_micros += micros(built - parsed);
        if observed.done {
            self.sweep.restart_from(self.sweep_start());
        }
        // A finished sweep is followed by one of the deletes, which then waits the poll interval.
        let followed = observed.done && self.sweep_finished();
        let next_poll_ms = if observed.done && !followed { self.table.poll_interval_ms } else { 0 };
        let mut batch = self.batch(records, bytes, next_poll_ms);
        batch.value_schema = new_schema;
        Ok(batch)
    }

    /// The table's sweep finished: the sweeps of its deletes, journal entries and attachments follow (true
    /// when there is one).
    fn sweep_finished(&mut self) -> bool {
        let deletes = self.deletes.as_mut().map(DeleteStream::table_sweep_finished).is_some();
        let journal = self.journal.as_mut().map(JournalStream::table_sweep_finished).is_some();
        let attachments = self.attachments.as_mut().map(AttachmentStream::table_sweep_finished).is_some();
        deletes || journal || attachments
    }

    /// A poll of the deletes', the journal's or the attachments' stream when one is due (its probe, or the sweep
    /// that follows the table's): the poll interval comes after the last of them.
    fn poll_followers(&mut self) -> Result<Option<PollBatch>, SnowError> {
        let interval = self.table.poll_interval_ms;
        let batch = if let Some(deletes) = self.deletes.as_mut().filter(|d| d.wants_poll()) {
            let batch = deletes.poll(&mut self.client, self.sweep.read_up_to(), interval);
            self.notes.extend(deletes.take_notes());
            batch?
        } else if let Some(journal) = self.journal.as_mut().filter(|j| j.wants_poll()) {
            let batch = journal.poll(&mut self.client, interval);
            self.notes.extend(journal.take_notes());
            batch?
        } else if let Some(attachments) = self.attachments.as_mut().filter(|a| a.wants_poll()) {
            let batch = attachments.poll(&mut self.client, interval);
            self.notes.extend(attachments.take_notes());
            batch?
        } else {
            return Ok(None);
        };
        let more = self.journal.as_ref().is_some_and(JournalStream::wants_poll)
            || self.attachments.as_ref().is_some_and(AttachmentStream::wants_poll);
        Ok(Some(if more { PollBatch { next_poll_ms: 0, ..batch } } else { batch }))
    }

    /// The page's rows with their cursor keys; a row without them is skipped (and counted) or
    /// fails the poll, as `snow.bad.row.behavior` says.
    fn key_rows<'r, 'p>(&mut self, rows: &'r [PageRow<'p>]) -> Result<Vec<(&'r PageRow<'p>, Timestamp, &'r str)>, SnowError> {
        let mut keyed = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            match cursor_key(row, &self.table) {
                Ok((ts, id)) => keyed.push((row, ts, id)),
                Err(problem) if self.bad_rows == BadRowBehavior::Skip => {
                    self.counters.bad_rows_skipped += 1;
                    self.notes.push(Note::warn(format!("table {}: skipped row {i} of a page: {problem}", self.table.name)));
                }
                Err(problem) => {
                    return Err(SnowError::data(format!(
                        "table {}: {problem} (snow.bad.row.behavior=skip would skip it)",
                        self.table.name
                    )));
                }
            }
        }
        Ok(keyed)
    }

    /// The table's value schema when it is due to be read and differs from the one last sent
    /// (always on the first call): the dictionary's requests are this poll's.
    fn schema_changed(&mut self) -> Result<Option<String>, SnowError> {
        let now = self.client.clock().now();
        match self.schema.as_ref() {
            Some(state) if state.read_at.is_none_or(|at| now.saturating_sub(at) >= state.refresh) => self.read_schema(),
            _ => Ok(None),
        }
    }

    /// The table's value schema when the first row of `rows` (every row of a page has the same
    /// fields) carries a field no dictionary read has listed: the dictionary is read again.
    fn schema_for_page(&mut self, rows: &[PageRow<'_>]) -> Result<Option<String>, SnowError> {
        let (Some(state), Some(row)) = (self.schema.as_ref(), rows.first()) else { return Ok(None) };
        let fields: std::collections::BTreeMap<String, serde::de::IgnoredAny> = serde_json::from_slice(row.raw).unwrap_or_default();
        let unknown: Vec<String> = fields.into_keys().filter(|f| !state.known.contains(f)).collect();
        if unknown.is_empty() {
            return Ok(None);
        }
        let schema = self.read_schema()?;
        if let Some(state) = self.schema.as_mut() {
            // What this read did not list either is not a column: it does not trigger again.
            let missing: Vec<String> = unknown.into_iter().filter(|f| !state.known.contains(f)).collect();
            state.not_in_dictionary.extend(missing.iter().cloned());
            state.known.extend(missing);
        }
        Ok(schema)
    }

    /// Reads the dictionary now; the schema when it differs from the one last sent.
    fn read_schema(&mut self) -> Result<Option<String>, SnowError> {
        let now = self.client.clock().now();
        let elements =
            crate::table::dictionary::read(&mut self.client, &self.table.name, "snow.value.schema=dictionary (a typed value.converter)")?;
        let text = super::schema::table_schema(&self.table, &elements);
        let Some(state) = self.schema.as_mut() else { return Ok(None) };
        state.read_at = Some(now);
        state.known = elements.into_iter().map(|e| e.name).chain(state.not_in_dictionary.iter().cloned()).collect();
        if state.sent.as_deref() == Some(text.as_str()) {
            return Ok(None);
        }
        state.sent = Some(text.clone());
        Ok(Some(text))
    }

    /// A batch of `records` over `bytes`; its offset is the furthest position emitted, when it
    /// emitted any.
    fn batch(&self, records: Vec<SourceRecord>, bytes: BatchBytes, next_poll_ms: u32) -> PollBatch {
        let position = || match &self.backfill {
            Phase::Slices(backfill) => backfill.position().to_position(),
            // A restart's re-read could still reach versions emitted before (by an earlier run, a
            // backfill's slices or another connector): they go with the position.
            Phase::Cursor { carried, until } if !carried.is_empty() && self.high.ts.plus_seconds(-self.overlap) <= *until => {
                // At most the newest MAX_SEEN, as every position carries: a read-back of a busy
                // overlap (exactly once) found more than an offset record may hold, and such a
                // table's next open reads them back again anyway.
                let from = self.high.ts.plus_seconds(-self.overlap);
                let reachable: Vec<_> = carried.iter().filter(|v| v.ts >= from).collect();
                let newest: Vec<_> =
                    reachable[reachable.len().saturating_sub(super::follower::MAX_SEEN)..].iter().map(|v| (*v).clone()).collect();
                self.high.to_position_with(&newest)
            }
            _ => self.high.to_position(),
        };
        let offset = (!records.is_empty()).then(|| SourceOffset { partition: self.partition_key.clone(), position: position() });
        let topic = self.records.topic().to_string();
        PollBatch { notice: self.notice(), ..PollBatch::new(topic, self.records.headers().to_vec(), bytes, records, offset, next_poll_ms) }
    }

    /// What the latest finished sweep found about rows the integration user cannot read.
    pub fn hidden(&self) -> Hidden {
        self.sweep.hidden()
    }

    /// The status line for the host when hidden rows keep the stream from moving.
    fn notice(&self) -> Option<String> {
        let table = &self.table.name;
        match self.sweep.hidden() {
            Hidden::None => None,
            Hidden::Rest(n) => Some(format!(
                "table {table}: the {n} rows after the cursor ({} {}) up to the high-water mark are all hidden from the integration \
                 user (row-level ACLs, domain separation or a before-query business rule); nothing readable remains, new readable \
                 rows are read as they come",
                self.high.ts, self.high.id
            )),
            Hidden::ScanLimit(rows) => Some(format!(
                "table {table}: a readable row lies above the cursor ({} {}) but none turned up within {rows} rows, and the instance \
                 sends neither X-Total-Count nor Link to tell what follows; raise snow.table.{table}.hidden.scan.max.rows or let \
                 the integration user read those rows",
                self.high.ts, self.high.id
            )),
        }
    }
}

/// The encoded query of `request` on `table`: the base query with the cursor's terms and order.
fn request_query(request: &SweepRequest, table: &TableConfig) -> String {
    let order: Vec<&str> = request.order.iter().map(String::as_str).collect();
    table.query.with_cursor(&request.terms, &order)
}

/// The list parameters of `request` (with its encoded `query`) on `table`.
/// `keys` are the cursor fields, all a keys-only request reads.
fn list_params<'a>(table: &'a TableConfig, keys: &'a [String; 2], request: &SweepRequest, query: &'a str) -> ListParams<'a> {
    ListParams {
        query,
        fields: if request.keys_only { Some(&keys[..]) } else { table.fields.as_deref() },
        limit: request.window.limit,
        offset: request.window.offset,
        count: request.count,
        display_value: if request.keys_only { DisplayValue::Raw } else { table.read_display_value() },
        exclude_reference_link: table.exclude_reference_link,
        no_domain: table.query_domain == crate::config::source::QueryDomain::All,
        category: table.query_category.as_deref(),
    }
}

/// The row's cursor key, or what is wrong with it.
fn cursor_key<'a>(row: &'a PageRow<'_>, table: &TableConfig) -> Result<(Timestamp, &'a str), String> {
    let id = row.id.as_deref().filter(|id| !id.is_empty()).ok_or_else(|| format!("a row has no {}", table.sys_id_field))?;
    let text = row.timestamp.as_deref().filter(|t| !t.is_empty()).ok_or_else(|| format!("row {id} has no {}", table.timestamp_field))?;
    let ts = Timestamp::parse(text).map_err(|e| format!("row {id}: {}: {e}", table.timestamp_field))?;
    Ok((ts, id))
}

/// A stored offset for the same table under another partition key means the query, id field or
/// timestamp field changed: resuming silently would skip or repeat rows, so refuse and say how to reset.
fn refuse_foreign_offset(partition: &Partition, offsets: &[SourceOffset]) -> Result<(), SnowError> {
    let Some(other) = offsets.iter().filter_map(|o| Partition::from_key(&o.partition)).find(|p| p.same_table(partition)) else {
        return Ok(());
    };
    Err(SnowError::config(
        format!("snow.table.{}.query", partition.table),
        format!(
            "the stored offset of table {} was made with another query, id field, timestamp field or domain \
             (stored: fingerprint {}, timestamp field {}; now: fingerprint {}, timestamp field {}). \
             Restore the previous settings, or reset the table's offset to start again from its start.timestamp: \
             `snow-connect offsets reset --file <offset.storage.file.filename> --connector <name> --table {}`",
            partition.table, other.fingerprint, other.timestamp_field, partition.fingerprint, partition.timestamp_field, partition.table
        ),
    ))
}

mod parallel;
#[cfg(test)]
mod tests;
