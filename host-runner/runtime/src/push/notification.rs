//! What a notification names: `{"table": …, "sys_id": …, "sys_updated_on": …}` (or a list of
//! them, as a rule that batches posts), the body at most [`MAX_BODY_BYTES`]. Only the table and
//! the stamp are used; `sys_id` is for the operator's logs.

use serde::Deserialize;
use snow_core::time::Timestamp;

use super::Refusal;

/// The largest body accepted (a batch of about 500 notifications).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// One row's change, as the business rule posts it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Notification {
    /// The table written.
    pub table: String,
    /// The row written (not used to read anything).
    #[serde(default)]
    pub sys_id: String,
    /// The row's `sys_updated_on` after the write (UTC).
    pub sys_updated_on: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Body {
    One(Notification),
    Many(Vec<Notification>),
}

/// The latest stamp per table a body names, refusing bodies too large, not JSON, without a table
/// or with an unreadable stamp.
pub fn read(body: &[u8]) -> Result<Vec<(String, Timestamp)>, Refusal> {
    if body.len() > MAX_BODY_BYTES {
        return Err(Refusal::TooLarge);
    }
    let all = match serde_json::from_slice::<Body>(body).map_err(|_| Refusal::Malformed)? {
        Body::One(n) => vec![n],
        Body::Many(list) => list,
    };
    let mut latest: Vec<(String, Timestamp)> = Vec::new();
    for n in all {
        if n.table.is_empty() {
            return Err(Refusal::Malformed);
        }
        let ts = Timestamp::parse(&n.sys_updated_on).map_err(|_| Refusal::Malformed)?;
        match latest.iter_mut().find(|(t, _)| *t == n.table) {
            Some((_, at)) => *at = (*at).max(ts),
            None => latest.push((n.table, ts)),
        }
    }
    if latest.is_empty() {
        return Err(Refusal::Malformed);
    }
    Ok(latest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_or_many_notifications_give_each_tables_latest_stamp() {
        let one = br#"{"table":"incident","sys_id":"a1","sys_updated_on":"2026-12-04 10:00:00"}"#;
        assert_eq!(read(one).unwrap(), [("incident".to_string(), Timestamp::parse("2026-12-04 10:00:00").unwrap())]);
        let many = br#"[{"table":"incident","sys_updated_on":"2026-12-04 10:00:00"},{"table":"problem","sys_updated_on":"2026-12-04 09:00:00"},{"table":"incident","sys_updated_on":"2026-12-04 10:00:07"}]"#;
        let read = read(many).unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!(read[0], ("incident".to_string(), Timestamp::parse("2026-12-04 10:00:07").unwrap()));
    }

    #[test]
    fn what_is_not_a_notification_is_refused_as_such() {
        for bad in [
            &b"not json"[..],
            b"{}",
            br#"{"table":"","sys_updated_on":"2026-12-04 10:00:00"}"#,
            br#"{"table":"incident","sys_updated_on":"soon"}"#,
            b"[]",
        ] {
            assert_eq!(read(bad), Err(Refusal::Malformed), "{}", String::from_utf8_lossy(bad));
        }
        let huge = vec![b' '; MAX_BODY_BYTES + 1];
        assert_eq!(read(&huge), Err(Refusal::TooLarge));
    }
}
