//! The keyset cursor end to end: the one-second boundary, restarts and kills, rows that change
//! while they are read, the safety lag, many tables, and the startup probe.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use fake_snow::{FakeOptions, FakeSnow, Fault, FaultAction};
use serde_json::Value;
use support::kafka::{Read, read_until};
use support::{Runner, connector_file, now_secs, tail, unique, wait_until, work_dir};

const USER: &str = "cursor-user";
const PASSWORD: &str = "Cursor-Pw-31";

fn fake(frozen_at: Option<i64>) -> FakeSnow {
    support::fake_with_user(USER, PASSWORD, frozen_at)
}

fn config(fake: &FakeSnow, name: &str, topic: &str, tables: &[&str], extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut c =
        support::source_entries(&fake.url(), name, topic, tables, &[("snow.auth.username", USER), ("snow.auth.password", PASSWORD)]);
    c.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    c
}

fn keys(records: &[Read]) -> BTreeSet<String> {
    records.iter().map(|r| r.key.clone()).collect()
}

/// The stored position of the only table of `connector`, as (timestamp text, sys_id).
fn stored(dir: &Path, connector: &str) -> Option<(String, String)> {
    let file: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("offsets.json")).ok()?).ok()?;
    let (_, position) = file["offsets"][connector].as_object()?.iter().next()?;
    let p: Value = serde_json::from_str(position.as_str()?).ok()?;
    Some((p["ts"].as_str()?.to_string(), p["id"].as_str()?.to_string()))
}

#[test]
fn twelve_thousand_rows_in_one_second_arrive_exactly_once() {
    let now = now_secs();
    let fake = fake(Some(now));
    let ids: BTreeSet<String> = fake.shared().seed("incident", 12_000, now - 600, 0).into_iter().collect();
    let (name, topic) = (unique("onesec"), unique("onesec"));
    let dir = work_dir("onesec");
    let file = connector_file(&dir, &name, &config(&fake, &name, &topic, &["incident"], &[("snow.batch.size", "5000")]));
    let runner = Runner::start(&dir, "run", &[&file]);
    let bootstrap = kafka_harness::shared().bootstrap();
    let first = read_until(bootstrap, &topic, Duration::from_secs(180), |r| r.len() >= ids.len());
    // Later sweeps re-read the second (the overlap): it must still be there exactly once.
    let seen = support::sweep_starts(&fake, "incident");
    wait_until("three more sweeps", Duration::from_secs(60), || (support::sweep_starts(&fake, "incident") >= seen + 3).then_some(()));
    let records = read_until(bootstrap, &topic, Duration::from_secs(30), |_| true);
    let log = runner.stop();
    assert_eq!(first.len(), 12_000, "exactly once; log:\n{}", tail(&log, 20));
    assert_eq!(records.len(), 12_000, "still exactly once after three more sweeps; log:\n{}", tail(&log, 20));
    assert_eq!(keys(&records), ids);
    let drains = fake.journal().entries.iter().filter(|e| e.query.as_deref().is_some_and(|q| q.contains("sys_id>"))).count();
    assert!(drains >= 2, "the second was drained by sys_id across pages ({drains} drains)");
}

#[test]
fn restarted_after_every_page_the_stream_is_complete_within_the_stated_duplicate_bound() {
    const BATCH: usize = 100;
    const OVERLAP: i64 = 2;
    let now = now_secs();
    let fake = fake(Some(now));
    let ids: BTreeSet<String> = fake.shared().seed("incident", 2500, now - 100, 30).into_iter().collect();
    let stamps: Vec<String> = fake.fields("incident", ["sys_updated_on"]).into_iter().map(|[s]| s).collect();
    // Slow reads so that each kill lands after about one page.
    fake.add_fault(Fault::always(FaultAction::Latency { ms: 200 }).on_method("GET").on_path("/api/now/table/incident"));
    let (name, topic) = (unique("restarts"), unique("restarts"));
    let dir = work_dir("restarts");
    let file = connector_file(
        &dir,
        &name,
        &config(&fake, &name, &topic, &["incident"], &[("snow.batch.size", "100"), ("snow.overlap.seconds", "2")]),
    );
    let bootstrap = kafka_harness::shared().bootstrap();
    let mut restarts = 0;
    let mut in_topic: Vec<Read> = Vec::new();
    let mut worst = (0usize, 0usize);
    loop {
        let before = stored(&dir, &name);
        let runner = Runner::start(&dir, &format!("run{restarts}"), &[&file]);
        wait_until("a new stored offset", Duration::from_secs(60), || (stored(&dir, &name) != before).then_some(()));
        runner.kill();
        restarts += 1;
        // What this run produced again: records whose key an earlier run had already produced.
        // It may be at most the rows of the overlap before the offset it resumed from, and the
        // polls the run before it had produced but not seen acknowledged.
        let now_in_topic = read_until(bootstrap, &topic, Duration::from_secs(30), |_| true);
        let earlier = keys(&in_topic);
        let again = now_in_topic[in_topic.len()..].iter().filter(|r| earlier.contains(&r.key)).count();
        if let Some((ts, _)) = &before {
            let bound = support::restart_duplicate_bound(&stamps, ts, OVERLAP, BATCH);
            assert!(again <= bound, "run {restarts} produced {again} records again, stated bound {bound} for a restart at {ts}");
            worst = worst.max((again, bound));
        } else {
            assert_eq!(again, 0, "the first run has nothing to repeat");
        }
        in_topic = now_in_topic;
        if keys(&in_topic).len() >= ids.len() {
            break;
        }
        assert!(restarts < 200, "no progress");
    }
    assert_eq!(keys(&in_topic), ids, "complete after {restarts} restarts");
    let duplicates = in_topic.len() - ids.len();
    eprintln!("{restarts} restarts, {duplicates} duplicates in all; the most one restart repeated: {} (its bound {})", worst.0, worst.1);
    assert!(restarts >= 10, "restarted after (nearly) every page: {restarts}");
}

#[test]
fn killed_at_random_points_of_a_backfill_while_rows_change_every_final_version_arrives() {
    let fake = Arc::new(fake(None));
    let now = now_secs();
    let seeded = Arc::new(fake.shared().seed("incident", 100_000, now - 86_400, 80_000));
    let (name, topic) = (unique("chaos"), unique("chaos"));
    let dir = work_dir("chaos");
    let file = connector_file(&dir, &name, &config(&fake, &name, &topic, &["incident"], &[("snow.batch.size", "1000")]));
    // A writer inserts 20 rows and updates 25 (some old, some new) every 100 ms, through the kills
    // and into the final run, stamped with the real clock.
    let writing = Arc::new(AtomicBool::new(true));
    let rounds = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (fake, writing, seeded, rounds) = (fake.clone(), writing.clone(), seeded.clone(), rounds.clone());
        std::thread::spawn(move || {
            let mut n = 0usize;
            while writing.load(Ordering::SeqCst) {
                let fresh = fake.shared().seed("incident", 20, now_secs(), 0);
                let mut changes = serde_json::Map::new();
                changes.insert("state".into(), Value::String(format!("{}", n % 7)));
                let old: Vec<String> = (0..20).map(|i| seeded[(n * 997 + i * 4_999) % seeded.len()].clone()).collect();
                fake.shared().update_rows("incident", &old, &changes);
                fake.shared().update_rows("incident", &fresh[..5], &changes);
                n += 1;
                rounds.store(n, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let mut next = support::kill_points("chaos");
    for round in 0..4 {
        let runner = Runner::start(&dir, &format!("run{round}"), &[&file]);
        let ms = 800 + next() % 2500;
        std::thread::sleep(Duration::from_millis(ms)); // a random kill point, not a synchronisation
        runner.kill();
    }
    // The final run's preconditions: the kills landed after data flowed and before the end.
    let bootstrap = kafka_harness::shared().bootstrap();
    assert!(stored(&dir, &name).is_some(), "an offset was stored before the final run");
    let held = read_until(bootstrap, &topic, Duration::from_secs(30), |_| true);
    let rows_now = fake.row_count("incident");
    assert!(
        !held.is_empty() && keys(&held).len() < rows_now,
        "Kafka held some but not all rows before the final run: {} of {rows_now}",
        keys(&held).len()
    );
    let last = Runner::start(&dir, "final", &[&file]);
    // The writer goes on while the final run reads: until that run produced records of its own
    // and at least a second of writes went by.
    let written = rounds.load(Ordering::SeqCst);
    read_until(bootstrap, &topic, Duration::from_secs(120), |r| r.len() >= held.len() + 1_000);
    wait_until("a second of writes during the final run", Duration::from_secs(60), || {
        (rounds.load(Ordering::SeqCst) >= written + 10).then_some(())
    });
    writing.store(false, Ordering::SeqCst);
    writer.join().unwrap();
    assert!(rounds.load(Ordering::SeqCst) >= written + 10, "the writer kept writing during the final run");
    let (finals, _, _) = support::read_every_final_version(&fake, "incident", &topic, Duration::from_secs(600), last);
    assert!(finals.len() > 100_000, "rows were inserted during the run");
    assert!(finals.iter().any(|(_, m)| m != "0"), "rows were updated during the run");
}

#[test]
fn the_safety_lag_holds_back_rows_of_the_current_second() {
    let now = now_secs();
    let fake = fake(Some(now));
    let old = fake.shared().seed("incident", 1, now - 60, 0);
    let recent: Vec<String> = [fake.shared().seed("incident", 1, now - 1, 0), fake.shared().seed("incident", 1, now, 0)].concat();
    let (name, topic) = (unique("lag"), unique("lag"));
    let dir = work_dir("lag");
    let file = connector_file(
        &dir,
        &name,
        &config(&fake, &name, &topic, &["incident"], &[("snow.safety.lag.seconds", "2"), ("snow.overlap.seconds", "0")]),
    );
    let runner = Runner::start(&dir, "run", &[&file]);
    let bootstrap = kafka_harness::shared().bootstrap();
    read_until(bootstrap, &topic, Duration::from_secs(60), |r| !r.is_empty());
    let sweeps_before = fake.journal().entries.len();
    wait_until("three more sweeps", Duration::from_secs(60), || (fake.journal().entries.len() >= sweeps_before + 6).then_some(()));
    let held = read_until(bootstrap, &topic, Duration::from_secs(10), |_| true);
    assert_eq!(keys(&held), old.iter().cloned().collect(), "rows of the last two seconds are held back");
    fake.clock().advance(5);
    let records = read_until(bootstrap, &topic, Duration::from_secs(60), |r| r.len() >= 3);
    runner.stop();
    assert_eq!(keys(&records), old.iter().chain(&recent).cloned().collect(), "released once the clock moved past the lag");
}

#[test]
fn a_row_updated_twice_between_sweeps_arrives_at_its_latest_version() {
    let now = now_secs();
    let fake = fake(Some(now));
    let id = fake.shared().seed("incident", 1, now - 100, 0).remove(0);
    let (name, topic) = (unique("twice"), unique("twice"));
    let dir = work_dir("twice");
    let file = connector_file(&dir, &name, &config(&fake, &name, &topic, &["incident"], &[("snow.poll.interval.ms", "1000")]));
    let runner = Runner::start(&dir, "run", &[&file]);
    let bootstrap = kafka_harness::shared().bootstrap();
    read_until(bootstrap, &topic, Duration::from_secs(60), |r| !r.is_empty());
    fake.clock().advance(1);
    let mut changes = serde_json::Map::new();
    changes.insert("state".into(), Value::String("2".into()));
    fake.shared().update_rows("incident", std::slice::from_ref(&id), &changes);
    changes.insert("state".into(), Value::String("6".into()));
    fake.shared().update_rows("incident", std::slice::from_ref(&id), &changes);
    fake.clock().advance(5);
    let version = |r: &Read| r.headers.get("snow.sys_mod_count").cloned().unwrap_or_default();
    let records = read_until(bootstrap, &topic, Duration::from_secs(60), |r| r.iter().any(|x| version(x) == "2"));
    runner.stop();
    let versions: Vec<String> = records.iter().map(version).collect();
    assert_eq!(versions, ["0", "2"], "the first version, then the latest one");
    let latest: Value = serde_json::from_slice(&records[1].value).unwrap();
    assert_eq!(latest["state"], "6");
}

#[test]
fn fifty_tables_over_four_tasks_all_arrive() {
    let now = now_secs();
    let fake = fake(Some(now));
    let tables: Vec<String> = (0..50).map(|i| format!("u_table_{i:02}")).collect();
    let ids: BTreeSet<String> = tables.iter().flat_map(|t| fake.shared().seed(t, 40, now - 3600, 600)).collect();
    let (name, topic) = (unique("fifty"), unique("fifty"));
    let dir = work_dir("fifty");
    let refs: Vec<&str> = tables.iter().map(String::as_str).collect();
    let file = connector_file(&dir, &name, &config(&fake, &name, &topic, &refs, &[("tasks.max", "4")]));
    let runner = Runner::start(&dir, "run", &[&file]);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(180), |r| keys(r).len() >= ids.len());
    let log = runner.stop();
    assert_eq!(keys(&records), ids);
    assert!(log.contains("planned 50 units over 4 tasks"));
    let tables_seen: BTreeSet<String> = records.iter().map(|r| r.headers["snow.table"].clone()).collect();
    assert_eq!(tables_seen.len(), 50);
}

#[test]
fn each_startup_probe_failure_gives_its_message() {
    let now = now_secs();
    let fake = FakeSnow::start(FakeOptions {
        users: vec![(USER.into(), PASSWORD.into()), ("local-user".into(), "Local-Pw-1".into())],
        time_zones: vec![("local-user".into(), 3600)],
        frozen_at: Some(now),
        ..Default::default()
    })
    .unwrap();
    for t in ["acl_t", "gone_t", "fields_t", "tz_t", "auth_t"] {
        fake.shared().seed(t, 3, now - 600, 10);
    }
    fake.add_fault(Fault::always(FaultAction::Status { status: 403, retry_after: None }).on_path("/api/now/table/acl_t"));
    fake.add_fault(Fault::always(FaultAction::Status { status: 404, retry_after: None }).on_path("/api/now/table/gone_t"));
    let dir = work_dir("probe");
    let topic = unique("probe");
    /// A table whose probe fails, the connector settings that make it fail, and the message expected.
    struct Case {
        table: &'static str,
        extra: Vec<(&'static str, &'static str)>,
        message: &'static str,
    }
    let case = |table, extra, message| Case { table, extra, message };
    let cases = [
        case("auth_t", vec![("snow.auth.password", "wrong")], "ServiceNow refused the integration user's login (check snow.auth.*"),
        case("acl_t", vec![], "the integration user may not read table acl_t"),
        case("nosuch_t", vec![], "ServiceNow rejected the read of table nosuch_t: check the table name"),
        case("gone_t", vec![], "the Table API answered 404 for table gone_t"),
        case(
            "fields_t",
            vec![("snow.table.fields_t.timestamp.field", "u_changed_on")],
            "table fields_t has no readable field u_changed_on",
        ),
        case(
            "tz_t",
            vec![("snow.auth.username", "local-user"), ("snow.auth.password", "Local-Pw-1")],
            "the integration user's time zone is not UTC",
        ),
    ];
    let mut files = Vec::new();
    for c in &cases {
        let name = unique(&format!("probe-{}", c.table));
        files.push(connector_file(&dir, &name, &config(&fake, &name, &topic, &[c.table], &c.extra)));
    }
    let refs: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
    let mut runner = Runner::start(&dir, "run", &refs);
    wait_until("six parked units", Duration::from_secs(60), || (runner.log().matches("unit parked").count() >= 6).then_some(()));
    let log = runner.wait_for_log("unit parked", Duration::from_secs(1));
    runner.kill();
    for c in &cases {
        let line = log
            .lines()
            .find(|l| l.contains("unit parked") && l.contains(&format!("unit={}", c.table)))
            .unwrap_or_else(|| panic!("no parked line for {}:\n{log}", c.table));
        assert!(line.contains(c.message), "{}: {line}", c.table);
    }
    let list_reads = fake
        .journal()
        .entries
        .iter()
        .filter(|e| e.path.starts_with("/api/now/table/") && e.query.as_deref().is_some_and(|q| !q.starts_with("ORDERBYDESC")))
        .count();
    assert_eq!(list_reads, 0, "no data was read: only the probes ran");
}

#[test]
fn a_failing_table_is_parked_and_shown_in_status_while_the_others_deliver() {
    let now = now_secs();
    let fake = support::fake_with_user(USER, PASSWORD, Some(now));
    let good: BTreeSet<String> = fake.shared().seed("good_t", 1500, now - 600, 300).into_iter().collect();
    fake.shared().seed("acl_t", 10, now - 600, 10);
    fake.add_fault(Fault::always(FaultAction::Status { status: 403, retry_after: None }).on_path("/api/now/table/acl_t"));
    let dir = work_dir("parked");
    let (name, topic) = (unique("parked"), unique("parked"));
    let file = connector_file(&dir, &name, &config(&fake, &name, &topic, &["acl_t", "good_t"], &[("snow.batch.size", "500")]));
    let mut runner = Runner::start_with_args(&dir, "run", &[&file], &["--status-listen", "127.0.0.1:0"]);
    let log = runner.wait_for_log("status endpoint on http://", Duration::from_secs(60));
    let addr = log.split("status endpoint on http://").nth(1).and_then(|r| r.split('/').next()).unwrap().to_string();

    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| keys(r).len() >= good.len());
    assert_eq!(keys(&records), good, "the healthy table delivers every row although the other one is parked");
    let units = wait_until("acl_t parked in /status", Duration::from_secs(30), || {
        let (code, body) = support::http_get(&addr, "/status");
        assert_eq!(code, 200, "{body}");
        let status: Value = serde_json::from_str(&body).unwrap();
        let units = status["units"].as_array().unwrap().clone();
        units.iter().any(|u| u["unit"] == "acl_t" && u["state"] == "parked").then_some(units)
    });
    let unit = |table: &str| units.iter().find(|u| u["unit"] == table).unwrap_or_else(|| panic!("no {table} in {units:?}")).clone();
    let parked = unit("acl_t");
    assert_eq!(parked["connector"], name.as_str());
    assert!(parked["message"].as_str().unwrap().contains("the integration user may not read table acl_t"), "{parked}");
    assert_eq!(unit("good_t")["state"], "running", "{units:?}");
    assert!(!units.iter().any(|u| u.to_string().contains(PASSWORD)), "no secret in the status");

    let parked_gauge = format!("snow_source_unit_parked{{connector=\"{name}\",table=\"acl_t\"}} 1");
    let delivered = format!("snow_source_records_total{{connector=\"{name}\",table=\"good_t\"}} {}", good.len());
    // The fake's clock is frozen: once caught up, the lag is exactly the safety lag (2 s here).
    let caught_up = format!("snow_source_lag_seconds{{connector=\"{name}\",table=\"good_t\"}} 2");
    wait_until("the metrics show the parked table, every delivered row and the lag", Duration::from_secs(30), || {
        let (code, body) = support::http_get(&addr, "/metrics");
        assert_eq!(code, 200);
        [&parked_gauge, &delivered, &caught_up].iter().all(|want| body.lines().any(|l| l == want.as_str())).then_some(())
    });
    assert_eq!(support::http_get(&addr, "/nothing").0, 404);
    let log = runner.stop();
    let summary = log
        .lines()
        .find(|l| l.contains(" parked  acl_t: "))
        .unwrap_or_else(|| panic!("no parked line in the summary:\n{}", tail(&log, 20)));
    assert!(summary.contains("may not read table acl_t"), "{summary}");
}
