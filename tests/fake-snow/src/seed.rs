//! Rows of realistic incident shape: about 40 fields, about 1 KB each, two reference fields.

use serde_json::{Map, Value, json};

use crate::store::Row;
use crate::time::format_ts;

const WORDS: [&str; 16] = [
    "printer", "network", "email", "VPN", "laptop", "password", "outage", "slow", "access", "database", "disk", "license", "phone",
    "badge", "portal", "backup",
];

/// An incident-shaped row numbered `n`, stamped at `ts` (created and updated), instance `base_url`.
pub fn incident(n: u64, ts: i64, base_url: &str) -> Row {
    let w = |i: u64| WORDS[(n.wrapping_mul(2_654_435_761).wrapping_add(i) % WORDS.len() as u64) as usize];
    let stamp = format_ts(ts);
    let reference = |table: &str, id: String, name: &str| json!({ "link": format!("{base_url}/api/now/table/{table}/{id}"), "value": id, "display_value": name });
    let value = json!({
        "number": format!("INC{:07}", n),
        "short_description": format!("{} {} issue reported by user {}", w(1), w(2), n % 997),
        "description": format!("The {} has been {} since this morning. Steps tried: restart, {} check, {} reset. Impact: team of {} people.", w(3), w(4), w(5), w(6), n % 40 + 1),
        "state": ((n % 7) + 1).to_string(),
        "impact": ((n % 3) + 1).to_string(),
        "urgency": ((n % 3) + 1).to_string(),
        "priority": ((n % 5) + 1).to_string(),
        "severity": ((n % 3) + 1).to_string(),
        "category": w(7),
        "subcategory": w(8),
        "contact_type": "self-service",
        "active": if n.is_multiple_of(5) { "false" } else { "true" },
        "caller_id": reference("sys_user", format!("{:032x}", n % 5000 + 1), &format!("User {}", n % 5000)),
        "assignment_group": reference("sys_user_group", format!("{:032x}", n % 40 + 0x10000), &format!("Group {}", n % 40)),
        "assigned_to": "",
        "opened_at": stamp,
        "opened_by": "6816f79cc0a8016401c5a33be04be441",
        "resolved_at": "",
        "closed_at": "",
        "close_code": "",
        "close_notes": "",
        "company": "31bea3d53790200044e0bfc8bcbe5dec",
        "location": "25ab9c4d0a0a0bb300f7dabdc0ca7c1c",
        "cmdb_ci": "",
        "business_service": "",
        "escalation": "0",
        "reassignment_count": (n % 4).to_string(),
        "reopen_count": "0",
        "made_sla": "true",
        "knowledge": "false",
        "work_notes": "",
        "comments": "",
        "sys_domain": "global",
        "sys_class_name": "incident",
        "sys_tags": "",
        "sys_created_by": "admin",
        "sys_updated_by": "admin",
        "sys_created_on": stamp,
        "sys_updated_on": stamp,
        "sys_mod_count": "0",
    });
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}
