//! The error taxonomy every ServiceNow call and every guest reports with.
//!
//! Errors are values with a classification ([`ErrorClass`]) so callers never match raw status
//! codes: the host retries [`ErrorClass::Transient`] failures, parks a unit on
//! [`ErrorClass::Fatal`] ones, and applies the configured policy to [`ErrorClass::Ambiguous`] writes.
//! Messages are redacted before they are built into an error; nothing here holds a secret.

use std::fmt;

/// How a failure may be handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// May succeed if tried again later (429, 5xx, connection refused before anything was sent).
    Transient,
    /// Will fail again unchanged (400, 403, 404, invalid configuration, bad data).
    Fatal,
    /// A non-idempotent write whose outcome is unknown: it may have been applied.
    Ambiguous,
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Transient => "transient",
            Self::Fatal => "fatal",
            Self::Ambiguous => "ambiguous",
        })
    }
}

/// What is wrong with a configuration value: the class a caller may act on (Kafka Connect's
/// validate shows every class the same way; a host stands in for a missing value, not for a
/// refused one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueClass {
    /// The key is required and absent (or empty).
    Missing,
    /// The key is not one the reader knows: a misspelling, or a key of another kind of connector.
    Unknown,
    /// The value does not parse, is out of range, or does not fit the other keys.
    Invalid,
    /// The value is well-formed but not allowed here: a policy forbids it (trust, a caller's
    /// rules, secrets that must be references), or what it names was refused.
    Refused,
}

/// A configuration problem: the key at fault, the class of what is wrong with its value, and the
/// reason. Rendered as text (`key: reason`) only where a person reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The key at fault, e.g. `snow.table.incident.fields`.
    pub key: String,
    /// What is wrong with its value.
    pub class: ValueClass,
    /// Why, and how to fix it.
    pub message: String,
}

impl ConfigError {
    /// An invalid value of `key`.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self::of(ValueClass::Invalid, key, message)
    }

    /// A problem of `class` with `key`.
    pub fn of(class: ValueClass, key: impl Into<String>, message: impl Into<String>) -> Self {
        Self { key: key.into(), class, message: message.into() }
    }

    /// `key` is required and absent.
    pub fn missing(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self::of(ValueClass::Missing, key, message)
    }

    /// `key` is not a key the reader knows.
    pub fn unknown(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self::of(ValueClass::Unknown, key, message)
    }

    /// `key`'s value is not allowed here.
    pub fn refused(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self::of(ValueClass::Refused, key, message)
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// `errors` as lines of `key: reason` for a person to read; adjacent errors of one reason and
/// class share a line (`a, b: give both`).
pub fn config_lines(errors: &[ConfigError]) -> Vec<String> {
    let mut lines: Vec<(Vec<&str>, &ConfigError)> = Vec::new();
    for error in errors {
        match lines.last_mut() {
            Some((keys, last)) if last.message == error.message && last.class == error.class => keys.push(&error.key),
            _ => lines.push((vec![&error.key], error)),
        }
    }
    lines.into_iter().map(|(keys, e)| format!("{}: {}", keys.join(", "), e.message)).collect()
}

/// An error answer from ServiceNow, parsed from its error envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpFailure {
    /// HTTP status.
    pub status: u16,
    /// `error.message` of the envelope, or a summary of the body.
    pub message: String,
    /// `error.detail` of the envelope.
    pub detail: Option<String>,
    /// The request id the request carried.
    pub request_id: Option<String>,
    /// Classification of this status for the request that got it.
    pub class: ErrorClass,
}

/// A failure with a message and a classification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What went wrong, naming the table, record or field.
    pub message: String,
    /// How it may be handled.
    pub class: ErrorClass,
}

/// Every error `snow-core` reports. Mirrors the WIT `snow-error` variant one to one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnowError {
    /// The configuration is invalid; every problem found is listed.
    #[error("invalid configuration: {}", join_config_errors(.0))]
    Config(Vec<ConfigError>),
    /// ServiceNow answered with an error status.
    #[error("ServiceNow answered {}: {}{}", .0.status, .0.message, detail_suffix(.0))]
    Http(HttpFailure),
    /// No usable answer arrived (connect failure, timeout, reset, malformed body).
    #[error("{}", .0.message)]
    Transport(Failure),
    /// The host's outbound gate refused the request.
    #[error("request denied by the host: {0}")]
    Denied(String),
    /// The data broke an invariant.
    #[error("{}", .0.message)]
    Data(Failure),
}

fn join_config_errors(errors: &[ConfigError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

fn detail_suffix(failure: &HttpFailure) -> String {
    let mut out = String::new();
    if let Some(detail) = failure.detail.as_deref().filter(|d| !d.is_empty()) {
        out.push_str(" (");
        out.push_str(detail);
        out.push(')');
    }
    if let Some(id) = &failure.request_id {
        out.push_str(" [request id ");
        out.push_str(id);
        out.push(']');
    }
    out
}

impl SnowError {
    /// Whether this is the record's own failure (its value, routing or mapping; a refusal of the
    /// host's gate) rather than ServiceNow's answer or the network.
    pub fn is_record_error(&self) -> bool {
        matches!(self, SnowError::Data(_) | SnowError::Config(_) | SnowError::Denied(_))
    }

    /// A single configuration problem.
    pub fn config(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Config(vec![ConfigError::new(key, message)])
    }

    /// A data invariant broken; always fatal (the same rows would break it again).
    pub fn data(message: impl Into<String>) -> Self {
        Self::Data(Failure { message: message.into(), class: ErrorClass::Fatal })
    }

    /// A transport failure of the given class.
    pub fn transport(message: impl Into<String>, class: ErrorClass) -> Self {
        Self::Transport(Failure { message: message.into(), class })
    }

    /// How this error may be handled.
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Config(_) | Self::Denied(_) => ErrorClass::Fatal,
            Self::Http(h) => h.class,
            Self::Transport(f) | Self::Data(f) => f.class,
        }
    }

    /// True when trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        self.class() == ErrorClass::Transient
    }

    /// True when a write may or may not have been applied.
    pub fn is_ambiguous(&self) -> bool {
        self.class() == ErrorClass::Ambiguous
    }

    /// True when ServiceNow refused the credentials (401) or the access (403).
    pub fn is_auth(&self) -> bool {
        matches!(self, Self::Http(h) if h.status == 401 || h.status == 403)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_follow_the_variant() {
        assert_eq!(SnowError::config("k", "m").class(), ErrorClass::Fatal);
        assert_eq!(SnowError::Denied("x".into()).class(), ErrorClass::Fatal);
        assert!(SnowError::transport("reset", ErrorClass::Transient).is_retryable());
        assert!(SnowError::transport("timeout after send", ErrorClass::Ambiguous).is_ambiguous());
    }

    #[test]
    fn http_error_message_names_status_detail_and_request_id() {
        let err = SnowError::Http(HttpFailure {
            status: 403,
            message: "User Not Authorized".into(),
            detail: Some("ACL denied".into()),
            request_id: Some("r-1".into()),
            class: ErrorClass::Fatal,
        });
        assert_eq!(err.to_string(), "ServiceNow answered 403: User Not Authorized (ACL denied) [request id r-1]");
        assert!(err.is_auth());
    }
}
