//! A secret value: readable only through [`Secret::expose`], shown as `***` everywhere else.

use std::fmt;

/// A credential (password, client secret, token).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself; call only where it is sent to its one legitimate receiver.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(crate::redact::MASK)
    }
}

#[cfg(test)]
mod tests {
    use super::Secret;

    #[test]
    fn never_shown() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s} {s:?}"), "*** Secret(***)");
        assert_eq!(s.expose(), "hunter2");
    }
}
