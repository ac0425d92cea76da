//! One table's stream: open it at its stored offset, then each `poll` makes one request and
//! returns the page's rows as records, each with the offset to store once Kafka has it.

use crate::clock::Clock;
use crate::config::{Entries, SourceConfig, TableConfig};
use crate::cursor::{Cursor, Partition, Sweep};
use crate::error::{ErrorClass, SnowError};
use crate::http::Transport;
use crate::record::{Header, PollBatch, SourceOffset, SourceRecord};
use crate::table::{DisplayValue, ListParams, TableClient, parse_page};
use crate::time::Timestamp;

/// Reads one table along its keyset cursor.
pub struct SourceTask<T, C> {
    client: TableClient<T, C>,
    table: TableConfig,
    instance: String,
    partition_key: String,
    sweep: Sweep,
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
        let cursor = match offsets.iter().rev().find(|o| o.partition == partition_key) {
            Some(stored) => {
                Cursor::from_position(&stored.position).map_err(|m| SnowError::config(format!("snow.table.{}", table.name), m))?
            }
            None => {
                refuse_foreign_offset(&partition, offsets)?;
                Cursor::before(table.start)
            }
        };
        Ok(Self {
            client: TableClient::new(&config.instance, transport, clock),
            instance: config.instance.authority.clone(),
            sweep: Sweep::new(cursor, config.safety_lag_seconds),
            table,
            partition_key,
        })
    }

    /// The partition key offsets of this stream are stored under.
    pub fn partition_key(&self) -> &str {
        &self.partition_key
    }

    /// The `X-RateLimit-*` headers of the latest answer that carried them.
    pub fn rate_limit(&self) -> Option<&crate::http::retry::RateLimit> {
        self.client.rate_limit()
    }

    /// The table this task reads.
    pub fn table(&self) -> &str {
        &self.table.name
    }

    /// The cursor: everything up to it has been returned by `poll`.
    pub fn cursor(&self) -> &Cursor {
        self.sweep.cursor()
    }

    /// Makes one request and returns its rows as records.
    pub fn poll(&mut self) -> Result<PollBatch, SnowError> {
        let table = &self.table;
        let (terms, order) = self.sweep.next_query(&table.timestamp_field, &table.sys_id_field).map_err(SnowError::data)?;
        let order: Vec<&str> = order.iter().map(String::as_str).filter(|o| !o.is_empty()).collect();
        let query = table.query.with_cursor(&terms, &order);
        let params = ListParams {
            query: &query,
            fields: table.fields.as_deref(),
            limit: table.batch_size,
            display_value: DisplayValue::Raw,
            exclude_reference_link: false,
        };
        let page = self.client.list(&table.name, &params)?;
        let rows = parse_page(&page.body, &table.sys_id_field, &table.timestamp_field)
            .map_err(|m| SnowError::transport(format!("table {}: {m}", table.name), ErrorClass::Transient))?;
        let mut keys = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            let id = row
                .id
                .as_deref()
                .filter(|id| !id.is_empty())
                .ok_or_else(|| SnowError::data(format!("table {}: row {i} of the page has no {}", table.name, table.sys_id_field)))?;
            let ts_text = row
                .timestamp
                .as_deref()
                .ok_or_else(|| SnowError::data(format!("table {}: row {id} has no {}", table.name, table.timestamp_field)))?;
            let ts = Timestamp::parse(ts_text)
                .map_err(|e| SnowError::data(format!("table {}: row {id}: {}: {e}", table.name, table.timestamp_field)))?;
            keys.push((ts, id));
        }
        let full = rows.len() >= table.batch_size as usize;
        let observed =
            self.sweep.observe(&keys, full, page.server_time).map_err(|m| SnowError::data(format!("table {}: {m}", table.name)))?;
        let records = rows[..observed.emit]
            .iter()
            .zip(&keys)
            .map(|(row, (ts, id))| SourceRecord {
                topic: table.topic.clone(),
                key: Some(id.as_bytes().to_vec()),
                value: Some(row.raw.as_bytes().to_vec()),
                headers: vec![
                    header("snow.table", &table.name),
                    header("snow.instance", &self.instance),
                    header("snow.sys_mod_count", row.mod_count.as_deref().unwrap_or("")),
                    header("snow.source.operation", "UPSERT"),
                ],
                timestamp_ms: Some(ts.as_millis()),
                offset: SourceOffset {
                    partition: self.partition_key.clone(),
                    position: Cursor { ts: *ts, id: (*id).to_string() }.to_position(),
                },
            })
            .collect();
        Ok(PollBatch { records, next_poll_ms: if observed.done { table.poll_interval_ms } else { 0 } })
    }
}

fn header(key: &str, value: &str) -> Header {
    Header { key: key.into(), value: value.as_bytes().to_vec() }
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
            "the stored offset of table {} was made with another query, id field or timestamp field \
             (stored: fingerprint {}, timestamp field {}; now: fingerprint {}, timestamp field {}). \
             Restore the previous settings, or delete the table's stored offset to start again from its start.timestamp",
            partition.table, other.fingerprint, other.timestamp_field, partition.fingerprint, partition.timestamp_field
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::config::reader::entries_from_pairs;
    use crate::http::transport::{Request, Response, TransportError};

    struct Pages {
        answers: Vec<(String, i64)>,
        sent: Vec<Request>,
    }

    impl Transport for &mut Pages {
        fn send(&mut self, request: &Request) -> Result<Response, TransportError> {
            self.sent.push(request.clone());
            let (body, now) = self.answers.remove(0);
            Ok(Response { status: 200, headers: vec![("Date".into(), Timestamp(now).to_http_date())], body: body.into_bytes() })
        }
    }

    fn entries(extra: &[(&str, &str)]) -> Entries {
        let mut pairs = vec![
            ("snow.instance.url", "https://acme.service-now.com"),
            ("snow.tables", "incident"),
            ("snow.batch.size", "2"),
            ("snow.safety.lag.seconds", "0"),
        ];
        pairs.extend_from_slice(extra);
        entries_from_pairs(pairs).unwrap()
    }

    fn row(id: &str, ts: i64) -> String {
        format!(r#"{{"sys_id":"{id}","sys_updated_on":"{}","sys_mod_count":"0","n":1}}"#, Timestamp(ts))
    }

    #[test]
    fn pages_become_records_with_offsets_and_resume_from_them() {
        let mut pages = Pages {
            answers: vec![(format!(r#"{{"result":[{},{}]}}"#, row("a", 0), row("b", 0)), 100), (r#"{"result":[]}"#.into(), 100)],
            sent: vec![],
        };
        let mut task = SourceTask::open(&entries(&[]), &[], &mut pages, ManualClock::default()).unwrap();
        let batch = task.poll().unwrap();
        assert_eq!(batch.records.len(), 2);
        assert_eq!(batch.next_poll_ms, 0, "a full page is chained without waiting");
        let last = batch.records[1].clone();
        assert_eq!(last.key.as_deref(), Some(&b"b"[..]));
        assert_eq!(last.value.as_deref(), Some(row("b", 0).as_bytes()));
        assert_eq!(last.timestamp_ms, Some(0));
        let offsets = vec![last.offset.clone()];
        drop(task);
        let task = SourceTask::open(&entries(&[]), &offsets, &mut pages, ManualClock::default()).unwrap();
        assert_eq!(task.cursor(), &Cursor { ts: Timestamp(0), id: "b".into() });
    }

    #[test]
    fn a_changed_query_refuses_the_stored_offset() {
        let mut pages = Pages { answers: vec![], sent: vec![] };
        let old = SourceTask::open(&entries(&[]), &[], &mut pages, ManualClock::default()).unwrap().partition_key().to_string();
        let offsets = vec![SourceOffset { partition: old, position: Cursor::before(Timestamp(5)).to_position() }];
        let Err(err) =
            SourceTask::open(&entries(&[("snow.table.incident.query", "active=true")]), &offsets, &mut pages, ManualClock::default())
        else {
            panic!("expected a refusal")
        };
        assert!(
            err.to_string().contains("snow.table.incident.query: the stored offset of table incident was made with another query"),
            "{err}"
        );
    }

    #[test]
    fn a_row_without_sys_id_names_the_table() {
        let mut pages = Pages { answers: vec![(r#"{"result":[{"sys_updated_on":"2024-01-01 00:00:00"}]}"#.into(), 100)], sent: vec![] };
        let mut task = SourceTask::open(&entries(&[]), &[], &mut pages, ManualClock::default()).unwrap();
        assert_eq!(task.poll().unwrap_err().to_string(), "table incident: row 0 of the page has no sys_id");
    }
}
