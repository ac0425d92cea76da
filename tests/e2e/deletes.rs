//! Deletes (ADR 0031): rows deleted on the instance become tombstones on the table's topic, read
//! from `sys_audit_delete` behind the table's own cursor; through SIGKILLs, exactly once, the
//! topic compacted (folded key by key) equals the table. Snapshot tables' tombstones are tested in
//! [`snapshot`], in this binary.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use fake_snow::{FakeSnow, Fault, FaultAction};
use support::kafka::{Read, read_until};
use support::{Runner, connector_file, now_secs, tail, unique, wait_until, work_dir};

const USER: &str = "deletes-user";
const PASSWORD: &str = "Deletes-Secret-Pw-3";

fn fake() -> FakeSnow {
    support::fake_with_user(USER, PASSWORD, None)
}

fn config(fake: &FakeSnow, name: &str, topic: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut c = support::source_entries(
        &fake.url(),
        name,
        topic,
        &["incident"],
        &[
            ("snow.auth.username", USER),
            ("snow.auth.password", PASSWORD),
            ("snow.table.incident.deletes", "true"),
            ("snow.poll.interval.ms", "300"),
        ],
    );
    c.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    c
}

fn is_delete(r: &Read) -> bool {
    r.headers.get("snow.source.operation").map(String::as_str) == Some("DELETE")
}

/// The topic folded as log compaction leaves it: each key's last record, a delete removing the key.
fn compacted(records: &[Read]) -> BTreeMap<String, String> {
    let mut state = BTreeMap::new();
    for r in records {
        if is_delete(r) {
            assert!(r.value.is_empty(), "a tombstone has no value: {}", String::from_utf8_lossy(&r.value));
            state.remove(&r.key);
        } else {
            state.insert(r.key.clone(), r.version().1);
        }
    }
    state
}

/// The fake's table as `(sys_id → sys_mod_count)`.
fn table(fake: &FakeSnow) -> BTreeMap<String, String> {
    fake.fields("incident", ["sys_id", "sys_mod_count"]).into_iter().map(|[id, count]| (id, count)).collect()
}

/// Inserts, updates and deletes rows while `writing`.
fn writer(fake: Arc<FakeSnow>, writing: Arc<AtomicBool>, deleted: Arc<AtomicUsize>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut n = 0usize;
        while writing.load(Ordering::SeqCst) {
            let fresh = fake.shared().seed("incident", 5, now_secs(), 0);
            let ids: Vec<String> = table(&fake).into_keys().collect();
            let pick = |k: usize| ids[(n * 7919 + k * 104_729) % ids.len()].clone();
            let mut changes = serde_json::Map::new();
            changes.insert("state".into(), serde_json::Value::String(format!("{}", n % 7)));
            fake.shared().update_rows("incident", &[pick(1), pick(2), fresh[0].clone()], &changes);
            // Old rows, a row updated a moment ago, and one inserted in this very second.
            let gone = fake.shared().delete_rows("incident", &[pick(3), pick(2), fresh[1].clone()]);
            deleted.fetch_add(gone, Ordering::SeqCst);
            n += 1;
            std::thread::sleep(Duration::from_millis(100));
        }
    })
}

#[test]
fn inserts_updates_and_deletes_through_kills_compact_to_the_table_exactly_once() {
    let fake = Arc::new(fake());
    fake.shared().seed("incident", 3000, now_secs() - 3600, 3000);
    fake.add_fault(Fault::always(FaultAction::Latency { ms: 20 }).on_method("GET"));
    let (name, topic, offsets) = (unique("deletes"), unique("deletes"), unique("deletesoff"));
    let dir = work_dir("deletes-kills");
    let mut c = config(&fake, &name, &topic, &[("exactly.once.support", "required"), ("snow.batch.size", "200")]);
    c.remove("offset.storage.file.filename");
    c.insert("offset.storage.topic".into(), offsets);
    let file = connector_file(&dir, &name, &c);
    let (writing, deleted) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicUsize::new(0)));
    let writer = writer(fake.clone(), writing.clone(), deleted.clone());
    let bootstrap = kafka_harness::shared().bootstrap();
    let mut next = support::kill_points("deletes kills");
    let mut seen_deletes = 0;
    for round in 0..5 {
        let runner = Runner::start(&dir, &format!("run{round}"), &[&file]);
        // Records flowed in this run, tombstones among them.
        let before = read_until(bootstrap, &topic, Duration::from_secs(60), |_| true).len();
        let records =
            read_until(bootstrap, &topic, Duration::from_secs(120), |r| r.len() > before + 100 && r[before..].iter().any(is_delete));
        seen_deletes = records.iter().filter(|r| is_delete(r)).count();
        std::thread::sleep(Duration::from_millis(next() % 1000)); // a random kill point, not a synchronisation
        runner.kill();
    }
    let last = Runner::start(&dir, "final", &[&file]);
    let written = deleted.load(Ordering::SeqCst);
    wait_until("more deletes after the last kill", Duration::from_secs(60), || {
        (deleted.load(Ordering::SeqCst) > written + 20).then_some(())
    });
    writing.store(false, Ordering::SeqCst);
    writer.join().unwrap();
    let want = table(&fake);
    let records = read_until(bootstrap, &topic, Duration::from_secs(300), |r| compacted(r) == want);
    let log = last.stop();
    assert_eq!(compacted(&records), want, "the compacted topic equals the table; log:\n{}", tail(&log, 30));
    assert!(deleted.load(Ordering::SeqCst) > 100 && seen_deletes > 0, "rows were deleted during the runs");
    // Exactly once: no row version twice, no delete twice.
    let mut versions = BTreeSet::new();
    for r in &records {
        let version = if is_delete(r) { (r.key.clone(), format!("deleted {}", r.headers["snow.deleted.on"])) } else { r.version() };
        assert!(versions.insert(version.clone()), "{version:?} written twice");
    }
    for r in records.iter().filter(|r| is_delete(r)) {
        assert_eq!(r.headers.get("snow.deleted.by").map(String::as_str), Some("admin"), "who deleted it");
    }
    // A key's tombstone never precedes its last upsert: a deleted row's last record is its delete.
    let mut last_of: BTreeMap<&str, &Read> = BTreeMap::new();
    for r in &records {
        last_of.insert(&r.key, r);
    }
    let keys = last_of.len();
    for (key, r) in last_of {
        assert_eq!(is_delete(r), !want.contains_key(key), "row {key}: its last record is a delete exactly when it is gone");
    }
    eprintln!(
        "5 kills; {} records ({} deletes) over {keys} keys; {} rows deleted on the instance, {} remain",
        records.len(),
        records.iter().filter(|r| is_delete(r)).count(),
        deleted.load(Ordering::SeqCst),
        want.len()
    );
}

#[test]
fn unreadable_or_unaudited_deletes_are_explained_at_start() {
    let fake = fake();
    fake.shared().seed("incident", 10, now_secs() - 600, 10);
    let (name, topic) = (unique("deletesprobe"), unique("deletesprobe"));
    let dir = work_dir("deletes-probe");
    let file = connector_file(&dir, &name, &config(&fake, &name, &topic, &[]));
    fake.shared().deny_reads("sys_audit_delete", true);
    let mut runner = Runner::start(&dir, "denied", &[&file]);
    runner.wait_for_log("the integration user may not read sys_audit_delete", Duration::from_secs(60));
    runner.stop();
    fake.shared().deny_reads("sys_audit_delete", false);
    fake.shared().set_no_audit_delete("incident", true);
    let mut runner = Runner::start(&dir, "unaudited", &[&file]);
    let log = runner.wait_for_log("deletes of incident are not audited", Duration::from_secs(60));
    runner.stop();
    assert!(log.contains("snow.table.incident.deletes"), "the key is named: {}", tail(&log, 10));
}

#[test]
fn record_format_deletes_carry_the_last_known_row_marked_deleted() {
    let fake = fake();
    let ids = fake.shared().seed("incident", 20, now_secs() - 600, 20);
    let (name, topic) = (unique("deletesrecord"), unique("deletesrecord"));
    let dir = work_dir("deletes-record");
    let file = connector_file(&dir, &name, &config(&fake, &name, &topic, &[("snow.table.incident.deletes.format", "record")]));
    let runner = Runner::start(&dir, "record", &[&file]);
    let bootstrap = kafka_harness::shared().bootstrap();
    read_until(bootstrap, &topic, Duration::from_secs(120), |r| r.len() >= 20);
    // The last known row: updated, then deleted.
    let mut changes = serde_json::Map::new();
    changes.insert("short_description".into(), serde_json::Value::String("updated before the delete".into()));
    fake.shared().update_rows("incident", &ids[..5], &changes);
    assert_eq!(fake.shared().delete_rows("incident", &ids[..5]), 5);
    let records = read_until(bootstrap, &topic, Duration::from_secs(120), |r| r.iter().filter(|r| is_delete(r)).count() >= 5);
    let log = runner.stop();
    let deletes: Vec<&Read> = records.iter().filter(|r| is_delete(r)).collect();
    assert_eq!(deletes.len(), 5, "one delete per deleted row; log:\n{}", tail(&log, 20));
    for r in deletes {
        let value = r.json();
        assert_eq!(value["__deleted"], serde_json::json!(true), "marked deleted: {value}");
        assert_eq!(value["sys_id"].as_str(), Some(r.key.as_str()), "the key and the row's sys_id agree: {value}");
        assert!(ids[..5].contains(&r.key), "a deleted row: {}", r.key);
        assert_eq!(value["short_description"], "updated before the delete", "the row as it was last: {value}");
        assert_eq!(r.headers.get("snow.deleted.by").map(String::as_str), Some("admin"));
    }
}
