//! A table read by periodic snapshots (`snow.table.<t>.mode=snapshot`, ADR 0035): for tables and
//! database views without a maintained timestamp, which no cursor can follow.
//!
//! Every `snapshot.interval.ms` the whole table is read along its id field (`<id> > last ^
//! ORDERBY<id>`, a keyset that neither skips nor repeats rows while others are written, with
//! `sysparm_offset` only to cross a page whose rows ACLs hide). Each row's content hash (FNV-1a
//! over the row as ServiceNow sent it) is compared with what the table's topic holds for its key:
//! a new or changed row is emitted (headers `snow.snapshot.id` and `snow.snapshot.hash`), an
//! unchanged one is not, and once the read is through, every key the topic holds that the
//! snapshot did not read becomes a tombstone.
//!
//! What the topic holds is not kept here between runs: the host reads it back from the topic
//! when the table opens and hands it over as the offset of [`seed_partition`] (lines of
//! `<hash> <id>`); the stored position only says when the last snapshot started, so that a
//! restart keeps to the interval.

use std::collections::HashMap;

use crate::clock::Clock;
use crate::config::TableConfig;
use crate::config::source::BadRowBehavior;
use crate::cursor::position::{fnv1a64, snapshot_position};
use crate::error::{ErrorClass, SnowError};
use crate::http::Transport;
use crate::record::{BatchBytes, BatchData, Header, PollBatch, SourceOffset, SourceRecord, Span};
use crate::table::query::{Op, Term};
use crate::table::{ListParams, TableClient, parse_page};
use crate::time::Timestamp;

use super::note::Note;
use super::record::RecordBuilder;

pub use super::record::{HASH_HEADER, ID_HEADER, hash_text};

/// The partition a host hands a snapshot table's seed under: the table's own key with `#topic`.
pub fn seed_partition(partition_key: &str) -> String {
    format!("{partition_key}#topic")
}

/// The content hash of a row as ServiceNow sent it.
pub fn content_hash(raw: &[u8]) -> u64 {
    fnv1a64(raw)
}

/// The seed's text for `rows` (key, hash): one `<hash> <id>` line each.
pub fn seed_text<'a>(rows: impl IntoIterator<Item = (&'a str, u64)>) -> String {
    let mut out = String::new();
    // A key holding a line break is no sys_id (another writer's record in the topic): it cannot be
    // a line of the seed, and no row of the table can be it, so it is left out.
    for (id, hash) in rows.into_iter().filter(|(id, _)| !id.contains('\n')) {
        out.push_str(&hash_text(hash));
        out.push(' ');
        out.push_str(id);
        out.push('\n');
    }
    out
}

/// Reads a seed's text into (id, hash) pairs; the error names the line that is wrong.
pub fn parse_seed(text: &str) -> Result<Vec<(&str, u64)>, String> {
    let mut rows = Vec::new();
    // Lines end at `\n` only: `str::lines` would also take a `\r` before it, which belongs to the id.
    for (n, line) in text.split('\n').enumerate().filter(|(_, l)| !l.is_empty()) {
        let parsed = line.split_once(' ').and_then(|(hash, id)| Some((u64::from_str_radix(hash, 16).ok()?, id)));
        let Some((hash, id)) = parsed.filter(|(_, id)| !id.is_empty()) else {
            return Err(format!("line {} of the topic's read-back is not `<hash> <id>`: {line:?}", n + 1));
        };
        rows.push((id, hash));
    }
    Ok(rows)
}

/// What the topic holds for one key, and whether the snapshot in progress read it.
struct Held {
    hash: u64,
    /// The number of the last snapshot that read the key.
    read_by: u32,
}

/// Where the snapshots stand.
enum Run {
    /// Waiting for the next snapshot; `check`: the first poll after opening, which compares the
    /// stored start of the last snapshot with ServiceNow's clock before reading on.
    Due { check: bool },
    /// Reading the table: everything up to `after` is read (`skip` rows past it were hidden).
    Reading { after: Option<String>, skip: u32 },
    /// The read is through: tombstones for the keys it did not read.
    Deleting { gone: Vec<Box<str>> },
}

/// Counts of the snapshot in progress (or the last one), for its closing note.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapshotCounts {
    /// Rows read.
    pub read: u64,
    /// Rows emitted: new or changed since the topic's record of them.
    pub emitted: u64,
    /// Tombstones emitted: keys the topic held that the snapshot did not read.
    pub deleted: u64,
    /// Requests made.
    pub requests: u64,
}

/// One table's snapshots.
pub struct SnapshotStream {
    table: TableConfig,
    partition_key: String,
    /// What the table's topic holds: per key, its content hash.
    held: HashMap<Box<str>, Held>,
    /// The number of the snapshot in progress (or the last one).
    number: u32,
    run: Run,
    /// When the last finished snapshot started, by ServiceNow's clock (the stored position).
    finished: Option<Timestamp>,
    /// When the snapshot in progress started: ServiceNow's clock (if it said) and the task's.
    started: (Option<Timestamp>, std::time::Duration),
    counts: SnapshotCounts,
    bad_rows: BadRowBehavior,
    /// The headers of every upsert (from the table's record builder) and of every tombstone.
    headers: (Vec<Header>, Vec<Header>),
    notes: Vec<Note>,
}

impl SnapshotStream {
    /// The snapshots of `table` (partition `partition_key`), resuming from its stored position
    /// `finished` and the topic's read-back in `offsets`. Without a read-back the table is refused
    /// once a snapshot was stored: its keys, and so the rows deleted meanwhile, would be unknown.
    pub fn open(
        table: &TableConfig,
        partition_key: &str,
        records: &RecordBuilder,
        finished: Option<Timestamp>,
        offsets: &[SourceOffset],
        bad_rows: BadRowBehavior,
    ) -> Result<Self, SnowError> {
        let seed_key = seed_partition(partition_key);
        let key = || format!("snow.table.{}.mode", table.name);
        let held: HashMap<Box<str>, Held> = match offsets.iter().rev().find(|o| o.partition == seed_key) {
            Some(seed) => parse_seed(&seed.position)
                .map_err(|m| SnowError::config(key(), format!("table {}: {m}", table.name)))?
                .into_iter()
                .map(|(id, hash)| (Box::from(id), Held { hash, read_by: 0 }))
                .collect(),
            None if finished.is_some() => {
                return Err(SnowError::config(
                    key(),
                    format!(
                        "table {} is read by snapshots, but the host handed over no read-back of its topic: the rows \
                         deleted since the last snapshot could not be found. Run it on a host that reads the topic back \
                         (snow-connect's host-runner does), or reset the table's offset to start afresh",
                        table.name
                    ),
                ));
            }
            None => HashMap::new(),
        };
        Ok(Self {
            table: table.clone(),
            partition_key: partition_key.to_string(),
            held,
            number: 0,
            run: Run::Due { check: finished.is_some() },
            finished,
            started: (None, std::time::Duration::ZERO),
            counts: SnapshotCounts::default(),
            bad_rows,
            headers: (records.headers().to_vec(), deleting(records.headers())),
            notes: Vec::new(),
        })
    }

    /// Keys the topic holds, as this stream knows it.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// When the last finished snapshot started (ServiceNow's clock).
    pub fn finished(&self) -> Option<Timestamp> {
        self.finished
    }

    /// Counts of the snapshot in progress, or of the last one.
    pub fn counts(&self) -> SnapshotCounts {
        self.counts
    }

    /// Notes gathered since the last call.
    pub fn take_notes(&mut self) -> Vec<Note> {
        std::mem::take(&mut self.notes)
    }

    /// Makes at most one request: a page of the table, or a page of tombstones (no request).
    pub fn poll<T: Transport, C: Clock>(
        &mut self,
        client: &mut TableClient<T, C>,
        records: &RecordBuilder,
    ) -> Result<PollBatch, SnowError> {
        // A failed poll leaves the snapshot where it was: the host polls again.
        match std::mem::replace(&mut self.run, Run::Due { check: false }) {
            Run::Due { check } => {
                let (counts, started) = (self.counts, self.started);
                self.number += 1;
                self.counts = SnapshotCounts::default();
                self.started = (None, client.clock().now());
                let batch = self.read(client, records, None, 0, check);
                if batch.is_err() {
                    self.number -= 1;
                    (self.counts, self.started, self.run) = (counts, started, Run::Due { check });
                }
                batch
            }
            Run::Reading { after, skip } => {
                let batch = self.read(client, records, after.clone(), skip, false);
                if batch.is_err() {
                    self.run = Run::Reading { after, skip };
                }
                batch
            }
            Run::Deleting { gone } => self.delete(gone, client.clock().now()),
        }
    }

    /// Reads the page after `after` (past `skip` hidden rows) and emits its new and changed rows.
    /// `check`: the first poll after opening, which waits out the rest of the interval instead
    /// when the last snapshot started less than an interval ago.
    fn read<T: Transport, C: Clock>(
        &mut self,
        client: &mut TableClient<T, C>,
        records: &RecordBuilder,
        after: Option<String>,
        skip: u32,
        check: bool,
    ) -> Result<PollBatch, SnowError> {
        let table = &self.table;
        let id_field = table.sys_id_field.as_str();
        let terms = match &after {
            Some(id) => vec![Term::new(id_field, Op::Gt, id).map_err(|m| SnowError::data(format!("table {}: {m}", table.name)))?],
            None => Vec::new(),
        };
        let query = table.query.with_cursor(&terms, &[id_field]);
        let params = ListParams {
            query: &query,
            fields: table.fields.as_deref(),
            limit: table.batch_size,
            offset: skip,
            count: true,
            display_value: table.read_display_value(),
            exclude_reference_link: table.exclude_reference_link,
            no_domain: table.query_domain == crate::config::source::QueryDomain::All,
            category: table.query_category.as_deref(),
        };
        let page = client.list(&table.name, &params)?;
        self.counts.requests += 1;
        if self.started.0.is_none() {
            self.started.0 = page.server_time;
        }
        if check && let (Some(last), Some(now)) = (self.finished, page.server_time) {
            let since_ms = (now.as_millis() - last.as_millis()).max(0);
            let interval = i64::from(table.snapshot_interval_ms);
            if since_ms < interval {
                // Restarted within the interval: this page is dropped, the snapshot starts when due.
                self.number -= 1;
                self.run = Run::Due { check: false };
                return Ok(self.batch(Vec::new(), BatchBytes::default(), (interval - since_ms) as u32, false));
            }
        }
        let rows = parse_page(&page.body, id_field, &table.timestamp_field)
            .map_err(|m| SnowError::transport(format!("table {}: {m}", table.name), ErrorClass::Transient))?;
        let mut out = records.page(&page.body);
        let mut last: Option<&str> = None;
        // What the topic will hold once this page's records are built: applied only then, so a
        // failed poll reads the page again with nothing taken as written.
        let mut read: Vec<(&str, u64)> = Vec::with_capacity(rows.len());
        let mut emitted = 0u64;
        for (i, row) in rows.iter().enumerate() {
            let Some(id) = row.id.as_deref().filter(|id| !id.is_empty()) else {
                let problem = format!("table {}: row {i} of a snapshot page has no {id_field}", table.name);
                if self.bad_rows == BadRowBehavior::Skip {
                    self.notes.push(Note::warn(problem));
                    continue;
                }
                return Err(SnowError::data(format!("{problem} (snow.bad.row.behavior=skip would skip it)")));
            };
            last = Some(id);
            let hash = content_hash(row.raw);
            read.push((id, hash));
            if self.held.get(id).is_none_or(|held| held.hash != hash) {
                out.push_snapshot(row, self.started.0, id, hash)?;
                emitted += 1;
            }
        }
        self.counts.read += read.len() as u64;
        self.counts.emitted += emitted;
        for (id, hash) in read {
            match self.held.get_mut(id) {
                Some(held) => *held = Held { hash, read_by: self.number },
                None => {
                    self.held.insert(Box::from(id), Held { hash, read_by: self.number });
                }
            }
        }
        let returned = rows.len();
        let limit = table.batch_size;
        self.run = match last {
            // The keyset moves on past the last row read (a short page may mean hidden rows: the
            // next request asks after it all the same).
            Some(id) => Run::Reading { after: Some(id.to_string()), skip: 0 },
            // A page of hidden rows when the instance says more match: cross it.
            None if returned == 0
                && (page.has_next == Some(true) || page.total.is_some_and(|t| t > u64::from(skip) + u64::from(limit))) =>
            {
                Run::Reading { after, skip: skip.saturating_add(limit) }
            }
            None if returned > 0 => Run::Reading { after, skip: skip.saturating_add(limit) },
            None => {
                let mut gone: Vec<Box<str>> =
                    self.held.iter().filter(|(_, h)| h.read_by != self.number).map(|(id, _)| id.clone()).collect();
                gone.sort_unstable();
                Run::Deleting { gone }
            }
        };
        let (mut records, finished) = out.finish();
        let bytes = if records.is_empty() { BatchBytes::default() } else { finished.into_batch_bytes(page.body, &mut records) };
        let with_offset = !records.is_empty();
        Ok(self.batch(records, bytes, 0, with_offset))
    }

    /// Emits tombstones for up to a page of `gone` keys; the snapshot ends with the last.
    fn delete(&mut self, mut gone: Vec<Box<str>>, now: std::time::Duration) -> Result<PollBatch, SnowError> {
        let rest = gone.split_off(gone.len().min(self.table.batch_size as usize));
        let mut data = BatchData::new(&[]);
        let too_large = |e| SnowError::data(format!("table {} snapshot: {e}; lower snow.batch.size", self.table.name));
        let name = data.append(ID_HEADER.as_bytes()).map_err(too_large)?;
        let mut records = Vec::with_capacity(gone.len());
        for id in &gone {
            let key = data.append(id.as_bytes()).map_err(too_large)?;
            let at = data.header(name, key).map_err(too_large)?;
            let timestamp_ms = self.started.0.map(Timestamp::as_millis);
            records.push(SourceRecord { key: Some(key), value: None, headers: Span { start: at, len: 1 }, timestamp_ms });
        }
        for id in &gone {
            self.held.remove(id);
        }
        self.counts.deleted += gone.len() as u64;
        let next_poll_ms = if rest.is_empty() {
            self.finish(now)
        } else {
            self.run = Run::Deleting { gone: rest };
            0
        };
        if records.is_empty() {
            return Ok(self.batch(Vec::new(), BatchBytes::default(), next_poll_ms, true));
        }
        let bytes = data.finish().into_batch_bytes(Vec::new(), &mut records);
        Ok(PollBatch::new(self.table.topic.clone(), self.headers.1.clone(), bytes, records, Some(self.offset()), next_poll_ms))
    }

    /// The snapshot is through: it is stored as the last finished one; the pause until the next.
    fn finish(&mut self, now: std::time::Duration) -> u32 {
        self.finished = self.started.0.or(self.finished);
        self.run = Run::Due { check: false };
        let c = self.counts;
        self.notes.push(Note::info(format!(
            "table {}: snapshot {} read {} rows in {} requests: {} new or changed, {} gone (tombstones), {} unchanged",
            self.table.name,
            self.number,
            c.read,
            c.requests,
            c.emitted,
            c.deleted,
            c.read - c.emitted
        )));
        let took = now.saturating_sub(self.started.1).as_millis();
        u32::try_from(u128::from(self.table.snapshot_interval_ms).saturating_sub(took)).unwrap_or(0)
    }

    /// The stored position as of now.
    fn offset(&self) -> SourceOffset {
        SourceOffset { partition: self.partition_key.clone(), position: snapshot_position(self.finished) }
    }

    /// A batch of the table's upserts; with an offset when it holds records or ends a snapshot.
    fn batch(&self, records: Vec<SourceRecord>, bytes: BatchBytes, next_poll_ms: u32, with_offset: bool) -> PollBatch {
        let offset = with_offset.then(|| self.offset());
        PollBatch::new(self.table.topic.clone(), self.headers.0.clone(), bytes, records, offset, next_poll_ms)
    }
}

/// `headers` with `snow.source.operation` saying `DELETE`.
fn deleting(headers: &[Header]) -> Vec<Header> {
    let mut out: Vec<Header> = headers.iter().filter(|h| h.key != "snow.source.operation").cloned().collect();
    out.push(Header { key: "snow.source.operation".into(), value: b"DELETE".to_vec() });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_reads_back_as_written_and_a_bad_line_is_named() {
        let text = seed_text([("a1", 7), ("b 2", u64::MAX)]);
        assert_eq!(text, "0000000000000007 a1\nffffffffffffffff b 2\n");
        assert_eq!(parse_seed(&text).unwrap(), [("a1", 7), ("b 2", u64::MAX)], "an id may hold spaces: the hash comes first");
        let err = parse_seed("0000000000000007 a1\nzz b\n").unwrap_err();
        assert!(err.contains("line 2"), "{err}");
        assert!(parse_seed("0000000000000007 \n").is_err(), "an empty id");
    }

    /// Found by the `stored_position` fuzz target: an id ending in `\r` lost it on the way back
    /// (`str::lines` took it for part of a `\r\n`), and an id holding `\n` became two lines.
    #[test]
    fn ids_with_carriage_returns_read_back_whole_and_ids_with_line_breaks_are_left_out() {
        let text = seed_text([("a\r", 7), ("b\r\r", 8), ("c\nd", 9), ("e", 10)]);
        assert_eq!(parse_seed(&text).unwrap(), [("a\r", 7), ("b\r\r", 8), ("e", 10)]);
    }
}
