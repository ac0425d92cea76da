//! Redaction of secrets from text that may reach a log, an error or a metric: inline
//! `Bearer …` / `Basic …` credentials and `name=value` / `"name":"value"` pairs whose name
//! contains password, secret, token or credential.

const SENSITIVE: [&str; 4] = ["password", "secret", "token", "credential"];

/// `text` with credentials replaced by `***`.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(skip) = scheme_credential(rest) {
            out.push_str(&rest[..skip.0]);
            out.push_str("***");
            rest = &rest[skip.1..];
            continue;
        }
        if let Some((keep, value_end)) = sensitive_pair(rest) {
            out.push_str(&rest[..keep]);
            out.push_str("***");
            rest = &rest[value_end..];
            continue;
        }
        let next = rest.char_indices().nth(1).map_or(rest.len(), |(i, _)| i);
        out.push_str(&rest[..next]);
        rest = &rest[next..];
    }
    out
}

/// At the start of `s`: `Bearer <cred>` or `Basic <cred>` → (end of the scheme and space, end of the credential).
fn scheme_credential(s: &str) -> Option<(usize, usize)> {
    for scheme in ["Bearer ", "Basic ", "bearer ", "basic "] {
        if let Some(after) = s.strip_prefix(scheme) {
            let len = after.find(|c: char| c.is_whitespace() || c == '"' || c == ',' || c == '\'').unwrap_or(after.len());
            if len >= 4 {
                return Some((scheme.len(), scheme.len() + len));
            }
        }
    }
    None
}

/// At the start of `s`: a sensitive name followed by `=`/`:` and a value → (where the value starts, where it ends).
fn sensitive_pair(s: &str) -> Option<(usize, usize)> {
    let name_len = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')).unwrap_or(s.len());
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
    if !matches!(bytes.get(i), Some(b'=') | Some(b':')) {
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
    let value_len =
        s[i..].find(|c: char| if quoted { c == '"' } else { c.is_whitespace() || c == '&' || c == ',' || c == ';' }).unwrap_or(s.len() - i);
    (value_len > 0).then_some((i, i + value_len))
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn redacts_credentials_in_their_usual_shapes() {
        assert_eq!(redact("Authorization: Bearer abc.def-ghi"), "Authorization: Bearer ***");
        assert_eq!(redact("basic dXNlcjpwdw== sent"), "basic *** sent");
        assert_eq!(redact("password=hunter2&user=bob"), "password=***&user=bob");
        assert_eq!(redact(r#"{"client_secret": "s3cr3t", "x": 1}"#), r#"{"client_secret": "***", "x": 1}"#);
        assert_eq!(redact("refresh_token:abc;"), "refresh_token:***;");
        assert_eq!(redact("no secrets here, token count 3"), "no secrets here, token count 3");
    }
}
