//! Strict percent-encoding for URL query values and path segments.
//!
//! Everything outside RFC 3986's unreserved set is encoded, so `^`, `=`, `&`, `+`, spaces and
//! non-ASCII in an encoded query never change the meaning of the URL.

/// Percent-encodes `text`, keeping only `A-Z a-z 0-9 - . _ ~`.
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 2);
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            out.push('%');
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 15) as usize] as char);
        }
    }
    out
}

/// Builds `?k=v&k=v` from pairs, encoding each key and value.
pub fn query_string<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (k, v) in pairs {
        out.push(if out.is_empty() { '?' } else { '&' });
        out.push_str(&encode(k));
        out.push('=');
        out.push_str(&encode(v));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_everything_but_unreserved() {
        assert_eq!(
            encode("sys_updated_on>2024-01-01 00:00:00^ORDERBYsys_id"),
            "sys_updated_on%3E2024-01-01%2000%3A00%3A00%5EORDERBYsys_id"
        );
        assert_eq!(encode("a+b&c=d/é"), "a%2Bb%26c%3Dd%2F%C3%A9");
        assert_eq!(query_string([("sysparm_limit", "10"), ("q", "x y")]), "?sysparm_limit=10&q=x%20y");
    }
}
