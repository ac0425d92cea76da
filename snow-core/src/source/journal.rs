//! A table's journal entries (`snow.table.<t>.journal=comments,work_notes`): the comments and
//! work notes of its rows, which ServiceNow keeps in `sys_journal_field` (`name` = the table,
//! `element` = the field, `element_id` = the row's sys_id, `value`, `sys_created_on`), not in the
//! rows. They are insert-only, so a keyset cursor over `(sys_created_on, sys_id)` with the query
//! `name=<t>^elementIN<fields>` reads each once; the same sweep engine as the table's (drain,
//! advance, overlap, dedup) with its own stored position, dedup window and startup probe. Entries
//! go to their own topic (`journal.topic`), keyed by the entry's sys_id, the entry's JSON as the
//! value, stamped with its `sys_created_on`; a sweep of entries follows each finished sweep of the
//! table, in the same poll batches (so the same producer and, exactly once, transactions).
//!
//! **The probe** tells "no entries yet" (none counted) from "the journal's read ACL hides them"
//! (entries counted, none readable: a 200 with an empty answer to a user that reads the table),
//! and a refused read (403) from both.

use crate::clock::Clock;
use crate::config::TableConfig;
use crate::cursor::{Partition, WindowSizes};
use crate::error::SnowError;
use crate::http::Transport;
use crate::record::{BatchBytes, BatchData, PollBatch, SourceOffset, SourceRecord, Span};
use crate::table::{BaseQuery, ListParams, TableClient, parse_page};
use crate::time::Timestamp;

use super::follower::{Follower, FollowerSettings, Follows, Opening};
use super::note::Note;

/// The table of journal entries.
pub const JOURNAL: &str = "sys_journal_field";

/// The fields of an entry read and written.
const FIELDS: [&str; 7] = ["sys_id", "sys_created_on", "sys_created_by", "name", "element", "element_id", "value"];

/// The stream of one table's journal entries.
pub struct JournalStream {
    core: Follower,
    elements: Vec<String>,
}

impl Follows for JournalStream {
    fn core(&self) -> &Follower {
        &self.core
    }
    fn core_mut(&mut self) -> &mut Follower {
        &mut self.core
    }
}

impl JournalStream {
    /// The journal stream of `table` when it reads journal fields, resuming from its stored
    /// offset in `offsets`.
    pub fn open(table: &TableConfig, settings: &FollowerSettings<'_>, offsets: &[SourceOffset]) -> Result<Option<Self>, SnowError> {
        if table.journal.is_empty() {
            return Ok(None);
        }
        let opening = Opening {
            partition: Partition::journal_of(settings.instance, &table.name, &table.journal),
            key: &format!("snow.table.{}.journal", table.name),
            topic: table.journal_topic.clone(),
            headers: Follower::headers(
                &table.name,
                settings.instance,
                &[("snow.source.table", JOURNAL), ("snow.source.operation", "INSERT")],
            ),
            sizes: WindowSizes::new(table.batch_size, table.hidden_window_max_rows, u64::from(table.hidden_scan_max_rows)),
            what: "journal",
            source: JOURNAL,
            ts_field: "sys_created_on",
        };
        Ok(Some(Self { core: Follower::open(table, settings, opening, offsets)?, elements: table.journal.clone() }))
    }

    /// One request of the entries' sweep (or their probe) and its records; `poll_interval_ms` is
    /// the pause after a finished sweep.
    pub fn poll<T: Transport, C: Clock>(&mut self, client: &mut TableClient<T, C>, poll_interval_ms: u32) -> Result<PollBatch, SnowError> {
        if self.core.probe_pending {
            self.probe(client)?;
            self.core.probe_pending = false;
            return Ok(self.core.batch(Vec::new(), BatchBytes::default(), 0));
        }
        let fields = FIELDS.map(String::from).to_vec();
        let page = self.core.list_next(client, &self.base_query(), &fields)?;
        let rows = self.core.rows(&page.body)?;
        let keyed = self.core.keyed(&rows)?;
        let keys: Vec<(Timestamp, &str)> = keyed.iter().map(|(ts, id, _)| (*ts, *id)).collect();
        let observed = self.core.observe(&keys, &page, page.server_time)?;
        let table = &self.core.table;
        let emitted = &keyed[..observed.emit];
        let mut data = BatchData::new(&page.body);
        let mut records = Vec::with_capacity(emitted.len());
        let too_large = |e| SnowError::data(format!("table {table} journal: {e}; lower snow.batch.size"));
        for &(ts, id, raw) in emitted {
            if !self.core.dedup.insert(ts, id, "") {
                continue;
            }
            let key = data.span(id.as_bytes()).map_err(too_large)?;
            let value = data.span(raw).map_err(too_large)?;
            records.push(SourceRecord {
                key: Some(key),
                value: Some(value),
                headers: Span { start: 0, len: 0 },
                timestamp_ms: Some(ts.as_millis()),
            });
        }
        if let Some(&(ts, id, _)) = emitted.last() {
            self.core.wrote(ts, id);
        }
        let finished = data.finish();
        let bytes = if records.is_empty() { BatchBytes::default() } else { finished.into_batch_bytes(page.body, &mut records) };
        let core = &mut self.core;
        core.dedup.forget_before(core.high.ts.plus_seconds(-core.overlap));
        let next = if observed.done { core.sweep_done(poll_interval_ms) } else { 0 };
        Ok(core.batch(records, bytes, next))
    }

    /// `name=<t>^elementIN<fields>`: this table's entries of the chosen fields only.
    fn base_query(&self) -> BaseQuery {
        BaseQuery::parse(&format!("name={}^elementIN{}", self.core.table, self.elements.join(","))).unwrap_or_default()
    }

    /// Checks at start that entries can be read: `sys_journal_field` readable by the integration
    /// user and, when entries of the table are counted, at least one of them visible.
    fn probe<T: Transport, C: Clock>(&mut self, client: &mut TableClient<T, C>) -> Result<(), SnowError> {
        let key = format!("snow.table.{}.journal", self.core.table);
        let table = &self.core.table.clone();
        let query = format!("{}^ORDERBYDESCsys_created_on", self.base_query().canonical());
        let fields = FIELDS.map(String::from).to_vec();
        let params = ListParams { count: true, ..ListParams::lookup(&query, &fields, 100) };
        let page = match client.list(JOURNAL, &params) {
            Err(SnowError::Http(h)) if h.status == 403 => {
                return Err(SnowError::config(
                    key,
                    format!(
                        "startup probe: the integration user may not read {JOURNAL} (an ACL refused it: {}); the journal entries of {table} \
                         are read from it. Grant the user read on {JOURNAL}, or remove the key",
                        h.message
                    ),
                ));
            }
            other => other?,
        };
        let rows =
            parse_page(&page.body, "sys_id", "sys_created_on").map_err(|m| SnowError::data(format!("table {table} journal: {m}")))?;
        let fields = self.elements.join(", ");
        match (rows.first(), page.total) {
            (None, Some(0)) => self.core.notes.push(Note::info(format!(
                "table {table}: no journal entries ({fields}) yet: the user reads {JOURNAL} and none is counted; entries are read as they come"
            ))),
            (None, Some(total)) => {
                let none_of = if total > 100 { "none of the newest 100 of them".to_string() } else { "none of them".to_string() };
                return Err(SnowError::config(
                    key,
                    format!(
                        "startup probe: {total} journal entries ({fields}) of {table} are counted in {JOURNAL} but the integration user \
                         can read {none_of} (the journal's read ACL hides them: ServiceNow answers 200 with nothing). Grant the \
                         user read on those fields' entries (e.g. the role that reads {table}'s {fields}), or remove the key"
                    ),
                ));
            }
            (None, None) => self.core.notes.push(Note::warn(format!(
                "table {table}: no journal entries ({fields}) readable, and the instance sends no X-Total-Count: whether there are none \
                 or the journal's read ACL hides them cannot be told"
            ))),
            (Some(row), _) => {
                let entry: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(row.raw).unwrap_or_default();
                if let Some(missing) = ["element_id", "value"].into_iter().find(|f| !entry.contains_key(*f)) {
                    return Err(SnowError::config(
                        key,
                        format!("startup probe: the integration user cannot read the {missing} field of {JOURNAL}: grant it"),
                    ));
                }
            }
        }
        Ok(())
    }
}
