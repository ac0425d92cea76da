//! Redaction by value: the secrets the host holds (passwords, client secrets, issued tokens, the
//! Basic header value), found in text in any of the encodings text commonly carries them in, so
//! that a guest that got hold of one cannot leak it through a log line, a metric label or a status
//! message by escaping it.
//!
//! For each secret the scrubber looks for: the text as is; URL-encoded (only what must be, and
//! every non-alphanumeric byte; `%2f` and `%2F`; `+` for a space); JSON-escaped (as a JSON encoder
//! writes it, with `\/`, and every non-alphanumeric character as `\u002f` or `\u002F`); and
//! base64 (standard and URL-safe, with and without padding). Secrets shorter than
//! [`KnownSecrets::MIN_LEN`] are not scrubbed by value (they would match ordinary words).

use std::borrow::Cow;

use super::pattern::MASK;

/// Every encoding of every known secret.
#[derive(Debug, Clone, Default)]
pub struct KnownSecrets {
    /// Longest first, so an encoding containing another is replaced whole.
    forms: Vec<String>,
    /// How many secrets were added.
    count: usize,
}

impl KnownSecrets {
    /// Secrets shorter than this are not scrubbed by value.
    pub const MIN_LEN: usize = 6;

    /// No secret known yet.
    pub const fn new() -> Self {
        Self { forms: Vec::new(), count: 0 }
    }

    /// Adds `secret` (and its encodings). Short or empty secrets are ignored.
    pub fn add(&mut self, secret: &str) {
        if secret.chars().count() < Self::MIN_LEN || self.contains(secret) {
            return;
        }
        self.count += 1;
        for form in encodings(secret) {
            if !form.is_empty() && !self.forms.contains(&form) {
                self.forms.push(form);
            }
        }
        self.forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    }

    /// How many secrets are known.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Whether `secret` is known.
    pub fn contains(&self, secret: &str) -> bool {
        self.forms.iter().any(|f| f == secret)
    }

    /// True when no secret is known.
    pub fn is_empty(&self) -> bool {
        self.forms.is_empty()
    }

    /// `text` with every known secret, in any of its encodings, replaced by the mask.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if !self.forms.iter().any(|f| text.contains(f.as_str())) {
            return Cow::Borrowed(text);
        }
        let mut out = text.to_string();
        for form in &self.forms {
            if out.contains(form.as_str()) {
                out = out.replace(form.as_str(), MASK);
            }
        }
        Cow::Owned(out)
    }
}

/// The forms `secret` may take in text.
fn encodings(secret: &str) -> Vec<String> {
    let mut forms = vec![secret.to_string()];
    for upper in [true, false] {
        forms.push(percent(secret, upper, false));
        forms.push(percent(secret, upper, true));
        forms.push(json_unicode(secret, upper));
    }
    forms.push(percent(secret, true, false).replace("%20", "+"));
    let json = serde_json::to_string(secret).unwrap_or_default();
    let json = json.trim_matches('"').to_string();
    forms.push(json.replace('/', "\\/"));
    forms.push(json);
    let b64 = crate::auth::basic::base64(secret.as_bytes());
    let url = b64.replace('+', "-").replace('/', "_");
    forms.push(b64.trim_end_matches('=').to_string());
    forms.push(url.trim_end_matches('=').to_string());
    forms.push(b64);
    forms.push(url);
    forms
}

/// URL-encoding: bytes outside `A-Za-z0-9-._~` (or, with `all`, every non-alphanumeric byte) as `%XX`.
fn percent(secret: &str, upper: bool, all: bool) -> String {
    let mut out = String::new();
    for b in secret.bytes() {
        let keep = b.is_ascii_alphanumeric() || (!all && matches!(b, b'-' | b'.' | b'_' | b'~'));
        if keep {
            out.push(b as char);
        } else if upper {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push_str(&format!("%{b:02x}"));
        }
    }
    out
}

/// JSON with every non-alphanumeric character escaped as `\uXXXX` (UTF-16 units).
fn json_unicode(secret: &str, upper: bool) -> String {
    let mut out = String::new();
    for c in secret.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
            continue;
        }
        let mut units = [0u16; 2];
        for unit in c.encode_utf16(&mut units) {
            if upper {
                out.push_str(&format!("\\u{unit:04X}"));
            } else {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_encoding_of_a_secret_is_scrubbed() {
        let mut known = KnownSecrets::default();
        let secret = "Pa55/w:rd+ é\"x";
        known.add(secret);
        known.add("abc");
        let b64 = crate::auth::basic::base64(secret.as_bytes());
        let leaks = [
            secret.to_string(),
            "Pa55%2Fw%3Ard%2B%20%C3%A9%22x".to_string(),
            "Pa55%2fw%3ard%2b%20%c3%a9%22x".to_string(),
            "Pa55%2Fw%3Ard%2B+%C3%A9%22x".to_string(),
            "Pa55\\u002fw\\u003ard\\u002b\\u0020\\u00e9\\u0022x".to_string(),
            "Pa55\\u002Fw\\u003Ard\\u002B\\u0020\\u00E9\\u0022x".to_string(),
            "Pa55/w:rd+ é\\\"x".to_string(),
            "Pa55\\/w:rd+ é\\\"x".to_string(),
            b64.clone(),
            b64.trim_end_matches('=').replace('+', "-").replace('/', "_"),
        ];
        for leak in &leaks {
            let text = format!("before {leak} after");
            let scrubbed = known.scrub(&text);
            assert_eq!(scrubbed, format!("before {MASK} after"), "not scrubbed: {leak}");
        }
        assert_eq!(known.scrub("abc is too short to scrub"), "abc is too short to scrub");
        assert!(matches!(known.scrub("nothing here"), Cow::Borrowed(_)));
    }
}
