//! Snapshots (ADR 0035): reading the whole table by its id field, emitting what the topic does
//! not hold yet, tombstones for what is gone, and keeping to the interval across restarts.

use super::*;
use crate::source::snapshot::{HASH_HEADER, ID_HEADER, content_hash, hash_text, seed_partition, seed_text};

fn view_row(id: &str, name: &str) -> String {
    format!(r#"{{"sys_id":"{id}","name":"{name}"}}"#)
}

fn snapshot_entries(extra: &[(&str, &str)]) -> Entries {
    let mut pairs = vec![("snow.table.incident.mode", "snapshot"), ("snow.table.incident.snapshot.interval.ms", "1000000")];
    pairs.extend_from_slice(extra);
    entries(&pairs)
}

fn key() -> String {
    Partition::of("acme.service-now.com", &SourceConfig::parse(&snapshot_entries(&[])).unwrap().tables[0]).key()
}

/// The topic's read-back as the host hands it over: `rows` with the hashes of their JSON.
fn seed(rows: &[(&str, &str)]) -> SourceOffset {
    let hashed: Vec<(&str, u64)> = rows.iter().map(|(id, json)| (*id, content_hash(json.as_bytes()))).collect();
    SourceOffset { partition: seed_partition(&key()), position: seed_text(hashed) }
}

#[test]
fn a_first_snapshot_emits_every_row_by_id_then_stores_when_it_started() {
    let mut s = script(vec![page(&[view_row("a", "x"), view_row("b", "y")]), page(&[view_row("c", "z")]), page(&[])]);
    let mut task = SourceTask::open(&snapshot_entries(&[]), &[seed(&[])], &mut s, ManualClock::default()).unwrap();
    let first = task.poll().unwrap();
    assert_eq!((first.key_text(0), first.key_text(1)), (Some("a"), Some("b")));
    let hash = hash_text(content_hash(view_row("a", "x").as_bytes()));
    assert_eq!(first.record_headers_of(0), [(ID_HEADER.to_string(), "a".to_string()), (HASH_HEADER.to_string(), hash)]);
    assert_eq!(first.records[0].timestamp_ms, Some(Timestamp(T0 + 100).as_millis()), "stamped with the snapshot's start");
    let offset = first.offset.clone().unwrap();
    assert_eq!((offset.partition.as_str(), offset.position.as_str()), (key().as_str(), r#"{"v":3}"#), "nothing finished yet");
    assert_eq!(first.next_poll_ms, 0);
    assert_eq!(task.poll().unwrap().records.len(), 1);
    let end = task.poll().unwrap();
    assert!(end.records.is_empty() && end.offset.is_none(), "the empty page ends the read");
    let done = task.poll().unwrap();
    assert!(done.records.is_empty());
    let stored = done.offset.clone().unwrap().position;
    assert_eq!(Position::parse(&stored).unwrap(), Position::Snapshot(Some(Timestamp(T0 + 100))));
    assert_eq!(done.next_poll_ms, 1_000_000, "the next snapshot an interval after this one started");
    assert_eq!(task.snapshots().unwrap().held(), 3);
    let notes = task.take_notes();
    assert!(notes.iter().any(|n| n.info && n.message.contains("3 rows in 3 requests: 3 new or changed, 0 gone")), "{notes:?}");
    drop(task);
    assert_eq!(s.queries, ["ORDERBYsys_id", "sys_id>b^ORDERBYsys_id", "sys_id>c^ORDERBYsys_id"]);
}

#[test]
fn only_new_and_changed_rows_are_emitted_and_keys_gone_become_tombstones() {
    let (a, b) = (view_row("a", "x"), view_row("b", "y"));
    let held = seed(&[("a", &a), ("b", r#"{"sys_id":"b","name":"old"}"#), ("k", "{}"), ("z", "{}")]);
    let mut s = script(vec![page(&[a.clone(), b]), page(&[view_row("c", "new")]), page(&[])]);
    let config = snapshot_entries(&[("snow.batch.size", "2")]);
    let mut task = SourceTask::open(&config, &[held], &mut s, ManualClock::default()).unwrap();
    let first = task.poll().unwrap();
    assert_eq!((first.records.len(), first.key_text(0)), (1, Some("b")), "a is unchanged, b changed");
    assert_eq!(task.poll().unwrap().key_text(0), Some("c"));
    assert!(task.poll().unwrap().records.is_empty());
    let gone = task.poll().unwrap();
    assert_eq!(gone.records.len(), 2);
    assert_eq!((gone.key_text(0), gone.key_text(1)), (Some("k"), Some("z")));
    assert!(gone.records.iter().all(|r| r.value.is_none()), "tombstones");
    assert!(gone.headers.iter().any(|h| h.key == "snow.source.operation" && h.value == b"DELETE"));
    assert_eq!(gone.record_headers_of(1), [(ID_HEADER.to_string(), "z".to_string())]);
    assert_eq!(Position::parse(&gone.offset.clone().unwrap().position).unwrap(), Position::Snapshot(Some(Timestamp(T0 + 100))));
    assert_eq!(task.snapshots().unwrap().held(), 3, "a, b and c");
    let counts = task.snapshots().unwrap().counts();
    assert_eq!((counts.read, counts.emitted, counts.deleted), (3, 2, 2));
}

#[test]
fn a_page_of_hidden_rows_is_crossed_by_offset_when_the_instance_counts_more() {
    // Two rows asked, none readable, five match: the same keyset is asked again further on.
    let mut s = script(vec![page(&[view_row("a", "x")]), page_of(&[], 5), page_of(&[view_row("q", "x")], 3), page(&[])]);
    let config = snapshot_entries(&[]);
    let mut task = SourceTask::open(&config, &[seed(&[])], &mut s, ManualClock::default()).unwrap();
    for _ in 0..4 {
        task.poll().unwrap();
    }
    drop(task);
    assert!(!s.urls[1].contains("sysparm_offset"), "{}", s.urls[1]);
    assert!(s.urls[2].contains("sysparm_offset=2"), "{}", s.urls[2]);
    assert_eq!(s.queries[1..], ["sys_id>a^ORDERBYsys_id", "sys_id>a^ORDERBYsys_id", "sys_id>q^ORDERBYsys_id"]);
}

#[test]
fn a_restart_within_the_interval_waits_out_the_rest_of_it() {
    let stored = SourceOffset { partition: key(), position: crate::cursor::position::snapshot_position(Some(Timestamp(T0 + 40))) };
    let mut s = script(vec![page(&[view_row("a", "x")]), page(&[view_row("a", "x")]), page(&[])]);
    let mut task = SourceTask::open(&snapshot_entries(&[]), &[stored, seed(&[])], &mut s, ManualClock::default()).unwrap();
    let wait = task.poll().unwrap();
    assert!(wait.records.is_empty() && wait.offset.is_none());
    assert_eq!(wait.next_poll_ms, 1_000_000 - 60_000, "started 60 s ago by ServiceNow's clock");
    let next = task.poll().unwrap();
    assert_eq!(next.key_text(0), Some("a"), "then the snapshot runs");
}

#[test]
fn a_stored_snapshot_without_the_topics_read_back_is_refused_naming_the_mode() {
    let stored = SourceOffset { partition: key(), position: crate::cursor::position::snapshot_position(Some(Timestamp(T0))) };
    let mut s = script(vec![]);
    let Err(e) = SourceTask::open(&snapshot_entries(&[]), &[stored], &mut s, ManualClock::default()) else { panic!("refused") };
    let text = e.to_string();
    assert!(text.contains("snow.table.incident.mode") && text.contains("read-back"), "{text}");
}

#[test]
fn snapshot_mode_refuses_cursor_only_keys_and_needs_no_timestamp_field() {
    let fields = snapshot_entries(&[("snow.table.incident.fields", "sys_id,name")]);
    assert!(SourceConfig::parse(&fields).is_ok(), "no timestamp field to list");
    let both = snapshot_entries(&[("snow.table.incident.deletes", "true"), ("snow.table.incident.backfill.parallelism", "4")]);
    let err = SourceConfig::parse(&both).unwrap_err().to_string();
    assert!(err.contains("snow.table.incident.deletes:") && err.contains("snow.table.incident.backfill.parallelism:"), "{err}");
}

#[test]
fn the_probe_of_a_table_without_its_timestamp_points_at_snapshot_mode() {
    let mut s = script(vec![page(&[view_row("a", "x")])]);
    let config = entries(&[("snow.startup.probe", "true")]);
    let mut task = SourceTask::open(&config, &[], &mut s, ManualClock::default()).unwrap();
    let err = task.poll().unwrap_err().to_string();
    assert!(err.contains("snow.table.incident.mode=snapshot"), "{err}");
    let mut s = script(vec![page(&[view_row("a", "x")]), page(&[])]);
    let config = snapshot_entries(&[("snow.startup.probe", "true")]);
    let mut task = SourceTask::open(&config, &[seed(&[])], &mut s, ManualClock::default()).unwrap();
    task.poll().unwrap();
    drop(task);
    assert_eq!(s.queries[0], "ORDERBYsys_id", "a snapshot's probe orders by the id field");
}

#[test]
fn a_topic_holding_more_keys_than_the_memory_cap_allows_is_refused_naming_the_cap() {
    let many: Vec<(String, String)> = (0..200_000).map(|i| (format!("{i:032x}"), "{}".to_string())).collect();
    let rows: Vec<(&str, &str)> = many.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let small = [("snow.dedup.window.size", "1000"), ("snow.hidden.window.max.rows", "2")];
    let config = snapshot_entries(&[small[0], small[1], ("component.memory.max.bytes", "33554432")]);
    let mut s = script(vec![]);
    let Err(e) = SourceTask::open(&config, &[seed(&rows)], &mut s, ManualClock::default()) else { panic!("refused") };
    let text = e.to_string();
    assert!(text.contains("component.memory.max.bytes") && text.contains("200000 keys"), "{text}");
    let roomy = snapshot_entries(&[small[0], small[1], ("component.memory.max.bytes", "268435456")]);
    assert!(SourceTask::open(&roomy, &[seed(&rows)], &mut s, ManualClock::default()).is_ok());
}

#[test]
fn a_failed_poll_mid_snapshot_reads_the_same_page_again_and_loses_no_change() {
    let (a, b) = (view_row("a", "x"), view_row("b", "new"));
    let held = seed(&[("a", &a), ("b", r#"{"sys_id":"b","name":"old"}"#)]);
    let broken = (200, r#"{"result":[{"sys_id":"c""#.to_string(), Some(1));
    let mut s = script(vec![page(std::slice::from_ref(&a)), broken, page(std::slice::from_ref(&b)), page(&[])]);
    let config = snapshot_entries(&[("snow.batch.size", "1")]);
    let mut task = SourceTask::open(&config, &[held], &mut s, ManualClock::default()).unwrap();
    assert!(task.poll().unwrap().records.is_empty(), "a is unchanged");
    assert_eq!(task.poll().unwrap_err().class(), ErrorClass::Transient, "a page cut short");
    let again = task.poll().unwrap();
    assert_eq!(again.key_text(0), Some("b"), "the same page asked again, its change emitted");
    assert!(task.poll().unwrap().records.is_empty());
    let done = task.poll().unwrap();
    assert_eq!(done.offset.map(|o| o.position), Some(crate::cursor::position::snapshot_position(Some(Timestamp(T0 + 100)))));
    assert_eq!(task.snapshots().unwrap().counts().read, 2, "each row counted once");
    drop(task);
    assert_eq!(s.queries[1], s.queries[2], "the failed page's request made again");
}
