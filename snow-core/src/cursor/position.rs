//! A place in a table's stream and the name of the stream.

use serde::{Deserialize, Serialize};

use crate::config::TableConfig;
use crate::time::Timestamp;

/// A cursor: everything at or before `(ts, id)` has been read. Ordered by `ts`, then `id`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cursor {
    /// Timestamp field value, to the second.
    pub ts: Timestamp,
    /// Id field value; empty means "before every row of this second".
    pub id: String,
}

#[derive(Serialize, Deserialize)]
struct PositionJson {
    v: u32,
    ts: String,
    id: String,
    /// Versions another connector already wrote to the table's topic (a cutover's seed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    seen: Vec<(String, String, String)>,
}

/// A version `(timestamp, sys_id, sys_mod_count)` a stored position says was already written to
/// the topic: written by `snow-connect migrate cutover` from the old connector's records, so the
/// first re-read suppresses them as the dedup window suppresses this connector's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenVersion {
    /// The row's cursor timestamp.
    pub ts: Timestamp,
    /// Its id field.
    pub id: String,
    /// Its `sys_mod_count` (empty when the records carried none).
    pub mod_count: String,
}

impl Cursor {
    /// The cursor before every row of second `ts`.
    pub fn before(ts: Timestamp) -> Self {
        Self { ts, id: String::new() }
    }

    /// Where a sweep from this furthest position starts: `overlap` seconds before it, never before
    /// the stream's `start`, and exactly here when nothing was read yet (or without overlap).
    pub fn overlap_start(&self, start: Timestamp, overlap: i64) -> Self {
        if overlap == 0 || *self == Self::before(start) {
            return self.clone();
        }
        Self::before(self.ts.plus_seconds(-overlap).max(start))
    }

    /// The stored form, `{"v":1,"ts":"YYYY-MM-DD HH:MM:SS","id":"..."}`.
    pub fn to_position(&self) -> String {
        self.to_position_with(&[])
    }

    /// [`Self::to_position`] carrying versions already written by another connector.
    pub fn to_position_with(&self, seen: &[SeenVersion]) -> String {
        let seen = seen.iter().map(|v| (v.ts.to_string(), v.id.clone(), v.mod_count.clone())).collect();
        let json = PositionJson { v: 1, ts: self.ts.to_string(), id: self.id.clone(), seen };
        serde_json::to_string(&json).unwrap_or_default()
    }

    /// Reads a stored position; the error says what is wrong with it.
    pub fn from_position(text: &str) -> Result<Self, String> {
        Self::from_position_with_seen(text).map(|(cursor, _)| cursor)
    }

    /// Reads a stored position and the versions it carries (none for the positions a connector
    /// writes; a cutover's seed otherwise).
    pub fn from_position_with_seen(text: &str) -> Result<(Self, Vec<SeenVersion>), String> {
        let version: VersionJson = serde_json::from_str(text).map_err(|e| format!("stored position {text:?} is not readable: {e}"))?;
        if version.v == 2 {
            return Err("stored position is a parallel backfill's (version 2), not a single cursor".into());
        }
        if version.v != 1 {
            return Err(format!("stored position has version {}, this connector reads versions 1, 2 and 3", version.v));
        }
        let json: PositionJson = serde_json::from_str(text).map_err(|e| format!("stored position {text:?} is not readable: {e}"))?;
        let ts = Timestamp::parse(&json.ts).map_err(|e| format!("stored position: {e}"))?;
        let seen = json
            .seen
            .into_iter()
            .map(|(ts, id, mod_count)| {
                let ts = Timestamp::parse(&ts).map_err(|e| format!("stored position, seen version of {id}: {e}"))?;
                Ok(SeenVersion { ts, id, mod_count })
            })
            .collect::<Result<_, String>>()?;
        Ok((Self { ts, id: json.id }, seen))
    }
}

/// A stored position: a cursor (`"v":1`), a parallel backfill in progress (`"v":2`, ADR 0033),
/// or a table read by snapshots (`"v":3`, ADR 0035).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// Everything at or before the cursor was read; versions another connector already wrote.
    Cursor(Cursor, Vec<SeenVersion>),
    /// A parallel backfill: what its unfinished slices still have to read.
    Backfill(BackfillPosition),
    /// A table read by snapshots: when the last finished one started (ServiceNow's clock), if any
    /// finished. What the topic holds is read back from it, not stored here.
    Snapshot(Option<Timestamp>),
}

#[derive(Serialize, Deserialize)]
struct SnapshotJson {
    v: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    finished: Option<String>,
}

/// The stored form of a snapshot table's position, `{"v":3,"finished":"…"}`.
pub fn snapshot_position(finished: Option<Timestamp>) -> String {
    serde_json::to_string(&SnapshotJson { v: 3, finished: finished.map(|t| t.to_string()) }).unwrap_or_default()
}

/// A parallel backfill's stored state: every row up to `end` was read but for the rest of each
/// slice listed (finished slices are not listed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackfillPosition {
    /// The last second the backfill reads (the high-water mark when it was planned); the
    /// streaming cursor goes on after it.
    pub end: Timestamp,
    /// The unfinished slices.
    pub slices: Vec<SlicePosition>,
    /// The versions already emitted in the overlap before `end` (the backfill's tail): what the
    /// single cursor's first sweep must not emit again, whichever run emitted them.
    pub seen: Vec<SeenVersion>,
}

/// One unfinished slice: it has read everything at or before `cursor` in its range, and reads on
/// up to the end of second `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlicePosition {
    /// Where the slice has got to.
    pub cursor: Cursor,
    /// The slice's last second.
    pub to: Timestamp,
}

/// Only the version of a stored position.
#[derive(Deserialize)]
struct VersionJson {
    v: u32,
}

#[derive(Serialize, Deserialize)]
struct BackfillJson {
    v: u32,
    end: String,
    /// `[ts, id, to]` per unfinished slice.
    slices: Vec<(String, String, String)>,
    /// `[ts, id, mod_count]` per version emitted in the tail.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    seen: Vec<(String, String, String)>,
}

impl Position {
    /// Reads a stored position of either version; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let version: VersionJson = serde_json::from_str(text).map_err(|e| format!("stored position {text:?} is not readable: {e}"))?;
        if version.v == 3 {
            let json: SnapshotJson =
                serde_json::from_str(text).map_err(|e| format!("stored snapshot position {text:?} is not readable: {e}"))?;
            let finished = json.finished.map(|t| Timestamp::parse(&t)).transpose().map_err(|e| format!("stored snapshot position: {e}"))?;
            return Ok(Self::Snapshot(finished));
        }
        if version.v != 2 {
            return Cursor::from_position_with_seen(text).map(|(cursor, seen)| Self::Cursor(cursor, seen));
        }
        let json: BackfillJson =
            serde_json::from_str(text).map_err(|e| format!("stored backfill position {text:?} is not readable: {e}"))?;
        let ts = |t: &str| Timestamp::parse(t).map_err(|e| format!("stored backfill position: {e}"));
        let end = ts(&json.end)?;
        let slices = json
            .slices
            .iter()
            .map(|(at, id, to)| Ok(SlicePosition { cursor: Cursor { ts: ts(at)?, id: id.clone() }, to: ts(to)? }))
            .collect::<Result<Vec<_>, String>>()?;
        let seen = json
            .seen
            .iter()
            .map(|(at, id, mod_count)| Ok(SeenVersion { ts: ts(at)?, id: id.clone(), mod_count: mod_count.clone() }))
            .collect::<Result<Vec<_>, String>>()?;
        if let Some(bad) = slices.iter().find(|s| s.to > end || s.cursor.ts > s.to.plus_seconds(1)) {
            return Err(format!(
                "stored backfill position: a slice at {} {:?} ending at {} lies outside the backfill (end {end})",
                bad.cursor.ts, bad.cursor.id, bad.to
            ));
        }
        Ok(Self::Backfill(BackfillPosition { end, slices, seen }))
    }
}

impl BackfillPosition {
    /// The stored form, `{"v":2,"end":"…","slices":[["ts","id","to"],…],"seen":[["ts","id","mod"],…]}`.
    pub fn to_position(&self) -> String {
        let slices = self.slices.iter().map(|s| (s.cursor.ts.to_string(), s.cursor.id.clone(), s.to.to_string())).collect();
        let seen = self.seen.iter().map(|v| (v.ts.to_string(), v.id.clone(), v.mod_count.clone())).collect();
        serde_json::to_string(&BackfillJson { v: 2, end: self.end.to_string(), slices, seen }).unwrap_or_default()
    }
}

/// The identity of one table's stream. Offsets are stored under it, so a changed query, id or
/// timestamp field is never resumed from a cursor that belonged to another stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    /// Instance host (`acme.service-now.com`).
    pub instance: String,
    /// Table or view.
    pub table: String,
    /// Timestamp field the cursor walks.
    pub timestamp_field: String,
    /// Hash of everything that decides which rows the stream holds and in what order.
    pub fingerprint: String,
    /// Which of the table's streams: empty for its rows along the cursor, `deletes` for its deletes
    /// (read from `sys_audit_delete`), `snapshot` for its rows read by snapshots. Left out of the
    /// key when empty, so rows' keys stay as they were.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stream: String,
}

/// The [`Partition::stream`] of a table's deletes.
pub const DELETES_STREAM: &str = "deletes";

/// The [`Partition::stream`] of a table's journal entries (`sys_journal_field`).
pub const JOURNAL_STREAM: &str = "journal";

/// The [`Partition::stream`] of a table's attachments (`sys_attachment`).
pub const ATTACHMENTS_STREAM: &str = "attachments";

/// The [`Partition::stream`] of a table read by snapshots (`mode=snapshot`): its positions are
/// never a cursor's, and switching modes starts the other stream afresh.
pub const SNAPSHOT_STREAM: &str = "snapshot";

impl Partition {
    /// The partition of `table` on `instance`.
    pub fn of(instance: &str, table: &TableConfig) -> Self {
        let domain = match table.query_domain {
            crate::config::source::QueryDomain::Session => "",
            crate::config::source::QueryDomain::All => "\u{0}all-domains",
        };
        let canonical = format!("{}\u{0}{}\u{0}{}{domain}", table.query.canonical(), table.sys_id_field, table.timestamp_field);
        Self {
            instance: instance.to_string(),
            table: table.name.clone(),
            timestamp_field: table.timestamp_field.clone(),
            fingerprint: format!("{:016x}", fnv1a64(canonical.as_bytes())),
            stream: match table.mode {
                crate::config::source::TableMode::Cursor => String::new(),
                crate::config::source::TableMode::Snapshot => SNAPSHOT_STREAM.into(),
            },
        }
    }

    /// The partition of `table`'s deletes on `instance`: `sys_audit_delete` rows naming the
    /// table, walked by `sys_created_on` (whatever the table's own query: a delete is emitted for
    /// every audited delete of the table).
    pub fn deletes_of(instance: &str, table: &str) -> Self {
        Self {
            instance: instance.to_string(),
            table: table.to_string(),
            timestamp_field: "sys_created_on".into(),
            fingerprint: format!("{:016x}", fnv1a64(format!("sys_audit_delete\u{0}tablename={table}").as_bytes())),
            stream: DELETES_STREAM.into(),
        }
    }

    /// The partition of `table`'s journal entries of `elements` on `instance`: `sys_journal_field`
    /// rows naming the table and one of the fields, walked by `sys_created_on`.
    pub fn journal_of(instance: &str, table: &str, elements: &[String]) -> Self {
        Self {
            instance: instance.to_string(),
            table: table.to_string(),
            timestamp_field: "sys_created_on".into(),
            fingerprint: format!(
                "{:016x}",
                fnv1a64(format!("sys_journal_field\u{0}name={table}^elementIN{}", elements.join(",")).as_bytes())
            ),
            stream: JOURNAL_STREAM.into(),
        }
    }

    /// The partition of `table`'s attachments on `instance`: `sys_attachment` rows naming the
    /// table, walked by `sys_updated_on`.
    pub fn attachments_of(instance: &str, table: &str) -> Self {
        Self {
            instance: instance.to_string(),
            table: table.to_string(),
            timestamp_field: "sys_updated_on".into(),
            fingerprint: format!("{:016x}", fnv1a64(format!("sys_attachment\u{0}table_name={table}").as_bytes())),
            stream: ATTACHMENTS_STREAM.into(),
        }
    }

    /// The stored key: compact JSON with a fixed member order.
    pub fn key(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads a stored key; `None` if it is not one of ours.
    pub fn from_key(key: &str) -> Option<Self> {
        serde_json::from_str(key).ok()
    }

    /// True when `other` is the same stream of the same table on the same instance, whatever its query.
    pub fn same_table(&self, other: &Partition) -> bool {
        self.instance == other.instance && self.table == other.table && self.stream == other.stream
    }
}

/// FNV-1a, 64 bit: stable across platforms and releases, which a stored fingerprint needs.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::BaseQuery;

    fn table(query: &str) -> TableConfig {
        TableConfig {
            name: "incident".into(),
            topic: "t".into(),
            timestamp_field: "sys_updated_on".into(),
            sys_id_field: "sys_id".into(),
            query: BaseQuery::parse(query).unwrap(),
            fields: None,
            start: Timestamp::EPOCH,
            batch_size: 10,
            hidden_window_max_rows: 10,
            hidden_scan_max_rows: 10,
            poll_interval_ms: 10,
            display_value: crate::table::DisplayValue::Raw,
            exclude_reference_link: false,
            query_domain: crate::config::source::QueryDomain::Session,
            query_category: None,
            deletes: None,
            backfill_parallelism: 1,
            mode: crate::config::source::TableMode::Cursor,
            snapshot_interval_ms: crate::config::source::DEFAULT_SNAPSHOT_INTERVAL_MS,
            journal: Vec::new(),
            journal_topic: "snow.incident.journal".into(),
            attachments: false,
            attachments_topic: "snow.incident.attachments".into(),
            attachments_max_bytes: crate::config::source::DEFAULT_ATTACHMENTS_MAX_BYTES,
        }
    }

    #[test]
    fn positions_round_trip_and_order() {
        let a = Cursor { ts: Timestamp(10), id: "b".into() };
        assert_eq!(Cursor::from_position(&a.to_position()).unwrap(), a);
        assert!(Cursor::before(Timestamp(10)) < a);
        assert!(a < Cursor { ts: Timestamp(10), id: "c".into() });
        assert!(a < Cursor::before(Timestamp(11)));
        assert!(Cursor::from_position(r#"{"v":3,"ts":"x","id":""}"#).unwrap_err().contains("version 3"));
    }

    #[test]
    fn fingerprint_follows_the_query() {
        let a = Partition::of("acme", &table("active=true"));
        let b = Partition::of("acme", &table("active=false"));
        assert_ne!(a.fingerprint, b.fingerprint);
        assert!(a.same_table(&b));
        assert_eq!(a, Partition::of("acme", &table("active=true")));
        assert_eq!(Partition::from_key(&a.key()), Some(a.clone()));
        assert!(!a.key().contains("stream"), "a table's rows keep the key they always had: {}", a.key());
        let deletes = Partition::deletes_of("acme", "incident");
        assert!(!deletes.same_table(&a) && deletes.key().contains(r#""stream":"deletes""#));
        assert_eq!(Partition::from_key(&deletes.key()), Some(deletes));
    }
}
