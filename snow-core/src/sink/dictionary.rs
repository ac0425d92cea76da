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
use crate::table::TableClient;

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

/// `table`'s fields: its own and those of every table it extends.
fn read<T: Transport, C: Clock>(client: &mut TableClient<T, C>, table: &str) -> Result<BTreeSet<String>, SnowError> {
    Ok(crate::table::dictionary::read(client, table, "snow.sink.unknown.fields")?.into_iter().map(|e| e.name).collect())
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
