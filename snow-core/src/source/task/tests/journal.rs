//! Journal entries: a sweep of `sys_journal_field` follows each finished sweep of the table, to
//! its own topic with its own position; the probe tells "none yet" from "hidden by the ACL".

use super::*;
use crate::source::journal::JOURNAL;

fn entry(id: &str, element: &str, parent: &str, ts: i64) -> String {
    format!(
        r#"{{"sys_id":"{id}","sys_created_on":"{}","sys_created_by":"ann","name":"incident","element":"{element}","element_id":"{parent}","value":"text {id}"}}"#,
        Timestamp(T0 + ts)
    )
}

fn with_journal(extra: &[(&str, &str)]) -> Entries {
    let mut pairs = vec![("snow.table.incident.journal", "comments, work_notes")];
    pairs.extend_from_slice(extra);
    entries(&pairs)
}

#[test]
fn a_finished_sweep_is_followed_by_one_of_journal_entries_to_their_own_topic() {
    let mut s = script(vec![
        page(&[]),
        page(&[row("a", 0, 0)]),
        // The journal's sweep: its drain, then its advance.
        page(&[]),
        page(&[entry("j1", "comments", "a", 5), entry("j2", "work_notes", "a", 6)]),
    ]);
    let mut task = SourceTask::open(&with_journal(&[]), &[], &mut s, ManualClock::default()).unwrap();
    task.poll().unwrap();
    let rows = task.poll().unwrap();
    assert_eq!((rows.topic.as_str(), rows.next_poll_ms), ("snow.incident", 0), "the journal's sweep follows at once");
    assert!(task.poll().unwrap().records.is_empty());
    let entries = task.poll().unwrap();
    assert_eq!(entries.topic, "snow.incident.journal");
    assert_eq!((entries.key_text(0), entries.key_text(1)), (Some("j1"), Some("j2")), "keyed by the entry");
    assert_eq!(entries.value(0), Some(entry("j1", "comments", "a", 5).as_bytes()), "the entry as read");
    assert_eq!(entries.records[1].timestamp_ms, Some(Timestamp(T0 + 6).as_millis()));
    assert!(entries.headers.iter().any(|h| h.key == "snow.source.table" && h.value == JOURNAL.as_bytes()));
    let offset = entries.offset.clone().unwrap();
    let fields = ["comments".to_string(), "work_notes".to_string()];
    assert_eq!(offset.partition, Partition::journal_of("acme.service-now.com", "incident", &fields).key());
    let interval = SourceConfig::parse(&with_journal(&[])).unwrap().tables[0].poll_interval_ms;
    assert_eq!(entries.next_poll_ms, interval, "then the poll interval");
    drop(task);
    assert!(s.queries[3].starts_with("name=incident^elementINcomments,work_notes^sys_created_on>"), "{}", s.queries[3]);
    assert!(s.urls[3].contains("/api/now/table/sys_journal_field?"), "{}", s.urls[3]);
    // A restart resumes the journal from its own offset.
    let task = SourceTask::open(&with_journal(&[]), &[rows.offset.clone().unwrap(), offset], &mut s, ManualClock::default()).unwrap();
    assert_eq!(task.journal().unwrap().cursor(), &Cursor { ts: Timestamp(T0 + 6), id: "j2".into() });
}

#[test]
fn deletes_and_journal_both_follow_before_the_poll_interval() {
    let mut s = script(vec![page(&[]), page(&[row("a", 0, 0)]), page(&[]), page(&[]), page(&[]), page(&[])]);
    let config = with_journal(&[("snow.table.incident.deletes", "true")]);
    let mut task = SourceTask::open(&config, &[], &mut s, ManualClock::default()).unwrap();
    let waits: Vec<u32> = (0..6).map(|_| task.poll().unwrap().next_poll_ms).collect();
    let interval = SourceConfig::parse(&config).unwrap().tables[0].poll_interval_ms;
    assert_eq!(waits, [0, 0, 0, 0, 0, interval], "table, deletes and journal sweeps, then the pause");
    drop(task);
    assert!(s.urls[3].contains("sys_audit_delete") && s.urls[5].contains("sys_journal_field"), "{:?}", s.urls);
}

#[test]
fn the_probe_tells_no_entries_from_entries_the_acl_hides_and_a_refused_read() {
    let probe = [("snow.startup.probe", "true")];
    // The table's probe, then the journal's.
    let mut s = script(vec![page(&[row("a", 0, 0)]), page_of(&[], 0)]);
    let mut task = SourceTask::open(&with_journal(&probe), &[], &mut s, ManualClock::default()).unwrap();
    task.poll().unwrap();
    task.poll().unwrap();
    let notes = task.take_notes();
    assert!(notes.iter().any(|n| n.info && n.message.contains("no journal entries (comments, work_notes) yet")), "{notes:?}");

    let mut s = script(vec![page(&[row("a", 0, 0)]), page_of(&[], 7)]);
    let mut task = SourceTask::open(&with_journal(&probe), &[], &mut s, ManualClock::default()).unwrap();
    task.poll().unwrap();
    let err = task.poll().unwrap_err().to_string();
    assert!(err.contains("snow.table.incident.journal") && err.contains("7 journal entries") && err.contains("read ACL hides"), "{err}");

    let mut s = script(vec![page(&[row("a", 0, 0)]), (403, r#"{"error":{"message":"Insufficient rights"}}"#.into(), None)]);
    let mut task = SourceTask::open(&with_journal(&probe), &[], &mut s, ManualClock::default()).unwrap();
    task.poll().unwrap();
    let err = task.poll().unwrap_err().to_string();
    assert!(err.contains("may not read sys_journal_field"), "{err}");
}

#[test]
fn the_journal_topic_is_a_configured_topic_and_snapshot_tables_have_no_journal() {
    let topics = crate::config::source::configured_topics(&with_journal(&[]));
    assert!(topics.contains("snow.incident.journal") && topics.contains("snow.incident"), "{topics:?}");
    let named = crate::config::source::configured_topics(&with_journal(&[("snow.table.incident.journal.topic", "itsm.notes")]));
    assert!(named.contains("itsm.notes"), "{named:?}");
    let snapshot = with_journal(&[("snow.table.incident.mode", "snapshot")]);
    assert!(SourceConfig::parse(&snapshot).unwrap_err().to_string().contains("snow.table.incident.journal:"));
}
