//! Attachments: a listing of `sys_attachment` follows each finished sweep of the table, then one
//! download a poll, each written with its metadata and content (or as a reference), checked
//! against the listed size and SHA-256.

use super::*;
use crate::source::attachments::{CONTENT_HEADER, MISMATCH_ATTEMPTS};
use base64::Engine;
use serde_json::Value;
use sha2::Digest;

fn listing(id: &str, size: usize, hash: &str, ts: i64) -> String {
    format!(
        r#"{{"sys_id":"{id}","sys_updated_on":"{}","sys_created_on":"{}","sys_created_by":"ann","table_name":"incident","table_sys_id":"a","file_name":"{id}.txt","content_type":"text/plain","size_bytes":"{size}","hash":"{hash}"}}"#,
        Timestamp(T0 + ts),
        Timestamp(T0 + ts)
    )
}

fn sha256(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn file(body: &str) -> Scripted {
    (200, body.to_string(), None)
}

fn with_attachments(extra: &[(&str, &str)]) -> Entries {
    let mut pairs = vec![("snow.table.incident.attachments", "true")];
    pairs.extend_from_slice(extra);
    entries(&pairs)
}

fn value(batch: &PollBatch) -> Value {
    serde_json::from_slice(batch.value(0).unwrap()).unwrap()
}

#[test]
fn listed_attachments_are_downloaded_one_a_poll_and_a_large_one_is_written_as_a_reference() {
    let mut s = script(vec![
        page(&[]),
        page(&[row("a", 0, 0)]),
        // The attachments' sweep: its drain, then its advance listing two files.
        page(&[]),
        page(&[listing("f1", 5, &sha256(b"hello"), 3), listing("f2", 2_000_000, "", 4)]),
        file("hello"),
    ]);
    let mut task = SourceTask::open(&with_attachments(&[]), &[], &mut s, ManualClock::default()).unwrap();
    task.poll().unwrap();
    assert_eq!(task.poll().unwrap().next_poll_ms, 0, "the attachments' sweep follows at once");
    assert!(task.poll().unwrap().records.is_empty());
    let listed = task.poll().unwrap();
    assert!(listed.records.is_empty() && listed.offset.is_none(), "a listing writes nothing yet");
    let first = task.poll().unwrap();
    assert_eq!(first.topic, "snow.incident.attachments");
    assert_eq!(first.key_text(0), Some("f1"));
    let v = value(&first);
    assert_eq!(v["content"], base64::engine::general_purpose::STANDARD.encode("hello"));
    assert_eq!((v["content_status"].as_str(), v["file_name"].as_str()), (Some("inline"), Some("f1.txt")));
    assert_eq!(v["download_link"], "https://acme.service-now.com/api/now/attachment/f1/file");
    assert_eq!(first.record_headers_of(0), [(CONTENT_HEADER.to_string(), "inline".to_string())]);
    assert_eq!(first.records[0].timestamp_ms, Some(Timestamp(T0 + 3).as_millis()));
    assert_eq!(first.offset.clone().unwrap().partition, Partition::attachments_of("acme.service-now.com", "incident").key());
    assert_eq!(first.next_poll_ms, 0);
    let second = task.poll().unwrap();
    let v = value(&second);
    assert_eq!(
        (v["content"].clone(), v["content_status"].as_str(), v["size_bytes"].as_str()),
        (Value::Null, Some("too_large"), Some("2000000"))
    );
    let interval = SourceConfig::parse(&with_attachments(&[])).unwrap().tables[0].poll_interval_ms;
    assert_eq!(second.next_poll_ms, interval, "the sweep is through");
    let stored = Cursor::from_position(&second.offset.clone().unwrap().position).unwrap();
    assert_eq!(stored, Cursor { ts: Timestamp(T0 + 4), id: "f2".into() });
    drop(task);
    assert_eq!(s.urls.len(), 5, "the large file was not downloaded: {:?}", s.urls);
    assert!(s.urls[3].contains("/api/now/table/sys_attachment?"), "{}", s.urls[3]);
    assert!(s.queries[3].starts_with("table_name=incident^sys_updated_on>"), "{}", s.queries[3]);
    assert!(s.urls[4].ends_with("/api/now/attachment/f1/file"), "{}", s.urls[4]);
}

#[test]
fn a_body_running_past_the_limit_is_a_reference_not_a_failure() {
    let mut s = script(vec![page(&[]), page(&[row("a", 0, 0)]), page(&[]), page(&[listing("f1", 5, "", 3)]), file("longer than eight")]);
    let config = with_attachments(&[("snow.table.incident.attachments.max.bytes", "8")]);
    let mut task = SourceTask::open(&config, &[], &mut s, ManualClock::default()).unwrap();
    let last = (0..5).map(|_| task.poll().unwrap()).last().unwrap();
    let v = value(&last);
    assert_eq!((v["content"].clone(), v["content_status"].as_str()), (Value::Null, Some("too_large")));
}

#[test]
fn a_content_that_disagrees_with_its_listing_is_retried_then_written_flagged() {
    let wrong = "0".repeat(64);
    let mut answers = vec![page(&[]), page(&[row("a", 0, 0)]), page(&[]), page(&[listing("f1", 5, &wrong, 3)])];
    answers.extend((0..MISMATCH_ATTEMPTS).map(|_| file("hello")));
    let mut s = script(answers);
    let mut task = SourceTask::open(&with_attachments(&[]), &[], &mut s, ManualClock::default()).unwrap();
    for _ in 0..4 {
        task.poll().unwrap();
    }
    for _ in 1..MISMATCH_ATTEMPTS {
        let err = task.poll().unwrap_err();
        assert_eq!(err.class(), ErrorClass::Transient);
        assert!(err.to_string().contains("SHA-256"), "{err}");
    }
    let flagged = task.poll().unwrap();
    assert_eq!(value(&flagged)["content_status"], "checksum_mismatch");
    assert!(task.take_notes().iter().any(|n| !n.info && n.message.contains("checksum_mismatch")));
}

#[test]
fn a_wrong_size_is_a_mismatch_too() {
    let mut s = script(vec![page(&[]), page(&[row("a", 0, 0)]), page(&[]), page(&[listing("f1", 6, "", 3)]), file("hello")]);
    let mut task = SourceTask::open(&with_attachments(&[]), &[], &mut s, ManualClock::default()).unwrap();
    for _ in 0..4 {
        task.poll().unwrap();
    }
    let err = task.poll().unwrap_err().to_string();
    assert!(err.contains("5 bytes downloaded, 6 listed"), "{err}");
}

#[test]
fn the_attachments_topic_is_configured_and_the_limit_must_fit_the_memory_cap() {
    let topics = crate::config::source::configured_topics(&with_attachments(&[]));
    assert!(topics.contains("snow.incident.attachments"), "{topics:?}");
    let tight = with_attachments(&[("component.memory.max.bytes", "268435456"), ("snow.attachments.max.bytes", "67108864")]);
    let err = SourceConfig::parse(&tight).unwrap_err().to_string();
    assert!(err.contains("snow.table.incident.attachments.max.bytes"), "{err}");
}
