//! A note: something worth logging that did not stop a table's stream (a skipped row, a check
//! that could not be made, a backfill planned), gathered by the streams and handed to the host
//! with the next poll.

/// Something worth logging that did not stop the task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// What happened.
    pub message: String,
    /// Normal operation worth recording (a backfill planned or done), not a warning.
    pub info: bool,
}

impl Note {
    /// A warning: something unexpected that the task handled.
    pub fn warn(message: impl Into<String>) -> Self {
        Self { message: message.into(), info: false }
    }

    /// Normal operation worth recording.
    pub fn info(message: impl Into<String>) -> Self {
        Self { message: message.into(), info: true }
    }
}
