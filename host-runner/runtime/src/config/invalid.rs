//! A configuration refused, as a value: the connector and every problem found, each a
//! [`ConfigError`] (key, class, reason). Readers collect `ConfigError`s; the text a person reads
//! (`connector c has an invalid configuration:` and a line per key) is made here only, by
//! `Display`, at the edges (the CLI, the log, a REST or Connect validate answer). Callers that
//! need the keys take them from the value: `anyhow::Error::downcast_ref::<InvalidConfig>()`.

use std::fmt;

pub use snow_core::error::{ConfigError, ValueClass, config_lines as lines};

/// A connector's configuration, refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidConfig {
    /// The connector's name (empty: a configuration that names none).
    pub connector: String,
    /// Every problem, in the order found.
    pub errors: Vec<ConfigError>,
}

impl InvalidConfig {
    /// `connector`'s configuration, refused for `errors`.
    pub fn new(connector: impl Into<String>, errors: Vec<ConfigError>) -> Self {
        Self { connector: connector.into(), errors }
    }

    /// `connector`'s configuration, refused for one problem.
    pub fn one(connector: impl Into<String>, error: ConfigError) -> Self {
        Self::new(connector, vec![error])
    }

    /// The problems as lines of `key: reason`, one problem shared by several keys on one line
    /// (`a, b: give both`).
    pub fn lines(&self) -> Vec<String> {
        lines(&self.errors)
    }
}

impl fmt::Display for InvalidConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = if self.connector.is_empty() { "connector".to_string() } else { format!("connector {}", self.connector) };
        write!(f, "{who} has an invalid configuration:\n  {}", self.lines().join("\n  "))
    }
}

impl std::error::Error for InvalidConfig {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_reason_of_several_keys_is_one_line_and_each_key_keeps_its_error() {
        let refused = InvalidConfig::new(
            "c",
            vec![
                ConfigError::missing("snow.auth.username", "are required"),
                ConfigError::missing("snow.auth.password", "are required"),
                ConfigError::unknown("kafka.typo", "unknown key"),
            ],
        );
        assert_eq!(
            refused.to_string(),
            "connector c has an invalid configuration:\n  snow.auth.username, snow.auth.password: are required\n  kafka.typo: unknown key"
        );
        let error = anyhow::Error::from(refused.clone());
        let found = error.downcast_ref::<InvalidConfig>().expect("the value survives anyhow");
        assert_eq!(
            found.errors.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(),
            ["snow.auth.username", "snow.auth.password", "kafka.typo"]
        );
        assert_eq!(found.errors[2].class, ValueClass::Unknown);
    }
}
