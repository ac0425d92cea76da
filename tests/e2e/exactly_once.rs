//! Exactly-once sources (ADR 0030): a table's polls and positions go through Kafka transactions,
//! a restart rebuilds the dedup window from the topic, and a `read_committed` consumer sees every
//! final version once, through SIGKILLs with a transaction open.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fake_snow::{FakeSnow, Fault, FaultAction};
use support::kafka::{Read, read_until};
use support::{Runner, connector_file, now_secs, tail, unique, wait_until, work_dir};

const USER: &str = "eos-user";
const PASSWORD: &str = "Eos-Secret-Pw-7";
/// A worker whose source connectors may run exactly once (Connect's worker key; disabled by default).
const EOS_WORKER: (&str, &str) = ("exactly.once.source.support", "enabled");

fn fake(frozen_at: Option<i64>) -> FakeSnow {
    support::fake_with_user(USER, PASSWORD, frozen_at)
}

/// An exactly-once source of `tables` into `topic`, offsets in the topic `offsets`.
fn config(fake: &FakeSnow, name: &str, topic: &str, offsets: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut c = support::source_entries(
        &fake.url(),
        name,
        topic,
        &["incident"],
        &[("snow.auth.username", USER), ("snow.auth.password", PASSWORD), ("exactly.once.support", "required")],
    );
    c.remove("offset.storage.file.filename");
    c.insert("offset.storage.topic".into(), offsets.to_string());
    c.insert("offset.storage.partitions".into(), "3".into());
    c.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    c
}

/// Row versions `(sys_id, sys_mod_count)` read more than once.
fn duplicates(records: &[Read]) -> Vec<(String, String)> {
    let mut seen = BTreeSet::new();
    records.iter().map(Read::version).filter(|v| !seen.insert(v.clone())).collect()
}

#[test]
fn file_offsets_are_refused_for_required_and_requested_falls_back_saying_why() {
    let fake = fake(Some(now_secs()));
    let (name, topic) = (unique("eosfile"), unique("eosfile"));
    let dir = work_dir("eos-file");
    let mut c = config(&fake, &name, &topic, "unused", &[]);
    for key in ["offset.storage.topic", "offset.storage.partitions"] {
        c.remove(key);
    }
    c.insert("offset.storage.file.filename".into(), "offsets.json".into());
    let file = connector_file(&dir, &name, &c);
    let (ok, out, err) = support::snow_connect(&dir, &["validate", file.to_str().unwrap()]);
    assert!(!ok, "{out}");
    assert!(err.contains("exactly.once.support: required: offsets in a file") && err.contains("offset.storage.topic"), "{err}");
    c.insert("exactly.once.support".into(), "requested".into());
    let file = connector_file(&dir, &name, &c);
    let (ok, out, err) = support::snow_connect(&dir, &["validate", file.to_str().unwrap()]);
    assert!(ok, "{out} {err}");
    assert!(err.contains("runs at-least-once (set offset.storage.topic"), "{err}");
}

#[test]
fn killed_with_a_transaction_open_a_restart_adds_no_duplicate() {
    let now = now_secs();
    let fake = fake(Some(now));
    // Rows 1 s apart over the overlap: every restart re-reads up to 30 of them.
    let ids = fake.shared().seed("incident", 6000, now - 6100, 6000);
    fake.add_fault(Fault::always(FaultAction::Latency { ms: 300 }).on_method("GET").on_path("/api/now/table/incident"));
    let (name, topic, offsets) = (unique("eoskill"), unique("eoskill"), unique("eosoffsets"));
    let dir = work_dir("eos-kill");
    let file = connector_file(&dir, &name, &config(&fake, &name, &topic, &offsets, &[("snow.batch.size", "50")]));
    let bootstrap = kafka_harness::shared().bootstrap();
    for round in 0..3 {
        let mut runner = Runner::start(&dir, &format!("run{round}"), &[&file]);
        let before = read_until(bootstrap, &topic, Duration::from_secs(60), |_| true).len();
        read_until(bootstrap, &topic, Duration::from_secs(120), |r| r.len() >= before + 300);
        if round > 0 {
            runner.wait_for_log("dedup window rebuilt from the topic", Duration::from_secs(60));
        }
        runner.kill();
    }
    let runner = Runner::start(&dir, "final", &[&file]);
    let records = read_until(bootstrap, &topic, Duration::from_secs(300), |r| {
        r.iter().map(|x| x.key.as_str()).collect::<BTreeSet<_>>().len() >= ids.len()
    });
    let log = runner.stop();
    let keys: BTreeSet<&str> = records.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys.len(), ids.len(), "every row; log:\n{}", tail(&log, 20));
    assert_eq!(duplicates(&records), Vec::<(String, String)>::new(), "no version twice; log:\n{}", tail(&log, 20));
}

/// Inserts and updates rows while `writing`: same-second bursts of new rows, updates of old and
/// new rows, and late rows (stamped seconds ago, as a long transaction commits them).
fn writer(
    fake: Arc<FakeSnow>,
    seeded: Arc<Vec<String>>,
    writing: Arc<AtomicBool>,
    rounds: Arc<AtomicUsize>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut n = 0usize;
        while writing.load(Ordering::SeqCst) {
            let now = now_secs();
            let burst = fake.shared().seed("incident", 30, now, 0);
            for i in 0..3 {
                fake.shared().insert_at("incident", (n * 10 + i) as u64, now - 4 - i as i64);
            }
            let mut changes = serde_json::Map::new();
            changes.insert("state".into(), serde_json::Value::String(format!("{}", n % 7)));
            let old: Vec<String> = (0..20).map(|i| seeded[(n * 997 + i * 4_999) % seeded.len()].clone()).collect();
            fake.shared().update_rows("incident", &old, &changes);
            fake.shared().update_rows("incident", &burst[..10], &changes);
            n += 1;
            rounds.store(n, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(100));
        }
    })
}

#[test]
fn a_backfill_with_writers_killed_ten_times_with_a_transaction_open_has_every_final_version_once() {
    const KILLS: usize = 10;
    let fake = Arc::new(fake(None));
    let now = now_secs();
    let seeded = Arc::new(fake.shared().seed("incident", 100_000, now - 86_400, 80_000));
    fake.record_served(true);
    // Pages take a while, so a run lasts long enough to be killed mid-transaction several times.
    fake.add_fault(Fault::always(FaultAction::Latency { ms: 60 }).on_method("GET").on_path("/api/now/table/incident"));
    let (name, topic, offsets) = (unique("eoschaos"), unique("eoschaos"), unique("eoschaosoff"));
    let dir = work_dir("eos-chaos");
    let file = connector_file(&dir, &name, &config(&fake, &name, &topic, &offsets, &[("snow.batch.size", "1000")]));
    let (writing, rounds) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicUsize::new(0)));
    let writer = writer(fake.clone(), seeded.clone(), writing.clone(), rounds.clone());
    let bootstrap = kafka_harness::shared().bootstrap();
    let mut next = support::kill_points("exactly-once chaos");
    let mut landed = 0;
    let mut attempts = 0;
    let mut ends: Option<support::kafka::Ends> = None;
    while landed < KILLS {
        attempts += 1;
        assert!(attempts <= 4 * KILLS, "only {landed} of {attempts} kills landed with a transaction open");
        let runner = Runner::start(&dir, &format!("run{attempts}"), &[&file]);
        let watch = ends.get_or_insert_with(|| {
            wait_until("the topic", Duration::from_secs(60), || support::kafka::Ends::new(bootstrap, &topic).stable().gt(&0).then_some(()));
            support::kafka::Ends::new(bootstrap, &topic)
        });
        // Records flowed in this run: the committed end moved on.
        let before = watch.stable();
        wait_until("records committed by this run", Duration::from_secs(120), || (watch.stable() > before).then_some(()));
        // A random point, then the first moment a transaction with records is open.
        std::thread::sleep(Duration::from_millis(next() % 1500)); // a random kill point, not a synchronisation
        wait_until("a transaction open", Duration::from_secs(60), || watch.transaction_open().then_some(()));
        runner.kill();
        // The dead process's transaction stays open until the next run fences it: the kill landed in it.
        if watch.transaction_open() {
            landed += 1;
        }
    }
    let last = Runner::start(&dir, "final", &[&file]);
    support::stop_writer_after(&writing, &rounds, writer, 10);
    let (finals, records, log) = support::read_every_final_version(&fake, "incident", &topic, Duration::from_secs(600), last);
    assert!(finals.len() > 100_000 && finals.iter().any(|(_, m)| m != "0"), "rows were inserted and updated during the runs");
    assert_eq!(duplicates(&records), Vec::<(String, String)>::new(), "no version twice; log:\n{}", tail(&log, 20));
    let passed = versions_the_cursor_passed(&fake, &dir, &file, &name, &records);
    eprintln!(
        "{landed} kills with a transaction open in {attempts} attempts; {} records, {} rows; {} versions the cursor passed all in Kafka ({} let off: gone within {GRACE_MS} ms of the next open)",
        records.len(),
        finals.len(),
        passed.required,
        passed.let_off
    );
}

/// How long after an open a version the previous run read (but perhaps did not commit) must
/// still be the row's version to be required: the next run's re-read of its overlap comes by then.
const GRACE_MS: u64 = 10_000;

/// Opens the table once more (so the last run's reads are followed by an open at its committed
/// position), then checks that every version a read served at or below its next open is in Kafka
/// ([`support::passed`]); returns what was checked.
fn versions_the_cursor_passed(
    fake: &FakeSnow,
    dir: &std::path::Path,
    file: &std::path::Path,
    name: &str,
    records: &[Read],
) -> support::passed::Passed {
    let mut reopen = Runner::start(dir, "reopen", &[file]);
    reopen.wait_for_log("opened at cursor", Duration::from_secs(120));
    reopen.stop();
    let logs = support::passed::logs_in(dir);
    let opens = support::passed::opens(&logs.iter().map(String::as_str).collect::<Vec<_>>(), name, "incident");
    let in_kafka: BTreeSet<(String, String)> = records.iter().map(Read::version).collect();
    let passed = support::passed::check(fake, "incident", &opens, GRACE_MS, &in_kafka);
    assert!(passed.required > 100_000, "the check covered the backfill: {} versions required", passed.required);
    assert_eq!(
        passed.missing,
        Vec::<(String, String, String)>::new(),
        "versions a committed read served are in Kafka ({} required)",
        passed.required
    );
    passed
}

/// The worker id of the last request the fake answered for `table` (its `X-Snow-Worker`).
fn last_worker(fake: &FakeSnow, table: &str) -> Option<String> {
    let path = format!("/api/now/table/{table}");
    fake.journal().entries.iter().rev().find(|e| e.path == path).and_then(|e| e.worker.clone())
}

/// Creates the exactly-once source `name` of `incident` into `topic` through the REST API of the
/// worker on `port` (the password from the workers' `SNOW_EOS_PASSWORD`), `batch` rows a page.
fn create_in_fleet(port: u16, fake: &FakeSnow, name: &str, topic: &str, batch: &str) {
    let mut c = support::source_entries(
        &fake.url(),
        name,
        topic,
        &["incident"],
        &[
            ("snow.auth.username", USER),
            ("snow.auth.password", "${env:SNOW_EOS_PASSWORD}"),
            ("snow.batch.size", batch),
            ("exactly.once.support", "required"),
        ],
    );
    for key in ["offset.storage.file.filename", "kafka.bootstrap.servers", "component.trusted.keys", "name"] {
        c.remove(key);
    }
    let created = support::fleet::curl(port, "POST", "/connectors", Some(&serde_json::json!({ "name": name, "config": c })));
    assert_eq!(created.status, 201, "{}", created.text);
}

/// Requests for `table` the fake answered from `worker`.
fn requests_from(fake: &FakeSnow, table: &str, worker: &str) -> usize {
    let path = format!("/api/now/table/{table}");
    fake.journal().entries.iter().filter(|e| e.path == path && e.worker.as_deref() == Some(worker)).count()
}

/// The worker paused: its id, its index, its pid, and the ranges of its open transaction.
type Paused = (String, usize, String, Vec<(i32, i64, i64)>);

#[test]
fn a_worker_paused_past_its_session_is_fenced_when_it_resumes_and_adds_no_duplicate() {
    use support::fleet::{start_worker, worker_properties};
    let now = now_secs();
    let fake = fake(Some(now));
    let ids = fake.shared().seed("incident", 40_000, now - 80_000, 79_000);
    // Slow pages: the backfill is still running when the paused worker resumes.
    fake.add_fault(Fault::always(FaultAction::Latency { ms: 150 }).on_method("GET").on_path("/api/now/table/incident"));
    let dir = work_dir("eos-zombie");
    let group = unique("eos-zombie");
    let specs: Vec<_> = (0..2).map(|i| worker_properties(&dir, &format!("w{i}"), &group, &[EOS_WORKER])).collect();
    let env = [("SNOW_EOS_PASSWORD", PASSWORD)];
    let mut workers: Vec<Runner> = specs.iter().enumerate().map(|(i, s)| start_worker(&dir, &format!("w{i}"), s, &env)).collect();
    let (name, topic) = (unique("eoszombie"), unique("eoszombie"));
    create_in_fleet(specs[0].port, &fake, &name, &topic, "200");
    let bootstrap = kafka_harness::shared().bootstrap();
    let watch = support::kafka::Ends::new(bootstrap, &topic);
    wait_until("1,000 records committed", Duration::from_secs(120), || (watch.stable() >= 1_000).then_some(()));
    // Paused with a transaction open, so that the first thing it does when it resumes is finish
    // it; and paused while it owns the table (on a busy machine a worker can lose its session and
    // the table move and come back before the pause: the owner is read again each attempt).
    let mut paused: Option<Paused> = None;
    for _ in 0..20 {
        wait_until("a transaction open", Duration::from_secs(60), || watch.transaction_open().then_some(()));
        let owner = last_worker(&fake, "incident").expect("a worker reads the table");
        let zombie = specs.iter().position(|s| owner.ends_with(&format!(":{}", s.port))).expect("the owner is one of the workers");
        let pid = workers[zombie].pid().to_string();
        assert!(std::process::Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
        // Its unit of the table runs: opened more often than stopped (the log is complete: the
        // process writes each line before it goes on, and it is stopped now).
        let log = workers[zombie].log();
        let runs_the_table =
            log.matches("opened at cursor").count() > log.matches(&format!("unit stopped connector={name} unit=incident")).count();
        let open = watch.open_ranges();
        if !open.is_empty() && runs_the_table && last_worker(&fake, "incident").as_deref() == Some(owner.as_str()) {
            // Still open a while later: not a commit already on its way when the pause landed
            // (its markers are written in milliseconds; the session lasts 6 s, so nothing else
            // can decide the transaction in this window).
            let since = Instant::now();
            while !watch.decided(&open) && since.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(Duration::from_millis(100));
            }
            if !watch.decided(&open) {
                paused = Some((owner, zombie, pid, open));
                break;
            }
        }
        assert!(std::process::Command::new("kill").args(["-CONT", &pid]).status().unwrap().success());
    }
    let (owner, zombie, pid, open) = paused.expect("the table's owner was paused with a transaction open");
    let at_pause = requests_from(&fake, "incident", &owner);
    // Past its session (6 s): the other worker takes the slot, fences the paused one and reads on.
    let survivor = specs[1 - zombie].port;
    let survivor_id = format!("127.0.0.1:{survivor}");
    let taken = requests_from(&fake, "incident", &survivor_id);
    wait_until("the other worker reading the table", Duration::from_secs(120), || {
        (requests_from(&fake, "incident", &survivor_id) > taken + 5).then_some(())
    });
    // At most a request already on its way when it stopped.
    let paused = requests_from(&fake, "incident", &owner);
    assert!(paused <= at_pause + 1, "the paused worker sent nothing: {at_pause} requests at the pause, {paused} before it resumed");
    // The coordinator aborted the paused worker's open transaction when the other worker took the
    // slot's transactional.id over (the paused process could do nothing about it): its records
    // are in the topic, and a read_committed reader never gets them.
    wait_until("the paused worker's transaction decided", Duration::from_secs(60), || watch.decided(&open).then_some(()));
    assert_eq!(watch.committed_in(bootstrap, &open), 0, "the open transaction {open:?} of the paused worker was aborted, not committed");
    let stopped = format!("unit stopped connector={name} unit=incident");
    let stops_before = workers[zombie].log().matches(&stopped).count();
    assert!(std::process::Command::new("kill").args(["-CONT", &pid]).status().unwrap().success());
    // Resumed, the zombie's next transactional request is refused by the coordinator, and its unit
    // stops: through the fencing, or through the session loss it notices at the same moment (which
    // of the two comes first is a race; the refusal is logged either way).
    workers[zombie].wait_for_log("this producer is fenced", Duration::from_secs(120));
    wait_until("the zombie's unit stopped", Duration::from_secs(60), || {
        (workers[zombie].log().matches(&stopped).count() > stops_before).then_some(())
    });
    let records = read_until(bootstrap, &topic, Duration::from_secs(600), |r| {
        r.iter().map(|x| x.key.as_str()).collect::<BTreeSet<_>>().len() >= ids.len()
    });
    let logs: Vec<String> = workers.drain(..).map(Runner::stop).collect();
    assert_eq!(duplicates(&records), Vec::<(String, String)>::new(), "no version twice; zombie log:\n{}", tail(&logs[zombie], 30));
    assert_eq!(records.iter().map(|r| r.key.as_str()).collect::<BTreeSet<_>>().len(), ids.len(), "every row");
}

#[test]
#[ignore = "a soak (several minutes): run by `make soak`"]
fn a_fleet_of_three_killed_ten_times_with_a_transaction_open_has_every_version_the_cursor_passed_once() {
    use support::fleet::{start_worker, worker_properties};
    const KILLS: usize = 10;
    let fake = Arc::new(fake(None));
    let now = now_secs();
    let seeded = Arc::new(fake.shared().seed("incident", 100_000, now - 86_400, 80_000));
    fake.record_served(true);
    fake.add_fault(Fault::always(FaultAction::Latency { ms: 60 }).on_method("GET").on_path("/api/now/table/incident"));
    let dir = work_dir("eos-fleet-chaos");
    let group = unique("eos-fleet-chaos");
    let specs: Vec<_> = (0..3).map(|i| worker_properties(&dir, &format!("w{i}"), &group, &[EOS_WORKER])).collect();
    let env = [("SNOW_EOS_PASSWORD", PASSWORD)];
    let mut workers: Vec<Option<Runner>> =
        specs.iter().enumerate().map(|(i, s)| Some(start_worker(&dir, &format!("w{i}-0"), s, &env))).collect();
    let (name, topic) = (unique("eosfleetchaos"), unique("eosfleetchaos"));
    create_in_fleet(specs[0].port, &fake, &name, &topic, "1000");
    let (writing, rounds) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicUsize::new(0)));
    let writer = writer(fake.clone(), seeded.clone(), writing.clone(), rounds.clone());
    let bootstrap = kafka_harness::shared().bootstrap();
    wait_until("the topic", Duration::from_secs(120), || support::kafka::Ends::new(bootstrap, &topic).stable().gt(&0).then_some(()));
    let watch = support::kafka::Ends::new(bootstrap, &topic);
    let mut next = support::kill_points("exactly-once fleet chaos");
    let (mut landed, mut attempts) = (0, 0);
    let mut starts = [1usize; 3];
    while landed < KILLS {
        attempts += 1;
        assert!(attempts <= 4 * KILLS, "only {landed} of {attempts} kills landed with a transaction open");
        // Records flowed since the last kill: the committed end moved on.
        let before = watch.stable();
        wait_until("records committed since the last kill", Duration::from_secs(180), || (watch.stable() > before).then_some(()));
        std::thread::sleep(Duration::from_millis(next() % 1500)); // a random kill point, not a synchronisation
        wait_until("a transaction open", Duration::from_secs(60), || watch.transaction_open().then_some(()));
        // The worker that owns the table now: the last one the fake saw reading it.
        let owner = last_worker(&fake, "incident").expect("a worker reads the table");
        let victim = specs.iter().position(|s| owner.ends_with(&format!(":{}", s.port))).expect("the owner is one of the workers");
        workers[victim].take().unwrap().kill();
        // The dead worker's transaction stays open until the slot's next owner fences it.
        if watch.transaction_open() {
            landed += 1;
        }
        workers[victim] = Some(start_worker(&dir, &format!("w{victim}-{}", starts[victim]), &specs[victim], &env));
        starts[victim] += 1;
    }
    let written = rounds.load(Ordering::SeqCst);
    wait_until("a second of writes after the last kill", Duration::from_secs(60), || {
        (rounds.load(Ordering::SeqCst) >= written + 10).then_some(())
    });
    writing.store(false, Ordering::SeqCst);
    writer.join().unwrap();
    let finals = support::final_versions(&fake, &["incident"]);
    let records = read_until(bootstrap, &topic, Duration::from_secs(600), support::has_every(&finals));
    let logs: Vec<String> = workers.iter_mut().map(|w| w.take().unwrap().stop()).collect();
    assert!(support::has_every(&finals)(&records), "every final row version is in Kafka; last log:\n{}", tail(&logs[0], 20));
    assert!(finals.len() > 100_000 && finals.iter().any(|(_, m)| m != "0"), "rows were inserted and updated during the runs");
    assert_eq!(duplicates(&records), Vec::<(String, String)>::new(), "no version twice");
    // One worker alone opens the table at the fleet's last committed position.
    let mut reopen = start_worker(&dir, "reopen", &specs[0], &env);
    reopen.wait_for_log("opened at cursor", Duration::from_secs(120));
    reopen.stop();
    let logs = support::passed::logs_in(&dir);
    let opens = support::passed::opens(&logs.iter().map(String::as_str).collect::<Vec<_>>(), &name, "incident");
    let in_kafka: BTreeSet<(String, String)> = records.iter().map(Read::version).collect();
    let passed = support::passed::check(&fake, "incident", &opens, GRACE_MS, &in_kafka);
    assert!(passed.required > 100_000, "the check covered the backfill: {} versions required", passed.required);
    assert_eq!(passed.missing, Vec::<(String, String, String)>::new(), "versions a committed read served are in Kafka");
    eprintln!(
        "{landed} kills with a transaction open in {attempts} attempts; {} records, {} rows; {} versions the cursor passed all in Kafka ({} let off), {} opens",
        records.len(),
        finals.len(),
        passed.required,
        passed.let_off,
        opens.len()
    );
}
