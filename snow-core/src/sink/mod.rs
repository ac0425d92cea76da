//! The sink side: [`value`] decodes what a Kafka record carries, [`resolve`] decides what it asks
//! of ServiceNow (table, row, operation) with [`body`] mapping its value to the fields written, and
//! [`task::SinkTask`] performs it and reports one outcome per record; [`guard`] skips writes older
//! than what a row already holds; [`dictionary`] checks written fields against the table's.

pub mod batch;
pub mod body;
pub mod dictionary;
pub mod guard;
pub mod resolve;
pub mod task;
pub mod value;

pub use task::SinkTask;
