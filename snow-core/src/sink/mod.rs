//! The sink side: [`operation`] decides what a Kafka record asks of ServiceNow, [`task::SinkTask`]
//! performs it and reports one outcome per record.

pub mod operation;
pub mod task;

pub use task::SinkTask;
