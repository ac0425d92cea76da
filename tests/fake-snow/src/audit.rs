//! Deletes as an instance records them: a row of *Audit Deleted Records* (`sys_audit_delete`)
//! per deleted row of an audited table, holding the row as XML, and the table-level read ACL
//! that keeps that table from users without the admin role.
//!
//! What a real instance does, and this fake with it: a delete of a row of a table whose name does
//! not start with `sys_` writes `tablename`, `documentkey` (the row's sys_id), `display_value`,
//! `payload` (the deleted row as an XML document named after its table) and the system fields
//! (`sys_created_on` is the delete's time, `sys_created_by` its user); a table whose collection
//! carries the dictionary attribute `no_audit_delete=true` records nothing, and neither do `sys_`
//! tables (the property `glide.ui.audit_deleted_tables` can add them on an instance; not modelled).
//! The exact layout of `payload` on an instance is not published: the fake writes
//! `<?xml version="1.0" encoding="UTF-8"?><record_update table="T"><T action="DELETE">…fields…</T></record_update>`,
//! the shape of an update set's record, and a reader must look only for the element named after
//! the table and its child elements.

use serde_json::Value;

use crate::store::{Row, raw_value};

/// The table of audited deletes.
pub const AUDIT_DELETE: &str = "sys_audit_delete";

/// The dictionary attribute of a collection that switches delete auditing off.
pub const NO_AUDIT_DELETE: &str = "no_audit_delete=true";

/// Whether deletes of `table` are recorded (unless its collection says `no_audit_delete`).
pub fn audited_by_default(table: &str) -> bool {
    !table.starts_with("sys_")
}

/// The `sys_audit_delete` row (without system fields) for `row` of `table` deleted.
pub fn audit_row(table: &str, sys_id: &str, row: &Row) -> Row {
    let mut audit = Row::new();
    audit.insert("tablename".into(), Value::String(table.into()));
    audit.insert("documentkey".into(), Value::String(sys_id.into()));
    let shown = row.get("number").map(raw_value).and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    audit.insert("display_value".into(), Value::String(shown));
    audit.insert("payload".into(), Value::String(payload(table, row)));
    audit
}

/// `row` of `table` as the XML document kept in `payload`.
pub fn payload(table: &str, row: &Row) -> String {
    let mut xml = format!(r#"<?xml version="1.0" encoding="UTF-8"?><record_update table="{table}"><{table} action="DELETE">"#);
    for (field, value) in row {
        let text = match raw_value(value) {
            Value::Null => String::new(),
            Value::String(s) => s,
            Value::Object(o) => o.get("value").and_then(Value::as_str).unwrap_or_default().to_string(),
            other => other.to_string(),
        };
        xml.push_str(&format!("<{field}>{}</{field}>", escape(&text)));
    }
    xml.push_str(&format!("</{table}></record_update>"));
    xml
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_names_the_table_and_escapes_values() {
        let mut row = Row::new();
        row.insert("sys_id".into(), Value::String("a1".into()));
        row.insert("short_description".into(), Value::String("x < y & z".into()));
        row.insert("caller_id".into(), serde_json::json!({ "value": "u9", "link": "http://x/u9" }));
        let xml = payload("incident", &row);
        assert!(xml.contains(r#"<incident action="DELETE">"#), "{xml}");
        assert!(xml.contains("<short_description>x &lt; y &amp; z</short_description>"), "{xml}");
        assert!(xml.contains("<caller_id>u9</caller_id>"), "{xml}");
        assert!(xml.ends_with("</incident></record_update>"), "{xml}");
        assert!(audited_by_default("incident") && !audited_by_default("sys_user"));
    }
}
