//! Redaction of secrets from anything that may reach a log, an error message, a metric or a
//! reporter topic, two ways: by shape ([`pattern`]: credential headers, `password=…` pairs,
//! `Bearer …`), and by value ([`known`]: the secrets the host holds, in every encoding text
//! commonly carries them — URL-encoded, JSON-escaped, base64).
//!
//! Redaction is a last line of defence: secrets are held in [`crate::auth::Secret`] and kept out
//! of messages in the first place.

pub mod known;
pub mod pattern;

pub use known::KnownSecrets;
pub use pattern::{CREDENTIAL_HEADERS, MASK, header_value, redact};
