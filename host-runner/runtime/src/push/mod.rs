//! Push notifications (ADR 0032): what an instance's after-commit business rule posts when a row
//! changed, checked before anything is woken. A notification is a wake-up, never data: the rows
//! are read by the table's cursor as always, so a lost, repeated or forged notification can only
//! change when a sweep runs.
//!
//! [`endpoint`] answers `POST /snow/push/<connector>` and counts each answer; [`signature`]
//! checks who sent it and when (HMAC-SHA256 over `<timestamp>.<body>`, a replay window);
//! [`notification`] reads what it names, with the body's size capped; [`wakes`] hands it to the
//! table's unit (registered while it runs), coalesced and rate-limited; [`listen`] serves the
//! endpoint on a standalone run's `snow.push.listen` (a fleet serves it on the worker's REST
//! listener and wakes the owner through its wake topic: `crate::worker::push`); [`rate`] is the
//! per-table token bucket. Each says why a request is refused as a [`Refusal`]: an HTTP status and
//! a reason for the counter, never the body or the secret.

pub mod endpoint;
pub mod listen;
pub mod notification;
pub mod rate;
pub mod signature;
pub mod wakes;

/// Why a push request was refused: its HTTP status and the reason counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No or malformed `X-Snow-Push-Timestamp` / `X-Snow-Push-Signature` (401).
    Unsigned,
    /// The signature does not match the body and timestamp (401).
    BadSignature,
    /// The timestamp is outside the replay window (401).
    Stale,
    /// The body is larger than [`notification::MAX_BODY_BYTES`] (413).
    TooLarge,
    /// Not a notification: not JSON, or no table or stamp (400).
    Malformed,
    /// No table of the connector runs here (401, answered as a bad signature: the answer does
    /// not tell which connectors exist).
    UnknownConnector,
    /// A table the connector does not read (404).
    UnknownTable,
    /// More notifications for the table than its rate allows (429).
    RateLimited,
    /// Not a `POST` (405).
    WrongMethod,
    /// The wake-up could not be handed on (a fleet's wake topic is out of reach: 503).
    Unavailable,
}

impl Refusal {
    /// The HTTP status answered.
    pub fn status(self) -> u16 {
        match self {
            Self::Unsigned | Self::BadSignature | Self::Stale | Self::UnknownConnector => 401,
            Self::TooLarge => 413,
            Self::Malformed => 400,
            Self::UnknownTable => 404,
            Self::RateLimited => 429,
            Self::WrongMethod => 405,
            Self::Unavailable => 503,
        }
    }

    /// What the answer says: the reasons a request was not accepted as signed are one (which of
    /// them, and whether the connector exists, is the operator's to see in the metric and the
    /// log, not the caller's).
    pub fn answered(self) -> &'static str {
        match self {
            Self::Unsigned | Self::BadSignature | Self::Stale | Self::UnknownConnector => "not_signed",
            other => other.reason(),
        }
    }

    /// The `reason` label of `snow_push_refused_total`.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Unsigned => "unsigned",
            Self::BadSignature => "bad_signature",
            Self::Stale => "stale",
            Self::TooLarge => "too_large",
            Self::Malformed => "malformed",
            Self::UnknownConnector => "unknown_connector",
            Self::UnknownTable => "unknown_table",
            Self::RateLimited => "rate_limited",
            Self::WrongMethod => "method",
            Self::Unavailable => "unavailable",
        }
    }
}
