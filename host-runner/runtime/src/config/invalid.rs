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

    /// The same refusal with each reason redacted ([`redacted`]).
    pub fn redacted(&self) -> Self {
        Self::new(self.connector.clone(), redacted(&self.errors))
    }
}

/// `errors` with each reason redacted on its own (by value and by shape); keys are names, never
/// secrets, and stay as they are.
pub fn redacted(errors: &[ConfigError]) -> Vec<ConfigError> {
    errors.iter().map(|e| ConfigError { message: crate::redact::clean(&e.message), ..e.clone() }).collect()
}

/// `error` with its context (as `{:#}` writes it) as text that may be shown anywhere — the CLI,
/// a log line, a status topic: a refused configuration's reasons redacted one by one, every other
/// part of the chain redacted whole.
pub fn shown(error: &anyhow::Error) -> String {
    let parts: Vec<String> = error
        .chain()
        .map(|link| match link.downcast_ref::<InvalidConfig>() {
            Some(refused) => crate::redact::scrub(&refused.redacted().to_string()).into_owned(),
            None => crate::redact::clean(&link.to_string()),
        })
        .collect();
    parts.join(": ")
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

    #[test]
    fn shown_keeps_each_reason_whole_and_still_masks_a_secret_inside_one() {
        let refused = InvalidConfig::new(
            "c",
            vec![
                ConfigError::missing("snow.auth.password", "must be given when snow.auth.type is basic"),
                ConfigError::refused("snow.url", "refused: password=hunter2 in the query"),
            ],
        );
        let error = anyhow::Error::from(refused).context("loading connector c");
        let text = shown(&error);
        assert!(text.starts_with("loading connector c: connector c has an invalid configuration:"), "{text}");
        assert!(text.contains("snow.auth.password: must be given when snow.auth.type is basic"), "{text}");
        assert!(text.contains("password=***") && !text.contains("hunter2"), "{text}");
        // The composed text redacted whole would have lost the reason's first word.
        let whole = crate::redact::clean(&format!("{error:#}"));
        assert!(!whole.contains("password: must"), "{whole}");
    }
}
