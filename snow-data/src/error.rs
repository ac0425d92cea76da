//! What goes wrong turning data into bytes or back: one error type carrying a message that names
//! the field, type or byte at fault (the caller adds the record: table, sys_id, topic and offset).

/// Data that does not fit its schema or format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DataError {
    message: String,
}

impl DataError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into() }
    }

    /// The same error, its message prefixed with where it happened (`field u_total: ...`).
    pub fn at(self, place: impl std::fmt::Display) -> Self {
        Self { message: format!("{place}: {}", self.message) }
    }
}
