//! Sink connector configuration: where records are written and how a record names its row.

use super::instance::InstanceConfig;
use super::reader::{ConfigReader, Entries};
use crate::error::SnowError;
use crate::table::query::{is_valid_field_name, is_valid_table_name};

/// The whole sink connector configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkConfig {
    /// The instance to write to.
    pub instance: InstanceConfig,
    /// Target table (`snow.sink.table`).
    pub table: String,
    /// Field of the record value holding the target row's sys_id (`snow.sink.sys.id.field`).
    /// A record with it is patched; a record without it creates a row.
    pub sys_id_field: String,
}

impl SinkConfig {
    /// Parses and validates a sink configuration; every problem is reported with its key.
    pub fn parse(entries: &Entries) -> Result<Self, SnowError> {
        let mut r = ConfigReader::new(entries);
        let instance = InstanceConfig::read(&mut r);
        let table = r.required("snow.sink.table", "the table records are written to, e.g. incident").unwrap_or_default();
        if !table.is_empty() && !is_valid_table_name(&table) {
            r.error("snow.sink.table", format!("{table:?} is not a table name"));
        }
        let sys_id_field = r.string("snow.sink.sys.id.field").unwrap_or_else(|| "sys_id".into());
        if !is_valid_field_name(&sys_id_field) {
            r.error("snow.sink.sys.id.field", format!("{sys_id_field:?} is not a field name"));
        }
        r.finish(&["snow."])?;
        let instance = instance.ok_or_else(|| SnowError::config("snow.instance.url", "is invalid"))?;
        Ok(Self { instance, table, sys_id_field })
    }
}
