//! Snapshot mode (ADR 0035): a database view without system fields read by periodic snapshots.
//! Only new and changed rows are emitted, rows gone become tombstones, unchanged rows are never
//! emitted again — also after a SIGKILL, with changes made while the runner was down: the runner
//! reads back what the topic holds. The topic folded key by key equals the view.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::support;
use crate::support::kafka::{Read, read_until};
use crate::support::{Runner, connector_file, unique, wait_until, work_dir};
use fake_snow::FakeSnow;
use serde_json::{Value, json};

const USER: &str = "snapshot-user";
const PASSWORD: &str = "Snapshot-Secret-Pw-5";
const VIEW: &str = "u_asset_view";

fn is_delete(r: &Read) -> bool {
    r.headers.get("snow.source.operation").map(String::as_str) == Some("DELETE")
}

/// The topic folded as log compaction leaves it: each key's last value, a tombstone removing it.
fn folded(records: &[Read]) -> BTreeMap<String, Value> {
    let mut state = BTreeMap::new();
    for r in records {
        if is_delete(r) {
            assert!(r.value.is_empty(), "a tombstone has no value");
            state.remove(&r.key);
        } else {
            state.insert(r.key.clone(), r.json());
        }
    }
    state
}

/// The view as the Table API serves it: `sys_id → row`.
fn view(fake: &FakeSnow) -> BTreeMap<String, Value> {
    fake.rows(VIEW).into_iter().map(|r| (r["sys_id"].as_str().unwrap().to_string(), Value::Object(r))).collect()
}

fn insert(fake: &FakeSnow, n: std::ops::Range<usize>) -> Vec<String> {
    let mut store = fake.shared().store();
    n.map(|i| {
        let mut row = serde_json::Map::new();
        row.insert("u_name".into(), json!(format!("asset {i}")));
        row.insert("u_cost".into(), json!(format!("{}", i * 10)));
        store.insert(VIEW, row, 0, "admin")["sys_id"].as_str().unwrap().to_string()
    })
    .collect()
}

fn change(fake: &FakeSnow, ids: &[String], tag: &str) {
    let mut changes = serde_json::Map::new();
    changes.insert("u_name".into(), json!(tag));
    assert_eq!(fake.shared().update_rows(VIEW, ids, &changes), ids.len());
}

/// Records after the first `from` of `records`: (upserts' keys, tombstones' keys), each sorted.
fn since(records: &[Read], from: usize) -> (Vec<String>, Vec<String>) {
    let (mut up, mut gone): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for r in &records[from..] {
        if is_delete(r) { gone.push(r.key.clone()) } else { up.push(r.key.clone()) }
    }
    up.sort();
    gone.sort();
    (up, gone)
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

#[test]
fn a_view_is_read_by_snapshots_emitting_only_changes_and_tombstones_also_across_a_kill() {
    snapshots_through_a_kill(false);
}

#[test]
fn exactly_once_a_view_is_read_by_snapshots_in_transactions_and_read_back_committed() {
    snapshots_through_a_kill(true);
}

/// Snapshots of a view through changes, a SIGKILL and changes while down; with `exactly_once`
/// in transactions, offsets in a topic.
fn snapshots_through_a_kill(exactly_once: bool) {
    let fake = support::fake_with_user(USER, PASSWORD, None);
    fake.shared().store().create_view(VIEW);
    let ids = insert(&fake, 0..450);
    let (name, topic) = (unique("snapshot"), unique("snapshot"));
    let dir = work_dir(if exactly_once { "snapshot-view-eos" } else { "snapshot-view" });
    let mut c = support::source_entries(
        &fake.url(),
        &name,
        &topic,
        &[VIEW],
        &[
            ("snow.auth.username", USER),
            ("snow.auth.password", PASSWORD),
            ("snow.table.u_asset_view.mode", "snapshot"),
            ("snow.table.u_asset_view.snapshot.interval.ms", "2000"),
            ("snow.batch.size", "100"),
        ],
    );
    c.insert("snow.startup.probe".into(), "true".into());
    if exactly_once {
        c.remove("offset.storage.file.filename");
        c.insert("offset.storage.topic".into(), unique("snapshotoff"));
        c.insert("exactly.once.support".into(), "required".into());
    }
    let file = connector_file(&dir, &name, &c);
    let bootstrap = kafka_harness::shared().bootstrap();
    let long = Duration::from_secs(120);

    let mut runner = Runner::start(&dir, "run1", &[&file]);
    let first = read_until(bootstrap, &topic, long, |r| r.len() >= 450);
    assert_eq!(first.len(), 450, "every row once");
    assert_eq!(folded(&first), view(&fake), "the first snapshot is the view");
    let r = &first[0];
    assert_eq!(r.headers.get("snow.snapshot.id"), Some(&r.key));
    assert_eq!(r.headers.get("snow.snapshot.hash").map(String::len), Some(16));
    runner.wait_for_log("snapshot 1 read 450 rows in 6 requests: 450 new or changed, 0 gone (tombstones)", long);

    // Changes between two snapshots: exactly those are emitted by the next one.
    let updated: Vec<String> = ids[..20].to_vec();
    let deleted: Vec<String> = ids[20..30].to_vec();
    change(&fake, &updated, "renamed");
    assert_eq!(fake.shared().delete_rows(VIEW, &deleted), 10);
    let added = insert(&fake, 450..465);
    // A snapshot under way may find some of the changes and the next the rest: each once.
    let all = read_until(bootstrap, &topic, long, |r| r.len() >= 450 + 20 + 15 + 10);
    let (up, gone) = since(&all, 450);
    assert_eq!(up, sorted([updated.clone(), added.clone()].concat()), "the changed and the new rows, once each");
    assert_eq!(gone, sorted(deleted.clone()), "a tombstone per row gone");
    runner.wait_for_log("0 new or changed, 0 gone (tombstones), 455 unchanged", long);
    let settled = read_until(bootstrap, &topic, long, |_| true);
    assert_eq!(settled.len(), 495, "an unchanged view emits nothing");
    runner.kill();

    // Changes while the runner is down; the restart reads back what the topic holds.
    change(&fake, &ids[100..105], "while down");
    assert_eq!(fake.shared().delete_rows(VIEW, &ids[200..205]), 5);
    let mut runner = Runner::start(&dir, "run2", &[&file]);
    runner.wait_for_log("its topic holds 455 keys (495 records read back", long);
    runner.wait_for_log("read 450 rows in 6 requests: 5 new or changed, 5 gone (tombstones), 445 unchanged", long);
    let after = read_until(bootstrap, &topic, long, |r| r.len() >= 505);
    let (up, gone) = since(&after, 495);
    assert_eq!(up, sorted(ids[100..105].to_vec()), "only the rows changed while it was down");
    assert_eq!(gone, sorted(ids[200..205].to_vec()));
    runner.wait_for_log("snapshot 2 read 450 rows in 6 requests: 0 new or changed, 0 gone (tombstones), 450 unchanged", long);
    let last = read_until(bootstrap, &topic, long, |_| true);
    assert_eq!(last.len(), 505, "nothing emitted again");
    assert_eq!(folded(&last), view(&fake), "the topic folded is the view");
    if !exactly_once {
        let position = wait_until("the stored snapshot position", long, || {
            let p = support::stored_position(&dir, &name)?;
            p.get("finished").is_some().then_some(p)
        });
        assert_eq!(position["v"], 3, "{position}");
    }
    runner.stop();
}
