//! The unknown-field check (`snow.sink.unknown.fields`): ServiceNow silently ignores a field a
//! table does not have, so a misspelt or renamed field would be lost without a word. With `fail`,
//! `drop` or `report`, a write's fields are checked against the table's dictionary: its own
//! `sys_dictionary` elements and those of every table it extends (`sys_db_object.super_class`),
//! read once per table and kept for `snow.sink.dictionary.ttl.seconds`.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use serde_json::Value;

use crate::clock::Clock;
use crate::error::SnowError;
use crate::http::Transport;
use crate::table::{ListParams, Op, TableClient, Term};

/// What a write with fields the table does not have does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownFields {
    /// Not checked (no dictionary reads): ServiceNow ignores them.
    Pass,
    /// The record fails, naming the fields.
    Fail,
    /// The fields are left out of the write (counted).
    Drop,
    /// Written as they are, and counted and logged by the lane (ServiceNow ignores them).
    Report,
}

/// Longest inheritance chain followed (ServiceNow's are a handful deep).
const MAX_DEPTH: usize = 16;

/// The fields of each table, as last read.
#[derive(Debug)]
pub struct Dictionary {
    ttl: Duration,
    tables: HashMap<String, (BTreeSet<String>, Duration)>,
}

impl Dictionary {
    /// A dictionary whose entries are read again after `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, tables: HashMap::new() }
    }

    /// The fields `table` has (its own and inherited), read when not known or older than the TTL.
    pub fn fields<T: Transport, C: Clock>(
        &mut self,
        client: &mut TableClient<T, C>,
        now: Duration,
        table: &str,
    ) -> Result<&BTreeSet<String>, SnowError> {
        let fresh = self.tables.get(table).is_some_and(|(_, at)| now.saturating_sub(*at) < self.ttl);
        if !fresh {
            let fields = read(client, table)?;
            self.tables.insert(table.to_string(), (fields, now));
        }
        self.tables.get(table).map(|(f, _)| f).ok_or_else(|| SnowError::data("the dictionary went away"))
    }
}

/// `table`'s fields: the chain of tables it extends, then their dictionary elements.
fn read<T: Transport, C: Clock>(client: &mut TableClient<T, C>, table: &str) -> Result<BTreeSet<String>, SnowError> {
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
    let mut fields = BTreeSet::new();
    for name in &chain {
        let query = Term::new("name", Op::Eq, name).map_err(SnowError::data)?.as_str().to_string();
        let keys = ["element".to_string()];
        let params = ListParams::lookup(&query, &keys, 10_000);
        let page = client.list("sys_dictionary", &params)?;
        let rows: Value = serde_json::from_slice(&page.body).unwrap_or(Value::Null);
        for row in rows["result"].as_array().into_iter().flatten() {
            if let Some(element) = row["element"].as_str().filter(|e| !e.is_empty()) {
                fields.insert(element.to_string());
            }
        }
    }
    if fields.is_empty() {
        return Err(SnowError::data(format!(
            "table {table} has no sys_dictionary entries the integration user can read (snow.sink.unknown.fields needs read access to sys_dictionary and sys_db_object)"
        )));
    }
    Ok(fields)
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

/// The fields of `body` (a JSON object) that are not in `known` (system fields are never checked:
/// only allowed ones reach a body, and every table has them).
pub fn unknown_fields(body: &[u8], known: &BTreeSet<String>) -> Vec<String> {
    let fields: serde_json::Map<String, Value> = serde_json::from_slice(body).unwrap_or_default();
    fields.keys().filter(|k| !k.starts_with("sys_") && !known.contains(*k)).cloned().collect()
}

/// `body` without `fields`.
pub fn without(body: &[u8], fields: &[String]) -> Vec<u8> {
    let mut map: serde_json::Map<String, Value> = serde_json::from_slice(body).unwrap_or_default();
    for f in fields {
        map.remove(f);
    }
    serde_json::to_vec(&map).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_are_named_and_dropped() {
        let known: BTreeSet<String> = ["short_description", "u_ref"].iter().map(|s| s.to_string()).collect();
        let body = br#"{"short_description":"x","u_reff":"typo","sys_id":"a"}"#;
        assert_eq!(unknown_fields(body, &known), ["u_reff"]);
        assert_eq!(without(body, &["u_reff".into()]), br#"{"short_description":"x","sys_id":"a"}"#);
    }
}
