//! Source connector configuration: the tables to read and how to read each.
//!
//! Per-table keys are `snow.table.<table>.<key>`; most fall back to a connector-wide
//! `snow.<key>` and then to a default. `docs/configuration.md` lists them all.

use super::instance::InstanceConfig;
use super::reader::{ConfigReader, Entries};
use crate::error::SnowError;
use crate::table::DisplayValue;
use crate::table::query::{BaseQuery, is_valid_field_name, is_valid_table_name};
use crate::time::Timestamp;

/// What to do with a row that lacks its id or timestamp (`snow.bad.row.behavior`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadRowBehavior {
    /// Stop the table with an error naming the row.
    Fail,
    /// Skip the row, log it and count it in `snow_source_bad_rows_total`.
    Skip,
}

/// How record values are written (`snow.value.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueFormat {
    /// The row's JSON as ServiceNow sent it (passed through without re-encoding when possible).
    Json,
    /// Kafka Connect's JSON with schema envelope (`{"schema":..,"payload":..}`), for Connect sinks
    /// reading with `schemas.enable=true`.
    ConnectJson,
}

/// Whether the task describes its tables' types (`snow.value.schema`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueSchema {
    /// No schema: records carry the rows as they are.
    None,
    /// Each table's value schema is derived from its dictionary (`sys_dictionary` and the tables
    /// it extends) and sent with the batches, for the host's typed converters.
    Dictionary,
}

/// Which domains a query sees (`query.domain`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryDomain {
    /// The integration user's session domain (ServiceNow's default).
    Session,
    /// Every domain (`sysparm_query_no_domain=true`; needs a role that allows it).
    All,
}

/// How a deleted row reaches the table's topic (`deletes.format`), when deletes are captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteFormat {
    /// Key = the row's sys_id, value null: what log compaction removes the key for.
    Tombstone,
    /// The row as the delete's audit record kept it, with `"__deleted": true` (for sinks that
    /// cannot take a null value, as Debezium's `ExtractNewRecordState` writes deletes).
    Record,
}

/// How a table's rows are read (`mode`, ADR 0035).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableMode {
    /// Along the keyset cursor `(timestamp, sys_id)`: every change, as it comes.
    Cursor,
    /// By periodic full snapshots keyed by the id field (`snapshot.interval.ms`): for tables and
    /// views without a maintained timestamp. Changed and new rows are emitted, unchanged ones are
    /// not, rows gone since the last snapshot become tombstones.
    Snapshot,
}

/// The whole source connector configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceConfig {
    /// The instance to read from.
    pub instance: InstanceConfig,
    /// Tables in the order `snow.tables` lists them.
    pub tables: Vec<TableConfig>,
    /// Seconds the high-water mark is held below the server clock (`snow.safety.lag.seconds`).
    pub safety_lag_seconds: u32,
    /// Seconds re-read before the cursor at the start of every sweep (`snow.overlap.seconds`).
    pub overlap_seconds: u32,
    /// Row versions remembered to suppress what the overlap reads again (`snow.dedup.window.size`).
    pub dedup_window_size: u32,
    /// Rows without id or timestamp (`snow.bad.row.behavior`).
    pub bad_row_behavior: BadRowBehavior,
    /// Check each table with a one-row read before any data moves (`snow.startup.probe`).
    pub startup_probe: bool,
    /// Record value format (`snow.value.format`).
    pub value_format: ValueFormat,
    /// Whether tables' value schemas are read from their dictionaries (`snow.value.schema`).
    pub value_schema: ValueSchema,
    /// How often a table's dictionary is read again, in ms (`snow.schema.refresh.interval.ms`).
    pub schema_refresh_ms: u32,
}

/// How one table is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableConfig {
    /// Table (or database view) name.
    pub name: String,
    /// Kafka topic its records go to.
    pub topic: String,
    /// Cursor timestamp column (`sys_updated_on` by default).
    pub timestamp_field: String,
    /// Cursor id column (`sys_id` by default; a view's prefixed id column).
    pub sys_id_field: String,
    /// The user's base encoded query the cursor predicates are ANDed onto.
    pub query: BaseQuery,
    /// Columns to fetch (`sysparm_fields`); `None` fetches all.
    pub fields: Option<Vec<String>>,
    /// Where a table without a stored offset starts (inclusive).
    pub start: Timestamp,
    /// Rows per request (`sysparm_limit`).
    pub batch_size: u32,
    /// The largest window a crossing of rows hidden by ACLs grows to (`hidden.window.max.rows`).
    pub hidden_window_max_rows: u32,
    /// How far past the cursor a crossing looks when the instance sends neither `X-Total-Count`
    /// nor `Link` (`hidden.scan.max.rows`).
    pub hidden_scan_max_rows: u32,
    /// Pause between sweeps once caught up.
    pub poll_interval_ms: u32,
    /// `sysparm_display_value`: raw values, display values (cursor fields stay raw), or both.
    pub display_value: DisplayValue,
    /// `sysparm_exclude_reference_link`.
    pub exclude_reference_link: bool,
    /// `sysparm_query_no_domain`.
    pub query_domain: QueryDomain,
    /// `sysparm_query_category`, if set.
    pub query_category: Option<String>,
    /// Deleted rows read from `sys_audit_delete` and written in this format (`deletes=true`);
    /// `None`: deletes are not captured.
    pub deletes: Option<DeleteFormat>,
    /// Time slices a backfill from the start is read in at once (`backfill.parallelism`, ADR
    /// 0033); 1 reads it with the single cursor.
    pub backfill_parallelism: u32,
    /// Cursor or periodic snapshots (`mode`).
    pub mode: TableMode,
    /// Time between the starts of two snapshots, in ms (`snapshot.interval.ms`; snapshot mode).
    pub snapshot_interval_ms: u32,
    /// The journal fields whose entries (`sys_journal_field`) are read to their own topic
    /// (`journal`, e.g. `comments,work_notes`); empty: none.
    pub journal: Vec<String>,
    /// The topic of the journal entries (`journal.topic`, default `<topic>.journal`).
    pub journal_topic: String,
    /// Whether the table's attachments (`sys_attachment`, content included) are read to their
    /// own topic (`attachments`).
    pub attachments: bool,
    /// The topic of the attachments (`attachments.topic`, default `<topic>.attachments`).
    pub attachments_topic: String,
    /// Largest content carried in a record (`attachments.max.bytes`, scoped); a larger one is
    /// written as a reference with its size.
    pub attachments_max_bytes: u32,
}

/// `attachments.max.bytes` unless set: with its base64 and the metadata, a record under Kafka's
/// default 1 MB message limit.
pub const DEFAULT_ATTACHMENTS_MAX_BYTES: u32 = 700_000;

/// The largest `attachments.max.bytes`: a download is held whole, with its base64, in the
/// component's memory.
pub const MAX_ATTACHMENTS_MAX_BYTES: u32 = 64 << 20;

/// `snapshot.interval.ms` unless set: an hour (a full read of a large view is not free).
pub const DEFAULT_SNAPSHOT_INTERVAL_MS: u32 = 3_600_000;

/// The key listing the tables.
pub const TABLES_KEY: &str = "snow.tables";

/// The key of the prefix of tables' default topics.
const TOPIC_PREFIX_KEY: &str = "snow.topic.prefix";

/// Topics of tables without their own `topic` start with this.
fn default_topic_prefix() -> &'static str {
    "snow."
}

/// A table's topic: its own `snow.table.<t>.topic`, or `<prefix><t>`.
fn table_topic(own: Option<String>, prefix: &str, table: &str) -> String {
    own.unwrap_or_else(|| format!("{prefix}{table}"))
}

/// The topics a source connector's configuration names, one per table of `snow.tables` (its own
/// `topic`, or `<snow.topic.prefix><table>`), read without validating anything else. The host lets
/// a source component produce only to these.
pub fn configured_topics(entries: &Entries) -> std::collections::BTreeSet<String> {
    let value = |k: &str| entries.get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let prefix = value(TOPIC_PREFIX_KEY).unwrap_or_else(|| default_topic_prefix().into());
    let tables = value(TABLES_KEY).unwrap_or_default();
    tables
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .flat_map(|t| {
            let topic = table_topic(value(&format!("snow.table.{t}.topic")), &prefix, t);
            let journal =
                value(&format!("snow.table.{t}.journal")).map(|_| journal_topic(value(&format!("snow.table.{t}.journal.topic")), &topic));
            let attachments = value(&format!("snow.table.{t}.attachments"))
                .filter(|v| v == "true")
                .map(|_| attachments_topic(value(&format!("snow.table.{t}.attachments.topic")), &topic));
            std::iter::once(topic).chain(journal).chain(attachments)
        })
        .collect()
}

/// A table's attachments topic: as configured, else its topic with `.attachments`.
fn attachments_topic(configured: Option<String>, table_topic: &str) -> String {
    configured.map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).unwrap_or_else(|| format!("{table_topic}.attachments"))
}

/// A table's journal topic: as configured, else its topic with `.journal`.
fn journal_topic(configured: Option<String>, table_topic: &str) -> String {
    configured.map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).unwrap_or_else(|| format!("{table_topic}.journal"))
}

/// Rows written in the last seconds may still be in flight inside ServiceNow (a transaction
/// commits rows stamped earlier); 5 s covers ordinary transactions. See docs/delivery.md.
fn default_safety_lag_seconds() -> u32 {
    5
}

/// 1,000 rows of incident shape are about 1 MB: large enough to amortise the request, small
/// enough to stay far from ServiceNow's 60 s transaction quota and to keep guest memory small.
fn default_batch_size() -> u32 {
    1000
}

/// Once caught up, a sweep every 5 s keeps latency low without loading the instance.
fn default_poll_interval_ms() -> u32 {
    5000
}

/// `sys_updated_on` moves on every change, so updates are captured, not only inserts.
fn default_timestamp_field() -> &'static str {
    "sys_updated_on"
}

/// Without a start timestamp a new table is read from its very beginning.
fn default_start() -> Timestamp {
    Timestamp::EPOCH
}

/// Re-reading 30 s before the cursor catches rows committed up to `lag + 30` s after their
/// timestamp (a long transaction, a slow business rule). See docs/delivery.md.
fn default_overlap_seconds() -> u32 {
    30
}

/// 200,000 versions (about 12 MB in the guest) cover the overlap of a table changing at over
/// 6,000 rows per second.
fn default_dedup_window_size() -> u32 {
    200_000
}

/// Slices a backfill may be read in at once: each keeps a request in flight, and the host's
/// per-instance cap (8 by default) bounds what is really sent.
const MAX_BACKFILL_PARALLELISM: u32 = 32;

/// The most ServiceNow returns in one page by default.
const MAX_BATCH_SIZE: u32 = 10_000;

/// Rows hidden by ACLs are crossed by windows growing up to ServiceNow's own largest page: a
/// hidden block shorter than that costs a few requests, a longer one a request per 10,000 rows.
fn default_hidden_window_max_rows() -> u32 {
    MAX_BATCH_SIZE
}

/// Without a count from the instance, a crossing toward a readable row it knows exists gives up
/// after a million rows (100 requests of 10,000), so a table never spins on an unbounded search.
fn default_hidden_scan_max_rows() -> u32 {
    1_000_000
}

/// Dictionaries change rarely (a release, an admin adding a field): ten minutes keeps a new field
/// from waiting long while costing a handful of requests per table an hour.
fn default_schema_refresh_ms() -> u32 {
    600_000
}

impl SourceConfig {
    /// Parses and validates a source configuration; every problem is reported with its key.
    pub fn parse(entries: &Entries) -> Result<Self, SnowError> {
        let mut r = ConfigReader::new(entries);
        let instance = InstanceConfig::read(&mut r);
        let safety_lag_seconds = r.bounded_u32("snow.safety.lag.seconds", default_safety_lag_seconds(), 0, 3600);
        let topic_prefix = r.string(TOPIC_PREFIX_KEY).unwrap_or_else(|| default_topic_prefix().into());
        let overlap_seconds = r.bounded_u32("snow.overlap.seconds", default_overlap_seconds(), 0, 86_400);
        let dedup_window_size = r.bounded_u32("snow.dedup.window.size", default_dedup_window_size(), 1, 10_000_000);
        let bad_row_behavior =
            r.choice("snow.bad.row.behavior", BadRowBehavior::Fail, &[("fail", BadRowBehavior::Fail), ("skip", BadRowBehavior::Skip)]);
        let startup_probe = r.choice("snow.startup.probe", true, &[("true", true), ("false", false)]);
        let value_format =
            r.choice("snow.value.format", ValueFormat::Json, &[("json", ValueFormat::Json), ("connect_json", ValueFormat::ConnectJson)]);
        let value_schema =
            r.choice("snow.value.schema", ValueSchema::None, &[("none", ValueSchema::None), ("dictionary", ValueSchema::Dictionary)]);
        let schema_refresh_ms = r.bounded_u32("snow.schema.refresh.interval.ms", default_schema_refresh_ms(), 10_000, 86_400_000);
        let names = r.list(TABLES_KEY);
        if names.is_empty() {
            r.error(TABLES_KEY, "is required: a comma-separated list of tables or views, e.g. incident,change_request");
            // Their per-table keys are not unknown: the list they belong to is missing.
            r.skip_prefix("snow.table.");
        }
        let mut tables = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            if !is_valid_table_name(name) {
                r.error(TABLES_KEY, format!("{name:?} is not a table name (letters, digits and _ only)"));
            } else if names[..i].contains(name) {
                r.error(TABLES_KEY, format!("{name} is listed twice"));
            } else if let Some(table) = TableConfig::read(&mut r, name, &topic_prefix) {
                tables.push(table);
            }
        }
        for table in &tables {
            let (window, key) = if table.hidden_window_max_rows > table.batch_size {
                (table.hidden_window_max_rows, format!("snow.table.{}.hidden.window.max.rows", table.name))
            } else {
                (table.batch_size, format!("snow.table.{}.batch.size", table.name))
            };
            super::memory::check(&mut r, dedup_window_size, window, &key);
            if table.attachments {
                super::memory::check_attachments(&mut r, dedup_window_size, window, table);
            }
        }
        r.finish(&["snow."])?;
        let instance = instance.ok_or_else(|| SnowError::config("snow.instance.url", "is invalid"))?;
        Ok(Self {
            instance,
            tables,
            safety_lag_seconds,
            overlap_seconds,
            dedup_window_size,
            bad_row_behavior,
            startup_probe,
            value_format,
            value_schema,
            schema_refresh_ms,
        })
    }
}

impl TableConfig {
    /// The `sysparm_display_value` the table's rows are read with: display values are read with
    /// `all`, so the cursor fields keep their raw values.
    pub fn read_display_value(&self) -> DisplayValue {
        if self.display_value == DisplayValue::Display { DisplayValue::All } else { self.display_value }
    }

    fn read(r: &mut ConfigReader<'_>, name: &str, topic_prefix: &str) -> Option<Self> {
        let key = |k: &str| format!("snow.table.{name}.{k}");
        // A per-table key wins over the connector-wide `snow.<k>`.
        let scoped = |r: &mut ConfigReader<'_>, k: &str| r.string(&key(k)).or_else(|| r.string(&format!("snow.{k}")));
        let topic = table_topic(r.string(&key("topic")), topic_prefix, name);
        let timestamp_field = scoped(r, "timestamp.field").unwrap_or_else(|| default_timestamp_field().into());
        let sys_id_field = scoped(r, "sys.id.field").unwrap_or_else(|| "sys_id".into());
        for (k, field) in [("timestamp.field", &timestamp_field), ("sys.id.field", &sys_id_field)] {
            if !is_valid_field_name(field) {
                r.error(&key(k), format!("{field:?} is not a field name"));
            }
        }
        let mode = table_choice(r, name, "mode", TableMode::Cursor, &[("cursor", TableMode::Cursor), ("snapshot", TableMode::Snapshot)]);
        let query = match BaseQuery::parse(&r.string(&key("query")).unwrap_or_default()) {
            Ok(q) => q,
            Err(message) => {
                r.error(&key("query"), message);
                BaseQuery::default()
            }
        };
        let fields =
            r.string(&key("fields")).map(|v| v.split(',').map(|f| f.trim().to_string()).filter(|f| !f.is_empty()).collect::<Vec<_>>());
        if let Some(fields) = &fields {
            if let Some(bad) = fields.iter().find(|f| !is_valid_field_name(f)) {
                r.error(&key("fields"), format!("{bad:?} is not a field name"));
            }
            // A snapshot has no timestamp field to read.
            let cursor_fields = if mode == TableMode::Snapshot { &[&sys_id_field][..] } else { &[&sys_id_field, &timestamp_field][..] };
            for needed in cursor_fields {
                if !fields.contains(needed) {
                    r.error(&key("fields"), format!("must contain the cursor field {needed}"));
                }
            }
        }
        let start = match scoped(r, "start.timestamp") {
            None => default_start(),
            Some(text) => Timestamp::parse(&text).unwrap_or_else(|e| {
                r.error(&key("start.timestamp"), format!("{e} (UTC, e.g. 2024-01-31 00:00:00)"));
                default_start()
            }),
        };
        let batch_size = table_u32(r, name, "batch.size", default_batch_size(), 1, MAX_BATCH_SIZE);
        let hidden_window_max_rows =
            table_u32(r, name, "hidden.window.max.rows", default_hidden_window_max_rows(), 1, MAX_BATCH_SIZE).max(batch_size);
        let hidden_scan_max_rows = table_u32(r, name, "hidden.scan.max.rows", default_hidden_scan_max_rows(), 1, u32::MAX);
        let poll_interval_ms = table_u32(r, name, "poll.interval.ms", default_poll_interval_ms(), 0, 86_400_000);
        let display_value = table_choice(
            r,
            name,
            "display.value",
            DisplayValue::Raw,
            &[("false", DisplayValue::Raw), ("true", DisplayValue::Display), ("all", DisplayValue::All)],
        );
        let exclude_reference_link = table_choice(r, name, "exclude.reference.link", false, &[("false", false), ("true", true)]);
        let query_domain =
            table_choice(r, name, "query.domain", QueryDomain::Session, &[("session", QueryDomain::Session), ("all", QueryDomain::All)]);
        let query_category = scoped(r, "query.category");
        let capture = table_choice(r, name, "deletes", false, &[("false", false), ("true", true)]);
        let backfill_parallelism = table_u32(r, name, "backfill.parallelism", 1, 1, MAX_BACKFILL_PARALLELISM);
        let format = table_choice(
            r,
            name,
            "deletes.format",
            DeleteFormat::Tombstone,
            &[("tombstone", DeleteFormat::Tombstone), ("record", DeleteFormat::Record)],
        );
        let snapshot_interval_ms = table_u32(r, name, "snapshot.interval.ms", DEFAULT_SNAPSHOT_INTERVAL_MS, 1_000, 7 * 86_400_000);
        if mode == TableMode::Snapshot {
            // A snapshot reads the whole table each time: a backfill, a time cursor and the audit
            // of deletes have nothing to do with it (it finds deletes itself).
            if backfill_parallelism > 1 {
                r.error(&key("backfill.parallelism"), "applies to mode=cursor only: a snapshot reads the whole table by its id field");
            }
            if capture {
                r.error(&key("deletes"), "applies to mode=cursor only: a snapshot emits a tombstone for every row gone since the last one");
            }
        }
        let journal: Vec<String> = r
            .string(&key("journal"))
            .map(|v| v.split(',').map(|f| f.trim().to_string()).filter(|f| !f.is_empty()).collect())
            .unwrap_or_default();
        if let Some(bad) = journal.iter().find(|f| !is_valid_field_name(f)) {
            r.error(&key("journal"), format!("{bad:?} is not a field name (list journal fields, e.g. comments,work_notes)"));
        }
        if !journal.is_empty() && mode == TableMode::Snapshot {
            r.error(&key("journal"), "applies to mode=cursor only: a table read by snapshots has no journal to follow");
        }
        let journal_topic = journal_topic(r.string(&key("journal.topic")), &topic);
        let attachments = r.choice(&key("attachments"), false, &[("false", false), ("true", true)]);
        if attachments && mode == TableMode::Snapshot {
            r.error(&key("attachments"), "applies to mode=cursor only");
        }
        let attachments_topic = attachments_topic(r.string(&key("attachments.topic")), &topic);
        let attachments_max_bytes =
            table_u32(r, name, "attachments.max.bytes", DEFAULT_ATTACHMENTS_MAX_BYTES, 0, MAX_ATTACHMENTS_MAX_BYTES);
        Some(Self {
            name: name.into(),
            topic,
            timestamp_field,
            sys_id_field,
            query,
            fields,
            start,
            batch_size,
            hidden_window_max_rows,
            hidden_scan_max_rows,
            poll_interval_ms,
            display_value,
            exclude_reference_link,
            query_domain,
            query_category,
            deletes: capture.then_some(format),
            backfill_parallelism,
            mode,
            snapshot_interval_ms,
            journal,
            journal_topic,
            attachments,
            attachments_topic,
            attachments_max_bytes,
        })
    }
}

fn table_choice<T: Copy>(r: &mut ConfigReader<'_>, table: &str, k: &str, default: T, options: &[(&str, T)]) -> T {
    let global = r.choice(&format!("snow.{k}"), default, options);
    r.choice(&format!("snow.table.{table}.{k}"), global, options)
}

fn table_u32(r: &mut ConfigReader<'_>, table: &str, k: &str, default: u32, min: u32, max: u32) -> u32 {
    let global = r.bounded_u32(&format!("snow.{k}"), default, min, max);
    r.bounded_u32(&format!("snow.table.{table}.{k}"), global, min, max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::reader::entries_from_pairs;

    fn parse(pairs: &[(&str, &str)]) -> Result<SourceConfig, SnowError> {
        SourceConfig::parse(&entries_from_pairs(pairs.iter().copied()).unwrap())
    }

    #[test]
    fn defaults_and_overrides() {
        let c = parse(&[
            ("snow.instance.url", "https://acme.service-now.com"),
            ("snow.tables", "incident, change_request"),
            ("snow.batch.size", "500"),
            ("snow.table.incident.batch.size", "5000"),
            ("snow.table.incident.topic", "itsm.incidents"),
            ("snow.table.change_request.start.timestamp", "2024-01-01 00:00:00"),
        ])
        .unwrap();
        assert_eq!(c.tables.len(), 2);
        assert_eq!((c.tables[0].batch_size, c.tables[0].topic.as_str()), (5000, "itsm.incidents"));
        assert_eq!((c.tables[1].batch_size, c.tables[1].topic.as_str()), (500, "snow.change_request"));
        assert_eq!(c.tables[1].start.to_string(), "2024-01-01 00:00:00");
        assert_eq!(c.tables[0].timestamp_field, "sys_updated_on");
        assert_eq!(c.safety_lag_seconds, 5);
        assert_eq!(
            (c.overlap_seconds, c.bad_row_behavior, c.startup_probe, c.value_format),
            (30, BadRowBehavior::Fail, true, ValueFormat::Json)
        );
        assert_eq!((c.tables[0].display_value, c.tables[0].query_domain), (DisplayValue::Raw, QueryDomain::Session));
    }

    #[test]
    fn deletes_are_off_by_default_and_take_a_format() {
        let base = [("snow.instance.url", "https://acme.service-now.com"), ("snow.tables", "incident,problem")];
        assert_eq!(parse(&base).unwrap().tables[0].deletes, None);
        let mut on = base.to_vec();
        on.extend([
            ("snow.table.incident.deletes", "true"),
            ("snow.table.problem.deletes", "true"),
            ("snow.table.problem.deletes.format", "record"),
        ]);
        let c = parse(&on).unwrap();
        assert_eq!((c.tables[0].deletes, c.tables[1].deletes), (Some(DeleteFormat::Tombstone), Some(DeleteFormat::Record)));
        let mut wrong = base.to_vec();
        wrong.extend([("snow.table.incident.deletes", "yes"), ("snow.table.incident.deletes.format", "null")]);
        let err = parse(&wrong).unwrap_err().to_string();
        assert!(err.contains("snow.table.incident.deletes:") && err.contains("snow.table.incident.deletes.format:"), "{err}");
    }

    #[test]
    fn every_problem_names_its_key() {
        let err = parse(&[
            ("snow.instance.url", "acme"),
            ("snow.tables", "incident"),
            ("snow.table.incident.fields", "number,short_description"),
            ("snow.table.incident.query", "active=true^ORDERBYnumber"),
            ("snow.table.problem.topic", "x"),
        ])
        .unwrap_err()
        .to_string();
        for expected in [
            "snow.instance.url: must start with",
            "snow.table.incident.fields: must contain the cursor field sys_id",
            "snow.table.incident.fields: must contain the cursor field sys_updated_on",
            "snow.table.incident.query:",
            "snow.table.problem.topic: unknown key",
        ] {
            assert!(err.contains(expected), "missing {expected:?} in {err}");
        }
    }

    #[test]
    fn configured_topics_follow_the_tables() {
        let entries = entries_from_pairs([
            ("snow.tables", " incident, change_request ,problem"),
            ("snow.topic.prefix", "itsm."),
            ("snow.table.incident.topic", "incidents"),
        ])
        .unwrap();
        let topics: Vec<String> = configured_topics(&entries).into_iter().collect();
        assert_eq!(topics, ["incidents", "itsm.change_request", "itsm.problem"]);
        let parsed = SourceConfig::parse(
            &entries_from_pairs([("snow.instance.url", "https://a.service-now.com"), ("snow.tables", "x"), ("snow.table.x.topic", "t")])
                .unwrap(),
        )
        .unwrap();
        assert_eq!(parsed.tables[0].topic, "t", "the same rule as the parsed configuration");
    }

    #[test]
    fn settings_that_cannot_fit_the_components_memory_are_refused_naming_the_key() {
        let base = [("snow.instance.url", "https://a.service-now.com"), ("snow.tables", "incident")];
        let with = |extra: &[(&'static str, &'static str)]| parse(&[&base[..], extra].concat());
        assert!(with(&[("component.memory.max.bytes", "268435456")]).is_ok(), "the defaults fit 256 MiB");
        let err = with(&[("component.memory.max.bytes", "268435456"), ("snow.dedup.window.size", "5000000")]).unwrap_err().to_string();
        assert!(
            err.contains("snow.dedup.window.size: 5000000 dedup versions") && err.contains("component.memory.max.bytes=268435456"),
            "{err}"
        );
        assert!(err.contains("set it to at most 804864, or raise component.memory.max.bytes"), "the largest that fits: {err}");
        let err = with(&[("component.memory.max.bytes", "67108864"), ("snow.dedup.window.size", "1000")]).unwrap_err().to_string();
        assert!(err.contains("snow.table.incident.hidden.window.max.rows:"), "the widest window takes most: {err}");
        assert!(with(&[("snow.dedup.window.size", "5000000")]).is_ok(), "no cap given, no check");
    }

    #[test]
    fn tables_are_required() {
        let err = parse(&[("snow.instance.url", "https://a.service-now.com")]).unwrap_err().to_string();
        assert!(err.contains("snow.tables: is required"), "{err}");
    }
}
