//! Records as `snow-core` hands them to the guests, one to one with the WIT types: the guests only
//! convert these to and from their generated bindings.

use crate::error::SnowError;

/// A Kafka record header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Name.
    pub key: String,
    /// Value bytes.
    pub value: Vec<u8>,
}

/// A source partition and a position in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceOffset {
    /// The source partition key (see [`crate::cursor::Partition`]).
    pub partition: String,
    /// The cursor position after the record (JSON text).
    pub position: String,
}

/// A record read from ServiceNow (what it shares with its batch is in [`PollBatch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRecord {
    /// Key bytes (the row's sys_id).
    pub key: Option<Vec<u8>>,
    /// Value bytes (the row's JSON).
    pub value: Option<Vec<u8>>,
    /// This record's own headers.
    pub headers: Vec<Header>,
    /// Timestamp in ms since the epoch.
    pub timestamp_ms: Option<i64>,
}

/// What one source poll returns: records of one stream, in source order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollBatch {
    /// Destination topic of every record.
    pub topic: String,
    /// Headers of every record.
    pub headers: Vec<Header>,
    /// Records in source order.
    pub records: Vec<SourceRecord>,
    /// The offset to store once every record is acknowledged (none when nothing moved).
    pub offset: Option<SourceOffset>,
    /// When to poll next, in ms (0: at once).
    pub next_poll_ms: u32,
}

/// A record consumed from Kafka.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkRecord {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Key bytes.
    pub key: Option<Vec<u8>>,
    /// Value bytes; `None` is a tombstone.
    pub value: Option<Vec<u8>>,
    /// Headers.
    pub headers: Vec<Header>,
    /// Timestamp in ms since the epoch.
    pub timestamp_ms: Option<i64>,
}

impl SinkRecord {
    /// `topic-partition@offset`, the way errors name a record.
    pub fn coordinates(&self) -> String {
        format!("{}-{}@{}", self.topic, self.partition, self.offset)
    }
}

/// A Table API write operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// POST.
    Create,
    /// PATCH.
    Patch,
    /// PUT.
    Put,
    /// DELETE.
    Delete,
}

/// A write ServiceNow accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Operation performed.
    pub operation: Operation,
    /// Table written.
    pub table: String,
    /// Row written.
    pub sys_id: String,
    /// HTTP status of the answer.
    pub status: u16,
}

/// The final word on one sink record.
pub type Outcome = Result<Written, SnowError>;
