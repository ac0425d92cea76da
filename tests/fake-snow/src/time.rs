//! Time formats the fake speaks: ServiceNow's `YYYY-MM-DD HH:MM:SS` and the HTTP `Date` header.
//! Written independently of snow-core on purpose.

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS` (UTC).
pub fn format_ts(secs: i64) -> String {
    let (y, m, d) = civil(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", s / 3600, s % 3600 / 60, s % 60)
}

/// Parses `YYYY-MM-DD HH:MM:SS` (UTC).
pub fn parse_ts(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() != 19 {
        return None;
    }
    let n = |r: std::ops::Range<usize>| text.get(r).and_then(|s| s.parse::<i64>().ok());
    let (y, mo, d, h, mi, s) = (n(0..4)?, n(5..7)?, n(8..10)?, n(11..13)?, n(14..16)?, n(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 59 {
        return None;
    }
    Some(days(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s)
}

/// Seconds since the epoch as an IMF-fixdate HTTP date.
pub fn http_date(secs: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let day = secs.div_euclid(86_400);
    let (y, m, d) = civil(day);
    let s = secs.rem_euclid(86_400);
    format!(
        "{}, {d:02} {} {y:04} {:02}:{:02}:{:02} GMT",
        DAYS[day.rem_euclid(7) as usize],
        MONTHS[(m - 1) as usize],
        s / 3600,
        s % 3600 / 60,
        s % 60
    )
}

fn days(y: i64, m: i64, d: i64) -> i64 {
    // Days from 1970-01-01, by counting months from March (so the leap day comes last).
    let (y, m) = if m <= 2 { (y - 1, m + 12) } else { (y, m) };
    let era_days = 365 * y + y.div_euclid(4) - y.div_euclid(100) + y.div_euclid(400);
    era_days + (153 * (m - 3) + 2) / 5 + d - 1 - 719_468
}

fn civil(day: i64) -> (i64, i64, i64) {
    let mut lo = 1i64;
    let mut hi = 10_000i64;
    // Binary search the year, then walk months: clarity over speed; the fake formats few dates.
    while lo < hi {
        let mid = (lo + hi + 1) / 2;
        if days(mid, 1, 1) <= day { lo = mid } else { hi = mid - 1 }
    }
    let y = lo;
    let mut m = 12;
    while days(y, m, 1) > day {
        m -= 1;
    }
    (y, m, day - days(y, m, 1) + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(format_ts(0), "1970-01-01 00:00:00");
        assert_eq!(format_ts(951_825_600), "2000-02-29 12:00:00");
        assert_eq!(parse_ts("2024-01-01 00:00:01"), Some(1_704_067_201));
        assert_eq!(http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        for secs in [0, 86_399, 1_704_067_201, 4_102_444_800] {
            assert_eq!(parse_ts(&format_ts(secs)), Some(secs));
        }
    }
}
