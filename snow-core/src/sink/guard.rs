//! The stale-write guard: with a version source configured (`snow.sink.version.field`,
//! `snow.sink.version.header` or `snow.sink.version.offset`), a write of a named row whose version
//! is older than the newest one already written for that row is skipped (`stale`).
//!
//! **The guard's state lives in the row itself**: every write carries the record's version in
//! `snow.sink.version.row.field`, so the newest version written is whatever the row holds. That
//! survives restarts, rebalances and a lost host without any store of our own, and stays right when
//! several connectors (or runners) write the same table. A lane remembers the versions it wrote
//! (bounded) and asks the row (`GET` with `sysparm_fields=<row field>`) only for a row it has not
//! written since it opened; a lane is one partition, and one row's records share a key and so a
//! partition, so nothing else writes that row's versions meanwhile.
//!
//! Versions compare as integers when both are whole numbers, otherwise as text (ISO 8601
//! timestamps, zero-padded numbers and ServiceNow's `yyyy-MM-dd HH:mm:ss` order correctly as
//! text). An equal version is written (a replay after a crash writes the same thing again).

use std::cmp::Ordering;
use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::error::SnowError;
use crate::record::SinkRecord;

/// Rows a lane remembers the newest version of before it starts over (each a few dozen bytes).
const MAX_REMEMBERED: usize = 200_000;

/// Where a record's version comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionSource {
    /// A member of the record's value.
    Field(String),
    /// A record header.
    Header(String),
    /// The record's Kafka offset.
    Offset,
}

/// The guard's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardConfig {
    /// Where versions come from.
    pub source: VersionSource,
    /// The row field that holds the newest version written.
    pub row_field: String,
}

/// A version, ordered as integers when both sides are, else as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version(pub String);

impl Version {
    /// How `self` compares with `other`.
    pub fn compare(&self, other: &Version) -> Ordering {
        match (self.0.trim().parse::<i128>(), other.0.trim().parse::<i128>()) {
            (Ok(a), Ok(b)) => a.cmp(&b),
            _ => self.0.cmp(&other.0),
        }
    }
}

/// One lane's guard: its configuration and the newest version it wrote per row.
#[derive(Debug)]
pub struct StaleGuard {
    config: GuardConfig,
    newest: HashMap<(String, String), Version>,
}

impl StaleGuard {
    /// A guard with nothing remembered.
    pub fn new(config: GuardConfig) -> Self {
        Self { config, newest: HashMap::new() }
    }

    /// The row field versions are kept in.
    pub fn row_field(&self) -> &str {
        &self.config.row_field
    }

    /// The version `record` carries; a record without one (or with one that is not text or a
    /// number) is a record error naming the source.
    pub fn version_of(&self, record: &SinkRecord, value: Option<&Map<String, Value>>) -> Result<Version, SnowError> {
        let at = record.coordinates();
        match &self.config.source {
            VersionSource::Offset => Ok(Version(record.offset.to_string())),
            VersionSource::Header(name) => {
                super::value::header(record, name).filter(|v| !v.trim().is_empty()).map(|v| Version(v.trim().to_string())).ok_or_else(
                    || SnowError::data(format!("record {at}: no {name} header to take the version from (snow.sink.version.header)")),
                )
            }
            VersionSource::Field(field) => match value.and_then(|v| v.get(field)) {
                Some(Value::String(s)) if !s.trim().is_empty() => Ok(Version(s.trim().to_string())),
                Some(Value::Number(n)) => Ok(Version(n.to_string())),
                _ => Err(SnowError::data(format!("record {at}: field {field} holds no version (snow.sink.version.field)"))),
            },
        }
    }

    /// The newest version this lane wrote to `table`/`sys_id`, if it remembers one.
    pub fn remembered(&self, table: &str, sys_id: &str) -> Option<&Version> {
        self.newest.get(&(table.to_string(), sys_id.to_string()))
    }

    /// Remembers that `version` is now the newest of `table`/`sys_id`.
    pub fn remember(&mut self, table: &str, sys_id: &str, version: Version) {
        if self.newest.len() >= MAX_REMEMBERED {
            self.newest.clear();
        }
        self.newest.insert((table.to_string(), sys_id.to_string()), version);
    }

    /// Forgets what is remembered of `table`/`sys_id` (a version planned but never written).
    pub fn forget(&mut self, table: &str, sys_id: &str) {
        self.newest.remove(&(table.to_string(), sys_id.to_string()));
    }

    /// `body` (a JSON object) with the row field set to `version`.
    pub fn stamp(&self, body: &[u8], version: &Version) -> Result<Vec<u8>, SnowError> {
        let mut fields: Map<String, Value> =
            serde_json::from_slice(body).map_err(|e| SnowError::data(format!("the body to write is not a JSON object: {e}")))?;
        fields.insert(self.config.row_field.clone(), Value::String(version.0.clone()));
        serde_json::to_vec(&fields).map_err(|e| SnowError::data(format!("encoding the body: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version(s.into())
    }

    #[test]
    fn versions_compare_as_numbers_when_both_are_else_as_text() {
        assert_eq!(v("9").compare(&v("10")), Ordering::Less, "9 < 10 as numbers, not as text");
        assert_eq!(v("2026-01-02 00:00:00").compare(&v("2026-01-10 00:00:00")), Ordering::Less);
        assert_eq!(v("2026-01-02T00:00:00Z").compare(&v("2026-01-02T00:00:00Z")), Ordering::Equal);
        assert_eq!(v("-3").compare(&v("2")), Ordering::Less);
    }

    #[test]
    fn a_version_comes_from_its_source_or_the_record_fails() {
        let record = crate::sink::value::tests::record(Some("k"), Some(r#"{"v":7}"#), &[("ver", "12")]);
        let value: Map<String, Value> = serde_json::from_str(r#"{"v":7,"s":"x"}"#).unwrap();
        let guard = |source| StaleGuard::new(GuardConfig { source, row_field: "u_version".into() });
        assert_eq!(guard(VersionSource::Field("v".into())).version_of(&record, Some(&value)).unwrap(), v("7"));
        assert_eq!(guard(VersionSource::Header("ver".into())).version_of(&record, Some(&value)).unwrap(), v("12"));
        assert_eq!(guard(VersionSource::Offset).version_of(&record, Some(&value)).unwrap(), v(&record.offset.to_string()));
        let err = guard(VersionSource::Field("missing".into())).version_of(&record, Some(&value)).unwrap_err().to_string();
        assert!(err.contains("field missing holds no version (snow.sink.version.field)"), "{err}");
        let stamped = guard(VersionSource::Offset).stamp(br#"{"a":"1"}"#, &v("41")).unwrap();
        assert_eq!(stamped, br#"{"a":"1","u_version":"41"}"#);
    }
}
