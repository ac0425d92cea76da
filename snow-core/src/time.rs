//! ServiceNow time: `YYYY-MM-DD HH:MM:SS` timestamps (UTC, one-second precision) and the
//! HTTP `Date` header that carries the server clock.
//!
//! A [`Timestamp`] is whole seconds since the Unix epoch. Conversions are done by hand (civil
//! calendar arithmetic) so `snow-core` needs no date crate and behaves the same in every host.

use std::fmt;

/// Whole seconds since 1970-01-01 00:00:00 UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

/// A string that is not a ServiceNow or HTTP date.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a valid {expected}: {value:?}")]
pub struct TimeParseError {
    expected: &'static str,
    value: String,
}

impl Timestamp {
    /// The Unix epoch, 1970-01-01 00:00:00.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// Parses ServiceNow's `YYYY-MM-DD HH:MM:SS` (UTC when display values are off).
    pub fn parse(text: &str) -> Result<Self, TimeParseError> {
        let err = || TimeParseError { expected: "ServiceNow timestamp (YYYY-MM-DD HH:MM:SS)", value: text.into() };
        let b = text.as_bytes();
        if b.len() != 19 || b[4] != b'-' || b[7] != b'-' || b[10] != b' ' || b[13] != b':' || b[16] != b':' {
            return Err(err());
        }
        // Digit by digit: this runs for every row read.
        let num = |range: std::ops::Range<usize>| -> Result<i64, TimeParseError> {
            b[range].iter().try_fold(0i64, |n, c| if c.is_ascii_digit() { Ok(n * 10 + i64::from(c - b'0')) } else { Err(err()) })
        };
        let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || s > 59 {
            return Err(err());
        }
        Ok(Self(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s))
    }

    /// Parses an HTTP-date in IMF-fixdate form (`Sun, 06 Nov 1994 08:49:37 GMT`).
    pub fn parse_http_date(text: &str) -> Result<Self, TimeParseError> {
        let err = || TimeParseError { expected: "HTTP date (IMF-fixdate)", value: text.into() };
        let parts: Vec<&str> = text.trim().split(' ').collect();
        if parts.len() != 6 || !parts[0].ends_with(',') || parts[5] != "GMT" {
            return Err(err());
        }
        let month = MONTHS.iter().position(|m| *m == parts[2]).ok_or_else(err)? + 1;
        let day: i64 = parts[1].parse().map_err(|_| err())?;
        let year: i64 = parts[3].parse().map_err(|_| err())?;
        let iso = format!("{year:04}-{month:02}-{day:02} {}", parts[4]);
        Self::parse(&iso).map_err(|_| err())
    }

    /// Formats as an HTTP-date (IMF-fixdate).
    pub fn to_http_date(self) -> String {
        let (y, mo, d, h, mi, s) = self.civil();
        let weekday = WEEKDAYS[(self.0.div_euclid(86_400) + 4).rem_euclid(7) as usize];
        format!("{weekday}, {d:02} {} {y:04} {h:02}:{mi:02}:{s:02} GMT", MONTHS[(mo - 1) as usize])
    }

    /// Milliseconds since the epoch (a Kafka record timestamp).
    pub fn as_millis(self) -> i64 {
        self.0.saturating_mul(1000)
    }

    /// This timestamp moved by `seconds` (negative moves back).
    pub fn plus_seconds(self, seconds: i64) -> Self {
        Self(self.0.saturating_add(seconds))
    }

    fn civil(self) -> (i64, i64, i64, i64, i64, i64) {
        let days = self.0.div_euclid(86_400);
        let secs = self.0.rem_euclid(86_400);
        let (y, mo, d) = civil_from_days(days);
        (y, mo, d, secs / 3600, secs % 3600 / 60, secs % 60)
    }
}

impl fmt::Display for Timestamp {
    /// ServiceNow form, `YYYY-MM-DD HH:MM:SS`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, mo, d, h, mi, s) = self.civil();
        write!(f, "{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}")
    }
}

const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const WEEKDAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date (year, month, day) `z` days after 1970-01-01 (H. Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { yoe + era * 400 + 1 } else { yoe + era * 400 }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_servicenow_format() {
        for text in ["1970-01-01 00:00:00", "2000-02-29 23:59:59", "2024-12-31 12:00:01", "1969-12-31 23:59:59"] {
            assert_eq!(Timestamp::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(Timestamp::parse("2024-01-01 00:00:01").unwrap().0, 1_704_067_201);
    }

    #[test]
    fn rejects_malformed_and_impossible_dates() {
        for bad in ["2024-02-30 00:00:00", "2023-02-29 00:00:00", "2024-01-01T00:00:00", "2024-1-01 00:00:00", "2024-01-01 24:00:00", ""] {
            assert!(Timestamp::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn http_date_round_trip() {
        let ts = Timestamp::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(ts.to_string(), "1994-11-06 08:49:37");
        assert_eq!(ts.to_http_date(), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert!(Timestamp::parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT").is_err());
    }
}
