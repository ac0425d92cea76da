//! A table's dictionary: its own `sys_dictionary` elements and those of every table it extends
//! (`sys_db_object.super_class`, followed up to 16 levels), read through the Table API. The sink
//! checks written fields against it; the source derives its table's typed schema from it.
//! A child's element shadows a parent's of the same name.

use serde_json::Value;

use crate::clock::Clock;
use crate::error::SnowError;
use crate::http::Transport;
use crate::table::{ListParams, Op, TableClient, Term};

/// Longest inheritance chain followed (ServiceNow's are a handful deep).
const MAX_DEPTH: usize = 16;

/// The `sys_dictionary` columns read.
const COLUMNS: [&str; 6] = ["element", "internal_type", "max_length", "reference", "choice", "attributes"];

/// One field of a table, as its dictionary element describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    /// The table that defines it (the table itself or one it extends).
    pub table: String,
    /// The column name (`short_description`).
    pub name: String,
    /// Its type (`string`, `integer`, `glide_date_time`, `reference`...).
    pub internal_type: String,
    /// The referenced table of a reference field.
    pub reference: Option<String>,
    /// Whether the field has choices (a drop-down): its display value is a label.
    pub choice: bool,
    /// The element's attributes (`scale=4,edge_encryption_enabled=true`).
    pub attributes: String,
}

impl Element {
    /// The attribute `name` (`scale` of `scale=4,...`), if set.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes.split(',').filter_map(|a| a.split_once('=')).find(|(k, _)| k.trim() == name).map(|(_, v)| v.trim())
    }
}

/// `table`'s elements, its own first then its parents'. `needed_by` names the setting that
/// needs them, for the error when the integration user cannot read the dictionary.
pub fn read<T: Transport, C: Clock>(client: &mut TableClient<T, C>, table: &str, needed_by: &str) -> Result<Vec<Element>, SnowError> {
    let mut chain = vec![table.to_string()];
    let mut object = one(client, "sys_db_object", "name", table, "super_class")?;
    while let Some(parent_id) = object.as_deref().filter(|p| !p.is_empty()) {
        if chain.len() >= MAX_DEPTH {
            break;
        }
        let parent = one(client, "sys_db_object", "sys_id", parent_id, "name")?;
        let Some(name) = parent.filter(|n| !n.is_empty() && !chain.contains(n)) else { break };
        object = one(client, "sys_db_object", "name", &name, "super_class")?;
        chain.push(name);
    }
    let mut elements: Vec<Element> = Vec::new();
    let columns: Vec<String> = COLUMNS.iter().map(|c| c.to_string()).collect();
    for name in &chain {
        let query = Term::new("name", Op::Eq, name).map_err(SnowError::data)?.as_str().to_string();
        let params = ListParams::lookup(&query, &columns, 10_000);
        let page = client.list("sys_dictionary", &params)?;
        let rows: Value = serde_json::from_slice(&page.body).unwrap_or(Value::Null);
        for row in rows["result"].as_array().into_iter().flatten() {
            let text = |k: &str| row[k].as_str().unwrap_or("").to_string();
            let element = text("element");
            if element.is_empty() || elements.iter().any(|e| e.name == element) {
                continue;
            }
            let reference = Some(text("reference")).filter(|r| !r.is_empty());
            let choice = !matches!(text("choice").as_str(), "" | "0");
            elements.push(Element {
                table: name.clone(),
                name: element,
                internal_type: text("internal_type"),
                reference,
                choice,
                attributes: text("attributes"),
            });
        }
    }
    if elements.is_empty() {
        return Err(SnowError::data(format!(
            "table {table} has no sys_dictionary entries the integration user can read ({needed_by} needs read access to sys_dictionary and sys_db_object)"
        )));
    }
    Ok(elements)
}

/// `field` of the one row of `table` whose `key` is `value`, if there is such a row.
fn one<T: Transport, C: Clock>(
    client: &mut TableClient<T, C>,
    table: &str,
    key: &str,
    value: &str,
    field: &str,
) -> Result<Option<String>, SnowError> {
    let query = Term::new(key, Op::Eq, value).map_err(SnowError::data)?.as_str().to_string();
    let keys = [field.to_string()];
    let params = ListParams::lookup(&query, &keys, 1);
    let page = client.list(table, &params)?;
    let rows: Value = serde_json::from_slice(&page.body).unwrap_or(Value::Null);
    Ok(rows["result"].get(0).and_then(|r| r[field].as_str()).map(str::to_string))
}
