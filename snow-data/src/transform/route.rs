//! RegexRouter (a topic that fully matches `regex` gets its first match replaced), Filter (drops
//! every record it is applied to: use it under a predicate), and Connect's three predicates:
//! TopicNameMatches, HasHeaderKey, RecordIsTombstone. Patterns are Rust's `regex` syntax, which
//! shares Java's for everything a topic pattern uses (classes, groups, quantifiers, anchors); a
//! replacement is read with Java's rules (`$1`, `${name}`, `\` escapes).

use regex::Regex;

use crate::error::DataError;
use crate::value::Value;

use super::support::{Conf, invalid};
use super::{Predicate, Record, Transform};

/// `pattern` compiled twice: anchored (Java's `matches()`) and as given (`replaceFirst`).
fn compile(key: &str, pattern: &str, why: &str) -> Result<(Regex, Regex), String> {
    let bad = |e: regex::Error| invalid(pattern, key, &format!("{why}: {e}"));
    Ok((Regex::new(&format!("^(?:{pattern})$")).map_err(bad)?, Regex::new(pattern).map_err(bad)?))
}

/// A Java replacement string in Rust's syntax: `$n` and `${name}` are groups, `\x` is `x`.
fn java_replacement(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => {}
            },
            '$' if chars.peek() == Some(&'{') => {
                out.push('$');
                for c in chars.by_ref() {
                    out.push(c);
                    if c == '}' {
                        break;
                    }
                }
            }
            '$' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                out.push_str(&format!("${{{digits}}}"));
            }
            other => out.push(other),
        }
    }
    out
}

/// `RegexRouter`.
pub struct RegexRouter {
    full: Regex,
    first: Regex,
    replacement: String,
}

impl RegexRouter {
    /// From its keys.
    pub fn new(conf: &Conf<'_>) -> Result<Self, String> {
        let (full, first) = compile("regex", conf.required("regex")?, "Invalid regex")?;
        Ok(Self { full, first, replacement: java_replacement(conf.required("replacement")?) })
    }

    /// The topic `topic` is routed to.
    pub fn route(&self, topic: &str) -> Option<String> {
        self.full.is_match(topic).then(|| self.first.replacen(topic, 1, self.replacement.as_str()).into_owned())
    }
}

impl Transform for RegexRouter {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, DataError> {
        if let Some(topic) = self.route(&record.topic) {
            record.topic = topic;
        }
        Ok(Some(record))
    }
}

/// `Filter`: drops the record.
pub struct Filter;

impl Transform for Filter {
    fn apply(&self, _record: Record) -> Result<Option<Record>, DataError> {
        Ok(None)
    }
}

/// `predicates.TopicNameMatches`.
pub struct TopicNameMatches {
    pattern: Regex,
}

impl TopicNameMatches {
    /// From its keys.
    pub fn new(conf: &Conf<'_>) -> Result<Self, String> {
        let (pattern, _) = compile("pattern", conf.non_empty("pattern")?, "entry must be a Java-compatible regular expression")?;
        Ok(Self { pattern })
    }
}

impl Predicate for TopicNameMatches {
    fn test(&self, record: &Record) -> bool {
        self.pattern.is_match(&record.topic)
    }
}

/// `predicates.HasHeaderKey`.
pub struct HasHeaderKey {
    name: String,
}

impl HasHeaderKey {
    /// From its keys.
    pub fn new(conf: &Conf<'_>) -> Result<Self, String> {
        Ok(Self { name: conf.non_empty("name")?.to_string() })
    }
}

impl Predicate for HasHeaderKey {
    fn test(&self, record: &Record) -> bool {
        record.headers.iter().any(|h| h.key == self.name)
    }
}

/// `predicates.RecordIsTombstone`.
pub struct RecordIsTombstone;

impl Predicate for RecordIsTombstone {
    fn test(&self, record: &Record) -> bool {
        matches!(record.value, Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn router(regex: &str, replacement: &str) -> RegexRouter {
        let keys: BTreeMap<String, String> =
            [("regex".to_string(), regex.to_string()), ("replacement".to_string(), replacement.to_string())].into();
        RegexRouter::new(&Conf::new(&keys)).expect("router")
    }

    #[test]
    fn a_full_match_replaces_the_first_match_as_java_does() {
        assert_eq!(router("(.*)-(\\d+)", "$2_$1").route("foo-12").as_deref(), Some("12_foo"));
        assert_eq!(router("a*?", "X").route("aaa").as_deref(), Some("Xaaa"), "replaceFirst after matches()");
        assert_eq!(router("servicenow\\.(.*)", "snow-$1").route("servicenow.incident").as_deref(), Some("snow-incident"));
        assert_eq!(router("x", "y").route("xx"), None, "no full match, no change");
        assert_eq!(java_replacement("a\\$b$1${name}"), "a$$b${1}${name}");
    }
}
