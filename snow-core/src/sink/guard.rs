//! The stale-write guard: with a version source configured (`snow.sink.version.field`,
//! `snow.sink.version.header` or `snow.sink.version.offset`), a write of a named row whose version
//! is older than the newest one already written for that row is skipped (`stale`).
//!
//! **The guard's state lives in the row itself**: every write carries the record's version in
//! `snow.sink.version.row.field`, so the newest version written is whatever the row holds. That
//! survives restarts, rebalances and a lost host without any store of our own, and stays right when
//! several connectors (or runners) write the same table. A lane remembers the versions it wrote
//! (bounded) and asks the row (`GET` with `sysparm_fields=<row field>`) only for a row it has not
//! written since it opened; a lane is one partition, and one row's records share a key and so a
//! partition, so nothing else writes that row's versions meanwhile.
//!
//! Versions compare by kind: numbers as exact decimals, timestamps (ISO 8601 with fractions and
//! offsets, or ServiceNow's `yyyy-MM-dd HH:mm:ss`) as instants, anything else as text; a record
//! whose version is of another kind than the row's is a record error, never a guess. An equal
//! version is written (a replay after a crash writes the same thing again).

use std::cmp::Ordering;
use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::error::SnowError;
use crate::record::SinkRecord;

/// Rows a lane remembers the newest version of before it starts over (each a few dozen bytes).
const MAX_REMEMBERED: usize = 200_000;

/// Where a record's version comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionSource {
    /// A member of the record's value.
    Field(String),
    /// A record header.
    Header(String),
    /// The record's Kafka offset.
    Offset,
}

/// The guard's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardConfig {
    /// Where versions come from.
    pub source: VersionSource,
    /// The row field that holds the newest version written.
    pub row_field: String,
}

/// A version as a record or a row carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version(pub String);

/// What a version is, for comparing it: a decimal number (exactly, any precision), an instant
/// (ISO 8601 or ServiceNow's `yyyy-MM-dd HH:mm:ss`, fractions and offsets included; no offset is
/// UTC), or text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// Sign (`true`: negative), integer digits without leading zeros, fraction digits without
    /// trailing zeros; zero is `(false, "", "")`.
    Number(bool, String, String),
    /// Seconds since the epoch and nanoseconds.
    Instant(i64, u32),
    /// Anything else.
    Text(String),
}

impl Kind {
    fn of(text: &str) -> Kind {
        let t = text.trim();
        if let Some(n) = parse_decimal(t) {
            return n;
        }
        if let Some(i) = parse_instant(t) {
            return i;
        }
        Kind::Text(t.to_string())
    }

    fn name(&self) -> &'static str {
        match self {
            Kind::Number(..) => "a number",
            Kind::Instant(..) => "a timestamp",
            Kind::Text(_) => "text",
        }
    }
}

/// `+12.50`, `-3`, `1e3`, `0.5E-2` as a normalized decimal.
fn parse_decimal(t: &str) -> Option<Kind> {
    let (negative, rest) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], rest[i + 1..].parse::<i32>().ok().filter(|e| e.abs() <= 4096)?),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty() || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    // All the digits, and where the point is among them once the exponent moved it.
    let digits = format!("{int}{frac}");
    let point = int.len() as i64 + i64::from(exponent);
    let (int, frac) = if point <= 0 {
        (String::new(), format!("{}{digits}", "0".repeat((-point) as usize)))
    } else if point as usize >= digits.len() {
        (format!("{digits}{}", "0".repeat(point as usize - digits.len())), String::new())
    } else {
        (digits[..point as usize].to_string(), digits[point as usize..].to_string())
    };
    let int = int.trim_start_matches('0').to_string();
    let frac = frac.trim_end_matches('0').to_string();
    let zero = int.is_empty() && frac.is_empty();
    Some(Kind::Number(negative && !zero, int, frac))
}

/// `2026-03-01 10:00:30`, `2026-03-01T10:00:30.250Z`, `2026-03-01T12:00:30+02:00` as an instant.
fn parse_instant(t: &str) -> Option<Kind> {
    if t.len() < 19 || !t.is_char_boundary(19) {
        return None;
    }
    let (base, rest) = t.split_at(19);
    let base = base.replacen('T', " ", 1);
    let seconds = crate::time::Timestamp::parse(&base).ok()?.0;
    let (fraction, zone) = match rest.strip_prefix('.') {
        Some(r) => {
            let end = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
            (&r[..end], &r[end..])
        }
        None => ("", rest),
    };
    if fraction.len() > 9 || (rest.starts_with('.') && fraction.is_empty()) {
        return None;
    }
    let nanos: u32 = if fraction.is_empty() { 0 } else { format!("{fraction:0<9}").parse().ok()? };
    let offset = match zone {
        "" | "Z" | "z" => 0,
        z if z.len() == 6 && z.is_ascii() && (z.starts_with('+') || z.starts_with('-')) && &z[3..4] == ":" => {
            let h: i64 = z[1..3].parse().ok()?;
            let m: i64 = z[4..6].parse().ok()?;
            let sign = if z.starts_with('-') { -1 } else { 1 };
            sign * (h * 3600 + m * 60)
        }
        _ => return None,
    };
    Some(Kind::Instant(seconds - offset, nanos))
}

/// How two magnitudes (integer digits, fraction digits; normalized) compare.
fn magnitude(a: (&str, &str), b: (&str, &str)) -> Ordering {
    a.0.len().cmp(&b.0.len()).then_with(|| a.0.cmp(b.0)).then_with(|| a.1.cmp(b.1))
}

impl Version {
    /// How `self` compares with `other`: numbers as exact decimals (`10.0` equals `10`, `9` is
    /// below `10`), timestamps as instants (`…30.250Z` is after `…30Z`), text as text. Two versions
    /// of different kinds cannot be ordered: the error says which they are.
    pub fn compare(&self, other: &Version) -> Result<Ordering, String> {
        match (Kind::of(&self.0), Kind::of(&other.0)) {
            (Kind::Number(na, ia, fa), Kind::Number(nb, ib, fb)) => Ok(match (na, nb) {
                (false, true) => Ordering::Greater,
                (true, false) => Ordering::Less,
                (false, false) => magnitude((&ia, &fa), (&ib, &fb)),
                (true, true) => magnitude((&ib, &fb), (&ia, &fa)),
            }),
            (Kind::Instant(sa, na), Kind::Instant(sb, nb)) => Ok((sa, na).cmp(&(sb, nb))),
            (Kind::Text(a), Kind::Text(b)) => Ok(a.cmp(&b)),
            (a, b) => {
                Err(format!("version {:?} ({}) cannot be compared with {:?} ({})", self.0.trim(), a.name(), other.0.trim(), b.name()))
            }
        }
    }
}

/// One lane's guard: its configuration and the newest version it wrote per row.
#[derive(Debug)]
pub struct StaleGuard {
    config: GuardConfig,
    newest: HashMap<(String, String), Version>,
}

impl StaleGuard {
    /// A guard with nothing remembered.
    pub fn new(config: GuardConfig) -> Self {
        Self { config, newest: HashMap::new() }
    }

    /// The row field versions are kept in.
    pub fn row_field(&self) -> &str {
        &self.config.row_field
    }

    /// The version `record` carries; a record without one (or with one that is not text or a
    /// number) is a record error naming the source.
    pub fn version_of(&self, record: &SinkRecord, value: Option<&Map<String, Value>>) -> Result<Version, SnowError> {
        let at = record.coordinates();
        match &self.config.source {
            VersionSource::Offset => Ok(Version(record.offset.to_string())),
            VersionSource::Header(name) => {
                super::value::header(record, name).filter(|v| !v.trim().is_empty()).map(|v| Version(v.trim().to_string())).ok_or_else(
                    || SnowError::data(format!("record {at}: no {name} header to take the version from (snow.sink.version.header)")),
                )
            }
            VersionSource::Field(field) => match value.and_then(|v| v.get(field)) {
                Some(Value::String(s)) if !s.trim().is_empty() => Ok(Version(s.trim().to_string())),
                Some(Value::Number(n)) => Ok(Version(n.to_string())),
                _ => Err(SnowError::data(format!("record {at}: field {field} holds no version (snow.sink.version.field)"))),
            },
        }
    }

    /// The newest version this lane wrote to `table`/`sys_id`, if it remembers one.
    pub fn remembered(&self, table: &str, sys_id: &str) -> Option<&Version> {
        self.newest.get(&(table.to_string(), sys_id.to_string()))
    }

    /// Remembers that `version` is now the newest of `table`/`sys_id`.
    pub fn remember(&mut self, table: &str, sys_id: &str, version: Version) {
        if self.newest.len() >= MAX_REMEMBERED {
            self.newest.clear();
        }
        self.newest.insert((table.to_string(), sys_id.to_string()), version);
    }

    /// Forgets what is remembered of `table`/`sys_id` (a version planned but never written).
    pub fn forget(&mut self, table: &str, sys_id: &str) {
        self.newest.remove(&(table.to_string(), sys_id.to_string()));
    }

    /// `body` (a JSON object) with the row field set to `version`.
    pub fn stamp(&self, body: &[u8], version: &Version) -> Result<Vec<u8>, SnowError> {
        let mut fields: Map<String, Value> =
            serde_json::from_slice(body).map_err(|e| SnowError::data(format!("the body to write is not a JSON object: {e}")))?;
        fields.insert(self.config.row_field.clone(), Value::String(version.0.clone()));
        serde_json::to_vec(&fields).map_err(|e| SnowError::data(format!("encoding the body: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version(s.into())
    }

    #[test]
    fn versions_compare_by_kind() {
        let cmp = |a: &str, b: &str| v(a).compare(&v(b)).unwrap();
        assert_eq!(cmp("9", "10"), Ordering::Less, "9 < 10 as numbers, not as text");
        assert_eq!(cmp("10.0", "9"), Ordering::Greater, "decimals, not text");
        assert_eq!(cmp("10.0", "10"), Ordering::Equal);
        assert_eq!(cmp("-3", "2"), Ordering::Less);
        assert_eq!(cmp("-3.5", "-3.25"), Ordering::Less);
        assert_eq!(cmp("0.1", "0.10000000000000000000000001"), Ordering::Less, "exactly, beyond f64");
        assert_eq!(cmp("1e3", "999.5"), Ordering::Greater);
        assert_eq!(cmp("-0", "0"), Ordering::Equal);
        assert_eq!(cmp("2026-01-02 00:00:00", "2026-01-10 00:00:00"), Ordering::Less);
        assert_eq!(cmp("2026-03-01T10:00:30.250Z", "2026-03-01T10:00:30Z"), Ordering::Greater, "fractions count");
        assert_eq!(cmp("2026-03-01T12:00:30+02:00", "2026-03-01 10:00:30"), Ordering::Equal, "offsets count");
        assert_eq!(cmp("2026-01-02T00:00:00Z", "2026-01-02T00:00:00Z"), Ordering::Equal);
        assert_eq!(cmp("v1.2", "v1.3"), Ordering::Less, "text as text");
        let err = v("2026-03-01 10:00:30").compare(&v("17")).unwrap_err();
        assert!(err.contains("(a timestamp) cannot be compared with \"17\" (a number)"), "{err}");
        assert!(v("abc").compare(&v("3")).is_err());
        // A zone that is not ASCII is text, never a slice through a character.
        assert!(v("2026-03-01T12:00:30+1é00").compare(&v("2026-03-01 10:00:30")).is_err());
        assert_eq!(cmp("2026-03-01T12:00:30+1é00", "2026-03-01T12:00:30+1é00"), Ordering::Equal);
    }

    #[test]
    fn a_version_comes_from_its_source_or_the_record_fails() {
        let record = crate::sink::value::tests::record(Some("k"), Some(r#"{"v":7}"#), &[("ver", "12")]);
        let value: Map<String, Value> = serde_json::from_str(r#"{"v":7,"s":"x"}"#).unwrap();
        let guard = |source| StaleGuard::new(GuardConfig { source, row_field: "u_version".into() });
        assert_eq!(guard(VersionSource::Field("v".into())).version_of(&record, Some(&value)).unwrap(), v("7"));
        assert_eq!(guard(VersionSource::Header("ver".into())).version_of(&record, Some(&value)).unwrap(), v("12"));
        assert_eq!(guard(VersionSource::Offset).version_of(&record, Some(&value)).unwrap(), v(&record.offset.to_string()));
        let err = guard(VersionSource::Field("missing".into())).version_of(&record, Some(&value)).unwrap_err().to_string();
        assert!(err.contains("field missing holds no version (snow.sink.version.field)"), "{err}");
        let stamped = guard(VersionSource::Offset).stamp(br#"{"a":"1"}"#, &v("41")).unwrap();
        assert_eq!(stamped, br#"{"a":"1","u_version":"41"}"#);
    }
}
