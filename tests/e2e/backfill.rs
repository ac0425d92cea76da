//! Parallel backfill end to end (issue 22, ADR 0033): the real source component in the real host
//! reads a table in time slices at once from the fake, while a writer inserts, updates and adds
//! late rows, and the host is SIGKILLed in the middle of the backfill.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use fake_snow::{FakeSnow, Fault, FaultAction};
use serde_json::Value;
use support::kafka::{Read, read_until};
use support::{Runner, connector_file, now_secs, stored_position, tail, unique, wait_until, work_dir};

const USER: &str = "snow-e2e";
const PASSWORD: &str = "e2e-Secret-Pw-42";

fn config(fake: &FakeSnow, name: &str, topic: &str, parallelism: &str) -> BTreeMap<String, String> {
    let extra = [
        ("snow.auth.username", USER),
        ("snow.auth.password", PASSWORD),
        ("snow.batch.size", "100"),
        ("snow.table.incident.backfill.parallelism", parallelism),
    ];
    support::source_entries(&fake.url(), name, topic, &["incident"], &extra)
}

/// Inserts, updates seeded rows and adds rows stamped a second late, every 100 ms.
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
            fake.shared().seed("incident", 5, now, 0);
            fake.shared().insert_at("incident", 1_000_000 + n as u64, now - 1);
            let mut changes = serde_json::Map::new();
            changes.insert("state".into(), Value::String(format!("{}", n % 7)));
            let old: Vec<String> = (0..20).map(|i| seeded[(n * 997 + i * 4_999) % seeded.len()].clone()).collect();
            fake.shared().update_rows("incident", &old, &changes);
            n += 1;
            rounds.store(n, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(100));
        }
    })
}

/// Each key's last record's `sys_mod_count` (records of a key share a partition, read in order).
fn last_versions(records: &[Read]) -> BTreeMap<String, String> {
    records.iter().map(Read::version).collect()
}

/// Keys whose records carry a `sys_mod_count` lower than an earlier record of the key.
fn out_of_order(records: &[Read]) -> Vec<(String, u64, u64)> {
    let mut last: BTreeMap<&str, u64> = BTreeMap::new();
    let mut bad = Vec::new();
    for r in records {
        let count: u64 = r.headers.get("snow.sys_mod_count").and_then(|c| c.parse().ok()).unwrap();
        if let Some(&before) = last.get(r.key.as_str())
            && count < before
        {
            bad.push((r.key.clone(), before, count));
        }
        last.insert(&r.key, count);
    }
    bad
}

#[test]
fn a_parallel_backfill_killed_mid_way_ends_with_the_single_cursors_final_versions_and_each_keys_versions_in_order() {
    const KILLS: usize = 3;
    let fake = Arc::new(support::fake_with_user(USER, PASSWORD, None));
    let now = now_secs();
    let seeded = Arc::new(fake.shared().seed("incident", 14_000, now - 86_400, 80_000));
    // Skewed, as real tables are (most rows recent): the slices finish at different times and
    // the ones that finish early split the others.
    let mut seeded = seeded.to_vec();
    seeded.extend(fake.shared().seed("incident", 6_000, now - 1_800, 1_700));
    let seeded = Arc::new(seeded);
    // As slow as an instance (each page ~150 ms), so the backfill outlasts the kills.
    fake.add_fault(Fault::always(FaultAction::Latency { ms: 150 }).on_method("GET").on_path("/api/now/table/incident"));
    let (writing, rounds) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicUsize::new(0)));
    let writer = writer(fake.clone(), seeded.clone(), writing.clone(), rounds.clone());
    let (name, topic) = (unique("parbackfill"), unique("parbackfill"));
    let dir = work_dir("parallel-backfill");
    let file = connector_file(&dir, &name, &config(&fake, &name, &topic, "4"));
    let bootstrap = kafka_harness::shared().bootstrap();
    let mut next = support::kill_points("parallel backfill");
    let mut first_log = String::new();
    for k in 0..KILLS {
        let mut runner = Runner::start(&dir, &format!("run{k}"), &[&file]);
        if k > 0 {
            runner.wait_for_log("a parallel backfill resumes:", Duration::from_secs(60));
        }
        // Records flowed in this run: the stored position moved on.
        let before = stored_position(&dir, &name);
        wait_until("this run stored a position", Duration::from_secs(120), || {
            let now = stored_position(&dir, &name);
            (now.is_some() && now != before).then_some(())
        });
        std::thread::sleep(Duration::from_millis(next() % 1000)); // a random kill point, not a synchronisation
        let log = runner.log();
        runner.kill();
        let stored = stored_position(&dir, &name).unwrap();
        assert_eq!(stored["v"], 2, "kill {k} landed mid-backfill (the stored position is the slices'): {stored}; log:\n{}", tail(&log, 20));
        if k == 0 {
            first_log = log;
        }
    }
    assert!(first_log.contains("in 4 slices at once"), "the backfill was planned in 4 slices:\n{}", tail(&first_log, 30));
    let mut last = Runner::start(&dir, "final", &[&file]);
    last.wait_for_log("a parallel backfill resumes:", Duration::from_secs(60));
    let done = last.wait_for_log("the single cursor reads on", Duration::from_secs(300));
    let runs: String = (0..KILLS).map(|k| std::fs::read_to_string(dir.join(format!("run{k}.log"))).unwrap_or_default()).collect();
    assert!(format!("{runs}{done}").contains("finished early: the slice"), "slices that finished early split the others");
    support::stop_writer_after(&writing, &rounds, writer, 10);
    let (finals, parallel, _) = support::read_every_final_version(&fake, "incident", &topic, Duration::from_secs(300), last);
    assert_eq!(out_of_order(&parallel), Vec::new(), "no key has an older version after a newer one");

    // The same table read by a single cursor from scratch ends with the same final versions.
    let (single_name, single_topic) = (unique("singlebackfill"), unique("singlebackfill"));
    let single_dir = work_dir("single-backfill");
    fake.clear_faults();
    let single_file = connector_file(&single_dir, &single_name, &config(&fake, &single_name, &single_topic, "1"));
    let single_runner = Runner::start(&single_dir, "single", &[&single_file]);
    let single = read_until(bootstrap, &single_topic, Duration::from_secs(300), support::has_every(&finals));
    single_runner.stop();
    let expected: BTreeMap<String, String> = finals.iter().cloned().collect();
    assert_eq!(last_versions(&single), expected, "the single cursor's topic ends with the table's final versions");
    assert_eq!(last_versions(&parallel), expected, "the parallel backfill's topic ends with the same final versions");
    assert!(finals.len() > 20_000 && finals.iter().any(|(_, m)| m != "0"), "rows were inserted and updated during the runs");
    eprintln!(
        "parallel: {} records for {} rows ({} duplicates across {KILLS} kills); single cursor: {} records",
        parallel.len(),
        finals.len(),
        parallel.len() - last_versions(&parallel).len(),
        single.len()
    );
}

/// Exactly once (ADR 0030 with ADR 0033): killed with a transaction open during the backfill and
/// again just after the hand-over to the single cursor, a `read_committed` reader sees every final
/// version once.
#[test]
fn exactly_once_a_parallel_backfill_killed_during_it_and_after_the_hand_over_has_every_final_version_once() {
    let fake = Arc::new(support::fake_with_user(USER, PASSWORD, None));
    let now = now_secs();
    let mut seeded = fake.shared().seed("incident", 14_000, now - 86_400, 80_000);
    seeded.extend(fake.shared().seed("incident", 6_000, now - 600, 560));
    let seeded = Arc::new(seeded);
    // Slow pages: the backfill lasts long enough for a kill with a transaction open to land in it.
    fake.add_fault(Fault::always(FaultAction::Latency { ms: 300 }).on_method("GET").on_path("/api/now/table/incident"));
    let (writing, rounds) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicUsize::new(0)));
    let writer = writer(fake.clone(), seeded.clone(), writing.clone(), rounds.clone());
    let (name, topic, offsets) = (unique("eosparbackfill"), unique("eosparbackfill"), unique("eosparbackfilloff"));
    let dir = work_dir("eos-parallel-backfill");
    let mut c = config(&fake, &name, &topic, "4");
    c.remove("offset.storage.file.filename");
    c.insert("offset.storage.topic".into(), offsets);
    c.insert("offset.storage.partitions".into(), "3".into());
    c.insert("exactly.once.support".into(), "required".into());
    let file = connector_file(&dir, &name, &c);
    let bootstrap = kafka_harness::shared().bootstrap();
    // Runs until `ready` says so, then kills at the first moment a transaction with records is
    // open; tries again (a kill can land just after a commit) until one lands in a transaction.
    let mut runs = 0;
    let mut kill_in_a_transaction = |what: &str, ready: &dyn Fn(&mut Runner)| {
        for _ in 0..8 {
            runs += 1;
            let mut runner = Runner::start(&dir, &format!("run{runs}"), &[&file]);
            ready(&mut runner);
            let watch = support::kafka::Ends::new(bootstrap, &topic);
            wait_until(&format!("a transaction open ({what})"), Duration::from_secs(60), || watch.transaction_open().then_some(()));
            runner.kill();
            // The dead process's transaction stays open until the next run fences it.
            if watch.transaction_open() {
                return;
            }
        }
        panic!("no kill {what} landed with a transaction open in 8 attempts");
    };
    kill_in_a_transaction("during the backfill", &|_| {
        wait_until("records committed", Duration::from_secs(120), || {
            (support::kafka::Ends::new(bootstrap, &topic).stable() >= 500).then_some(())
        });
    });
    let first = std::cell::Cell::new(true);
    kill_in_a_transaction("after the hand-over", &|runner| {
        if first.replace(false) {
            // The kill before landed in the backfill: the next run resumes it.
            runner.wait_for_log("a parallel backfill resumes:", Duration::from_secs(60));
            runner.wait_for_log("the single cursor reads on", Duration::from_secs(300));
        } else {
            runner.wait_for_log("opened at cursor", Duration::from_secs(60));
        }
    });
    // The final run catches up at the fake's own speed.
    fake.clear_faults();
    let mut last = Runner::start(&dir, "final", &[&file]);
    last.wait_for_log("opened at cursor", Duration::from_secs(60));
    support::stop_writer_after(&writing, &rounds, writer, 10);
    let (_, records, _) = support::read_every_final_version(&fake, "incident", &topic, Duration::from_secs(300), last);
    let mut seen = BTreeSet::new();
    let twice: Vec<(String, String)> = records.iter().map(Read::version).filter(|v| !seen.insert(v.clone())).collect();
    let where_twice: Vec<String> = twice
        .iter()
        .take(5)
        .map(|v| {
            let at: Vec<String> = records
                .iter()
                .filter(|r| r.version() == *v)
                .map(|r| format!("p{}@{} {}", r.partition, r.offset, r.json()["sys_updated_on"]))
                .collect();
            format!("{}: {}", v.0, at.join(", "))
        })
        .collect();
    assert_eq!(twice, Vec::<(String, String)>::new(), "no version twice: {where_twice:#?}");
    assert_eq!(out_of_order(&records), Vec::new(), "no key has an older version after a newer one");
}
