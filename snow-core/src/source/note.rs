//! A note: something worth logging that did not stop a table's stream (a skipped row, a check
//! that could not be made), gathered by the streams and handed to the host with the next poll.

/// Something worth logging that did not stop the task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// What happened.
    pub message: String,
}
