//! Migration end to end: Confluent's ServiceNow source (a stand-in that behaves as documented)
//! streams from fake-snow into a real broker with a writer changing rows; it is stopped, its
//! configuration translated (`snow-connect migrate confluent`), our start written from its last
//! committed offset (`snow-connect migrate cutover`), and our connector takes over. The evidence
//! — every row version in the topic, what the old connector skipped and we recovered, the
//! duplicates against the printed bound — is written to `target/evidence/cutover.json`
//! (schema in docs/migration.md) and checked here.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_snow::store::{DictField, Row};
use fake_snow::{FakeOptions, FakeSnow};
use serde_json::{Value, json};
use support::kafka::{Read, read_until};
use support::old_poller::OldPoller;
use support::{Runner, now_secs, snow_connect, tail, unique, wait_until, work_dir};

const USER: &str = "kafka.reader";
const PASSWORD: &str = "Migr4te-Old-Pw";
/// Rounds of the writer while the old connector streams: short enough that everything it skips
/// lies within our overlap (30 s) of its last committed position.
const STREAM_ROUNDS: usize = 8;
/// How far in the past a late row is stamped (a long transaction's commit).
const LATE_BY: i64 = 6;
/// A row version: (sys_updated_on text, sys_id, sys_mod_count).
type Version = (String, String, String);

/// The incident dictionary our typed `JsonConverter` source reads (the old one typed nothing).
fn dictionary() -> Vec<DictField> {
    vec![
        DictField::typed("sys_id", "GUID"),
        DictField::typed("sys_updated_on", "glide_date_time"),
        DictField::typed("sys_mod_count", "integer"),
        DictField::typed("number", "string"),
        DictField::typed("short_description", "string"),
        DictField::typed("priority", "integer"),
    ]
}

/// The version a topic record carries, from the old connector's all-string envelope or ours
/// (typed: the timestamp in epoch milliseconds, the count a number).
fn version_of(read: &Read) -> Option<Version> {
    let value: Value = serde_json::from_slice(&read.value).ok()?;
    let row = value.get("payload")?;
    let ts = match &row["sys_updated_on"] {
        Value::String(s) => s.clone(),
        Value::Number(n) => format_ts(n.as_i64()? / 1000),
        _ => return None,
    };
    let count = match &row["sys_mod_count"] {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    Some((ts, row["sys_id"].as_str()?.to_string(), count))
}

fn format_ts(secs: i64) -> String {
    snow_core::time::Timestamp(secs).to_string()
}

/// The version a row of the fake holds now.
fn version_in(fake: &FakeSnow, id: &str) -> Version {
    fake.shared().version_of("incident", id).unwrap()
}

fn ours(read: &Read) -> bool {
    read.headers.contains_key("snow.instance")
}

#[test]
fn a_cutover_from_confluents_source_loses_nothing_and_counts_its_duplicates() {
    let dir = work_dir("cutover");
    let bootstrap = kafka_harness::shared().bootstrap().to_string();
    let fake = support::fake_with_user(USER, PASSWORD, None);
    let now = now_secs();
    // The old connector starts at 00:00 UTC of its day (servicenow.since); the seed lies after it.
    let day_start = now - now.rem_euclid(86_400);
    let seed_from = (now - 1800).max(day_start + 1);
    let seeded = fake.shared().seed("incident", 600, seed_from, u64::try_from((now - 60 - seed_from).max(1)).unwrap());
    fake.shared().store().set_dictionary("incident", &dictionary(), None, now);
    let truth: Arc<Mutex<BTreeSet<Version>>> = Arc::new(Mutex::new(seeded.iter().map(|id| version_in(&fake, id)).collect()));

    let (old_name, topic, offsets_topic) = (unique("servicenow-source"), unique("topic-servicenow"), unique("connect-offsets"));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(support::kafka::create_topic(&bootstrap, &topic, 1));
    rt.block_on(support::kafka::create_topic_with(&bootstrap, &offsets_topic, 1, &[("cleanup.policy", "compact")]));

    // The old connector's configuration, as Confluent's examples write it.
    let since_day = format_ts(day_start)[..10].to_string();
    let old_config = json!({
        "name": old_name,
        "config": {
            "connector.class": "io.confluent.connect.servicenow.ServiceNowSourceConnector",
            "kafka.topic": topic,
            "servicenow.url": format!("{}/", fake.url()),
            "tasks.max": "1",
            "servicenow.table": "incident",
            "servicenow.user": USER,
            "servicenow.password": PASSWORD,
            "servicenow.since": since_day,
            "batch.max.rows": "5",
            "poll.interval.s": "1",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "confluent.topic.bootstrap.servers": bootstrap,
            "confluent.topic.replication.factor": "1"
        }
    });
    let old_file = dir.join("servicenow-source.json");
    std::fs::write(&old_file, old_config.to_string()).unwrap();

    // The old connector runs: a backfill, then streaming while a writer changes rows.
    let streaming = Arc::new(AtomicBool::new(false));
    let paging_changes = Arc::new(Mutex::new(Vec::<Version>::new()));
    let old_started = now_secs();
    let old = {
        let (fake_url, streaming, changes) = (fake.url(), streaming.clone(), paging_changes.clone());
        let shared = fake.shared_handle();
        OldPoller {
            fake_url,
            user: USER.into(),
            password: PASSWORD.into(),
            connector: old_name.clone(),
            table: "incident".into(),
            topic: topic.clone(),
            offsets_topic: offsets_topic.clone(),
            since: format!("{since_day} 00:00:00"),
            batch: 5,
            poll: Duration::from_secs(1),
            commit_every: 3,
        }
        .start(&bootstrap, move |page, before| {
            // While it pages, a row it has just read changes: every row after it moves up one
            // place, and the row at the next page's start is never read (offset paging). The
            // change lands in a later second than every row already there, so the old connector's
            // next position passes the skipped row for good. Once a poll (its first page).
            if streaming.load(Ordering::SeqCst) && before == 0 {
                let second = shared.clock.now();
                while shared.clock.now() <= second {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let id = page[0]["sys_id"].as_str().unwrap().to_string();
                let mut change = Row::new();
                change.insert("short_description".into(), json!(format!("changed while paged {}", now_secs())));
                if shared.update_rows("incident", std::slice::from_ref(&id), &change) == 1 {
                    changes.lock().unwrap().push((String::new(), id, String::new()));
                }
            }
        })
    };
    let read_old = |n: usize| read_until(&bootstrap, &topic, Duration::from_secs(120), |r| r.len() >= n);
    read_old(seeded.len());
    streaming.store(true, Ordering::SeqCst);

    // The writer: each second, changes rows never changed before and inserts a late row (stamped
    // eight seconds ago, as a long transaction commits it).
    let writing = Arc::new(AtomicBool::new(true));
    let late_rows = Arc::new(Mutex::new(Vec::<String>::new()));
    let rounds = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writer = {
        let (writing, truth, late_rows, rounds) = (writing.clone(), truth.clone(), late_rows.clone(), rounds.clone());
        let shared = fake.shared_handle();
        let ids: Vec<String> = seeded.iter().rev().step_by(3).cloned().collect();
        std::thread::spawn(move || {
            let mut next = ids.into_iter();
            let mut n = 10_000;
            while writing.load(Ordering::SeqCst) {
                for id in next.by_ref().take(6) {
                    let mut change = Row::new();
                    change.insert("priority".into(), json!("1"));
                    shared.update_rows("incident", std::slice::from_ref(&id), &change);
                    truth.lock().unwrap().insert(shared.version_of("incident", &id).unwrap());
                }
                n += 1;
                let late = shared.insert_at("incident", n, shared.clock.now() - LATE_BY);
                truth.lock().unwrap().insert(shared.version_of("incident", &late).unwrap());
                late_rows.lock().unwrap().push(late);
                rounds.fetch_add(1, Ordering::SeqCst);
                // The writer's pace: a round a second, as a busy instance changes rows.
                std::thread::sleep(Duration::from_millis(1000));
            }
        })
    };
    // The old connector streams for STREAM_ROUNDS rounds of the writer (all within our overlap of
    // its last position) and has paged past changed rows at least once.
    wait_until("the writer's rounds while the old connector streams", Duration::from_secs(120), || {
        (rounds.load(Ordering::SeqCst) >= STREAM_ROUNDS && !paging_changes.lock().unwrap().is_empty()).then_some(())
    });
    let old_stats = old.stop();
    let old_stopped = now_secs();
    assert!(old_stats.committed.is_some(), "the old connector committed an offset: {old_stats:?}");

    // Translate; then start ours where the old one stopped.
    let component = support::signed(guest_artifacts::GUEST_SOURCE);
    let (ok, out, err) = snow_connect(
        &dir,
        &[
            "migrate",
            "confluent",
            old_file.to_str().unwrap(),
            "--out",
            "migrated",
            "--bootstrap",
            &bootstrap,
            "--source-component",
            component,
            "--trusted-keys",
            support::DEV_PUB,
        ],
    );
    assert!(!ok && out.contains("exit code 1"), "a REVIEW translation (exit 1): {out}\n{err}");
    let translated = dir.join("migrated").join(format!("{old_name}.properties"));
    let env_password = format!("SNOW_{}_AUTH_PASSWORD", old_name.to_uppercase().replace(['-', '.'], "_"));
    let cutover = std::process::Command::new(env!("CARGO_BIN_EXE_snow-connect"))
        .args(["migrate", "cutover", translated.to_str().unwrap(), "--old-connector", &old_name, "--old-offsets-topic", &offsets_topic])
        .args(["--seed-max", "40", "--json"])
        .env(&env_password, PASSWORD)
        .env("SNOW_LOG", "warn")
        .current_dir(&dir)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&cutover.stderr).into_owned();
    assert!(cutover.status.success(), "cutover: {printed}");
    let plan: Value = serde_json::from_slice(&cutover.stdout).unwrap();
    let table_plan = plan["tables"][0].clone();
    assert_eq!(table_plan["old_timestamp"], json!(old_stats.committed.clone().unwrap()), "T is the last committed offset");
    let bound = table_plan["duplicate_bound"].as_u64().unwrap();
    assert!(printed.contains(&format!("at most {bound} duplicate(s)")), "the bound is printed: {printed}");
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("snow-connect.offsets.json")).unwrap()).unwrap();
    let position: Value =
        serde_json::from_str(stored["offsets"][&old_name].as_object().unwrap().values().next().unwrap().as_str().unwrap()).unwrap();
    let seed: BTreeSet<Version> = position["seen"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v[0].as_str().unwrap().to_string(), v[1].as_str().unwrap().to_string(), v[2].as_str().unwrap().to_string()))
        .collect();

    let ours_started = now_secs();
    let runner = Runner::spawn(&dir, "ours", &[&translated], support::DEFAULT_LOG, &[(&env_password, PASSWORD)]);
    // The writer goes on across the cutover, while ours starts.
    let at_start = rounds.load(Ordering::SeqCst);
    wait_until("the writer's rounds while ours starts", Duration::from_secs(120), || {
        (rounds.load(Ordering::SeqCst) >= at_start + 4).then_some(())
    });
    writing.store(false, Ordering::SeqCst);
    writer.join().unwrap();
    let truth: BTreeSet<Version> = truth.lock().unwrap().clone();
    let truth = {
        // The rows changed while the old connector paged hold their latest version in the fake.
        let mut all = truth;
        for (_, id, _) in paging_changes.lock().unwrap().iter() {
            all.insert(version_in(&fake, id));
        }
        all
    };
    let records = read_until(&bootstrap, &topic, Duration::from_secs(240), |records| {
        let seen: BTreeSet<Version> = records.iter().filter_map(version_of).collect();
        truth.iter().all(|v| seen.contains(v))
    });
    // A few more sweeps of ours: a duplicate would be written by now.
    let sweeps = support::sweep_starts(&fake, "incident");
    wait_until("two more sweeps", Duration::from_secs(60), || (support::sweep_starts(&fake, "incident") >= sweeps + 2).then_some(()));
    let records = read_until(&bootstrap, &topic, Duration::from_secs(60), |r| r.len() >= records.len());
    // The runbook's check, as a user runs it after the cutover (our connector still running).
    let verify = std::process::Command::new(env!("CARGO_BIN_EXE_snow-connect"))
        .args(["migrate", "verify", translated.to_str().unwrap(), "--from", table_plan["reread_from"].as_str().unwrap()])
        .args(["--until", &format_ts(now_secs()), "--json"])
        .env(&env_password, PASSWORD)
        .env("SNOW_LOG", "warn")
        .current_dir(&dir)
        .output()
        .unwrap();
    let verified: Value = serde_json::from_slice(&verify.stdout).unwrap_or(Value::Null);
    let log = runner.stop();

    // The evidence.
    let old_versions: Vec<Version> = records.iter().filter(|r| !ours(r)).filter_map(version_of).collect();
    let new_versions: Vec<Version> = records.iter().filter(|r| ours(r)).filter_map(version_of).collect();
    let (old_set, new_set): (BTreeSet<Version>, BTreeSet<Version>) =
        (old_versions.iter().cloned().collect(), new_versions.iter().cloned().collect());
    let lost: Vec<&Version> = truth.iter().filter(|v| !old_set.contains(*v) && !new_set.contains(*v)).collect();
    let t = old_stats.position.clone();
    let recovered: Vec<&Version> = new_set.iter().filter(|v| !old_set.contains(*v) && v.0 <= t).collect();
    let late: BTreeSet<String> = late_rows.lock().unwrap().iter().cloned().collect();
    let recovered_late = recovered.iter().filter(|v| late.contains(&v.1)).count();
    let recovered_paging = recovered.len() - recovered_late;
    let duplicates: Vec<&Version> = new_set.iter().filter(|v| old_set.contains(*v)).collect();
    let outside_bound: Vec<&&Version> = duplicates.iter().filter(|v| seed.contains(**v)).collect();
    let mut new_counts: BTreeMap<&Version, usize> = BTreeMap::new();
    for v in &new_versions {
        *new_counts.entry(v).or_default() += 1;
    }
    let our_own_duplicates = new_counts.values().filter(|n| **n > 1).count();
    let old_own_duplicates = old_versions.len() - old_set.len();
    let checks = json!({
        "lost_is_zero": lost.is_empty(),
        "every_final_version_in_topic": truth.iter().all(|v| old_set.contains(v) || new_set.contains(v)),
        "late_rows_recovered": recovered_late >= 1,
        "paging_skips_recovered": recovered_paging >= 1,
        "duplicates_within_bound": (duplicates.len() as u64) <= bound,
        "no_duplicate_of_a_seeded_version": outside_bound.is_empty(),
        "ours_wrote_each_version_once": our_own_duplicates == 0,
        "old_committed_offset_used": table_plan["old_timestamp"] == json!(old_stats.committed.clone().unwrap()),
        "verify_finds_nothing_missing": verify.status.success() && verified["tables"][0]["missing"] == json!([]),
        "verify_counts_the_same_duplicates": verified["tables"][0]["duplicates_old_and_ours"] == json!(duplicates.len())
            && verified["tables"][0]["duplicates_ours"] == json!(0),
    });
    let evidence = json!({
        "schema": "snow-connect/cutover-evidence/1",
        "old_connector": {
            "product": "ServiceNow Source Connector for Confluent Platform (stand-in: tests/e2e/support/old_poller.rs)",
            "behaviour": "sys_updated_on>=T^ORDERBYsys_updated_on, sysparm_limit=batch.max.rows=5, sysparm_offset paging, offset {timestamp} committed every 3 polls",
            "polls": old_stats.polls, "pages": old_stats.pages, "records": old_stats.records,
            "committed_offset": old_stats.committed, "position_in_memory": old_stats.position,
        },
        "new_connector": {
            "snow_connect": env!("CARGO_PKG_VERSION"),
            "component": Path::new(component).file_name().unwrap().to_string_lossy(),
            "component_sha256": sha256_hex(&std::fs::read(component).unwrap()),
        },
        "cutover": table_plan,
        "verify": verified,
        "windows": {
            "old_started": format_ts(old_started), "old_stopped": format_ts(old_stopped),
            "old_committed": old_stats.committed, "reread_from": table_plan["reread_from"],
            "ours_started": format_ts(ours_started), "ended": format_ts(now_secs()),
        },
        "counts": {
            "row_versions": truth.len(),
            "old_records": old_versions.len(), "old_versions": old_set.len(), "old_own_duplicates": old_own_duplicates,
            "new_records": new_versions.len(), "new_versions": new_set.len(),
            "lost": lost.len(),
            "recovered": recovered.len(), "recovered_late_rows": recovered_late, "recovered_paging_skips": recovered_paging,
            "duplicates": duplicates.len(), "duplicate_bound": bound, "seeded": seed.len(),
        },
        "recovered": recovered.iter().map(|(ts, id, count)| json!({"sys_id": id, "sys_updated_on": ts, "sys_mod_count": count})).collect::<Vec<_>>(),
        "lost": lost.iter().map(|(ts, id, count)| json!({"sys_id": id, "sys_updated_on": ts, "sys_mod_count": count})).collect::<Vec<_>>(),
        "checks": checks,
    });
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/evidence/cutover.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, format!("{evidence:#}\n")).unwrap();
    eprintln!("cutover evidence ({}): {}", path.display(), evidence["counts"]);
    for (name, passed) in checks.as_object().unwrap() {
        assert_eq!(passed, &json!(true), "check {name} failed; evidence in {}; our log:\n{}", path.display(), tail(&log, 30));
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// `migrate confluent --apply` against a running worker: a connector with a starting position
/// (from `migrate cutover --out`) is created stopped, its offsets written (KIP-875), then resumed;
/// one the migration did not make is refused unless forced (then stopped, reconfigured, given its
/// position and resumed); applying again updates its own.
#[test]
fn apply_creates_at_a_position_refuses_strangers_and_updates_its_own() {
    use support::fleet::{curl, start_worker, wait_status, worker_properties};
    const OTHER_USER: &str = "problem.reader";
    let dir = work_dir("apply");
    let now = now_secs();
    let users = vec![(USER.into(), PASSWORD.into()), (OTHER_USER.into(), PASSWORD.into())];
    let fake = FakeSnow::start(FakeOptions { users, frozen_at: Some(now), ..Default::default() }).unwrap();
    // 40 rows an hour ago, 10 in the last minute: the position (now - 30 s) leaves the old ones out.
    let old_rows = fake.shared().seed("incident", 40, now - 3600, 600);
    let new_rows = fake.shared().seed("incident", 10, now - 20, 10);
    let problems = fake.shared().seed("problem", 5, now - 3600, 60);
    fake.clock().advance(10);
    let (incidents, problem_name, topic, problem_topic) =
        (unique("snow-incidents"), unique("snow-problems"), unique("apply-topic"), unique("apply-problems"));
    let old = |connector: &str, table: &str, topic: &str, user: &str| {
        json!({"name": connector, "config": {
            "connector.class": "io.confluent.connect.servicenow.ServiceNowSourceConnector",
            "kafka.topic": topic, "servicenow.url": fake.url(), "servicenow.table": table,
            "servicenow.user": user, "servicenow.password": PASSWORD, "poll.interval.s": "1",
            "servicenow.since": format_ts(now - 7200)[..10].to_string(),
        }})
    };
    let inputs = dir.join("old");
    std::fs::create_dir_all(&inputs).unwrap();
    std::fs::write(inputs.join("a.json"), old(&incidents, "incident", &topic, USER).to_string()).unwrap();
    std::fs::write(inputs.join("b.json"), old(&problem_name, "problem", &problem_topic, OTHER_USER).to_string()).unwrap();
    let component = support::signed(guest_artifacts::GUEST_SOURCE);
    let translate = |extra: &[&str]| {
        let bootstrap = kafka_harness::shared().bootstrap();
        let mut args = vec!["migrate", "confluent", "old", "--out", "migrated", "--source-component", component, "--bootstrap", bootstrap];
        args.extend_from_slice(extra);
        snow_connect(&dir, &args)
    };
    // Their users differ: they stay two connectors (the report says why).
    let (_, out, err) = translate(&[]);
    assert!(out.contains("exit code 1") && out.lines().filter(|l| l.contains(".properties:")).count() == 2, "{out}\n{err}");
    let report = std::fs::read_to_string(dir.join("migrated/migration-report.md")).unwrap();
    assert!(report.contains("differs in snow.auth.username"), "{report}");

    // The starting positions by hand (--since), written as KIP-875 bodies into one file.
    let file = |name: &str| dir.join("migrated").join(format!("{name}.properties"));
    let password_env = |name: &str| format!("SNOW_{}_AUTH_PASSWORD", name.to_uppercase().replace(['-', '.'], "_"));
    for (name, since) in [(&incidents, now - 30), (&problem_name, now - 7000)] {
        let cutover = std::process::Command::new(env!("CARGO_BIN_EXE_snow-connect"))
            .args(["migrate", "cutover", file(name).to_str().unwrap(), "--since", &format_ts(since), "--out", "positions.json"])
            .env(password_env(name), PASSWORD)
            .env("SNOW_LOG", "warn")
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(cutover.status.success(), "{}", String::from_utf8_lossy(&cutover.stderr));
    }

    let spec = worker_properties(&dir, "w1", &unique("apply-fleet"), &[]);
    let (incidents_env, problems_env) = (password_env(&incidents), password_env(&problem_name));
    let worker = start_worker(&dir, "w1", &spec, &[(&incidents_env, PASSWORD), (&problems_env, PASSWORD)]);
    let url = format!("http://127.0.0.1:{}", spec.port);
    // A connector of the incidents' name made by hand (no snow.migrated.from) is left alone.
    let by_hand = json!({"name": incidents, "config": {
        "component.path": component, "snow.instance.url": fake.url(), "snow.tables": "incident",
        "snow.auth.username": USER, "snow.auth.password": format!("${{env:{incidents_env}}}"),
        "snow.table.incident.topic": unique("by-hand"), "snow.startup.probe": "false"}});
    assert_eq!(curl(spec.port, "POST", "/connectors", Some(&by_hand)).status, 201);
    let (ok, out, err) = translate(&["--apply", &url, "--offsets", "positions.json"]);
    assert!(!ok && out.contains("\"outcome\":\"refused\""), "refused: {out}\n{err}");
    assert!(out.contains(&format!("{problem_name}: {{\"outcome\":\"created_at_position\"}}")), "{out}");
    // Applied again, the connector that has run keeps its own position.
    wait_status(spec.port, &problem_name, Duration::from_secs(120), "running", |s| s["connector"]["state"] == "RUNNING");
    read_until(kafka_harness::shared().bootstrap(), &problem_topic, Duration::from_secs(120), |r| r.len() >= problems.len());
    wait_until("the problems connector's offset stored", Duration::from_secs(60), || {
        let offsets = curl(spec.port, "GET", &format!("/connectors/{problem_name}/offsets"), None);
        offsets.text.contains(&problems[problems.len() - 1]).then_some(())
    });
    let (_, out, _) = translate(&["--apply", &url, "--offsets", "positions.json"]);
    assert!(out.contains(&format!("{problem_name}: {{\"outcome\":\"updated_keeping_position\"}}")), "{out}");
    // Told to (--force), it takes the connector over: stopped, reconfigured, given its position
    // (KIP-875), resumed.
    let (_, out, err) = translate(&["--apply", &url, "--offsets", "positions.json", "--force"]);
    assert!(out.contains(&format!("{incidents}: {{\"outcome\":\"updated_at_position\"}}")), "{out}\n{err}");
    for name in [&incidents, &problem_name] {
        wait_status(spec.port, name, Duration::from_secs(120), "running", |s| s["connector"]["state"] == "RUNNING");
    }
    let offsets = curl(spec.port, "GET", &format!("/connectors/{incidents}/offsets"), None);
    assert!(offsets.text.contains("incident"), "{}", offsets.text);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| {
        let keys: BTreeSet<String> = r.iter().map(|r| r.key.trim_matches('"').to_string()).collect();
        new_rows.iter().all(|id| keys.contains(id))
    });
    let keys: BTreeSet<String> = records.iter().map(|r| r.key.trim_matches('"').to_string()).collect();
    assert!(old_rows.iter().all(|id| !keys.contains(id)), "rows before the position (less the overlap) are not read");
    // --force wrote the problems' position again too: its rows were read once more.
    let problem_records =
        read_until(kafka_harness::shared().bootstrap(), &problem_topic, Duration::from_secs(120), |r| r.len() >= 2 * problems.len());
    let problem_keys: BTreeSet<String> = problem_records.iter().map(|r| r.key.trim_matches('"').to_string()).collect();
    assert_eq!(problem_keys, problems.iter().cloned().collect::<BTreeSet<_>>(), "the created connector read from its position");

    // The runbook's check sees what the position left out: from an hour ago, the 40 old rows are
    // missing from the topic (exit 1); from the position on, nothing is.
    let verify = |from: i64| {
        std::process::Command::new(env!("CARGO_BIN_EXE_snow-connect"))
            .args([
                "migrate",
                "verify",
                file(&incidents).to_str().unwrap(),
                "--from",
                &format_ts(from),
                "--until",
                &format_ts(now + 10),
                "--json",
            ])
            .env(&incidents_env, PASSWORD)
            .env("SNOW_LOG", "warn")
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let hour = verify(now - 3600);
    assert_eq!(hour.status.code(), Some(1), "{}", String::from_utf8_lossy(&hour.stderr));
    let answer: Value = serde_json::from_slice(&hour.stdout).unwrap();
    let missing: BTreeSet<String> =
        answer["tables"][0]["missing"].as_array().unwrap().iter().map(|m| m[0].as_str().unwrap().to_string()).collect();
    assert_eq!(missing, old_rows.iter().cloned().collect::<BTreeSet<_>>(), "exactly the rows before the position");
    let recent = verify(now - 30);
    let answer: Value = serde_json::from_slice(&recent.stdout).unwrap();
    assert!(recent.status.success() && answer["tables"][0]["missing"] == json!([]), "{}", String::from_utf8_lossy(&recent.stderr));

    // Applying again updates our own connectors in place.
    let (_, out, err) = translate(&["--apply", &url]);
    assert_eq!(out.matches("\"outcome\":\"updated\"").count(), 2, "{out}\n{err}");
    let config = curl(spec.port, "GET", &format!("/connectors/{incidents}/config"), None);
    assert!(config.body["snow.migrated.from"].as_str().unwrap().contains(&incidents), "{}", config.text);
    drop(worker);
}
