//! From a page row to a Kafka record: key = sys_id; value = the row's JSON, passed through as
//! ServiceNow sent it unless a reshaping is asked for (display values with raw cursor fields, or
//! Kafka Connect's JSON-with-schema envelope); header `snow.sys_mod_count` (and, once per batch,
//! `snow.table`, `snow.instance`, `snow.source.operation`); timestamp = the row's cursor timestamp.
//! Keys, passed-through values and header values are ranges of the page itself: a page's records
//! need no buffer of their own.

use serde_json::{Map, Value, json};

use crate::config::TableConfig;
use crate::config::source::ValueFormat;
use crate::error::SnowError;
use crate::record::{BatchData, BatchTooLarge, Finished, Header, SourceRecord, Span};
use crate::table::{DisplayValue, PageRow};
use crate::time::Timestamp;

/// The header naming the row a snapshot record is of (its id field's value, ADR 0035).
pub const ID_HEADER: &str = "snow.snapshot.id";
/// The header carrying a snapshot record's content hash (16 hex digits).
pub const HASH_HEADER: &str = "snow.snapshot.hash";

/// A content hash as its header carries it.
pub fn hash_text(hash: u64) -> String {
    format!("{hash:016x}")
}

/// Builds the records of one table.
pub struct RecordBuilder {
    topic: String,
    table: String,
    headers: Vec<Header>,
    id_field: String,
    ts_field: String,
    display: DisplayValue,
    format: ValueFormat,
    /// Rows go out as read (the host types them by the table's schema, ADR 0027).
    as_read: bool,
}

impl RecordBuilder {
    /// A builder for `table` on `instance`.
    pub fn new(table: &TableConfig, instance: &str, format: ValueFormat) -> Self {
        Self {
            topic: table.topic.clone(),
            table: table.name.clone(),
            headers: vec![header("snow.table", &table.name), header("snow.instance", instance), header("snow.source.operation", "UPSERT")],
            id_field: table.sys_id_field.clone(),
            ts_field: table.timestamp_field.clone(),
            display: table.display_value,
            format,
            as_read: false,
        }
    }

    /// The same builder passing every row on as it was read (with `display.value=display`, as
    /// `{"value":…,"display_value":…}` pairs): the host types rows by the table's schema.
    pub fn passing_rows_as_read(self) -> Self {
        Self { as_read: true, ..self }
    }

    /// The topic of every record.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The headers of every record.
    pub fn headers(&self) -> &[Header] {
        &self.headers
    }

    /// Starts the records of the page `body`.
    pub fn page<'p>(&self, body: &'p [u8]) -> PageRecords<'_, 'p> {
        PageRecords { builder: self, data: BatchData::new(body), mod_count_key: None, snapshot_keys: None, records: Vec::new() }
    }

    /// The value of `row` (sys_id `id`): the row's JSON as the page carried it, or reshaped.
    fn value(&self, row: &PageRow<'_>, id: &str, data: &mut BatchData<'_>) -> Result<Span, SnowError> {
        let reshaped = match (self.display, self.format) {
            _ if self.as_read => return data.span(row.raw).map_err(|e| self.too_large(e)),
            (DisplayValue::Raw | DisplayValue::All, ValueFormat::Json) => return data.span(row.raw).map_err(|e| self.too_large(e)),
            (display, format) => {
                let mut object: Map<String, Value> =
                    serde_json::from_slice(row.raw).map_err(|e| SnowError::data(format!("table {}: row {id}: {e}", self.table)))?;
                if display == DisplayValue::Display {
                    self.show(&mut object);
                }
                let value = match format {
                    ValueFormat::Json => Value::Object(object),
                    ValueFormat::ConnectJson => json!({ "schema": self.schema(&object), "payload": object }),
                };
                serde_json::to_vec(&value).map_err(|e| SnowError::data(format!("table {}: row {id}: {e}", self.table)))?
            }
        };
        data.append(&reshaped).map_err(|e| self.too_large(e))
    }

    fn too_large(&self, e: BatchTooLarge) -> SnowError {
        SnowError::data(format!("table {}: {e}; lower snow.batch.size", self.table))
    }

    /// Display values for every field but the cursor fields, which keep their raw values
    /// (the row was read with `sysparm_display_value=all`).
    fn show(&self, object: &mut Map<String, Value>) {
        for (name, value) in object.iter_mut() {
            let Value::Object(pair) = value else { continue };
            let raw_wanted = *name == self.id_field || *name == self.ts_field;
            let picked = pair.get(if raw_wanted { "value" } else { "display_value" }).cloned().unwrap_or(Value::Null);
            *value = match pair.get("link") {
                Some(link) if !raw_wanted => json!({ "display_value": picked, "link": link }),
                _ => picked,
            };
        }
    }

    /// A Kafka Connect struct schema describing `object`.
    fn schema(&self, object: &Map<String, Value>) -> Value {
        json!({
            "type": "struct",
            "name": format!("servicenow.{}", self.table),
            "optional": false,
            "fields": object.iter().map(|(name, value)| field_schema(name, value)).collect::<Vec<_>>(),
        })
    }
}

/// The records of one page, their bytes ranges of the page wherever possible.
pub struct PageRecords<'b, 'p> {
    builder: &'b RecordBuilder,
    data: BatchData<'p>,
    /// Where the name `snow.sys_mod_count` is, once written.
    mod_count_key: Option<Span>,
    /// Where the names of the snapshot headers are, once written.
    snapshot_keys: Option<(Span, Span)>,
    records: Vec<SourceRecord>,
}

impl PageRecords<'_, '_> {
    /// Adds the record of `row`, whose cursor key is `(ts, id)`.
    pub fn push(&mut self, row: &PageRow<'_>, ts: Timestamp, id: &str) -> Result<(), SnowError> {
        let b = self.builder;
        let value = b.value(row, id, &mut self.data)?;
        let key = self.data.span(id.as_bytes()).map_err(|e| b.too_large(e))?;
        let name = match self.mod_count_key {
            Some(name) => name,
            None => *self.mod_count_key.insert(self.data.append(b"snow.sys_mod_count").map_err(|e| b.too_large(e))?),
        };
        let count = self.data.span(row.mod_count.as_deref().unwrap_or("").as_bytes()).map_err(|e| b.too_large(e))?;
        let at = self.data.header(name, count).map_err(|e| b.too_large(e))?;
        self.records.push(SourceRecord {
            key: Some(key),
            value: Some(value),
            headers: Span { start: at, len: 1 },
            timestamp_ms: Some(ts.as_millis()),
        });
        Ok(())
    }

    /// Adds the record of `row` (id `id`) read by a snapshot started at `ts` (ServiceNow's clock,
    /// when it told), with its content hash: the
    /// headers `snow.snapshot.id` and `snow.snapshot.hash` tell a read-back of the topic what it
    /// holds whatever converters and transforms did to the key (ADR 0035).
    pub fn push_snapshot(&mut self, row: &PageRow<'_>, ts: Option<Timestamp>, id: &str, hash: u64) -> Result<(), SnowError> {
        let b = self.builder;
        let value = b.value(row, id, &mut self.data)?;
        let key = self.data.span(id.as_bytes()).map_err(|e| b.too_large(e))?;
        let (id_name, hash_name) = match self.snapshot_keys {
            Some(names) => names,
            None => *self.snapshot_keys.insert((
                self.data.append(ID_HEADER.as_bytes()).map_err(|e| b.too_large(e))?,
                self.data.append(HASH_HEADER.as_bytes()).map_err(|e| b.too_large(e))?,
            )),
        };
        let hash = self.data.append(hash_text(hash).as_bytes()).map_err(|e| b.too_large(e))?;
        let at = self.data.header(id_name, key).map_err(|e| b.too_large(e))?;
        self.data.header(hash_name, hash).map_err(|e| b.too_large(e))?;
        self.records.push(SourceRecord {
            key: Some(key),
            value: Some(value),
            headers: Span { start: at, len: 2 },
            timestamp_ms: ts.map(Timestamp::as_millis),
        });
        Ok(())
    }

    /// The records, and what turns the page into their batch's data (see [`Finished`]).
    pub fn finish(self) -> (Vec<SourceRecord>, Finished) {
        (self.records, self.data.finish())
    }
}

fn field_schema(name: &str, value: &Value) -> Value {
    match value {
        Value::Object(inner) => json!({
            "field": name,
            "type": "struct",
            "optional": true,
            "fields": inner.iter().map(|(n, v)| field_schema(n, v)).collect::<Vec<_>>(),
        }),
        Value::Bool(_) => json!({ "field": name, "type": "boolean", "optional": true }),
        Value::Number(_) => json!({ "field": name, "type": "double", "optional": true }),
        _ => json!({ "field": name, "type": "string", "optional": true }),
    }
}

fn header(key: &str, value: &str) -> Header {
    Header { key: key.into(), value: value.as_bytes().to_vec() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{BatchBytes, PollBatch};
    use crate::table::parse_page;

    fn table(display: DisplayValue) -> TableConfig {
        let mut t = crate::config::SourceConfig::parse(
            &crate::config::reader::entries_from_pairs([("snow.instance.url", "https://a.service-now.com"), ("snow.tables", "incident")])
                .unwrap(),
        )
        .unwrap()
        .tables
        .remove(0);
        t.display_value = display;
        t
    }

    const ALL: &[u8] = br#"{"result":[{"sys_id":{"display_value":"a1","value":"a1"},"sys_updated_on":{"display_value":"01/02/2024 01:00:00 AM","value":"2024-01-02 01:00:00"},"caller_id":{"display_value":"Ann","value":"u1","link":"https://x/u1"},"state":{"display_value":"New","value":"1"}}]}"#;

    /// The batch of every row of `body`, built by `b`.
    fn batch(b: &RecordBuilder, body: &[u8]) -> PollBatch {
        let rows = parse_page(body, "sys_id", "sys_updated_on").unwrap();
        let mut out = b.page(body);
        for row in &rows {
            out.push(row, Timestamp::parse(row.timestamp.as_deref().unwrap()).unwrap(), row.id.as_deref().unwrap()).unwrap();
        }
        let (mut records, finished) = out.finish();
        let BatchBytes { data, extra, record_headers } = finished.into_batch_bytes(body.to_vec(), &mut records);
        PollBatch {
            topic: b.topic().into(),
            headers: b.headers().to_vec(),
            data,
            extra,
            record_headers,
            records,
            offset: None,
            next_poll_ms: 0,
            notice: None,
            value_schema: None,
        }
    }

    #[test]
    fn raw_rows_pass_through_unchanged_as_ranges_of_the_page() {
        let body = br#"{"result":[{"sys_id":"a1","sys_updated_on":"2024-01-02 01:00:00","sys_mod_count":"3","n":"1"},{"sys_id":"b\u0032","sys_updated_on":"2024-01-02 01:00:01","sys_mod_count":"0"}]}"#;
        let rows = parse_page(body, "sys_id", "sys_updated_on").unwrap();
        let b = batch(&RecordBuilder::new(&table(DisplayValue::Raw), "a.service-now.com", ValueFormat::Json), body);
        assert_eq!(b.value(0), Some(rows[0].raw));
        assert_eq!(b.key_text(0), Some("a1"));
        assert_eq!(b.key_text(1), Some("b2"), "an escaped sys_id is carried unescaped");
        assert_eq!(b.record_headers_of(0), [("snow.sys_mod_count".to_string(), "3".to_string())]);
        assert_eq!(b.records[0].timestamp_ms, Some(Timestamp::parse("2024-01-02 01:00:00").unwrap().as_millis()));
        assert_eq!(
            (b.data.len(), b.extra.len()),
            (body.len(), "snow.sys_mod_count".len() + "b2".len()),
            "the page once (kept whole: its rows are most of it); the header name once and the unescaped id: nothing per record"
        );
    }

    #[test]
    fn display_values_keep_raw_cursor_fields() {
        let b = batch(&RecordBuilder::new(&table(DisplayValue::Display), "a", ValueFormat::Json), ALL);
        let v: Value = serde_json::from_slice(b.value(0).unwrap()).unwrap();
        assert_eq!(v["sys_updated_on"], "2024-01-02 01:00:00", "the cursor field stays raw");
        assert_eq!(v["state"], "New");
        assert_eq!(v["caller_id"], json!({ "display_value": "Ann", "link": "https://x/u1" }));
    }

    #[test]
    fn connect_json_envelope_describes_the_payload() {
        let body = br#"{"result":[{"sys_id":"a1","sys_updated_on":"2024-01-02 01:00:00","caller_id":{"link":"l","value":"u1"}}]}"#;
        let b = batch(&RecordBuilder::new(&table(DisplayValue::Raw), "a", ValueFormat::ConnectJson), body);
        let v: Value = serde_json::from_slice(b.value(0).unwrap()).unwrap();
        assert_eq!(v["payload"]["sys_id"], "a1");
        assert_eq!(v["schema"]["name"], "servicenow.incident");
        let fields = v["schema"]["fields"].as_array().unwrap();
        assert_eq!(
            fields[0],
            json!({ "field": "caller_id", "type": "struct", "optional": true, "fields": [
            { "field": "link", "type": "string", "optional": true }, { "field": "value", "type": "string", "optional": true }] })
        );
        assert_eq!(fields.len(), 3);
        assert_eq!(b.key_text(0), Some("a1"));
    }
}
