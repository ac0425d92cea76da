//! Redaction by shape: whole values of credential headers, and inside text the members and pairs
//! whose name contains `password`, `secret`, `token` or `credential`, and inline `Bearer …` /
//! `Basic …` credentials.

/// Headers whose whole value is a credential.
pub const CREDENTIAL_HEADERS: [&str; 4] = ["authorization", "proxy-authorization", "cookie", "set-cookie"];

/// Words that make a member or parameter name sensitive.
const SENSITIVE: [&str; 4] = ["password", "secret", "token", "credential"];

/// What replaces a secret.
pub const MASK: &str = "***";

/// The value to show for header `name`: masked for credential headers, otherwise redacted text.
pub fn header_value(name: &str, value: &str) -> String {
    if CREDENTIAL_HEADERS.iter().any(|h| name.eq_ignore_ascii_case(h)) { MASK.to_string() } else { redact(value) }
}

/// `text` with credentials replaced by [`MASK`]: `name=value`, `name: value` and `"name":"value"`
/// for sensitive names (JSON, form bodies, query strings, log text), and `Bearer`/`Basic` values.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some((keep, end)) = scheme_credential(rest).or_else(|| sensitive_pair(rest)) {
            out.push_str(&rest[..keep]);
            out.push_str(MASK);
            rest = &rest[end..];
            continue;
        }
        // Step over a whole word so a name is only ever matched from its start.
        let word = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len()).max(rest.chars().next().map_or(1, char::len_utf8));
        out.push_str(&rest[..word]);
        rest = &rest[word..];
    }
    out
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'
}

/// At the start of `s`: `Bearer <cred>` or `Basic <cred>` → (where the credential starts, where it ends).
fn scheme_credential(s: &str) -> Option<(usize, usize)> {
    for scheme in ["Bearer ", "Basic ", "bearer ", "basic ", "BEARER ", "BASIC "] {
        if let Some(after) = s.strip_prefix(scheme) {
            let len = after.find(|c: char| c.is_whitespace() || matches!(c, '"' | ',' | '\'' | ';' | ')')).unwrap_or(after.len());
            if len >= 4 {
                return Some((scheme.len(), scheme.len() + len));
            }
        }
    }
    None
}

/// At the start of `s`: a sensitive name, `=` or `:` (JSON quotes allowed) and a value →
/// (where the value starts, where it ends).
fn sensitive_pair(s: &str) -> Option<(usize, usize)> {
    let name_len = s.find(|c: char| !is_name_char(c)).unwrap_or(s.len());
    if name_len == 0 {
        return None;
    }
    let name = s[..name_len].to_ascii_lowercase();
    if !SENSITIVE.iter().any(|w| name.contains(w)) {
        return None;
    }
    let bytes = s.as_bytes();
    let mut i = name_len;
    if bytes.get(i) == Some(&b'"') {
        i += 1;
    }
    while bytes.get(i) == Some(&b' ') {
        i += 1;
    }
    if !matches!(bytes.get(i), Some(b'=' | b':')) {
        return None;
    }
    i += 1;
    while bytes.get(i) == Some(&b' ') {
        i += 1;
    }
    let quoted = bytes.get(i) == Some(&b'"');
    if quoted {
        i += 1;
    }
    let len = s[i..]
        .char_indices()
        .find(|(j, c)| {
            if quoted {
                *c == '"' && s.as_bytes()[i + j - 1] != b'\\'
            } else {
                c.is_whitespace() || matches!(c, '&' | ',' | ';' | '}' | ')')
            }
        })
        .map_or(s.len() - i, |(j, _)| j);
    (len > 0).then_some((i, i + len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_headers_are_masked_whole() {
        for h in ["Authorization", "proxy-authorization", "Cookie", "SET-COOKIE"] {
            assert_eq!(header_value(h, "anything at all"), MASK);
        }
        assert_eq!(header_value("X-Request-Id", "abc"), "abc");
    }

    #[test]
    fn redacts_credentials_in_their_usual_shapes() {
        for (input, expected) in [
            ("Authorization: Bearer abc.def-ghi", "Authorization: Bearer ***"),
            ("basic dXNlcjpwdw== sent", "basic *** sent"),
            ("password=hunter2&user=bob", "password=***&user=bob"),
            (
                "grant_type=password&client_id=c&client_secret=s3&username=u&password=p%40ss",
                "grant_type=password&client_id=c&client_secret=***&username=u&password=***",
            ),
            (r#"{"client_secret": "s3cr3t", "x": 1}"#, r#"{"client_secret": "***", "x": 1}"#),
            (
                r#"{"access_token":"at-1","refresh_token":"rt-1","expires_in":1799}"#,
                r#"{"access_token":"***","refresh_token":"***","expires_in":1799}"#,
            ),
            (r#"{"password":"with \"quote\" inside","n":2}"#, r#"{"password":"***","n":2}"#),
            ("refresh_token:abc;", "refresh_token:***;"),
            ("X-Credential-Id: 42", "X-Credential-Id: ***"),
            ("no secrets here, token count 3", "no secrets here, token count 3"),
            ("mytoken is fine but notoken=x is not", "mytoken is fine but notoken=*** is not"),
        ] {
            assert_eq!(redact(input), expected, "{input}");
        }
    }

    #[test]
    fn unicode_text_passes_through() {
        assert_eq!(redact("Ünïcødé — password=é"), "Ünïcødé — password=***");
    }
}
