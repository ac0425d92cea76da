//! Journal entries: comments and work notes written on the instance reach the table's journal
//! topic, keyed by the entry, each once, also across a SIGKILL with entries written while the
//! runner was down; a journal the read ACL hides stops the table with the reason.
//!

use std::collections::BTreeSet;
use std::time::Duration;

use fake_snow::FakeSnow;
use serde_json::{Map, Value, json};

use crate::support::kafka::read_until;
use crate::support::{self, Runner, connector_file, now_secs, unique, work_dir};

const USER: &str = "journal-user";
const PASSWORD: &str = "Journal-Secret-Pw-8";

fn fake() -> FakeSnow {
    support::fake_with_user(USER, PASSWORD, None)
}

fn config(fake: &FakeSnow, name: &str, topic: &str) -> std::collections::BTreeMap<String, String> {
    let mut c = support::source_entries(
        &fake.url(),
        name,
        topic,
        &["incident"],
        &[
            ("snow.auth.username", USER),
            ("snow.auth.password", PASSWORD),
            ("snow.table.incident.journal", "comments,work_notes"),
            ("snow.startup.probe", "true"),
            ("snow.batch.size", "100"),
        ],
    );
    c.insert("snow.table.incident.journal.topic".into(), format!("{topic}.notes"));
    c
}

/// Writes a comment on each of `ids` and a work note on every third.
fn comment(fake: &FakeSnow, ids: &[String], round: usize) {
    for (i, id) in ids.iter().enumerate() {
        let mut changes = Map::new();
        changes.insert("comments".into(), json!(format!("comment {round} on {id}")));
        if i % 3 == 0 {
            changes.insert("work_notes".into(), json!(format!("note {round}")));
        }
        assert_eq!(fake.shared().update_rows("incident", std::slice::from_ref(id), &changes), 1);
    }
}

/// The sys_id of the newest entry by `(sys_created_on, sys_id)`.
fn newest_entry(fake: &FakeSnow) -> String {
    let rows = fake.rows("sys_journal_field");
    let key = |r: &Map<String, Value>| (r["sys_created_on"].as_str().unwrap().to_string(), r["sys_id"].as_str().unwrap().to_string());
    rows.iter().map(key).max().unwrap().1
}

/// The journal's stored position in the offsets file of `dir`.
fn journal_position(dir: &std::path::Path) -> Option<String> {
    let file: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("offsets.json")).ok()?).ok()?;
    let offsets = file["offsets"].as_object()?.values().next()?.as_object()?;
    offsets.iter().find(|(k, _)| k.contains(r#""stream":"journal""#)).and_then(|(_, v)| v.as_str().map(str::to_string))
}

/// The entries of incident's comments and work notes on the instance, by sys_id.
fn entries(fake: &FakeSnow) -> BTreeSet<String> {
    fake.rows("sys_journal_field")
        .into_iter()
        .filter(|r| r["name"] == "incident")
        .map(|r| r["sys_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn journal_entries_reach_their_own_topic_each_once_also_across_a_kill() {
    let fake = fake();
    let ids = fake.shared().seed("incident", 300, now_secs() - 3600, 3000);
    comment(&fake, &ids[..120], 1);
    let (name, topic) = (unique("journal"), unique("journal"));
    let notes = format!("{topic}.notes");
    let dir = work_dir("journal-kill");
    let file = connector_file(&dir, &name, &config(&fake, &name, &topic));
    let bootstrap = kafka_harness::shared().bootstrap();
    let long = Duration::from_secs(120);
    let runner = Runner::start(&dir, "run1", &[&file]);
    let first = entries(&fake);
    assert_eq!(first.len(), 160, "120 comments and 40 work notes");
    let read = read_until(bootstrap, &notes, long, |r| r.len() >= first.len());
    // Killed once the journal's stored position has its newest entry (at least once: a kill
    // before that would have it read again).
    let newest = newest_entry(&fake);
    support::wait_until("the journal's position at its newest entry", long, || journal_position(&dir)?.contains(&newest).then_some(()));
    runner.kill();
    let entry = read[0].json();
    assert_eq!(entry["name"], "incident");
    assert_eq!(read[0].key, entry["sys_id"].as_str().unwrap(), "keyed by the entry");
    assert!(entry["element_id"].as_str().is_some_and(|p| ids.contains(&p.to_string())), "{entry}");
    assert_eq!(read[0].headers.get("snow.source.table").map(String::as_str), Some("sys_journal_field"));

    // Entries written while the runner is down are read after the restart; none twice.
    comment(&fake, &ids[100..160], 2);
    let want = entries(&fake);
    assert_eq!(want.len(), 160 + 80);
    let runner = Runner::start(&dir, "run2", &[&file]);
    let all = read_until(bootstrap, &notes, long, |r| r.len() >= want.len());
    let keys: Vec<&String> = all.iter().map(|r| &r.key).collect();
    let unique_keys: BTreeSet<String> = keys.iter().map(|k| k.to_string()).collect();
    assert_eq!(unique_keys, want, "every entry");
    // Let a few more sweeps run: nothing is read twice.
    let settled = read_until(bootstrap, &notes, long, |_| true);
    assert_eq!(settled.len(), want.len(), "each entry once");
    let texts: Vec<Value> = settled.iter().map(|r| r.json()["value"].clone()).collect();
    assert!(texts.iter().any(|t| t.as_str().is_some_and(|t| t.starts_with("comment 2 on"))));
    runner.stop();
}

#[test]
fn a_journal_the_read_acl_hides_stops_the_table_with_the_reason() {
    let fake = fake();
    let ids = fake.shared().seed("incident", 20, now_secs() - 600, 500);
    comment(&fake, &ids, 1);
    assert!(fake.shared().hide_matching("sys_journal_field", "name=incident"));
    let (name, topic) = (unique("journalacl"), unique("journalacl"));
    let dir = work_dir("journal-acl");
    let file = connector_file(&dir, &name, &config(&fake, &name, &topic));
    let mut runner = Runner::start(&dir, "run", &[&file]);
    let log = runner.wait_for_log("the journal's read ACL hides them", Duration::from_secs(120));
    assert!(log.contains("27 journal entries (comments, work_notes) of incident are counted"), "{}", support::tail(&log, 20));
    runner.stop();
}
