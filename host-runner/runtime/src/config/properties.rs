//! Java `.properties` text, read as `java.util.Properties.load` reads it: natural lines joined by a
//! trailing odd backslash (the next line's leading whitespace dropped), `#`/`!` comment lines,
//! blank lines, the key ended by the first unescaped `=`, `:` or whitespace (then whitespace and at
//! most one `=`/`:` skipped), and the value kept as written to the end of the line — trailing
//! spaces included. Escapes: `\t \n \r \f`, `\uXXXX`, and `\` before any other character stands
//! for that character. A later key replaces an earlier one. Text is UTF-8 (Java reads a `Reader` the
//! same way; `\uXXXX` works either way).

use std::collections::BTreeMap;

/// Parses properties text; a malformed `\uXXXX` escape is an error naming its line.
pub fn parse(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for (line_no, line) in logical_lines(text) {
        let (key, value) = split(&line);
        let key = unescape(&key).map_err(|e| format!("line {line_no}: {e}"))?;
        let value = unescape(&value).map_err(|e| format!("line {line_no}: {e}"))?;
        out.insert(key, value);
    }
    Ok(out)
}

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}')
}

/// The logical lines (continuations joined, escapes still in) with the number of their first line.
fn logical_lines(text: &str) -> Vec<(usize, Vec<char>)> {
    let mut lines = Vec::new();
    let breaks = split_lines(text);
    let mut i = 0;
    while i < breaks.len() {
        let first = i + 1;
        let mut line: Vec<char> = breaks[i].chars().skip_while(|c| is_space(*c)).collect();
        i += 1;
        if line.is_empty() || line[0] == '#' || line[0] == '!' {
            continue;
        }
        while ends_in_odd_backslashes(&line) {
            line.pop();
            match breaks.get(i) {
                Some(next) => {
                    line.extend(next.chars().skip_while(|c| is_space(*c)));
                    i += 1;
                }
                None => break,
            }
        }
        lines.push((first, line));
    }
    lines
}

/// Natural lines, split at `\r\n`, `\n` or `\r`.
fn split_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            b'\r' => {
                out.push(&text[start..i]);
                if bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < bytes.len() {
        out.push(&text[start..]);
    }
    out
}

fn ends_in_odd_backslashes(line: &[char]) -> bool {
    line.iter().rev().take_while(|c| **c == '\\').count() % 2 == 1
}

/// The raw key and value of a logical line.
fn split(line: &[char]) -> (String, String) {
    let mut key_len = 0;
    let mut value_start = line.len();
    let mut has_separator = false;
    let mut escaped = false;
    while key_len < line.len() {
        let c = line[key_len];
        if (c == '=' || c == ':') && !escaped {
            value_start = key_len + 1;
            has_separator = true;
            break;
        }
        if is_space(c) && !escaped {
            value_start = key_len + 1;
            break;
        }
        escaped = c == '\\' && !escaped;
        key_len += 1;
    }
    while value_start < line.len() {
        let c = line[value_start];
        if !is_space(c) {
            if !has_separator && (c == '=' || c == ':') {
                has_separator = true;
            } else {
                break;
            }
        }
        value_start += 1;
    }
    (line[..key_len].iter().collect(), line[value_start.min(line.len())..].iter().collect())
}

/// Resolves the escapes of a key or value.
fn unescape(raw: &str) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let unit = (hex.len() == 4).then(|| u16::from_str_radix(&hex, 16).ok()).flatten();
                let unit = unit.ok_or_else(|| format!("malformed \\uxxxx escape \\u{hex}"))?;
                // A surrogate pair arrives as two escapes.
                match char::from_u32(u32::from(unit)) {
                    Some(c) => out.push(c),
                    None => out.push_str(&surrogate(unit, &mut chars)?),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

/// The character of the surrogate pair starting with `high`, read from `\uXXXX` after it.
fn surrogate(high: u16, chars: &mut std::str::Chars<'_>) -> Result<String, String> {
    let rest: String = chars.by_ref().take(6).collect();
    let low = rest.strip_prefix("\\u").and_then(|h| u16::from_str_radix(h, 16).ok());
    match low.map(|low| char::decode_utf16([high, low]).collect::<Result<String, _>>()) {
        Some(Ok(text)) => Ok(text),
        _ => Err(format!("an unpaired surrogate \\u{high:04x}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Java 17's `Properties.load` reads from each text (generated by running it on these cases).
    const JAVA: &[(&str, &[(&str, &str)])] = &[
        ("a=b", &[("a", "b")]),
        ("a = b", &[("a", "b")]),
        ("a:b", &[("a", "b")]),
        ("a : b", &[("a", "b")]),
        ("a b", &[("a", "b")]),
        ("a\tb", &[("a", "b")]),
        ("  a=b  ", &[("a", "b  ")]),
        ("a=b   ", &[("a", "b   ")]),
        ("a=\\ b", &[("a", " b")]),
        ("a=", &[("a", "")]),
        ("a", &[("a", "")]),
        ("a  ", &[("a", "")]),
        ("# comment\na=b", &[("a", "b")]),
        ("! comment\na=b", &[("a", "b")]),
        ("  # indented comment\na=b", &[("a", "b")]),
        ("a=b # not a comment", &[("a", "b # not a comment")]),
        ("a=one\\\n   two", &[("a", "onetwo")]),
        ("a=one\\\\\nb=two", &[("a", "one\\"), ("b", "two")]),
        ("a=one\\\\\\\n  two", &[("a", "one\\two")]),
        ("a\\=b=c", &[("a=b", "c")]),
        ("a\\:b:c", &[("a:b", "c")]),
        ("a\\ b=c", &[("a b", "c")]),
        ("a=\\u0041\\u00e9", &[("a", "A\u{e9}")]),
        ("a=\\t\\n\\r\\f", &[("a", "\t\n\r\u{c}")]),
        ("a=\\q\\\\", &[("a", "q\\")]),
        ("a==b", &[("a", "=b")]),
        ("a=b=c", &[("a", "b=c")]),
        ("a::b", &[("a", ":b")]),
        ("a :=b", &[("a", "=b")]),
        ("a\\\n  b=c", &[("ab", "c")]),
        ("key1=x\nkey1=y", &[("key1", "y")]),
        ("a=b\\", &[("a", "b")]),
        ("\\#a=b", &[("#a", "b")]),
        ("a=${env:X}", &[("a", "${env:X}")]),
        ("a=p@ss w0rd ", &[("a", "p@ss w0rd ")]),
        ("a=line1\\\r\n  line2", &[("a", "line1line2")]),
        ("a= \\  lead", &[("a", "  lead")]),
    ];

    #[test]
    fn reads_what_java_reads() {
        for (text, expected) in JAVA {
            let got = parse(text).unwrap();
            let expected: BTreeMap<String, String> = expected.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            assert_eq!(got, expected, "reading {text:?}");
        }
    }

    #[test]
    fn a_malformed_unicode_escape_names_its_line() {
        assert_eq!(parse("a=1\nb=\\u12").unwrap_err(), "line 2: malformed \\uxxxx escape \\u12");
        assert_eq!(parse("a=\\ud83d\\ude00").unwrap()["a"], "\u{1f600}", "a surrogate pair");
    }
}
