//! The encoded-query subset: `field OP value` terms joined by `^` (AND), `^OR` (OR with the
//! previous term), `^NQ` (a new OR branch), `ORDERBY`/`ORDERBYDESC`; operators
//! `= != > >= < <= LIKE NOT LIKE STARTSWITH ENDSWITH IN NOT IN ISEMPTY ISNOTEMPTY`; `^^` is a
//! literal caret. Like ServiceNow, a term it cannot parse is dropped silently (and listed in
//! [`Query::dropped`] so tests can see it).

use std::cmp::Ordering;

use serde_json::Value;

use crate::store::Row;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `=`
    Eq,
    /// `!=`
    Ne,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `LIKE` (contains, case-insensitive)
    Like,
    /// `NOT LIKE`
    NotLike,
    /// `STARTSWITH`
    StartsWith,
    /// `ENDSWITH`
    EndsWith,
    /// `IN` (comma list)
    In,
    /// `NOT IN`
    NotIn,
    /// `ISEMPTY`
    IsEmpty,
    /// `ISNOTEMPTY`
    IsNotEmpty,
}

/// Longest operator names first so `NOT IN` wins over `IN` and `>=` over `>`.
const OPS: [(&str, Op); 14] = [
    ("ISNOTEMPTY", Op::IsNotEmpty),
    ("ISEMPTY", Op::IsEmpty),
    ("STARTSWITH", Op::StartsWith),
    ("ENDSWITH", Op::EndsWith),
    ("NOT LIKE", Op::NotLike),
    ("NOT IN", Op::NotIn),
    ("LIKE", Op::Like),
    ("IN", Op::In),
    ("!=", Op::Ne),
    (">=", Op::Ge),
    ("<=", Op::Le),
    ("=", Op::Eq),
    (">", Op::Gt),
    ("<", Op::Lt),
];

/// One condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// Field name.
    pub field: String,
    /// Operator.
    pub op: Op,
    /// Value (unescaped).
    pub value: String,
}

/// A parsed query: branches (OR of branches), each an AND of OR-groups of terms; and the order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// `branches[b][g]` is an OR-group of terms; a branch matches when all its groups match.
    pub branches: Vec<Vec<Vec<Term>>>,
    /// `(field, descending)` in priority order.
    pub order: Vec<(String, bool)>,
    /// Terms that could not be parsed and were dropped.
    pub dropped: Vec<String>,
}

impl Query {
    /// Parses an encoded query.
    pub fn parse(text: &str) -> Self {
        let mut query = Query::default();
        for branch_text in split(text, true) {
            let mut groups: Vec<Vec<Term>> = Vec::new();
            for raw in split(&branch_text, false) {
                if raw.is_empty() {
                    continue;
                }
                if let Some(f) = raw.strip_prefix("ORDERBYDESC") {
                    query.order.push((f.to_string(), true));
                    continue;
                }
                if let Some(f) = raw.strip_prefix("ORDERBY") {
                    query.order.push((f.to_string(), false));
                    continue;
                }
                let (is_or, body) = match raw.strip_prefix("OR") {
                    Some(rest) if !groups.is_empty() && parse_term(rest).is_some() => (true, rest),
                    _ => (false, raw.as_str()),
                };
                match parse_term(body) {
                    Some(term) if is_or => groups.last_mut().expect("checked non-empty").push(term),
                    Some(term) => groups.push(vec![term]),
                    None => query.dropped.push(raw.clone()),
                }
            }
            if !groups.is_empty() {
                query.branches.push(groups);
            }
        }
        query
    }

    /// True when `row` matches (a query without conditions matches every row).
    pub fn matches(&self, row: &Row) -> bool {
        self.branches.is_empty() || self.branches.iter().any(|groups| groups.iter().all(|g| g.iter().any(|t| t.matches(row))))
    }

    /// Orders rows by the query's ORDERBY terms (stable).
    pub fn compare(&self, a: &Row, b: &Row) -> Ordering {
        for (field, desc) in &self.order {
            let ord = compare_values(&field_value(a, field), &field_value(b, field));
            if ord != Ordering::Equal {
                return if *desc { ord.reverse() } else { ord };
            }
        }
        Ordering::Equal
    }
}

/// Splits at `^NQ` (branches) or at `^` (terms, not `^NQ`), honouring `^^` as a literal caret.
fn split(text: &str, branches: bool) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '^' {
            current.push(c);
            continue;
        }
        if chars.peek() == Some(&'^') {
            chars.next();
            // Keep the escape in term text while splitting branches; unescape at term level.
            current.push_str(if branches { "^^" } else { "^" });
            continue;
        }
        let rest: String = chars.clone().take(2).collect();
        if rest == "NQ" {
            if branches {
                chars.next();
                chars.next();
                parts.push(std::mem::take(&mut current));
            } else {
                current.push('^');
            }
        } else if branches {
            current.push('^');
        } else {
            parts.push(std::mem::take(&mut current));
        }
    }
    parts.push(current);
    parts
}

fn parse_term(text: &str) -> Option<Term> {
    let field_len = text.find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.'))?;
    if field_len == 0 {
        return None;
    }
    let (field, rest) = text.split_at(field_len);
    let (name, op) = OPS.iter().find(|(name, _)| rest.starts_with(name))?;
    let value = &rest[name.len()..];
    if matches!(op, Op::IsEmpty | Op::IsNotEmpty) && !value.is_empty() {
        return None;
    }
    Some(Term { field: field.to_string(), op: *op, value: value.to_string() })
}

/// The comparable value of `field` in `row`: a string, a reference's `value`, or empty.
pub fn field_value(row: &Row, field: &str) -> String {
    match row.get(field) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Object(o)) => o.get("value").and_then(Value::as_str).unwrap_or("").to_string(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Numbers compare as numbers, everything else as text (dates in ServiceNow form sort as text).
fn compare_values(a: &str, b: &str) -> Ordering {
    match (a.parse::<i64>(), b.parse::<i64>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        _ => a.cmp(b),
    }
}

impl Term {
    /// True when `row` satisfies the term.
    pub fn matches(&self, row: &Row) -> bool {
        let v = field_value(row, &self.field);
        let lower = || v.to_lowercase();
        match self.op {
            Op::Eq => v == self.value,
            Op::Ne => v != self.value,
            Op::Gt => compare_values(&v, &self.value) == Ordering::Greater,
            Op::Ge => compare_values(&v, &self.value) != Ordering::Less,
            Op::Lt => compare_values(&v, &self.value) == Ordering::Less,
            Op::Le => compare_values(&v, &self.value) != Ordering::Greater,
            Op::Like => lower().contains(&self.value.to_lowercase()),
            Op::NotLike => !lower().contains(&self.value.to_lowercase()),
            Op::StartsWith => lower().starts_with(&self.value.to_lowercase()),
            Op::EndsWith => lower().ends_with(&self.value.to_lowercase()),
            Op::In => self.value.split(',').any(|x| x == v),
            Op::NotIn => !self.value.split(',').any(|x| x == v),
            Op::IsEmpty => v.is_empty(),
            Op::IsNotEmpty => !v.is_empty(),
        }
    }
}

/// When the query has the keyset cursor's shape on an indexed timestamp field, the bounds and
/// ordering that let the store read an index range in order instead of scanning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexPlan {
    /// The timestamp field whose index to read.
    pub field: String,
    /// Inclusive lower bound, if any (`>` is applied by the full filter).
    pub from: Option<String>,
    /// Inclusive upper bound, if any.
    pub to: Option<String>,
    /// Read the range from its end (`ORDERBYDESC`).
    pub descending: bool,
}

impl Query {
    /// An index plan, if one applies: at most one branch, and an order that the index order
    /// `(timestamp, sys_id)` satisfies read forwards or backwards.
    pub fn index_plan(&self, indexed: &[&str]) -> Option<IndexPlan> {
        let groups: &[Vec<Term>] = match self.branches.as_slice() {
            [] => &[],
            [groups] => groups,
            _ => return None,
        };
        for field in indexed {
            let bounds: Vec<&Term> = groups.iter().filter(|g| g.len() == 1 && g[0].field == *field).map(|g| &g[0]).collect();
            let has_eq = bounds.iter().any(|t| t.op == Op::Eq);
            let order: Vec<(&str, bool)> = self.order.iter().map(|(f, d)| (f.as_str(), *d)).collect();
            let fits = match order.as_slice() {
                [(f, d)] if f == field => Some(*d),
                [(f, d), ("sys_id", e)] if f == field && d == e => Some(*d),
                [("sys_id", descending)] if has_eq && !bounds.is_empty() => Some(*descending),
                _ => None,
            };
            let Some(descending) = fits else { continue };
            let (mut from, mut to): (Option<String>, Option<String>) = (None, None);
            for t in bounds {
                match t.op {
                    Op::Eq => {
                        from = max_opt(from, t.value.clone());
                        to = min_opt(to, t.value.clone());
                    }
                    Op::Gt | Op::Ge => from = max_opt(from, t.value.clone()),
                    Op::Lt | Op::Le => to = min_opt(to, t.value.clone()),
                    _ => {}
                }
            }
            return Some(IndexPlan { field: field.to_string(), from, to, descending });
        }
        None
    }
}

fn max_opt(a: Option<String>, b: String) -> Option<String> {
    Some(match a {
        Some(a) if a > b => a,
        _ => b,
    })
}

fn min_opt(a: Option<String>, b: String) -> Option<String> {
    Some(match a {
        Some(a) if a < b => a,
        _ => b,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pairs: &[(&str, &str)]) -> Row {
        pairs.iter().map(|(k, v)| (k.to_string(), Value::String(v.to_string()))).collect()
    }

    #[test]
    fn and_or_nq_and_order() {
        let q = Query::parse("active=true^priority=1^ORpriority=2^NQcategory=network^ORDERBYnumber^ORDERBYDESCsys_id");
        assert_eq!(q.branches.len(), 2);
        assert_eq!(q.order, vec![("number".into(), false), ("sys_id".into(), true)]);
        assert!(q.matches(&row(&[("active", "true"), ("priority", "2")])));
        assert!(!q.matches(&row(&[("active", "true"), ("priority", "3")])));
        assert!(q.matches(&row(&[("category", "network")])));
    }

    #[test]
    fn operators() {
        let r = row(&[("n", "10"), ("s", "Printer on fire"), ("e", "")]);
        for (q, expected) in [
            ("n>9", true),
            ("n>=10", true),
            ("n<9", false),
            ("n!=10", false),
            ("sLIKEfire", true),
            ("sNOT LIKEfire", false),
            ("sSTARTSWITHprinter", true),
            ("sENDSWITHfire", true),
            ("nIN1,10", true),
            ("nNOT IN1,10", false),
            ("eISEMPTY", true),
            ("sISNOTEMPTY", true),
        ] {
            assert_eq!(Query::parse(q).matches(&r), expected, "{q}");
        }
    }

    #[test]
    fn invalid_terms_are_dropped_like_servicenow_does() {
        let q = Query::parse("active=true^bogus term^Nope");
        assert_eq!(q.dropped, vec!["bogus term".to_string(), "Nope".to_string()]);
        assert!(q.matches(&row(&[("active", "true")])));
    }

    #[test]
    fn escaped_caret_is_a_literal() {
        let q = Query::parse("short_description=a^^b");
        assert!(q.matches(&row(&[("short_description", "a^b")])));
    }

    #[test]
    fn cursor_shapes_use_the_index() {
        let drain = Query::parse("sys_updated_on=2024-01-01 00:00:00^sys_id>abc^ORDERBYsys_id");
        assert_eq!(
            drain.index_plan(&["sys_updated_on"]),
            Some(IndexPlan {
                field: "sys_updated_on".into(),
                from: Some("2024-01-01 00:00:00".into()),
                to: Some("2024-01-01 00:00:00".into()),
                descending: false
            })
        );
        let advance = Query::parse(
            "active=true^sys_updated_on>2024-01-01 00:00:00^sys_updated_on<=2024-01-02 00:00:00^ORDERBYsys_updated_on^ORDERBYsys_id",
        );
        assert_eq!(advance.index_plan(&["sys_updated_on"]).unwrap().to.as_deref(), Some("2024-01-02 00:00:00"));
        assert_eq!(Query::parse("a=1^NQb=2^ORDERBYsys_updated_on").index_plan(&["sys_updated_on"]), None);
        assert_eq!(Query::parse("sys_updated_on>x^ORDERBYnumber").index_plan(&["sys_updated_on"]), None);
        let by_id = Query::parse("sys_id>abc^ORDERBYsys_id").index_plan(&["sys_updated_on", "sys_id"]);
        assert_eq!(by_id, Some(IndexPlan { field: "sys_id".into(), from: Some("abc".into()), to: None, descending: false }));
        let latest = Query::parse("ORDERBYDESCsys_updated_on").index_plan(&["sys_updated_on"]);
        assert_eq!(latest, Some(IndexPlan { field: "sys_updated_on".into(), from: None, to: None, descending: true }));
    }
}
