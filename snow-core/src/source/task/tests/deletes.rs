//! Deletes (ADR 0031): the second cursor over `sys_audit_delete`, its cap, tombstones and
//! records, rows created again, and its probe.

use super::*;
use crate::config::source::DeleteFormat;
use crate::source::deletes::{DELETED_BY_HEADER, DELETED_ON_HEADER, DeleteStream};
use crate::source::follower::{FollowerSettings as DeleteSettings, Follows};

fn audit(id: &str, key: &str, ts: i64) -> String {
    format!(r#"{{"sys_id":"{id}","sys_created_on":"{}","sys_created_by":"bob","documentkey":"{key}"}}"#, Timestamp(T0 + ts))
}

fn with_deletes(extra: &[(&str, &str)]) -> Entries {
    let mut pairs = vec![("snow.table.incident.deletes", "true")];
    pairs.extend_from_slice(extra);
    entries(&pairs)
}

#[test]
fn a_finished_sweep_is_followed_by_one_of_deletes_whose_tombstones_carry_who_and_when() {
    let mut s = script(vec![
        page(&[]),
        page(&[row("a", 0, 0), row("c", 1, 2)]),
        // The deletes' sweep: its drain, then its advance.
        page(&[]),
        page(&[audit("x1", "a", 50), audit("x2", "c", 60)]),
        // Which of a and c exist again: c was created again.
        page(&[row("c", 70, 0)]),
    ]);
    let mut task = SourceTask::open(&with_deletes(&[]), &[], &mut s, ManualClock::default()).unwrap();
    task.poll().unwrap();
    let rows = task.poll().unwrap();
    assert_eq!(rows.records.len(), 2);
    assert_eq!(rows.next_poll_ms, 0, "the deletes' sweep follows at once");
    assert!(task.poll().unwrap().records.is_empty());
    let deletes = task.poll().unwrap();
    assert_eq!(deletes.records.len(), 1, "no tombstone for the row created again");
    assert_eq!(deletes.key_text(0), Some("a"));
    assert_eq!(deletes.records[0].value, None, "a tombstone");
    assert_eq!(deletes.records[0].timestamp_ms, Some(Timestamp(T0 + 50).as_millis()));
    assert_eq!(
        deletes.record_headers_of(0),
        [(DELETED_BY_HEADER.to_string(), "bob".to_string()), (DELETED_ON_HEADER.to_string(), Timestamp(T0 + 50).to_string())]
    );
    assert!(deletes.headers.iter().any(|h| h.key == "snow.source.operation" && h.value == b"DELETE"));
    let offset = deletes.offset.clone().unwrap();
    assert_eq!(offset.partition, Partition::deletes_of("acme.service-now.com", "incident").key());
    let (cursor, seen) = Cursor::from_position_with_seen(&offset.position).unwrap();
    assert_eq!(cursor, Cursor { ts: Timestamp(T0 + 60), id: "x2".into() });
    let seen: Vec<(&str, &str)> = seen.iter().map(|v| (v.id.as_str(), v.mod_count.as_str())).collect();
    // No overlap in these tests: only the cursor's own second is read again.
    assert_eq!(seen, [("c", "")], "the position carries what the next sweep reads again");
    let interval = SourceConfig::parse(&with_deletes(&[])).unwrap().tables[0].poll_interval_ms;
    assert_eq!(deletes.next_poll_ms, interval, "then the poll interval");
    assert_eq!(task.deletes().unwrap().restored(), 1);
    drop(task);
    assert!(s.queries[3].starts_with("tablename=incident^sys_created_on>"), "{}", s.queries[3]);
    assert!(s.urls[3].contains("/api/now/table/sys_audit_delete?"), "{}", s.urls[3]);
    assert_eq!(s.queries[4], "sys_idINa,c");
    assert!(s.urls[4].contains("/api/now/table/incident?"), "{}", s.urls[4]);
    // A restart resumes both cursors from their own offsets.
    let offsets = vec![rows.offset.clone().unwrap(), offset];
    let task = SourceTask::open(&with_deletes(&[]), &offsets, &mut s, ManualClock::default()).unwrap();
    assert_eq!(task.cursor(), Cursor { ts: Timestamp(T0 + 1), id: "c".into() });
    assert_eq!(task.deletes().unwrap().cursor(), &Cursor { ts: Timestamp(T0 + 60), id: "x2".into() });
}

#[test]
fn deletes_are_read_no_further_than_the_tables_cursor_has_read() {
    let config = SourceConfig::parse(&with_deletes(&[])).unwrap();
    let settings =
        DeleteSettings { instance: "acme.service-now.com", lag_seconds: 0, overlap_seconds: 0, dedup_window_size: 100, probe: false };
    let mut stream = DeleteStream::open(&config.tables[0], &settings, &[]).unwrap().unwrap();
    let mut s = script(vec![page(&[]), page(&[])]);
    let mut client = TableClient::new(&config.instance, &mut s, ManualClock::default());
    stream.table_sweep_finished();
    // The server's clock says T0 + 100; the table's cursor has read up to T0 + 40.
    stream.poll(&mut client, Some(Timestamp(T0 + 40)), 1000).unwrap();
    stream.poll(&mut client, Some(Timestamp(T0 + 40)), 1000).unwrap();
    drop(client);
    let hwm = format!("sys_created_on<={}", Timestamp(T0 + 40));
    assert!(s.queries[1].contains(&hwm), "{}", s.queries[1]);
    assert!(!stream.wants_poll(), "the sweep is done");
}

#[test]
fn a_wake_lets_the_deletes_sweep_read_up_to_the_notified_stamp_but_not_past_the_tables_cursor() {
    let config = SourceConfig::parse(&with_deletes(&[])).unwrap();
    let settings =
        DeleteSettings { instance: "acme.service-now.com", lag_seconds: 5, overlap_seconds: 0, dedup_window_size: 100, probe: false };
    // Server clock T0 + 100, lag 5 s: a timed sweep of deletes reads up to T0 + 95 at most.
    let sweep = |read_up_to: i64, wake: Option<i64>| {
        let mut stream = DeleteStream::open(&config.tables[0], &settings, &[]).unwrap().unwrap();
        let mut s = script(vec![page(&[]), page(&[])]);
        let mut client = TableClient::new(&config.instance, &mut s, ManualClock::default());
        if let Some(at) = wake {
            stream.wake(Timestamp(T0 + at));
        }
        stream.table_sweep_finished();
        stream.poll(&mut client, Some(Timestamp(T0 + read_up_to)), 1000).unwrap();
        stream.poll(&mut client, Some(Timestamp(T0 + read_up_to)), 1000).unwrap();
        drop(client);
        s.queries[1].clone()
    };
    let upto = |at: i64| format!("sys_created_on<={}", Timestamp(T0 + at));
    assert!(sweep(99, None).contains(&upto(95)), "{}", sweep(99, None));
    assert!(sweep(99, Some(99)).contains(&upto(99)), "a delete notified at T0 + 99: {}", sweep(99, Some(99)));
    assert!(
        sweep(97, Some(99)).contains(&upto(97)),
        "never past what the table's cursor has read (a delete before the row's last upsert): {}",
        sweep(97, Some(99))
    );
}

#[test]
fn the_record_format_carries_the_deleted_row_with_deleted_true() {
    let payload = r#"<?xml version=\"1.0\" encoding=\"UTF-8\"?><record_update table=\"incident\"><incident action=\"DELETE\"><number>INC1</number><state>7</state></incident></record_update>"#;
    let with_payload = format!(
        r#"{{"sys_id":"x1","sys_created_on":"{}","sys_created_by":"bob","documentkey":"a","payload":"{payload}"}}"#,
        Timestamp(T0 + 5)
    );
    let mut s = script(vec![page(&[]), page(&[]), page(&[]), page(&[with_payload]), page(&[])]);
    let mut task =
        SourceTask::open(&with_deletes(&[("snow.table.incident.deletes.format", "record")]), &[], &mut s, ManualClock::default()).unwrap();
    assert_eq!(
        SourceConfig::parse(&with_deletes(&[("snow.table.incident.deletes.format", "record")])).unwrap().tables[0].deletes,
        Some(DeleteFormat::Record)
    );
    for _ in 0..3 {
        task.poll().unwrap();
    }
    let batch = task.poll().unwrap();
    let value: serde_json::Value = serde_json::from_slice(batch.value(0).unwrap()).unwrap();
    assert_eq!(value, serde_json::json!({ "number": "INC1", "state": "7", "sys_id": "a", "__deleted": true }));
    drop(task);
    assert!(s.urls[3].contains("payload"), "the payload is read for the record format: {}", s.urls[3]);
}

#[test]
fn the_deletes_probe_explains_an_unreadable_audit_table_and_unaudited_deletes() {
    let envelope = |m: &str| format!(r#"{{"error":{{"message":"{m}","detail":"d"}},"status":"failure"}}"#);
    let probe = |answers: Vec<Scripted>| {
        let mut s = script(answers);
        let mut task = SourceTask::open(&with_deletes(&[("snow.startup.probe", "true")]), &[], &mut s, ManualClock::default()).unwrap();
        task.poll().unwrap();
        task.poll().map(|_| task.take_notes())
    };
    let table_ok = (200, r#"{"result":[]}"#.to_string(), None);
    let err = probe(vec![table_ok.clone(), (403, envelope("User Not Authorized"), None)]).unwrap_err().to_string();
    assert!(err.contains("snow.table.incident.deletes: startup probe: the integration user may not read sys_audit_delete"), "{err}");
    let err = probe(vec![table_ok.clone(), page_of(&[], 12)]).unwrap_err().to_string();
    assert!(err.contains("12 deletes of incident are recorded in sys_audit_delete but the integration user can read none"), "{err}");
    let unaudited = (200, r#"{"result":[{"attributes":"no_audit_delete=true"}]}"#.to_string(), None);
    let err = probe(vec![table_ok.clone(), page(&[]), unaudited]).unwrap_err().to_string();
    assert!(err.contains("deletes of incident are not audited (its dictionary collection entry has no_audit_delete=true)"), "{err}");
    let notes = probe(vec![table_ok.clone(), page(&[audit("x1", "a", 1)]), (403, envelope("User Not Authorized"), None)]).unwrap();
    assert!(notes.iter().any(|n| n.message.contains("cannot read sys_dictionary")), "{notes:?}");
    assert!(probe(vec![table_ok, page(&[]), page(&[])]).unwrap().is_empty());
}

#[test]
fn a_failed_check_of_created_again_rows_moves_nothing_and_the_poll_is_made_again() {
    let envelope = r#"{"error":{"message":"User Not Authorized","detail":"d"},"status":"failure"}"#.to_string();
    let deletes = page(&[audit("x1", "a", 50)]);
    let mut s = script(vec![page(&[]), page(&[row("a", 0, 0)]), page(&[]), deletes.clone(), (403, envelope, None), deletes, page(&[])]);
    let mut task = SourceTask::open(&with_deletes(&[]), &[], &mut s, ManualClock::default()).unwrap();
    for _ in 0..3 {
        task.poll().unwrap();
    }
    assert!(task.poll().is_err(), "the check of rows created again failed");
    let batch = task.poll().unwrap();
    assert_eq!((batch.records.len(), batch.key_text(0)), (1, Some("a")), "the delete is written by the poll made again");
    drop(task);
    assert_eq!(s.queries[3], s.queries[5], "the sweep did not move on the failure");
}
