//! What the streams that follow a table's own sweep share (its deletes, journal entries and
//! attachments: ADR 0031, ADR 0036): a keyset cursor of their own over another table, opened from
//! their own stored position with the versions it carries, a dedup window, the batch headers and
//! topic, whether their probe or a sweep is due, and notes. Each stream adds its query, its
//! records and its probe.

use crate::clock::Clock;
use crate::config::TableConfig;
use crate::cursor::dedup::DedupWindow;
use crate::cursor::sweep::Observed;
use crate::cursor::{Answer, Cursor, Partition, Sweep, WindowSizes};
use crate::error::{ErrorClass, SnowError};
use crate::http::Transport;
use crate::record::{BatchBytes, Header, PollBatch, SourceOffset, SourceRecord};
use crate::table::{BaseQuery, ListParams, ListResponse, PageRow, TableClient, parse_page};
use crate::time::Timestamp;

use super::note::Note;

/// What a follower needs of the connector's settings.
pub struct FollowerSettings<'a> {
    /// The instance host (`acme.service-now.com`).
    pub instance: &'a str,
    /// `snow.safety.lag.seconds`.
    pub lag_seconds: u32,
    /// `snow.overlap.seconds`.
    pub overlap_seconds: u32,
    /// `snow.dedup.window.size`.
    pub dedup_window_size: u32,
    /// `snow.startup.probe`.
    pub probe: bool,
}

/// Most versions a follower's position carries (about 60 bytes each: well under Kafka's 1 MB
/// record limit). More records of one follower inside one overlap than this can be written twice
/// after a restart.
pub const MAX_SEEN: usize = 5000;

/// A row with its cursor key: `(timestamp, sys_id, the row's bytes)`.
pub type Keyed<'r> = (Timestamp, &'r str, &'r [u8]);

/// The cursor, window and state every follower has.
pub struct Follower {
    /// The table followed.
    pub table: String,
    /// What the stream is of the table (`deletes`, `journal`, `attachments`), for messages.
    pub what: &'static str,
    /// The table the stream reads (`sys_audit_delete`, ...).
    pub source: &'static str,
    /// The timestamp field its cursor walks (with `sys_id`).
    pub ts_field: &'static str,
    /// Where the records go.
    pub topic: String,
    /// The follower's stored positions' key.
    pub partition_key: String,
    /// The sweep over the followed table's companion (`sys_audit_delete`, ...).
    pub sweep: Sweep,
    /// The furthest record written (or stored, before the first).
    pub high: Cursor,
    /// The table's `start.timestamp`.
    pub start: Timestamp,
    /// `snow.overlap.seconds`.
    pub overlap: i64,
    /// Versions written that a re-read may meet again.
    pub dedup: DedupWindow,
    /// The headers of every record.
    pub headers: Vec<Header>,
    /// The startup probe is still to run.
    pub probe_pending: bool,
    /// A sweep is due: the table's own sweep finished.
    pub due: bool,
    /// Notes gathered since the host last took them.
    pub notes: Vec<Note>,
}

/// How a follower opens.
pub struct Opening<'a> {
    /// What the stream is of the table (`deletes`, ...), for messages.
    pub what: &'static str,
    /// The table it reads.
    pub source: &'static str,
    /// The timestamp field its cursor walks (with `sys_id`).
    pub ts_field: &'static str,
    /// Its partition.
    pub partition: Partition,
    /// The configuration key that turns it on (named when its stored position is unreadable).
    pub key: &'a str,
    /// Its topic.
    pub topic: String,
    /// Its records' headers.
    pub headers: Vec<Header>,
    /// Its windows.
    pub sizes: WindowSizes,
}

impl Follower {
    /// A follower of `table` resuming from its stored position in `offsets`.
    pub fn open(
        table: &TableConfig,
        settings: &FollowerSettings<'_>,
        opening: Opening<'_>,
        offsets: &[SourceOffset],
    ) -> Result<Self, SnowError> {
        let partition_key = opening.partition.key();
        let (high, seen) = match offsets.iter().rev().find(|o| o.partition == partition_key) {
            Some(stored) => Cursor::from_position_with_seen(&stored.position)
                .map_err(|m| SnowError::config(opening.key, format!("the stored position of its stream: {m}")))?,
            None => (Cursor::before(table.start), Vec::new()),
        };
        let mut dedup = DedupWindow::new(settings.dedup_window_size as usize);
        for v in &seen {
            dedup.insert(v.ts, &v.id, &v.mod_count);
        }
        let mut follower = Self {
            table: table.name.clone(),
            what: opening.what,
            source: opening.source,
            ts_field: opening.ts_field,
            topic: opening.topic,
            partition_key,
            sweep: Sweep::new(high.clone(), settings.lag_seconds, opening.sizes),
            high,
            start: table.start,
            overlap: i64::from(settings.overlap_seconds),
            dedup,
            headers: opening.headers,
            probe_pending: settings.probe,
            due: false,
            notes: Vec::new(),
        };
        follower.restart();
        Ok(follower)
    }

    /// The next request of the sweep: the rows of [`Self::source`] that `base` matches, `fields`
    /// read, after the cursor.
    pub fn list_next<T: Transport, C: Clock>(
        &mut self,
        client: &mut TableClient<T, C>,
        base: &BaseQuery,
        fields: &[String],
    ) -> Result<ListResponse, SnowError> {
        let request = self.sweep.next_request(self.ts_field, "sys_id").map_err(SnowError::data)?;
        let order: Vec<&str> = request.order.iter().map(String::as_str).collect();
        let query = base.with_cursor(&request.terms, &order);
        let params =
            ListParams { offset: request.window.offset, count: request.count, ..ListParams::lookup(&query, fields, request.window.limit) };
        client.list(self.source, &params)
    }

    /// The rows of a page's `body`.
    pub fn rows<'p>(&self, body: &'p [u8]) -> Result<Vec<PageRow<'p>>, SnowError> {
        parse_page(body, "sys_id", self.ts_field)
            .map_err(|m| SnowError::transport(format!("table {} {}: {m}", self.table, self.what), ErrorClass::Transient))
    }

    /// `rows` with their cursor keys `(timestamp, sys_id)` and their bytes; a row without them
    /// fails the poll, naming the table it came from.
    pub fn keyed<'r>(&self, rows: &'r [PageRow<'_>]) -> Result<Vec<Keyed<'r>>, SnowError> {
        let (table, source, ts_field) = (&self.table, self.source, self.ts_field);
        rows.iter()
            .map(|row| {
                let (Some(id), Some(ts)) = (row.id.as_deref(), row.timestamp.as_deref()) else {
                    return Err(SnowError::data(format!("table {table}: a {source} row without sys_id or {ts_field}")));
                };
                let ts = Timestamp::parse(ts).map_err(|e| SnowError::data(format!("table {table}: {source} row {id}: {e}")))?;
                Ok((ts, id, row.raw))
            })
            .collect()
    }

    /// The sweep takes the page's `keys` (of `returned` rows, answered in `page`), reading no
    /// further than `server_time`: how many to emit and whether the sweep is through.
    pub fn observe(
        &mut self,
        keys: &[(Timestamp, &str)],
        page: &ListResponse,
        server_time: Option<Timestamp>,
    ) -> Result<Observed, SnowError> {
        let answer = Answer { returned: keys.len(), total: page.total, has_next: page.has_next, server_time };
        self.sweep.observe(keys, answer).map_err(|m| SnowError::data(format!("table {} {}: {m}", self.table, self.what)))
    }

    /// The next sweep starts `overlap` before the furthest record written.
    pub fn restart(&mut self) {
        self.sweep.restart_from(self.high.overlap_start(self.start, self.overlap));
    }

    /// The sweep is through: the next follows the table's next; the pause (`poll_interval_ms`).
    pub fn sweep_done(&mut self, poll_interval_ms: u32) -> u32 {
        self.due = false;
        self.restart();
        poll_interval_ms
    }

    /// `(ts, id)` was written: the furthest record moves there when it is further.
    pub fn wrote(&mut self, ts: Timestamp, id: &str) {
        if (ts, id) > (self.high.ts, self.high.id.as_str()) {
            self.high = Cursor { ts, id: id.to_string() };
        }
    }

    /// The stored position: the furthest record written, carrying the versions the next sweep's
    /// overlap re-reads (the newest [`MAX_SEEN`]), so a restart suppresses them without reading
    /// the topic back.
    pub fn position(&self) -> String {
        self.high.to_position_with(&self.dedup.recent(MAX_SEEN))
    }

    /// A batch of `records`; its offset is the stored position, when it has records.
    pub fn batch(&self, records: Vec<SourceRecord>, bytes: BatchBytes, next_poll_ms: u32) -> PollBatch {
        let offset = (!records.is_empty()).then(|| SourceOffset { partition: self.partition_key.clone(), position: self.position() });
        PollBatch::new(self.topic.clone(), self.headers.clone(), bytes, records, offset, next_poll_ms)
    }

    /// The batch headers of a follower of `table`: the table, the instance, and `extra`.
    pub fn headers(table: &str, instance: &str, extra: &[(&str, &str)]) -> Vec<Header> {
        let mut headers = vec![
            Header { key: "snow.table".into(), value: table.as_bytes().to_vec() },
            Header { key: "snow.instance".into(), value: instance.as_bytes().to_vec() },
        ];
        headers.extend(extra.iter().map(|(k, v)| Header { key: (*k).into(), value: v.as_bytes().to_vec() }));
        headers
    }
}

/// What the task asks of every follower; the accessors come from its [`Follower`].
pub trait Follows {
    /// The shared part.
    fn core(&self) -> &Follower;
    /// The shared part, to change.
    fn core_mut(&mut self) -> &mut Follower;

    /// The partition key its offsets are stored under.
    fn partition_key(&self) -> &str {
        &self.core().partition_key
    }

    /// The furthest record written (or stored, before the first): what a restart resumes from.
    fn cursor(&self) -> &Cursor {
        &self.core().high
    }

    /// Whether the next poll is this stream's: its probe, or a sweep that is due.
    fn wants_poll(&self) -> bool {
        self.core().probe_pending || self.core().due
    }

    /// The table's own sweep finished: a sweep of this stream follows.
    fn table_sweep_finished(&mut self) {
        self.core_mut().due = true;
    }

    /// Notes gathered since the last call.
    fn take_notes(&mut self) -> Vec<Note> {
        std::mem::take(&mut self.core_mut().notes)
    }
}
