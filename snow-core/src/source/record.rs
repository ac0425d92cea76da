//! From a page row to a Kafka record: key = sys_id; value = the row's JSON, passed through as
//! ServiceNow sent it unless a reshaping is asked for (display values with raw cursor fields, or
//! Kafka Connect's JSON-with-schema envelope); header `snow.sys_mod_count` (and, once per batch,
//! `snow.table`, `snow.instance`, `snow.source.operation`); timestamp = the row's cursor timestamp.

use serde_json::{Map, Value, json};

use crate::config::TableConfig;
use crate::config::source::ValueFormat;
use crate::cursor::Cursor;
use crate::error::SnowError;
use crate::record::{Header, SourceRecord};
use crate::table::{DisplayValue, PageRow};

/// Builds the records of one table.
pub struct RecordBuilder {
    topic: String,
    table: String,
    headers: Vec<Header>,
    id_field: String,
    ts_field: String,
    display: DisplayValue,
    format: ValueFormat,
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
        }
    }

    /// The topic of every record.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The headers of every record.
    pub fn headers(&self) -> &[Header] {
        &self.headers
    }

    /// The record of `row` (cursor key `at`).
    pub fn build(&self, row: &PageRow<'_>, at: &Cursor) -> Result<SourceRecord, SnowError> {
        let value = match (self.display, self.format) {
            (DisplayValue::Raw | DisplayValue::All, ValueFormat::Json) => row.raw.to_vec(),
            (display, format) => {
                let mut object: Map<String, Value> =
                    serde_json::from_slice(row.raw).map_err(|e| SnowError::data(format!("table {}: row {}: {e}", self.table, at.id)))?;
                if display == DisplayValue::Display {
                    self.show(&mut object);
                }
                let value = match format {
                    ValueFormat::Json => Value::Object(object),
                    ValueFormat::ConnectJson => json!({ "schema": self.schema(&object), "payload": object }),
                };
                serde_json::to_vec(&value).map_err(|e| SnowError::data(format!("table {}: row {}: {e}", self.table, at.id)))?
            }
        };
        Ok(SourceRecord {
            key: Some(at.id.as_bytes().to_vec()),
            value: Some(value),
            headers: vec![header("snow.sys_mod_count", row.mod_count.as_deref().unwrap_or(""))],
            timestamp_ms: Some(at.ts.as_millis()),
        })
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
    use crate::table::parse_page;
    use crate::time::Timestamp;

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

    #[test]
    fn raw_rows_pass_through_unchanged() {
        let body = br#"{"result":[{"sys_id":"a1","sys_updated_on":"2024-01-02 01:00:00","sys_mod_count":"3","n":"1"}]}"#;
        let rows = parse_page(body, "sys_id", "sys_updated_on").unwrap();
        let at = Cursor { ts: Timestamp::parse("2024-01-02 01:00:00").unwrap(), id: "a1".into() };
        let r = RecordBuilder::new(&table(DisplayValue::Raw), "a.service-now.com", ValueFormat::Json);
        let r = r.build(&rows[0], &at).unwrap();
        assert_eq!(r.value.as_deref(), Some(rows[0].raw));
        assert_eq!(r.headers, [header("snow.sys_mod_count", "3")]);
        assert_eq!(r.timestamp_ms, Some(at.ts.as_millis()));
    }

    #[test]
    fn display_values_keep_raw_cursor_fields() {
        let rows = parse_page(ALL, "sys_id", "sys_updated_on").unwrap();
        let at = Cursor { ts: Timestamp::parse("2024-01-02 01:00:00").unwrap(), id: "a1".into() };
        let r = RecordBuilder::new(&table(DisplayValue::Display), "a", ValueFormat::Json).build(&rows[0], &at).unwrap();
        let v: Value = serde_json::from_slice(r.value.as_deref().unwrap()).unwrap();
        assert_eq!(v["sys_updated_on"], "2024-01-02 01:00:00", "the cursor field stays raw");
        assert_eq!(v["state"], "New");
        assert_eq!(v["caller_id"], json!({ "display_value": "Ann", "link": "https://x/u1" }));
    }

    #[test]
    fn connect_json_envelope_describes_the_payload() {
        let body = br#"{"result":[{"sys_id":"a1","sys_updated_on":"2024-01-02 01:00:00","caller_id":{"link":"l","value":"u1"}}]}"#;
        let rows = parse_page(body, "sys_id", "sys_updated_on").unwrap();
        let at = Cursor { ts: Timestamp::parse("2024-01-02 01:00:00").unwrap(), id: "a1".into() };
        let r = RecordBuilder::new(&table(DisplayValue::Raw), "a", ValueFormat::ConnectJson).build(&rows[0], &at).unwrap();
        let v: Value = serde_json::from_slice(r.value.as_deref().unwrap()).unwrap();
        assert_eq!(v["payload"]["sys_id"], "a1");
        assert_eq!(v["schema"]["name"], "servicenow.incident");
        let fields = v["schema"]["fields"].as_array().unwrap();
        assert_eq!(
            fields[0],
            json!({ "field": "caller_id", "type": "struct", "optional": true, "fields": [
            { "field": "link", "type": "string", "optional": true }, { "field": "value", "type": "string", "optional": true }] })
        );
        assert_eq!(fields.len(), 3);
    }
}
