//! A table's deletes (ADR 0031): a second keyset cursor, over the instance's *Audit Deleted
//! Records* (`sys_audit_delete`, `tablename=<t>`, walked by `(sys_created_on, sys_id)`), with its
//! own stored position, dedup window and startup probe (the part every follower of a table shares
//! is [`super::follower`]); its records go to the table's topic in the
//! same poll batches as the table's own, so through the same producer and, exactly once, the same
//! transactions.
//!
//! **Order per key by a cap.** A sweep of deletes holds its high-water mark at the smaller of the
//! server clock minus the safety lag and what the table's own cursor has read (the high-water mark
//! of its latest finished sweep). A row's last update is stamped at or before its delete, so when
//! a delete stamped `T` is emitted, every version of the row stamped up to `T` was emitted before
//! it by the table's cursor: a key's tombstone never precedes its last upsert. A sweep of deletes
//! runs after each finished sweep of the table.
//!
//! **Rows deleted and created again** with the same sys_id (a restore from *Deleted Records*):
//! before a page of deletes is emitted, one `sys_idIN…` read of the table asks which of their rows
//! exist again; no tombstone is written for those (the table's cursor writes the live row).
//!
//! A delete's version, for the dedup window, is `(sys_created_on of the delete, the deleted row's
//! sys_id, "")`. The stored position carries the versions the overlap will read again, so a
//! restart (exactly once included) writes none of them twice without reading the topic back.

use serde_json::{Map, Value};

use crate::clock::Clock;
use crate::config::TableConfig;
use crate::config::source::DeleteFormat;
use crate::cursor::{Partition, WindowSizes};
use crate::error::{ErrorClass, SnowError};
use crate::http::Transport;
use crate::record::{BatchBytes, BatchData, PollBatch, SourceOffset, SourceRecord, Span};
use crate::table::{BaseQuery, ListParams, TableClient, parse_page};
use crate::time::Timestamp;

use super::audit_payload;
use super::follower::{Follower, FollowerSettings, Follows, Opening};
use super::note::Note;

/// The table of audited deletes.
pub const AUDIT_DELETE: &str = "sys_audit_delete";

/// Header: the user who deleted the row (`sys_created_by` of the audit record).
pub const DELETED_BY_HEADER: &str = "snow.deleted.by";

/// Header: when the row was deleted (`sys_created_on` of the audit record, UTC).
pub const DELETED_ON_HEADER: &str = "snow.deleted.on";

/// The field a record-format delete carries (Debezium's name).
pub const DELETED_FIELD: &str = "__deleted";

/// The stream of one table's deletes.
pub struct DeleteStream {
    core: Follower,
    format: DeleteFormat,
    /// `snow.safety.lag.seconds`, in seconds.
    lag: i64,
    /// Deletes not written because the row exists again.
    restored: u64,
    /// A notified stamp (push, ADR 0032) the next sweep of deletes may read up to, never past
    /// what the table's own cursor has read.
    raise: Option<Timestamp>,
}

impl Follows for DeleteStream {
    fn core(&self) -> &Follower {
        &self.core
    }
    fn core_mut(&mut self) -> &mut Follower {
        &mut self.core
    }
}

impl DeleteStream {
    /// The delete stream of `table` when it captures deletes, resuming from its stored offset in
    /// `offsets`.
    pub fn open(table: &TableConfig, settings: &FollowerSettings<'_>, offsets: &[SourceOffset]) -> Result<Option<Self>, SnowError> {
        let Some(format) = table.deletes else { return Ok(None) };
        if table.sys_id_field != "sys_id" {
            return Err(SnowError::config(
                format!("snow.table.{}.deletes", table.name),
                format!(
                    "deletes are read by the deleted row's sys_id, and table {} is keyed by {} (a database view?): a view's deletes are its tables' deletes",
                    table.name, table.sys_id_field
                ),
            ));
        }
        let opening = Opening {
            partition: Partition::deletes_of(settings.instance, &table.name),
            key: &format!("snow.table.{}.deletes", table.name),
            topic: table.topic.clone(),
            headers: Follower::headers(&table.name, settings.instance, &[("snow.source.operation", "DELETE")]),
            sizes: WindowSizes::new(table.batch_size, table.hidden_window_max_rows, u64::from(table.hidden_scan_max_rows)),
            what: "deletes",
            source: AUDIT_DELETE,
            ts_field: "sys_created_on",
        };
        let stream = Self {
            core: Follower::open(table, settings, opening, offsets)?,
            format,
            lag: i64::from(settings.lag_seconds),
            restored: 0,
            raise: None,
        };
        Ok(Some(stream))
    }

    /// Deletes not written because their row exists again.
    pub fn restored(&self) -> u64 {
        self.restored
    }

    /// A push notification stamped `ts` (a delete's notification carries the time of the
    /// delete): the next sweep of deletes may read up to it instead of stopping the safety lag
    /// short, capped by what the table's own cursor has read then, so a delete is still never read
    /// before the row's last upsert could have been.
    pub fn wake(&mut self, ts: Timestamp) {
        self.raise = Some(self.raise.map_or(ts, |r| r.max(ts)));
    }

    /// One request of the deletes' sweep (or their probe) and its records. `read_up_to` is what
    /// the table's own cursor has read (the cap); `poll_interval_ms` the pause after a finished sweep.
    pub fn poll<T: Transport, C: Clock>(
        &mut self,
        client: &mut TableClient<T, C>,
        read_up_to: Option<Timestamp>,
        poll_interval_ms: u32,
    ) -> Result<PollBatch, SnowError> {
        if self.core.probe_pending {
            self.probe(client)?;
            self.core.probe_pending = false;
            return Ok(self.core.batch(Vec::new(), BatchBytes::default(), 0));
        }
        // Nothing the table's cursor has not read yet can be deleted after its last upsert.
        let Some(read_up_to) = read_up_to else {
            self.core.due = false;
            return Ok(self.core.batch(Vec::new(), BatchBytes::default(), poll_interval_ms));
        };
        if self.core.sweep.high_water().is_none()
            && let Some(raised) = self.raise.take()
        {
            self.core.sweep.raise_next_high_water(raised.min(read_up_to));
        }
        let page = self.core.list_next(client, &self.base_query(), &self.fields())?;
        let rows = self.core.rows(&page.body)?;
        let keyed = self
            .core
            .keyed(&rows)?
            .into_iter()
            .map(|(ts, id, raw)| {
                let audit: AuditRow = serde_json::from_slice(raw)
                    .map_err(|e| SnowError::data(format!("table {}: {AUDIT_DELETE} row {id}: {e}", self.core.table)))?;
                Ok((ts, id, audit, raw))
            })
            .collect::<Result<Vec<_>, SnowError>>()?;
        // Every request of the poll is made before anything moves: a failed one leaves the sweep,
        // the dedup window and the position as they were, so the poll is simply made again.
        let alive = self.alive(client, keyed.iter().map(|(_, _, audit, _)| audit.documentkey.as_str()).filter(|k| !k.is_empty()))?;
        let keys: Vec<(Timestamp, &str)> = keyed.iter().map(|(ts, id, _, _)| (*ts, *id)).collect();
        let cap = read_up_to.plus_seconds(self.lag);
        let server_time = Some(page.server_time.map_or(cap, |now| now.min(cap)));
        let observed = self.core.observe(&keys, &page, server_time)?;
        let emitted = &keyed[..observed.emit];
        let mut data = BatchData::new(&page.body);
        let mut records = Vec::with_capacity(emitted.len());
        let mut names: Option<(Span, Span)> = None;
        for (ts, _, audit, _) in emitted {
            if audit.documentkey.is_empty() || !self.core.dedup.insert(*ts, &audit.documentkey, "") {
                continue;
            }
            if alive.contains(audit.documentkey.as_str()) {
                self.restored += 1;
                continue;
            }
            records.push(self.record(&mut data, &mut names, *ts, audit)?);
        }
        if let Some(&(ts, id, _, _)) = emitted.last() {
            self.core.wrote(ts, id);
        }
        let finished = data.finish();
        let bytes = if records.is_empty() { BatchBytes::default() } else { finished.into_batch_bytes(page.body, &mut records) };
        self.core.dedup.forget_before(self.core.high.ts.plus_seconds(-self.core.overlap));
        let next = if observed.done { self.core.sweep_done(poll_interval_ms) } else { 0 };
        Ok(self.core.batch(records, bytes, next))
    }

    /// `tablename=<t>`: this table's deletes only (another table's are never read).
    fn base_query(&self) -> BaseQuery {
        BaseQuery::parse(&format!("tablename={}", self.core.table)).unwrap_or_default()
    }

    fn fields(&self) -> Vec<String> {
        let mut fields: Vec<String> = ["sys_id", "sys_created_on", "sys_created_by", "documentkey"].map(String::from).to_vec();
        if self.format == DeleteFormat::Record {
            fields.push("payload".into());
        }
        fields
    }

    /// Of `ids`, the rows of the table that exist (again).
    fn alive<'i, T: Transport, C: Clock>(
        &self,
        client: &mut TableClient<T, C>,
        ids: impl Iterator<Item = &'i str>,
    ) -> Result<std::collections::HashSet<String>, SnowError> {
        let ids: Vec<&str> = ids.collect();
        if ids.is_empty() {
            return Ok(Default::default());
        }
        let query = format!("sys_idIN{}", ids.join(","));
        let fields = vec!["sys_id".to_string()];
        let params = ListParams::lookup(&query, &fields, ids.len() as u32);
        let page = client.list(&self.core.table, &params)?;
        let rows = parse_page(&page.body, "sys_id", "sys_updated_on")
            .map_err(|m| SnowError::transport(format!("table {}: {m}", self.core.table), ErrorClass::Transient))?;
        Ok(rows.iter().filter_map(|r| r.id.as_deref().map(str::to_string)).collect())
    }

    /// The record of one delete: key = the row's sys_id; value null (tombstone) or the row from
    /// the audit record with `"__deleted": true`; the deleting user and time as headers.
    fn record(
        &mut self,
        data: &mut BatchData<'_>,
        names: &mut Option<(Span, Span)>,
        ts: Timestamp,
        audit: &AuditRow,
    ) -> Result<SourceRecord, SnowError> {
        let table = self.core.table.clone();
        let too_large = |e| SnowError::data(format!("table {table} deletes: {e}; lower snow.batch.size"));
        let key = data.append(audit.documentkey.as_bytes()).map_err(too_large)?;
        let value = match self.format {
            DeleteFormat::Tombstone => None,
            DeleteFormat::Record => {
                let value = self.deleted_row(audit);
                Some(data.append(&serde_json::to_vec(&value).unwrap_or_default()).map_err(too_large)?)
            }
        };
        let (by, on) = match *names {
            Some(n) => n,
            None => {
                let n = (
                    data.append(DELETED_BY_HEADER.as_bytes()).map_err(too_large)?,
                    data.append(DELETED_ON_HEADER.as_bytes()).map_err(too_large)?,
                );
                *names.insert(n)
            }
        };
        let who = data.append(audit.sys_created_by.as_bytes()).map_err(too_large)?;
        let when = data.append(ts.to_string().as_bytes()).map_err(too_large)?;
        let first = data.header(by, who).map_err(too_large)?;
        data.header(on, when).map_err(too_large)?;
        Ok(SourceRecord { key: Some(key), value, headers: Span { start: first, len: 2 }, timestamp_ms: Some(ts.as_millis()) })
    }

    /// The deleted row as the audit record kept it, with `"__deleted": true`; only its sys_id when
    /// the payload cannot be read (and a note says so).
    fn deleted_row(&mut self, audit: &AuditRow) -> Value {
        let mut row = audit_payload::fields(&audit.payload, &self.core.table).unwrap_or_else(|| {
            self.core.notes.push(Note::warn(format!(
                    "table {}: the audit record of the delete of {} holds no readable row (payload); the delete is written with its sys_id only",
                    self.core.table, audit.documentkey
                )));
            Map::new()
        });
        row.insert("sys_id".into(), Value::String(audit.documentkey.clone()));
        row.insert(DELETED_FIELD.into(), Value::Bool(true));
        Value::Object(row)
    }

    /// Checks at start that deletes can be read: `sys_audit_delete` readable by the integration
    /// user, its rows of this table visible, and the table's deletes audited.
    fn probe<T: Transport, C: Clock>(&mut self, client: &mut TableClient<T, C>) -> Result<(), SnowError> {
        let key = format!("snow.table.{}.deletes", self.core.table);
        let table = &self.core.table;
        if table.starts_with("sys_") {
            self.core.notes.push(Note::warn(format!(
                    "table {table}: deletes of sys_ tables are audited only when the instance lists them in glide.ui.audit_deleted_tables; without it no delete of {table} is recorded"
                )));
        }
        let query = format!("tablename={table}^ORDERBYDESCsys_created_on");
        let fields = vec!["sys_id".to_string(), "documentkey".to_string()];
        let params = ListParams { count: true, ..ListParams::lookup(&query, &fields, 1) };
        let page = match client.list(AUDIT_DELETE, &params) {
            Err(SnowError::Http(h)) if h.status == 403 => {
                return Err(SnowError::config(
                    key,
                    format!(
                        "startup probe: the integration user may not read {AUDIT_DELETE} (an ACL refused it: {}); deletes of {table} are read from it. \
                         Grant the user read on {AUDIT_DELETE} (only admin has it on a new instance), or set the key to false",
                        h.message
                    ),
                ));
            }
            other => other?,
        };
        let rows =
            parse_page(&page.body, "sys_id", "sys_created_on").map_err(|m| SnowError::data(format!("table {table} deletes: {m}")))?;
        if rows.is_empty() && page.total.is_some_and(|t| t > 0) {
            return Err(SnowError::config(
                key,
                format!(
                    "startup probe: {} deletes of {table} are recorded in {AUDIT_DELETE} but the integration user can read none of them (a row-level ACL hides them); \
                     grant it read on those rows, or set the key to false",
                    page.total.unwrap_or_default()
                ),
            ));
        }
        if let Some(row) = rows.first()
            && !serde_json::from_slice::<Map<String, Value>>(row.raw).is_ok_and(|r| r.contains_key("documentkey"))
        {
            return Err(SnowError::config(
                key,
                format!("startup probe: the integration user cannot read the documentkey field of {AUDIT_DELETE}: grant it"),
            ));
        }
        self.probe_auditing(client, &key)
    }

    /// Reads the table's collection entry in the dictionary: `no_audit_delete=true` means no
    /// delete is ever recorded.
    fn probe_auditing<T: Transport, C: Clock>(&mut self, client: &mut TableClient<T, C>, key: &str) -> Result<(), SnowError> {
        let table = &self.core.table;
        let query = format!("name={table}^internal_type=collection");
        let fields = vec!["attributes".to_string()];
        let params = ListParams::lookup(&query, &fields, 1);
        let page = match client.list("sys_dictionary", &params) {
            Err(SnowError::Http(h)) if h.status == 403 => {
                self.core.notes.push(Note::warn(format!(
                        "table {table}: the integration user cannot read sys_dictionary, so whether deletes of {table} are audited (no_audit_delete) is not checked"
                    )));
                return Ok(());
            }
            other => other?,
        };
        let attributes: String = serde_json::from_slice::<Value>(&page.body)
            .ok()
            .and_then(|v| v.get("result")?.as_array()?.first()?.get("attributes")?.as_str().map(str::to_string))
            .unwrap_or_default();
        if attributes.split(',').any(|a| a.trim().eq_ignore_ascii_case("no_audit_delete=true")) {
            return Err(SnowError::config(
                key,
                format!(
                    "startup probe: deletes of {table} are not audited (its dictionary collection entry has no_audit_delete=true), so no delete can be read; \
                     remove the attribute, or set the key to false"
                ),
            ));
        }
        Ok(())
    }
}

/// The fields of a `sys_audit_delete` row a delete needs.
#[derive(serde::Deserialize)]
struct AuditRow {
    #[serde(default)]
    documentkey: String,
    #[serde(default)]
    sys_created_by: String,
    #[serde(default)]
    payload: String,
}
