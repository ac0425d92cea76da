//! A table's value schema, derived from its dictionary, in Kafka Connect's JSON schema format
//! (what `JsonConverter` writes under `schemas.enable=true`; ADR 0027). The host types each row
//! by it and hands it to the user's converter (Avro, JSON Schema, Protobuf, Connect JSON).
//!
//! | dictionary type | Connect type |
//! |---|---|
//! | `boolean` | boolean |
//! | `integer` | int32 |
//! | `longint`, `auto_increment` | int64 |
//! | `float` | float64 |
//! | `decimal` | Decimal, scale from the `scale` attribute, else 2 |
//! | `glide_date_time`, `due_date`, `calendar_date_time` | Timestamp |
//! | `glide_date` | Date |
//! | `glide_time` | Time |
//! | everything else (`string`, `reference`, `choice`, `currency`, `glide_duration`, `journal`…) | string |
//!
//! `currency`, `price` and durations stay text: their stored forms carry a currency code or a
//! date-shaped duration that no Connect type holds exactly. Every field is optional (ServiceNow
//! leaves any of them empty) except the cursor's id and timestamp. With `display.value=all`, a
//! reference or choice field gets a `dv_<field>` string beside it holding its display value;
//! with `display.value=display`, every field but the cursor's is that display text.

use serde_json::{Value, json};

use crate::config::TableConfig;
use crate::table::DisplayValue;
use crate::table::dictionary::Element;

// Connect's logical type names (snow-data's `schema` re-exports these).
/// Milliseconds since the epoch, over int64.
pub const TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";
/// Days since the epoch, over int32.
pub const DATE: &str = "org.apache.kafka.connect.data.Date";
/// Milliseconds since midnight, over int32.
pub const TIME: &str = "org.apache.kafka.connect.data.Time";
/// An exact decimal over bytes, its scale in the `scale` parameter.
pub const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";
/// The schema parameter naming the field whose display value a field holds.
pub const DISPLAY_OF: &str = "servicenow.display.of";

/// The Connect schema of `table`'s records, as JSON text, from its dictionary `elements`.
pub fn table_schema(table: &TableConfig, elements: &[Element]) -> String {
    let mut fields: Vec<(String, Value)> = Vec::new();
    let wanted = |name: &str| table.fields.as_ref().is_none_or(|f| f.iter().any(|w| w == name));
    let is_cursor = |name: &str| name == table.sys_id_field || name == table.timestamp_field;
    for e in elements.iter().filter(|e| wanted(&e.name) || is_cursor(&e.name)) {
        let name = e.name.as_str();
        let field = if name == table.sys_id_field {
            json!({ "type": "string", "optional": false })
        } else if name == table.timestamp_field {
            json!({ "type": "int64", "optional": false, "name": TIMESTAMP, "version": 1 })
        } else if table.display_value == DisplayValue::Display {
            json!({ "type": "string", "optional": true, "parameters": { DISPLAY_OF: name } })
        } else {
            typed(e)
        };
        fields.push((name.to_string(), field));
        if table.display_value == DisplayValue::All
            && (e.reference.is_some() || e.internal_type == "reference" || e.choice)
            && !is_cursor(name)
        {
            fields.push((format!("dv_{name}"), json!({ "type": "string", "optional": true, "parameters": { DISPLAY_OF: name } })));
        }
    }
    fields.sort_by(|a, b| a.0.cmp(&b.0));
    let fields: Vec<Value> = fields
        .into_iter()
        .map(|(name, mut f)| {
            f["field"] = json!(name);
            f
        })
        .collect();
    json!({ "type": "struct", "name": format!("servicenow.{}", table.name), "optional": false, "fields": fields }).to_string()
}

/// The Connect schema of one element (optional).
fn typed(e: &Element) -> Value {
    match e.internal_type.as_str() {
        "boolean" => json!({ "type": "boolean", "optional": true }),
        "integer" => json!({ "type": "int32", "optional": true }),
        "longint" | "auto_increment" => json!({ "type": "int64", "optional": true }),
        "float" => json!({ "type": "double", "optional": true }),
        "decimal" => {
            let scale = e.attribute("scale").and_then(|s| s.parse::<u8>().ok()).unwrap_or(2);
            json!({ "type": "bytes", "optional": true, "name": DECIMAL, "version": 1, "parameters": { "scale": scale.to_string() } })
        }
        "glide_date_time" | "due_date" | "calendar_date_time" => {
            json!({ "type": "int64", "optional": true, "name": TIMESTAMP, "version": 1 })
        }
        "glide_date" => json!({ "type": "int32", "optional": true, "name": DATE, "version": 1 }),
        "glide_time" => json!({ "type": "int32", "optional": true, "name": TIME, "version": 1 }),
        _ => json!({ "type": "string", "optional": true }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::source::SourceConfig;

    fn element(name: &str, internal_type: &str) -> Element {
        Element {
            table: "incident".into(),
            name: name.into(),
            internal_type: internal_type.into(),
            reference: (internal_type == "reference").then(|| "sys_user".into()),
            choice: false,
            attributes: if internal_type == "decimal" { "scale=4".into() } else { String::new() },
        }
    }

    fn table(display: &str, fields: Option<&str>) -> TableConfig {
        let mut entries: crate::config::Entries = [
            ("snow.instance.url", "https://acme.service-now.com"),
            ("snow.tables", "incident"),
            ("snow.table.incident.display.value", display),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        if let Some(f) = fields {
            entries.insert("snow.table.incident.fields".into(), f.into());
        }
        SourceConfig::parse(&entries).expect("config").tables.remove(0)
    }

    fn elements() -> Vec<Element> {
        vec![
            element("sys_id", "GUID"),
            element("sys_updated_on", "glide_date_time"),
            element("priority", "integer"),
            element("cost", "decimal"),
            element("caller_id", "reference"),
            element("opened", "glide_date"),
            element("price", "currency"),
        ]
    }

    #[test]
    fn dictionary_types_become_connect_types_and_cursor_fields_are_required() {
        let s: Value = serde_json::from_str(&table_schema(&table("false", None), &elements())).expect("json");
        assert_eq!(s["name"], "servicenow.incident");
        let field = |n: &str| s["fields"].as_array().and_then(|f| f.iter().find(|f| f["field"] == n)).cloned().unwrap_or(Value::Null);
        assert_eq!(field("sys_id")["optional"], false);
        assert_eq!(
            (field("sys_updated_on")["name"].as_str(), field("sys_updated_on")["optional"].as_bool()),
            (Some(TIMESTAMP), Some(false))
        );
        assert_eq!(field("priority")["type"], "int32");
        assert_eq!(field("cost")["parameters"]["scale"], "4");
        assert_eq!(field("opened")["name"], DATE);
        assert_eq!(field("price")["type"], "string");
        assert_eq!(field("caller_id")["type"], "string");
        assert!(field("dv_caller_id").is_null(), "no display values asked for");
        let names: Vec<&str> = s["fields"].as_array().into_iter().flatten().filter_map(|f| f["field"].as_str()).collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "fields in name order, whatever the dictionary's: {names:?}");
    }

    #[test]
    fn display_values_and_chosen_fields_shape_the_schema() {
        let s: Value =
            serde_json::from_str(&table_schema(&table("all", Some("sys_id,sys_updated_on,caller_id")), &elements())).expect("json");
        let names: Vec<&str> = s["fields"].as_array().into_iter().flatten().filter_map(|f| f["field"].as_str()).collect();
        assert_eq!(names, ["caller_id", "dv_caller_id", "sys_id", "sys_updated_on"]);
        assert_eq!(s["fields"][1]["parameters"][DISPLAY_OF], "caller_id");
        let s: Value = serde_json::from_str(&table_schema(&table("true", None), &elements())).expect("json");
        let priority = s["fields"].as_array().and_then(|f| f.iter().find(|f| f["field"] == "priority")).cloned().unwrap_or(Value::Null);
        assert_eq!((priority["type"].as_str(), priority["parameters"][DISPLAY_OF].as_str()), (Some("string"), Some("priority")));
    }
}
