//! One sink lane: writes the records of one partition in order and reports one outcome each.

use super::operation::{Write, resolve};
use crate::clock::Clock;
use crate::config::{Entries, SinkConfig};
use crate::error::{Failure, SnowError};
use crate::http::Transport;
use crate::record::{Operation, Outcome, SinkRecord, Written};
use crate::table::TableClient;

/// Writes records to one ServiceNow table.
pub struct SinkTask<T, C> {
    client: TableClient<T, C>,
    config: SinkConfig,
}

impl<T: Transport, C: Clock> SinkTask<T, C> {
    /// Opens a lane for the sink configured by `entries`; retries sleep on `clock`.
    pub fn open(entries: &Entries, transport: T, clock: C) -> Result<Self, SnowError> {
        let config = SinkConfig::parse(entries)?;
        Ok(Self { client: TableClient::new(&config.instance, transport, clock), config })
    }

    /// The `X-RateLimit-*` headers of the latest answer that carried them.
    pub fn rate_limit(&self) -> Option<&crate::http::retry::RateLimit> {
        self.client.rate_limit()
    }

    /// The table written to.
    pub fn table(&self) -> &str {
        &self.config.table
    }

    /// Writes `records` in order. After a retryable failure the rest are not attempted and get a
    /// retryable failure too, so the host holds the partition at the first one.
    pub fn put(&mut self, records: &[SinkRecord]) -> Vec<Outcome> {
        let mut held: Option<String> = None;
        records
            .iter()
            .map(|record| {
                if let Some(first) = &held {
                    return Err(SnowError::transport(
                        format!("record {} not attempted: {first} failed with a retryable error", record.coordinates()),
                        crate::ErrorClass::Transient,
                    ));
                }
                let outcome = self.write(record);
                if matches!(&outcome, Err(e) if e.is_retryable()) {
                    held = Some(record.coordinates());
                }
                outcome
            })
            .collect()
    }

    fn write(&mut self, record: &SinkRecord) -> Outcome {
        let table = self.config.table.as_str();
        let (operation, result) = match resolve(record, &self.config.sys_id_field)? {
            Write::Create { body } => (Operation::Create, self.client.create(table, body)),
            Write::Patch { sys_id, body } => (
                Operation::Patch,
                self.client.patch(table, &sys_id, body).map(|mut w| {
                    w.sys_id.get_or_insert(sys_id);
                    w
                }),
            ),
        };
        let written = result.map_err(|e| name_record(e, record))?;
        Ok(Written { operation, table: table.to_string(), sys_id: written.sys_id.unwrap_or_default(), status: written.status })
    }
}

/// Prefixes the record's coordinates to an error's message.
fn name_record(error: SnowError, record: &SinkRecord) -> SnowError {
    let at = record.coordinates();
    match error {
        SnowError::Http(mut h) => {
            h.message = format!("record {at}: {}", h.message);
            SnowError::Http(h)
        }
        SnowError::Transport(f) => SnowError::Transport(Failure { message: format!("record {at}: {}", f.message), class: f.class }),
        SnowError::Data(f) => SnowError::Data(Failure { message: format!("record {at}: {}", f.message), class: f.class }),
        other => other,
    }
}
