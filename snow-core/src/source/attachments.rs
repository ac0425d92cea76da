//! A table's attachments (`snow.table.<t>.attachments=true`): the files attached to its rows,
//! listed in `sys_attachment` (`table_name` = the table, `table_sys_id` = the row) and fetched
//! from `/api/now/attachment/{sys_id}/file`. A keyset cursor over `(sys_updated_on, sys_id)`
//! with the query `table_name=<t>` (the same sweep engine as the table's, its own position, dedup
//! window and probe) lists them; each is then downloaded in a poll of its own (a poll makes at most
//! one request) and written to the attachments topic: key = the attachment's sys_id, value = its
//! metadata as read with the content in base64 (`"content"`), timestamp = its `sys_updated_on`.
//!
//! **Bounded memory.** A download is read no further than `attachments.max.bytes` (the transport
//! stops there). A file listed larger, or one whose body runs past it, is written all the same,
//! as a reference: `"content": null`, `"content_status": "too_large"`, its `size_bytes` and
//! `download_link`: never a change skipped silently.
//!
//! **Checked content.** The body must have the listed `size_bytes`, and, when the listing carries
//! a SHA-256 `hash` (64 hex digits), that digest. A mismatch is a transient error (the download
//! is tried again by the next poll); after [`MISMATCH_ATTEMPTS`] the attachment is written with
//! `"content_status": "checksum_mismatch"` and a warning, so one bad file cannot stop the table.

use std::collections::VecDeque;

use base64::Engine;
use serde_json::{Map, Value};
use sha2::Digest;

use crate::clock::Clock;
use crate::config::TableConfig;
use crate::cursor::{Partition, WindowSizes};
use crate::error::{ErrorClass, SnowError};
use crate::http::Transport;
use crate::record::{BatchBytes, BatchData, PollBatch, SourceOffset, SourceRecord, Span};
use crate::table::{BaseQuery, Download, ListParams, TableClient, parse_page};
use crate::time::Timestamp;

use super::follower::{Follower, FollowerSettings, Follows, Opening};
use super::note::Note;

/// The table of attachments.
pub const ATTACHMENTS: &str = "sys_attachment";

/// The fields of an attachment listed and written.
const FIELDS: [&str; 10] = [
    "sys_id",
    "sys_updated_on",
    "sys_created_on",
    "sys_created_by",
    "table_name",
    "table_sys_id",
    "file_name",
    "content_type",
    "size_bytes",
    "hash",
];

/// Downloads of one attachment whose content disagrees with its listing before it is written
/// with `"content_status": "checksum_mismatch"`.
pub const MISMATCH_ATTEMPTS: u32 = 3;

/// Header: `inline` (the content is in the value) or why it is not.
pub const CONTENT_HEADER: &str = "snow.attachment.content";

/// One attachment listed and not written yet.
struct Listed {
    ts: Timestamp,
    id: String,
    /// Its metadata as listed.
    row: Map<String, Value>,
}

/// The stream of one table's attachments.
pub struct AttachmentStream {
    core: Follower,
    base_url: String,
    max_bytes: u32,
    /// The sweep in progress has listed everything: it ends when `listed` is written.
    listed_all: bool,
    /// Listed, in cursor order, to download and write one a poll.
    listed: VecDeque<Listed>,
    /// Downloads of the first of `listed` whose content disagreed with its listing.
    mismatches: u32,
}

impl Follows for AttachmentStream {
    fn core(&self) -> &Follower {
        &self.core
    }
    fn core_mut(&mut self) -> &mut Follower {
        &mut self.core
    }
}

impl AttachmentStream {
    /// The attachment stream of `table` when it reads attachments, resuming from its stored
    /// offset in `offsets`; `base_url` makes the download links.
    pub fn open(
        table: &TableConfig,
        settings: &FollowerSettings<'_>,
        base_url: &str,
        offsets: &[SourceOffset],
    ) -> Result<Option<Self>, SnowError> {
        if !table.attachments {
            return Ok(None);
        }
        let opening = Opening {
            partition: Partition::attachments_of(settings.instance, &table.name),
            key: &format!("snow.table.{}.attachments", table.name),
            topic: table.attachments_topic.clone(),
            headers: Follower::headers(
                &table.name,
                settings.instance,
                &[("snow.source.table", ATTACHMENTS), ("snow.source.operation", "UPSERT")],
            ),
            // Listings are small; a page of them is written one download a poll.
            sizes: WindowSizes::new(table.batch_size.min(100), table.hidden_window_max_rows, u64::from(table.hidden_scan_max_rows)),
            what: "attachments",
            source: ATTACHMENTS,
            ts_field: "sys_updated_on",
        };
        Ok(Some(Self {
            core: Follower::open(table, settings, opening, offsets)?,
            base_url: base_url.trim_end_matches('/').to_string(),
            max_bytes: table.attachments_max_bytes,
            listed_all: false,
            listed: VecDeque::new(),
            mismatches: 0,
        }))
    }

    /// One request: the probe, a page of the listing, or the download of the next attachment
    /// listed (written as its record); `poll_interval_ms` is the pause after a finished sweep.
    pub fn poll<T: Transport, C: Clock>(&mut self, client: &mut TableClient<T, C>, poll_interval_ms: u32) -> Result<PollBatch, SnowError> {
        if self.core.probe_pending {
            self.probe(client)?;
            self.core.probe_pending = false;
            return Ok(self.core.batch(Vec::new(), BatchBytes::default(), 0));
        }
        if !self.listed.is_empty() {
            return self.write_next(client, poll_interval_ms);
        }
        let fields = FIELDS.map(String::from).to_vec();
        let page = self.core.list_next(client, &self.base_query(), &fields)?;
        let rows = self.core.rows(&page.body)?;
        let keyed = self.core.keyed(&rows)?;
        let keys: Vec<(Timestamp, &str)> = keyed.iter().map(|(ts, id, _)| (*ts, *id)).collect();
        let observed = self.core.observe(&keys, &page, page.server_time)?;
        for &(ts, id, raw) in &keyed[..observed.emit] {
            // Recorded as written only once written: the stored position carries what is.
            if self.core.dedup.contains(ts, id, "") {
                continue;
            }
            let row: Map<String, Value> = serde_json::from_slice(raw)
                .map_err(|e| SnowError::data(format!("table {}: {ATTACHMENTS} row {id}: {e}", self.core.table)))?;
            self.listed.push_back(Listed { ts, id: id.to_string(), row });
        }
        self.listed_all = observed.done;
        let next = if self.listed.is_empty() && observed.done { self.sweep_done(poll_interval_ms) } else { 0 };
        Ok(self.core.batch(Vec::new(), BatchBytes::default(), next))
    }

    /// Downloads the first attachment listed and writes it.
    fn write_next<T: Transport, C: Clock>(
        &mut self,
        client: &mut TableClient<T, C>,
        poll_interval_ms: u32,
    ) -> Result<PollBatch, SnowError> {
        let Some(first) = self.listed.front() else { return Ok(self.core.batch(Vec::new(), BatchBytes::default(), 0)) };
        let listed_size = first.row.get("size_bytes").and_then(number);
        let too_large = listed_size.is_some_and(|s| s > u64::from(self.max_bytes));
        let (content, status) = if too_large {
            (None, "too_large")
        } else {
            match client.download(&first.id, self.max_bytes as usize)? {
                Download::TooLarge => (None, "too_large"),
                Download::Content(bytes, _) => match self.check(first, &bytes) {
                    Ok(()) => (Some(bytes), "inline"),
                    Err(problem) if self.mismatches + 1 < MISMATCH_ATTEMPTS => {
                        self.mismatches += 1;
                        return Err(SnowError::transport(problem, ErrorClass::Transient));
                    }
                    Err(problem) => {
                        self.core.notes.push(Note::warn(format!(
                            "{problem}; written with content_status checksum_mismatch after {MISMATCH_ATTEMPTS} downloads"
                        )));
                        (Some(bytes), "checksum_mismatch")
                    }
                },
            }
        };
        self.mismatches = 0;
        let Some(Listed { ts, id, mut row }) = self.listed.pop_front() else {
            return Ok(self.core.batch(Vec::new(), BatchBytes::default(), 0));
        };
        let table = self.core.table.clone();
        row.insert("download_link".into(), Value::String(format!("{}/api/now/attachment/{id}/file", self.base_url)));
        row.insert("content".into(), content.map_or(Value::Null, |b| Value::String(base64::engine::general_purpose::STANDARD.encode(b))));
        row.insert("content_status".into(), Value::String(status.into()));
        let value = serde_json::to_vec(&row).map_err(|e| SnowError::data(format!("table {table}: attachment {id}: {e}")))?;
        let mut data = BatchData::new(&[]);
        let too_big = |e| SnowError::data(format!("table {table} attachment {id}: {e}"));
        let key = data.append(id.as_bytes()).map_err(too_big)?;
        let value = data.append(&value).map_err(too_big)?;
        let name = data.append(CONTENT_HEADER.as_bytes()).map_err(too_big)?;
        let said = data.append(status.as_bytes()).map_err(too_big)?;
        let at = data.header(name, said).map_err(too_big)?;
        let mut records = vec![SourceRecord {
            key: Some(key),
            value: Some(value),
            headers: Span { start: at, len: 1 },
            timestamp_ms: Some(ts.as_millis()),
        }];
        let core = &mut self.core;
        core.dedup.insert(ts, &id, "");
        core.wrote(ts, &id);
        core.dedup.forget_before(core.high.ts.plus_seconds(-core.overlap));
        let bytes = data.finish().into_batch_bytes(Vec::new(), &mut records);
        let next = if self.listed.is_empty() && self.listed_all { self.sweep_done(poll_interval_ms) } else { 0 };
        Ok(self.core.batch(records, bytes, next))
    }

    /// Whether `bytes` are the content `listed` describes: its size, and its SHA-256 when listed.
    fn check(&self, listed: &Listed, bytes: &[u8]) -> Result<(), String> {
        let what = || {
            format!(
                "table {}: attachment {} ({})",
                self.core.table,
                listed.id,
                listed.row.get("file_name").and_then(Value::as_str).unwrap_or("")
            )
        };
        if let Some(size) = listed.row.get("size_bytes").and_then(number).filter(|s| *s != bytes.len() as u64) {
            return Err(format!("{}: {} bytes downloaded, {size} listed", what(), bytes.len()));
        }
        let listed_hash = listed.row.get("hash").and_then(Value::as_str).unwrap_or("");
        if listed_hash.len() == 64 && listed_hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            let digest: String = sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect();
            if !digest.eq_ignore_ascii_case(listed_hash) {
                return Err(format!("{}: SHA-256 {digest} downloaded, {listed_hash} listed", what()));
            }
        }
        Ok(())
    }

    /// The sweep is through: the next follows the table's next; the pause.
    fn sweep_done(&mut self, poll_interval_ms: u32) -> u32 {
        self.listed_all = false;
        self.core.sweep_done(poll_interval_ms)
    }

    /// `table_name=<t>`: this table's attachments only.
    fn base_query(&self) -> BaseQuery {
        BaseQuery::parse(&format!("table_name={}", self.core.table)).unwrap_or_default()
    }

    /// Checks at start that attachments can be listed: `sys_attachment` readable by the
    /// integration user and, when attachments of the table are counted, one of them visible.
    fn probe<T: Transport, C: Clock>(&mut self, client: &mut TableClient<T, C>) -> Result<(), SnowError> {
        let key = format!("snow.table.{}.attachments", self.core.table);
        let table = &self.core.table;
        let query = format!("table_name={table}^ORDERBYDESCsys_updated_on");
        let fields = FIELDS.map(String::from).to_vec();
        let params = ListParams { count: true, ..ListParams::lookup(&query, &fields, 100) };
        let page = match client.list(ATTACHMENTS, &params) {
            Err(SnowError::Http(h)) if h.status == 403 => {
                return Err(SnowError::config(
                    key,
                    format!(
                        "startup probe: the integration user may not read {ATTACHMENTS} (an ACL refused it: {}); the attachments of {table} \
                         are listed in it. Grant the user read on {ATTACHMENTS}, or set the key to false",
                        h.message
                    ),
                ));
            }
            other => other?,
        };
        let rows =
            parse_page(&page.body, "sys_id", "sys_updated_on").map_err(|m| SnowError::data(format!("table {table} attachments: {m}")))?;
        if rows.is_empty() && page.total.is_some_and(|t| t > 0) {
            return Err(SnowError::config(
                key,
                format!(
                    "startup probe: {} attachments of {table} are counted in {ATTACHMENTS} but the integration user can read none of the \
                     newest of them (a read ACL hides them); grant it read on them, or set the key to false",
                    page.total.unwrap_or_default()
                ),
            ));
        }
        Ok(())
    }
}

/// A listed number: ServiceNow sends numbers as strings.
fn number(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.trim().parse().ok())
}
