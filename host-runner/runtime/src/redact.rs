//! Redaction of everything the host shows — log lines (its own, librdkafka's, and what guests log
//! or print), metric label values, status messages — in one place: secrets by shape
//! ([`snow_core::redact::redact`]) and the secrets this process holds by value, in every encoding
//! ([`snow_core::redact::KnownSecrets`]). Credentials register their secrets when they are built
//! ([`register`]); tokens when they are issued ([`register_issued`]: the last [`MAX_ISSUED`]
//! only, so that a long-lived worker refreshing tokens never fills the registry).

use std::borrow::Cow;
use std::io::{self, Write};
use std::sync::RwLock;

use snow_core::redact::KnownSecrets;

static KNOWN: RwLock<KnownSecrets> = RwLock::new(KnownSecrets::new());

/// Tokens the process was issued, newest last, and the same as a scrubber.
static ISSUED: RwLock<(std::collections::VecDeque<String>, KnownSecrets)> =
    RwLock::new((std::collections::VecDeque::new(), KnownSecrets::new()));

/// Issued tokens kept for scrubbing: far more than are ever valid at once (one or two per
/// credential), fewer than would let refreshes fill the registry.
pub const MAX_ISSUED: usize = 512;

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

/// Makes a token the process was just issued unshowable; the oldest of more than [`MAX_ISSUED`]
/// issued ones is forgotten (long expired by then).
pub fn register_issued(token: &str) {
    let mut issued = ISSUED.write().unwrap_or_else(|e| e.into_inner());
    if issued.0.iter().any(|t| t == token) {
        return;
    }
    issued.0.push_back(token.to_string());
    if issued.0.len() > MAX_ISSUED {
        issued.0.pop_front();
        let mut known = KnownSecrets::new();
        for t in &issued.0 {
            known.add(t);
        }
        issued.1 = known;
    } else {
        issued.1.add(token);
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
    let scrubbed = {
        let known = KNOWN.read().unwrap_or_else(|e| e.into_inner());
        match known.scrub(text) {
            Cow::Borrowed(_) => None,
            Cow::Owned(s) => Some(s),
        }
    };
    let issued = ISSUED.read().unwrap_or_else(|e| e.into_inner());
    match scrubbed {
        None => match issued.1.scrub(text) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            Cow::Owned(s) => Cow::Owned(s),
        },
        Some(s) => Cow::Owned(issued.1.scrub(&s).into_owned()),
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
    fn issued_tokens_are_scrubbed_and_never_fill_the_registry() {
        for i in 0..MAX_ISSUED + 10 {
            register_issued(&format!("issued-token-{i:05}-abcdefgh"));
        }
        // (Other tests register secrets in the same process meanwhile: the registry is checked by
        // what it holds, not by its count.)
        let known = KNOWN.read().unwrap();
        assert!(
            (0..MAX_ISSUED + 10).all(|i| !known.contains(&format!("issued-token-{i:05}-abcdefgh"))),
            "tokens stay out of the bounded registry"
        );
        drop(known);
        let newest = format!("issued-token-{:05}-abcdefgh", MAX_ISSUED + 9);
        assert!(!scrub(&format!("Bearer {newest}")).contains(&newest));
        assert!(scrub("issued-token-00000-abcdefgh").contains("issued-token-00000"), "the oldest is forgotten");
    }

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
