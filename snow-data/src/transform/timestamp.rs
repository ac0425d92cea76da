//! TimestampConverter (a timestamp field or whole key/value between string, unix, Date, Time and
//! Timestamp) and TimestampRouter (`${topic}-${timestamp}` topics), with the part of Java's
//! `SimpleDateFormat` they need, always in UTC: `y M d H h m s S a E` pattern letters (`MMM` and
//! longer spell the month, `E` the day), `Z`/`X` for the zone, quoted literals. Parsing is lenient
//! as Java's default is (a month 13 rolls into the next year, trailing text is ignored).

use snow_core::time::Timestamp;

use crate::error::DataError;
use crate::schema::{Kind, Logical, Schema};
use crate::value::Value;

use super::support::{Conf, copy_basics, field_value, invalid, java_class, map_put, require_map, require_struct, schema_text};
use super::{Record, Side, Transform};

const DAY_MS: i64 = 86_400_000;
/// Longest run of one pattern letter (Java takes any; a width past this is a mistake, and Rust's
/// formatting refuses widths past 65535).
const MAX_RUN: usize = 64;
const MONTHS: [&str; 12] =
    ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
const DAYS: [&str; 7] = ["Thursday", "Friday", "Saturday", "Sunday", "Monday", "Tuesday", "Wednesday"];

/// One piece of a date pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    /// A pattern letter repeated `n` times.
    Field(char, usize),
    /// Literal text.
    Text(String),
}

/// A `SimpleDateFormat` pattern, in UTC.
#[derive(Debug, Clone)]
pub struct DateFormat {
    pattern: String,
    parts: Vec<Part>,
}

impl DateFormat {
    /// Compiles `pattern`; an unknown letter is refused as Java refuses it.
    pub fn new(pattern: &str) -> Result<Self, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut parts = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c == '\'' {
                let mut text = String::new();
                i += 1;
                if chars.get(i) == Some(&'\'') {
                    parts.push(Part::Text("'".into()));
                    i += 1;
                    continue;
                }
                loop {
                    match chars.get(i) {
                        None => return Err(format!("Unterminated quote in pattern {pattern}")),
                        Some('\'') if chars.get(i + 1) == Some(&'\'') => {
                            text.push('\'');
                            i += 2;
                        }
                        Some('\'') => {
                            i += 1;
                            break;
                        }
                        Some(ch) => {
                            text.push(*ch);
                            i += 1;
                        }
                    }
                }
                parts.push(Part::Text(text));
            } else if c.is_ascii_alphabetic() {
                if !"yMdHhmsSaEZX".contains(c) {
                    return Err(format!("Illegal pattern character '{c}'"));
                }
                let n = chars[i..].iter().take_while(|x| **x == c).count();
                if n > MAX_RUN {
                    return Err(format!("pattern letter '{c}' repeated {n} times (at most {MAX_RUN})"));
                }
                parts.push(Part::Field(c, n));
                i += n;
            } else {
                parts.push(Part::Text(c.to_string()));
                i += 1;
            }
        }
        Ok(Self { pattern: pattern.to_string(), parts })
    }

    /// `ms` since the epoch, formatted.
    pub fn format(&self, ms: i64) -> String {
        let secs = ms.div_euclid(1000);
        let millis = ms.rem_euclid(1000);
        // From the numbers, not from the text: a year past 9999 (or before 0) has more digits.
        let (y, mo, d) = snow_core::time::civil_from_days(secs.div_euclid(86_400));
        let in_day = secs.rem_euclid(86_400);
        let (h, mi, s) = (in_day / 3600, in_day % 3600 / 60, in_day % 60);
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Field('y', 2) => out.push_str(&format!("{:02}", y % 100)),
                Part::Field('y', n) => out.push_str(&format!("{y:0n$}")),
                Part::Field('M', n) if *n >= 4 => out.push_str(MONTHS[(mo - 1) as usize]),
                Part::Field('M', 3) => out.push_str(&MONTHS[(mo - 1) as usize][..3]),
                Part::Field('M', n) => out.push_str(&format!("{mo:0n$}")),
                Part::Field('d', n) => out.push_str(&format!("{d:0n$}")),
                Part::Field('H', n) => out.push_str(&format!("{h:0n$}")),
                Part::Field('h', n) => out.push_str(&format!("{:0n$}", if h % 12 == 0 { 12 } else { h % 12 })),
                Part::Field('m', n) => out.push_str(&format!("{mi:0n$}")),
                Part::Field('s', n) => out.push_str(&format!("{s:0n$}")),
                Part::Field('S', n) => out.push_str(&format!("{millis:0n$}")),
                Part::Field('a', _) => out.push_str(if h < 12 { "AM" } else { "PM" }),
                Part::Field('E', n) => {
                    let day = DAYS[secs.div_euclid(86_400).rem_euclid(7) as usize];
                    out.push_str(if *n >= 4 { day } else { &day[..3] });
                }
                Part::Field('Z', _) => out.push_str("+0000"),
                Part::Field('X', _) => out.push('Z'),
                Part::Field(..) => {}
            }
        }
        out
    }

    /// `text` read by the pattern: ms since the epoch. Trailing text is ignored.
    pub fn parse(&self, text: &str) -> Option<i64> {
        let b = text.as_bytes();
        let mut at = 0;
        let (mut y, mut mo, mut d, mut h, mut mi, mut s, mut ms, mut pm) = (1970_i64, 1_i64, 1_i64, 0_i64, 0_i64, 0_i64, 0_i64, None);
        for (i, part) in self.parts.iter().enumerate() {
            match part {
                Part::Text(t) => {
                    if !text[at..].starts_with(t.as_str()) {
                        return None;
                    }
                    at += t.len();
                }
                Part::Field('M', n) if *n >= 3 => {
                    let rest = &text[at..];
                    let (index, len) = MONTHS.iter().enumerate().find_map(|(k, m)| {
                        if rest.get(..m.len()).is_some_and(|p| p.eq_ignore_ascii_case(m)) {
                            Some((k, m.len()))
                        } else if rest.get(..3).is_some_and(|p| p.eq_ignore_ascii_case(&m[..3])) {
                            Some((k, 3))
                        } else {
                            None
                        }
                    })?;
                    mo = index as i64 + 1;
                    at += len;
                }
                Part::Field('E', _) => {
                    let rest = &text[at..];
                    let len = DAYS.iter().find_map(|day| {
                        if rest.get(..day.len()).is_some_and(|p| p.eq_ignore_ascii_case(day)) {
                            Some(day.len())
                        } else {
                            rest.get(..3).is_some_and(|p| p.eq_ignore_ascii_case(&day[..3])).then_some(3)
                        }
                    })?;
                    at += len;
                }
                Part::Field('a', _) => {
                    let rest = text[at..].get(..2)?;
                    pm = Some(rest.eq_ignore_ascii_case("PM"));
                    at += 2;
                }
                Part::Field('Z' | 'X', _) => {
                    if text[at..].starts_with('Z') {
                        at += 1;
                    } else {
                        let sign = match b.get(at)? {
                            b'+' => 1,
                            b'-' => -1,
                            _ => return None,
                        };
                        let digits: String = text[at + 1..].chars().filter(|c| *c != ':').take(4).collect();
                        let offset: i64 =
                            digits.get(..2)?.parse::<i64>().ok()? * 60 + digits.get(2..4).unwrap_or("0").parse::<i64>().ok()?;
                        mi -= sign * offset;
                        at += 1 + text[at + 1..].chars().take_while(|c| c.is_ascii_digit() || *c == ':').count();
                    }
                }
                Part::Field(c, n) => {
                    // A field followed directly by another field takes exactly its width (`yyyyMMdd`).
                    let abutting = matches!(self.parts.get(i + 1), Some(Part::Field(..)));
                    let start = at;
                    if matches!(b.get(at), Some(b'-' | b'+')) && *c == 'y' {
                        at += 1;
                    }
                    // At most 18 digits: any more could not be a date's field, and 18 always fit an i64.
                    while at < b.len() && b[at].is_ascii_digit() && (!abutting || at - start < *n) && at - start < 18 {
                        at += 1;
                    }
                    let v: i64 = text[start..at].parse().ok()?;
                    match c {
                        'y' => y = if *n <= 2 && at - start <= 2 { 2000 + v } else { v },
                        'M' => mo = v,
                        'd' => d = v,
                        'H' => h = v,
                        'h' => h = v % 12,
                        'm' => mi = v,
                        's' => s = v,
                        'S' => ms = v,
                        _ => {}
                    }
                }
            }
        }
        if pm == Some(true) {
            h += 12;
        }
        // Lenient: months beyond 12 roll into years, days beyond the month roll on.
        let y = y + (mo - 1).div_euclid(12);
        let mo = (mo - 1).rem_euclid(12) + 1;
        let base = Timestamp::parse(&format!("{y:04}-{mo:02}-01 00:00:00")).ok()?;
        // Lenient fields may be large: summed wide, and a sum past i64 is no timestamp.
        let wide = |v: i64| i128::from(v);
        let total = (wide(base.0) + (wide(d) - 1) * 86_400 + wide(h) * 3600 + wide(mi) * 60 + wide(s)) * 1000 + wide(ms);
        i64::try_from(total).ok()
    }
}

/// What a timestamp is held as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    String,
    Unix,
    Date,
    Time,
    Timestamp,
}

impl Form {
    fn schema(self, optional: bool) -> Schema {
        let s = match self {
            Form::String => Schema::new(Kind::String),
            Form::Unix => Schema::new(Kind::Int64),
            Form::Date => Schema::date(),
            Form::Time => Schema::time(),
            Form::Timestamp => Schema::timestamp(),
        };
        if optional { s.optional() } else { s }
    }

    fn of_schema(schema: &Schema) -> Result<Self, DataError> {
        Ok(match (schema.logical(), &schema.kind) {
            (Some(Logical::Timestamp), _) => Form::Timestamp,
            (Some(Logical::Date), _) => Form::Date,
            (Some(Logical::Time), _) => Form::Time,
            (_, Kind::String) => Form::String,
            (_, Kind::Int64) => Form::Unix,
            _ => {
                return Err(DataError::new(format!("Schema {} does not correspond to a known timestamp type format", schema_text(schema))));
            }
        })
    }

    fn of_value(value: &Value) -> Result<Self, DataError> {
        Ok(match value {
            Value::Timestamp(_) | Value::Date(_) | Value::Time(_) => Form::Timestamp,
            Value::Int64(_) => Form::Unix,
            Value::String(_) => Form::String,
            other => {
                return Err(DataError::new(format!(
                    "TimestampConverter does not support class {} objects as timestamps",
                    java_class(other)
                )));
            }
        })
    }
}

/// `TimestampConverter$Key` / `$Value`.
pub struct TimestampConverter {
    side: Side,
    field: String,
    target: Form,
    format: Option<DateFormat>,
    precision: &'static str,
    with_default: bool,
}

impl TimestampConverter {
    /// From its keys.
    pub fn new(side: Side, conf: &Conf<'_>) -> Result<Self, String> {
        let target = match conf.one_of("target.type", &["string", "unix", "Date", "Time", "Timestamp"], None)? {
            "string" => Form::String,
            "unix" => Form::Unix,
            "Date" => Form::Date,
            "Time" => Form::Time,
            _ => Form::Timestamp,
        };
        let pattern = conf.string("format").unwrap_or("");
        if target == Form::String && pattern.trim().is_empty() {
            return Err("TimestampConverter requires format option to be specified when using string timestamps".into());
        }
        let format = if pattern.trim().is_empty() {
            None
        } else {
            Some(DateFormat::new(pattern).map_err(|_| {
                format!("TimestampConverter requires a SimpleDateFormat-compatible pattern for string timestamps: {pattern}")
            })?)
        };
        let precision =
            match conf.one_of("unix.precision", &["nanoseconds", "microseconds", "milliseconds", "seconds"], Some("milliseconds"))? {
                "nanoseconds" => "nanoseconds",
                "microseconds" => "microseconds",
                "seconds" => "seconds",
                _ => "milliseconds",
            };
        Ok(Self {
            side,
            field: conf.string("field").unwrap_or("").to_string(),
            target,
            format,
            precision,
            with_default: conf.replace_null_with_default()?,
        })
    }

    /// `value` (held as `from`) in ms since the epoch.
    fn to_millis(&self, value: &Value, from: Form) -> Result<i64, DataError> {
        match (from, value) {
            (Form::String, Value::String(text)) => {
                let format =
                    self.format.as_ref().ok_or_else(|| DataError::new("TimestampConverter needs format to read string timestamps"))?;
                format.parse(text).ok_or_else(|| {
                    DataError::new(format!("Could not parse timestamp: value ({text}) does not match pattern ({})", format.pattern))
                })
            }
            (Form::String, other) => {
                Err(DataError::new(format!("Expected string timestamp to be a String, but found class {}", java_class(other))))
            }
            (Form::Unix, Value::Int64(v)) => Ok(match self.precision {
                "seconds" => v.saturating_mul(1000),
                "microseconds" => v / 1000,
                "nanoseconds" => v / 1_000_000,
                _ => *v,
            }),
            (Form::Unix, other) => {
                Err(DataError::new(format!("Expected Unix timestamp to be a Long, but found class {}", java_class(other))))
            }
            (_, Value::Timestamp(ms)) => Ok(*ms),
            (_, Value::Date(days)) => Ok(i64::from(*days) * DAY_MS),
            (_, Value::Time(ms)) => Ok(i64::from(*ms)),
            (form, other) => Err(DataError::new(format!(
                "Expected {} to be a java.util.Date, but found class {}",
                match form {
                    Form::Date => "Date",
                    Form::Time => "Time",
                    _ => "Timestamp",
                },
                java_class(other)
            ))),
        }
    }

    /// `ms` as the target form.
    fn millis_as_target(&self, ms: i64) -> Value {
        match self.target {
            Form::String => Value::String(self.format.as_ref().map(|f| f.format(ms)).unwrap_or_default()),
            Form::Unix => Value::Int64(match self.precision {
                "seconds" => ms.div_euclid(1000),
                "microseconds" => ms.saturating_mul(1000),
                "nanoseconds" => ms.saturating_mul(1_000_000),
                _ => ms,
            }),
            Form::Date => Value::Date(ms.div_euclid(DAY_MS) as i32),
            Form::Time => Value::Time(ms.rem_euclid(DAY_MS) as i32),
            Form::Timestamp => Value::Timestamp(ms),
        }
    }

    fn convert(&self, value: &Value, from: Form) -> Result<Value, DataError> {
        if value.is_null() {
            return Ok(Value::Null);
        }
        Ok(self.millis_as_target(self.to_millis(value, from)?))
    }
}

impl Transform for TimestampConverter {
    fn apply(&self, record: Record) -> Result<Option<Record>, DataError> {
        let (schema, value) = record.operating(self.side);
        let (schema, value) = match (schema, self.field.is_empty()) {
            (Some(schema), true) => {
                let from = Form::of_schema(schema)?;
                (Some(self.target.schema(schema.optional)), self.convert(value, from)?)
            }
            (Some(schema), false) => {
                let mut fields = Vec::with_capacity(schema.fields().len());
                let mut from = None;
                for f in schema.fields() {
                    if f.name == self.field {
                        from = Some(Form::of_schema(&f.schema)?);
                        fields.push(crate::schema::Field::new(&f.name, self.target.schema(f.schema.optional)));
                    } else {
                        fields.push(f.clone());
                    }
                }
                let mut new_schema = copy_basics(schema, Kind::Struct(fields));
                new_schema.optional = schema.optional;
                let value = if value.is_null() {
                    Value::Null
                } else {
                    let values = require_struct(value, "converting timestamp formats")?;
                    let mut out = Vec::with_capacity(values.len());
                    for f in schema.fields() {
                        let v = field_value(values, schema, &f.name, self.with_default);
                        let v = match from {
                            Some(form) if f.name == self.field => self.convert(&v, form)?,
                            _ => v,
                        };
                        out.push((f.name.clone(), v));
                    }
                    Value::Struct(out)
                };
                (Some(new_schema), value)
            }
            (None, true) => (None, if value.is_null() { Value::Null } else { self.convert(value, Form::of_value(value)?)? }),
            (None, false) => {
                if value.is_null() {
                    (None, Value::Null)
                } else {
                    let entries = require_map(value, "converting timestamp formats")?;
                    let mut out = entries.to_vec();
                    let v = super::support::map_get(entries, &self.field).cloned().unwrap_or(Value::Null);
                    let converted = if v.is_null() { Value::Null } else { self.convert(&v, Form::of_value(&v)?)? };
                    map_put(&mut out, &self.field, converted);
                    (None, Value::Map(out))
                }
            }
        };
        Ok(Some(record.with(self.side, schema, value)))
    }
}

/// `TimestampRouter`.
pub struct TimestampRouter {
    topic_format: String,
    format: DateFormat,
}

impl TimestampRouter {
    /// From its keys.
    pub fn new(conf: &Conf<'_>) -> Result<Self, String> {
        let pattern = conf.string("timestamp.format").unwrap_or("yyyyMMdd");
        Ok(Self {
            topic_format: conf.string("topic.format").unwrap_or("${topic}-${timestamp}").to_string(),
            format: DateFormat::new(pattern).map_err(|e| invalid(pattern, "timestamp.format", &e))?,
        })
    }
}

impl Transform for TimestampRouter {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, DataError> {
        let ms = record.timestamp.ok_or_else(|| DataError::new(format!("Timestamp missing on record: topic '{}'", record.topic)))?;
        record.topic = self.topic_format.replace("${topic}", &record.topic).replace("${timestamp}", &self.format.format(ms));
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_format_and_parse_in_utc() {
        let f = DateFormat::new("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").expect("pattern");
        assert_eq!(f.format(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(f.parse("2023-11-14T22:13:20.123Z"), Some(1_700_000_000_123));
        assert_eq!(DateFormat::new("yyyyMMdd").expect("pattern").format(1_700_000_000_123), "20231114");
        assert_eq!(DateFormat::new("yyyyMMdd").expect("pattern").parse("20231114"), Some(1_699_920_000_000));
        let lenient = DateFormat::new("yyyy-MM-dd").expect("pattern");
        assert_eq!(
            lenient.parse("2024-13-45xyz").map(|ms| DateFormat::new("yyyy-MM-dd").expect("p").format(ms)),
            Some("2025-02-14".into())
        );
        assert_eq!(DateFormat::new("dd MMM yyyy").expect("pattern").format(0), "01 Jan 1970");
        // A year of five digits (or a negative one) keeps its month: no slicing of a text whose
        // widths moved.
        let year_10000 = snow_core::time::days_from_civil(10_000, 3, 4) * 86_400_000;
        assert_eq!(DateFormat::new("dd MMMM yyyy").expect("pattern").format(year_10000), "04 March 10000");
        assert_eq!(DateFormat::new("MMM").expect("pattern").format(i64::MIN / 2).len(), 3);
        // Untrusted text and patterns never panic: a name cut inside a character, a run too long
        // to format, fields too large to add up.
        assert_eq!(DateFormat::new("MMMM").expect("pattern").parse("Janua€x"), Some(0), "its first three letters name January");
        for (pattern, text) in [("MMM", "abé"), ("EEE", "abé"), ("yyyy-MM", "9223372036854775807-13")] {
            assert_eq!(DateFormat::new(pattern).expect("pattern").parse(text), None, "{pattern} {text}");
        }
        assert_eq!(DateFormat::new("yyyy-MM-dd").expect("pattern").parse("2024-01-99999999999999999999"), None);
        assert!(DateFormat::new("H a").expect("pattern").parse("9223372036854775807 PM").is_none());
        assert!(DateFormat::new(&"y".repeat(65_536)).unwrap_err().contains("repeated 65536 times"));
        assert!(DateFormat::new("yyyy-qq").is_err());
    }
}
