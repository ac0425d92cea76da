//! A secret value: readable only through [`Secret::expose`], shown as `***` everywhere else.

use std::fmt;

/// A credential the host holds for a connector.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: String) -> Self {
        Self(value)
    }

    /// The secret itself; call only where it is sent to its one legitimate receiver.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}
