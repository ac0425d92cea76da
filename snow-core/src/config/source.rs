//! Source connector configuration: the tables to read and how to read each.
//!
//! Per-table keys are `snow.table.<table>.<key>`; most fall back to a connector-wide
//! `snow.<key>` and then to a default. `docs/configuration.md` lists them all.

use super::instance::InstanceConfig;
use super::reader::{ConfigReader, Entries};
use crate::error::SnowError;
use crate::table::query::{BaseQuery, is_valid_field_name, is_valid_table_name};
use crate::time::Timestamp;

/// The whole source connector configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceConfig {
    /// The instance to read from.
    pub instance: InstanceConfig,
    /// Tables in the order `snow.tables` lists them.
    pub tables: Vec<TableConfig>,
    /// Seconds the high-water mark is held below the server clock (`snow.safety.lag.seconds`).
    pub safety_lag_seconds: u32,
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
    /// Pause between sweeps once caught up.
    pub poll_interval_ms: u32,
}

/// The key listing the tables.
pub const TABLES_KEY: &str = "snow.tables";

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

/// The most ServiceNow returns in one page by default.
const MAX_BATCH_SIZE: u32 = 10_000;

impl SourceConfig {
    /// Parses and validates a source configuration; every problem is reported with its key.
    pub fn parse(entries: &Entries) -> Result<Self, SnowError> {
        let mut r = ConfigReader::new(entries);
        let instance = InstanceConfig::read(&mut r);
        let safety_lag_seconds = r.bounded_u32("snow.safety.lag.seconds", default_safety_lag_seconds(), 0, 3600);
        let topic_prefix = r.string("snow.topic.prefix").unwrap_or_else(|| "snow.".into());
        let names = r.list(TABLES_KEY);
        if names.is_empty() {
            r.error(TABLES_KEY, "is required: a comma-separated list of tables or views, e.g. incident,change_request");
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
        r.finish(&["snow."])?;
        let instance = instance.ok_or_else(|| SnowError::config("snow.instance.url", "is invalid"))?;
        Ok(Self { instance, tables, safety_lag_seconds })
    }
}

impl TableConfig {
    fn read(r: &mut ConfigReader<'_>, name: &str, topic_prefix: &str) -> Option<Self> {
        let key = |k: &str| format!("snow.table.{name}.{k}");
        // A per-table key wins over the connector-wide `snow.<k>`.
        let scoped = |r: &mut ConfigReader<'_>, k: &str| r.string(&key(k)).or_else(|| r.string(&format!("snow.{k}")));
        let topic = r.string(&key("topic")).unwrap_or_else(|| format!("{topic_prefix}{name}"));
        let timestamp_field = scoped(r, "timestamp.field").unwrap_or_else(|| default_timestamp_field().into());
        let sys_id_field = scoped(r, "sys.id.field").unwrap_or_else(|| "sys_id".into());
        for (k, field) in [("timestamp.field", &timestamp_field), ("sys.id.field", &sys_id_field)] {
            if !is_valid_field_name(field) {
                r.error(&key(k), format!("{field:?} is not a field name"));
            }
        }
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
            for needed in [&sys_id_field, &timestamp_field] {
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
        let poll_interval_ms = table_u32(r, name, "poll.interval.ms", default_poll_interval_ms(), 0, 86_400_000);
        Some(Self { name: name.into(), topic, timestamp_field, sys_id_field, query, fields, start, batch_size, poll_interval_ms })
    }
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
    fn tables_are_required() {
        let err = parse(&[("snow.instance.url", "https://a.service-now.com")]).unwrap_err().to_string();
        assert!(err.contains("snow.tables: is required"), "{err}");
    }
}
