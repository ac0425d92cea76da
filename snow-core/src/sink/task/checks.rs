//! What is checked before a write: the fields it writes against the table's dictionary
//! (`snow.sink.unknown.fields`, [`crate::sink::dictionary`]) and its version against the row's
//! (the stale-write guard, [`crate::sink::guard`]). Both the Table API and the Batch API paths
//! prepare their writes here.

use serde_json::Value;

use super::{SinkTask, is_not_found};
use crate::clock::Clock;
use crate::config::sink::UnknownFields;
use crate::error::SnowError;
use crate::http::Transport;
use crate::record::{Outcome, SinkRecord, SkipReason, Skipped};
use crate::sink::dictionary;
use crate::sink::guard::Version;
use crate::sink::resolve::{Plan, Write};

/// A record checked against the guard: already settled (stale), or a write to make with the
/// version it carries.
pub(super) enum Prepared {
    Done(Outcome),
    Write(Plan, Option<Version>),
}

impl<T: Transport, C: Clock> SinkTask<T, C> {
    /// Checks `plan` against the stale-write guard: skipped when older than the row, else the plan
    /// with its body carrying the record's version (unchanged without a guard).
    pub(super) fn prepare(&mut self, record: &SinkRecord, plan: Plan) -> Result<Prepared, SnowError> {
        let plan = self.check_fields(plan)?;
        let Some(guard) = &self.guard else { return Ok(Prepared::Write(plan, None)) };
        let version = match guard.version_of(record, crate::sink::value::object(record)?.as_ref()) {
            Ok(v) => v,
            // A tombstone carries no value to take a version from: the delete is not guarded.
            Err(_) if matches!(plan.write, Write::Delete { .. }) && record.value.is_none() => return Ok(Prepared::Write(plan, None)),
            Err(e) => return Err(e),
        };
        let Plan { table, write } = plan;
        let named = match &write {
            Write::Update { sys_id, .. } | Write::Delete { sys_id } => Some(sys_id.clone()),
            Write::Create { .. } => None,
        };
        let older = match named.as_ref().map(|sys_id| self.newest_version(&table, sys_id)).transpose()?.flatten() {
            Some(newest) => {
                version.compare(&newest).map_err(|why| {
                    SnowError::data(format!(
                        "record {}: {why} (the row's snow.sink.version.row.field); the stale-write guard cannot order them",
                        record.coordinates()
                    ))
                })? == std::cmp::Ordering::Less
            }
            None => false,
        };
        if let Some(sys_id) = named.as_ref().filter(|_| older) {
            return Ok(Prepared::Done(Outcome::Skipped(Skipped { table, sys_id: sys_id.clone(), reason: SkipReason::Stale })));
        }
        let guard = self.guard.as_ref().ok_or_else(|| SnowError::data("the guard went away"))?;
        let write = match write {
            Write::Create { sys_id, body } => Write::Create { sys_id, body: guard.stamp(&body, &version)? },
            Write::Update { sys_id, method, body, upsert } => Write::Update { sys_id, method, body: guard.stamp(&body, &version)?, upsert },
            delete => delete,
        };
        Ok(Prepared::Write(Plan { table, write }, Some(version)))
    }

    /// Checks the fields `plan` writes against its table's dictionary (`snow.sink.unknown.fields`).
    fn check_fields(&mut self, plan: Plan) -> Result<Plan, SnowError> {
        let policy = self.config.unknown_fields;
        if policy == UnknownFields::Pass {
            return Ok(plan);
        }
        let Plan { table, write } = plan;
        let body = match &write {
            Write::Create { body, .. } | Write::Update { body, .. } => body,
            Write::Delete { .. } => return Ok(Plan { table, write }),
        };
        let now = self.client.clock().now();
        let known = self.dictionary.fields(&mut self.client, now, &table)?;
        let unknown = dictionary::unknown_fields(body, known);
        if unknown.is_empty() {
            return Ok(Plan { table, write });
        }
        let list = unknown.join(", ");
        match policy {
            UnknownFields::Fail => {
                return Err(SnowError::data(format!("table {table} has no field {list} (snow.sink.unknown.fields=fail)")));
            }
            UnknownFields::Drop => self.counters.unknown_fields_dropped += unknown.len() as u64,
            _ => self.counters.unknown_fields_reported += unknown.len() as u64,
        }
        for field in &unknown {
            if self.told.len() < 1_000 && self.told.insert(format!("{table}.{field}")) {
                let what = if policy == UnknownFields::Drop { "left out of every write" } else { "written, and ignored by ServiceNow" };
                self.notices.push(format!("table {table} has no field {field}: {what} (snow.sink.unknown.fields)"));
            }
        }
        if policy == UnknownFields::Report {
            return Ok(Plan { table, write });
        }
        let write = match write {
            Write::Create { sys_id, body } => Write::Create { sys_id, body: dictionary::without(&body, &unknown) },
            Write::Update { sys_id, method, body, upsert } => {
                Write::Update { sys_id, method, body: dictionary::without(&body, &unknown), upsert }
            }
            delete => delete,
        };
        Ok(Plan { table, write })
    }

    /// The newest version row `sys_id` of `table` holds: remembered from this lane's own writes,
    /// else read from the row (none when the row or its version field is empty or missing).
    fn newest_version(&mut self, table: &str, sys_id: &str) -> Result<Option<Version>, SnowError> {
        let Some(guard) = &self.guard else { return Ok(None) };
        if let Some(v) = guard.remembered(table, sys_id) {
            return Ok(Some(v.clone()));
        }
        let field = guard.row_field().to_string();
        let row = match self.client.get_fields(table, sys_id, &[&field]) {
            Ok(response) => response,
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let found: Value = serde_json::from_slice(&row.body).unwrap_or(Value::Null);
        let version = match &found["result"][&field] {
            Value::String(s) if !s.trim().is_empty() => Some(Version(s.trim().to_string())),
            Value::Number(n) => Some(Version(n.to_string())),
            _ => None,
        };
        if let (Some(v), Some(guard)) = (&version, self.guard.as_mut()) {
            guard.remember(table, sys_id, v.clone());
        }
        Ok(version)
    }
}
