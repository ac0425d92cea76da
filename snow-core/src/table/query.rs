//! Encoded queries: terms built from validated parts, and the user's base query with cursor
//! predicates ANDed onto each of its `^NQ` branches so that an OR can never escape them.
//!
//! ServiceNow silently drops terms it cannot parse, so nothing here pastes text in raw: field
//! names are checked, and values that could split or end a term (`^`, line breaks) are refused.

use std::fmt::Write as _;

/// True for a ServiceNow table name: ASCII letters, digits and `_`.
pub fn is_valid_table_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 80 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// True for a field name: ASCII letters, digits, `_`, and `.` for dot-walked references.
pub fn is_valid_field_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && !name.ends_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
}

/// Comparison operators the connectors build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `=`
    Eq,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Self::Eq => "=",
            Self::Gt => ">",
            Self::Ge => ">=",
            Self::Lt => "<",
            Self::Le => "<=",
        }
    }
}

/// One `field OP value` term whose parts were checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term(String);

impl Term {
    /// Builds a term; refuses a bad field name or a value that would change the query's shape.
    pub fn new(field: &str, op: Op, value: &str) -> Result<Self, String> {
        if !is_valid_field_name(field) {
            return Err(format!("{field:?} is not a field name"));
        }
        if let Some(bad) = value.chars().find(|c| matches!(c, '^' | '\n' | '\r' | '\0')) {
            return Err(format!("value {value:?} for {field} contains {bad:?}, which would change the encoded query"));
        }
        Ok(Self(format!("{field}{}{value}", op.as_str())))
    }

    /// The encoded term.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A user's base query, split into its top-level `^NQ` branches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BaseQuery {
    branches: Vec<String>,
}

impl BaseQuery {
    /// Parses a user query. Ordering terms are refused: the cursor owns the order.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(Self::default());
        }
        if text.contains(['\n', '\r', '\0']) {
            return Err("must not contain line breaks".into());
        }
        let branches = split_branches(text);
        for branch in &branches {
            for term in split_terms(branch) {
                let bare = term.strip_prefix("OR").filter(|_| !term.starts_with("ORDERBY")).unwrap_or(term);
                if bare.starts_with("ORDERBY") || bare.starts_with("GROUPBY") {
                    return Err(format!("must not contain {bare:?}: the cursor orders rows itself"));
                }
                if bare.is_empty() {
                    return Err("has an empty term (a doubled or trailing ^)".into());
                }
            }
        }
        Ok(Self { branches: branches.into_iter().map(String::from).collect() })
    }

    /// The query as given (normalised), used for the offset fingerprint.
    pub fn canonical(&self) -> String {
        self.branches.join("^NQ")
    }

    /// The full encoded query: `terms` ANDed onto every branch, then `ORDERBY` each of `order`.
    pub fn with_cursor(&self, terms: &[Term], order: &[&str]) -> String {
        let mut out = String::new();
        let push_branch = |out: &mut String, base: Option<&str>| {
            let mut first = true;
            if let Some(base) = base {
                out.push_str(base);
                first = false;
            }
            for term in terms {
                if !first {
                    out.push('^');
                }
                out.push_str(term.as_str());
                first = false;
            }
        };
        if self.branches.is_empty() {
            push_branch(&mut out, None);
        }
        for (i, branch) in self.branches.iter().enumerate() {
            if i > 0 {
                out.push_str("^NQ");
            }
            push_branch(&mut out, Some(branch));
        }
        for field in order {
            if !out.is_empty() {
                out.push('^');
            }
            let _ = write!(out, "ORDERBY{field}");
        }
        out
    }
}

/// Splits at top-level `^NQ`, honouring `^^` as an escaped caret.
fn split_branches(text: &str) -> Vec<&str> {
    split_on(text, |rest| rest.starts_with(b"^NQ").then_some(3))
}

/// Splits a branch at `^` (an `^OR` term keeps its `OR` prefix), honouring `^^`.
fn split_terms(branch: &str) -> Vec<&str> {
    split_on(branch, |rest| (rest.starts_with(b"^") && !rest.starts_with(b"^NQ")).then_some(1))
}

/// Splits `text` where `separator` (looking at the bytes from there on) finds one. Separators are
/// ASCII, so every cut falls between characters, whatever the text holds around them.
fn split_on(text: &str, separator: impl Fn(&[u8]) -> Option<usize>) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut i) = (0, 0);
    let bytes = text.as_bytes();
    while i < bytes.len() {
        if bytes[i] == b'^' && bytes.get(i + 1) == Some(&b'^') {
            i += 2;
            continue;
        }
        if let Some(len) = separator(&bytes[i..]) {
            parts.push(&text[start..i]);
            i += len;
            start = i;
        } else {
            i += 1;
        }
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_with_non_ascii_text_is_split_between_characters() {
        // Found by `make fuzz` (encoded_query): a cut inside a multi-byte character panicked.
        let query = BaseQuery::parse("short_description=caf\u{e9}\u{fffd}^active=true^NQnumber=\u{1f600}").unwrap();
        assert_eq!(query.canonical(), "short_description=caf\u{e9}\u{fffd}^active=true^NQnumber=\u{1f600}");
        assert!(BaseQuery::parse("shocript.\u{fffd}iort_d").is_ok());
    }

    fn terms() -> Vec<Term> {
        vec![
            Term::new("sys_updated_on", Op::Gt, "2024-01-01 00:00:00").unwrap(),
            Term::new("sys_updated_on", Op::Le, "2024-01-02 00:00:00").unwrap(),
        ]
    }

    #[test]
    fn cursor_terms_are_anded_onto_every_branch() {
        let q = BaseQuery::parse("active=true^ORpriority=1^NQcategory=network").unwrap();
        assert_eq!(
            q.with_cursor(&terms(), &["sys_updated_on", "sys_id"]),
            "active=true^ORpriority=1^sys_updated_on>2024-01-01 00:00:00^sys_updated_on<=2024-01-02 00:00:00\
             ^NQcategory=network^sys_updated_on>2024-01-01 00:00:00^sys_updated_on<=2024-01-02 00:00:00\
             ^ORDERBYsys_updated_on^ORDERBYsys_id"
        );
    }

    #[test]
    fn empty_base_query() {
        let q = BaseQuery::parse("  ").unwrap();
        assert_eq!(q.with_cursor(&terms()[..1], &["sys_id"]), "sys_updated_on>2024-01-01 00:00:00^ORDERBYsys_id");
    }

    #[test]
    fn escaped_caret_does_not_split() {
        let q = BaseQuery::parse("short_descriptionLIKEa^^NQb").unwrap();
        assert_eq!(q.canonical(), "short_descriptionLIKEa^^NQb");
        assert_eq!(q.branches.len(), 1);
    }

    #[test]
    fn user_ordering_is_refused() {
        assert!(BaseQuery::parse("active=true^ORDERBYnumber").unwrap_err().contains("ORDERBYnumber"));
        assert!(BaseQuery::parse("active=true^NQORDERBYDESCnumber").is_err());
        assert!(BaseQuery::parse("active=true^^^").is_err() || BaseQuery::parse("active=true^").is_err());
    }

    #[test]
    fn values_that_change_the_query_are_refused() {
        assert!(Term::new("sys_id", Op::Gt, "abc^NQactive=false").is_err());
        assert!(Term::new("sys_id", Op::Gt, "abc\n").is_err());
        assert!(Term::new("bad field", Op::Eq, "x").is_err());
        assert_eq!(Term::new("caller_id.name", Op::Eq, "a=b").unwrap().as_str(), "caller_id.name=a=b");
    }
}
