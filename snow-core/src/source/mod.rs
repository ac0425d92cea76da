//! The source side: [`task::SourceTask`] reads one table along its cursor and turns each page into
//! Kafka records with their offsets; [`plan()`] splits a connector's tables over tasks.

pub mod attachments;
pub mod audit_payload;
mod backfill;
pub mod deletes;
pub mod follower;
pub mod journal;
mod note;
mod probe;
mod record;
pub mod schema;
pub mod snapshot;
pub mod task;

pub use task::SourceTask;

use crate::config::{Entries, SourceConfig};
use crate::cursor::{Partition, plan::assign};
use crate::error::SnowError;

/// One table's share of a plan: its partition key, name, and the configuration to open it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedUnit {
    /// The table's partition key.
    pub partition: String,
    /// The table name.
    pub name: String,
    /// The connector configuration narrowed to this table (`snow.tables` = the table).
    pub config: Entries,
}

/// Validates `entries` and splits the tables over at most `max_tasks` tasks.
pub fn plan(entries: &Entries, max_tasks: u32) -> Result<Vec<Vec<PlannedUnit>>, SnowError> {
    let config = SourceConfig::parse(entries)?;
    let names: Vec<String> = config.tables.iter().map(|t| t.name.clone()).collect();
    Ok(assign(&names, max_tasks)
        .into_iter()
        .map(|indexes| {
            indexes
                .into_iter()
                .map(|i| {
                    let table = &config.tables[i];
                    let mut unit_config = entries.clone();
                    unit_config.insert(crate::config::source::TABLES_KEY.into(), table.name.clone());
                    // Keys of the other tables would be unknown to a single-table config.
                    unit_config.retain(|k, _| !k.starts_with("snow.table.") || k.starts_with(&format!("snow.table.{}.", table.name)));
                    PlannedUnit {
                        partition: Partition::of(&config.instance.authority, table).key(),
                        name: table.name.clone(),
                        config: unit_config,
                    }
                })
                .collect()
        })
        .collect())
}

/// Every partition key a task opened with `entries` (one table) may read a stored position
/// under: the table's own stream and its followers' (deletes, journal, attachments). A host that
/// cannot list a connector's stored offsets (Kafka Connect's `OffsetStorageReader` answers only
/// for partitions it is asked about) asks for these before it opens the task.
pub fn stored_partitions(entries: &Entries) -> Result<Vec<String>, SnowError> {
    let config = SourceConfig::parse(entries)?;
    let instance = &config.instance.authority;
    let mut keys = Vec::new();
    for table in &config.tables {
        keys.push(Partition::of(instance, table).key());
        if table.deletes.is_some() {
            keys.push(Partition::deletes_of(instance, &table.name).key());
        }
        if !table.journal.is_empty() {
            keys.push(Partition::journal_of(instance, &table.name, &table.journal).key());
        }
        if table.attachments {
            keys.push(Partition::attachments_of(instance, &table.name).key());
        }
    }
    Ok(keys)
}
