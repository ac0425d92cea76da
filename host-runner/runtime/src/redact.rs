//! Redaction of everything the host shows — log lines (its own, librdkafka's, and what guests log
//! or print), metric label values, status messages — in one place: secrets by shape
//! ([`snow_core::redact::redact`]) and the secrets this process holds by value, in every encoding
//! ([`snow_core::redact::KnownSecrets`]). Credentials register their secrets when they are built
//! ([`register`]); tokens when they are issued.

use std::borrow::Cow;
use std::io::{self, Write};
use std::sync::RwLock;

use snow_core::redact::KnownSecrets;

static KNOWN: RwLock<KnownSecrets> = RwLock::new(KnownSecrets::new());

/// Most secrets one process holds: registered on start only (a connector's credentials, tokens
/// as issued), so a long-lived worker stays far below; past it new ones are refused with an
/// error, and the by-shape redaction still applies to them.
pub const MAX_SECRETS: usize = 4096;

/// Makes `secret` (and its encodings) unshowable from now on.
pub fn register(secret: &str) {
    if !admit(&mut KNOWN.write().unwrap_or_else(|e| e.into_inner()), secret, MAX_SECRETS) {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| tracing::error!("{MAX_SECRETS} secrets are registered for redaction; later ones are redacted by shape only"));
    }
}

/// Adds `secret` to `known` unless it already holds `max` others; whether it is known now.
fn admit(known: &mut KnownSecrets, secret: &str, max: usize) -> bool {
    if known.count() >= max && !known.contains(secret) {
        return false;
    }
    known.add(secret);
    true
}

/// `text` without the secrets this process holds, in any encoding (by value only).
pub fn scrub(text: &str) -> Cow<'_, str> {
    let known = KNOWN.read().unwrap_or_else(|e| e.into_inner());
    match known.scrub(text) {
        Cow::Borrowed(_) => Cow::Borrowed(text),
        Cow::Owned(s) => Cow::Owned(s),
    }
}

/// `text` as the host may show it: known secrets scrubbed, then credentials redacted by shape.
pub fn clean(text: &str) -> String {
    snow_core::redact::redact(&scrub(text))
}

/// stderr for the log: each formatted event is scrubbed of known secrets before it is written.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScrubbedStderr;

impl Write for ScrubbedStderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // The log formatter writes one whole event per call.
        let text = String::from_utf8_lossy(buf);
        io::stderr().lock().write_all(scrub(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for ScrubbedStderr {
    type Writer = ScrubbedStderr;

    fn make_writer(&'a self) -> Self::Writer {
        *self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_is_bounded() {
        let mut known = KnownSecrets::new();
        for i in 0..5 {
            admit(&mut known, &format!("secret-number-{i}"), 3);
        }
        assert_eq!(known.count(), 3);
        assert!(admit(&mut known, "secret-number-0", 3), "a known one is still known");
    }

    #[test]
    fn registered_secrets_are_cleaned_in_their_encodings() {
        register("Reg-Secret/42");
        assert_eq!(clean("x Reg-Secret%2F42 y password=hunter2"), "x *** y password=***");
        assert_eq!(scrub("no secret"), "no secret");
    }
}
