//! Sink lanes end to end: partitions written in parallel within the cap, each key's writes in
//! offset order, each lane in its own ServiceNow session, every record with exactly one outcome on
//! the reporter topics; poison records to the dead letter queue with Kafka Connect's headers while
//! their partition goes on; and a partition stopped by the default policy while the others go on.
//!
//! Longer than our 600-line mark: each lane scenario (order, poison, kills, takeover, traps,
//! correlation, DLQ, transforms) needs its records and its checks spelled out.

use crate::support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use fake_snow::server::Latency;
use fake_snow::{FakeOptions, FakeSnow};
use support::kafka::{Produced, Read, create_topic, produce, produce_records, read_until, try_committed, wait_committed};
use support::{Runner, assert_last_updates, connector_file, keyed_updates, now_secs, sink_entries, tail, unique, wait_until, work_dir};

/// A sink test's setting: a fake with `rows` seeded incidents, answering after `latency`, and a new
/// topic of `partitions` holding `updates` keyed updates of them (`stride` apart, see
/// [`keyed_updates`]) followed by `more`.
struct Scene {
    fake: FakeSnow,
    name: String,
    topic: String,
    records: Vec<(Option<String>, String)>,
    rt: tokio::runtime::Runtime,
}

impl Scene {
    fn new(
        prefix: &str,
        rows: usize,
        latency: Latency,
        partitions: i32,
        updates: usize,
        stride: usize,
        more: Vec<(Option<String>, String)>,
    ) -> Self {
        let fake = FakeSnow::start(FakeOptions::default()).unwrap();
        let ids = fake.shared().seed("incident", rows as u64, now_secs() - 3600, 600);
        fake.shared().set_latency(latency);
        let (name, topic) = (unique(prefix), unique(prefix));
        let bootstrap = kafka_harness::shared().bootstrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(create_topic(bootstrap, &topic, partitions));
        let mut records = keyed_updates(&ids, updates, stride);
        records.extend(more);
        rt.block_on(produce(bootstrap, &topic, &records));
        Self { fake, name, topic, records, rt }
    }
}

fn latency(request_ms: u64, write_ms: u64) -> Latency {
    Latency { request_ms, write_ms, batch_quota_ms: None }
}

#[test]
fn ten_thousand_records_over_eight_partitions_keep_each_keys_order_within_the_cap() {
    const RECORDS: usize = 10_000;
    const KEYS: usize = 1_000;
    const CAP: usize = 8;
    // A little latency per request, so that lanes overlap as they would against an instance. Each
    // key is updated ten times, its updates spread over the whole run; u_seq orders them.
    let Scene { fake, name, topic, records, .. } = Scene::new("lanes", KEYS, latency(2, 1), 8, RECORDS, 7919, Vec::new());
    let bootstrap = kafka_harness::shared().bootstrap();

    let dir = work_dir("lanes");
    let config = sink_entries(
        &fake.url(),
        &name,
        &topic,
        "incident",
        &[
            ("snow.auth.type", "none"),
            ("snow.sink.max.in.flight", &CAP.to_string()),
            ("reporter.result.topic.name", "${connector}-ok"),
            ("reporter.error.topic.name", "${connector}-errors"),
        ],
    );
    let runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    wait_committed(&format!("connect-{name}"), &topic, 8, RECORDS as i64, Duration::from_secs(300));
    let log = runner.stop();

    let journal = fake.journal();
    let writes: Vec<&fake_snow::JournalEntry> = journal.entries.iter().filter(|e| e.method == "PATCH").collect();
    assert_eq!(writes.len(), RECORDS, "one PATCH per record, none repeated; log:\n{}", tail(&log, 20));
    // Every key's writes arrived in offset order (u_seq grows with the offset within a partition).
    let mut last_seq: HashMap<&str, i64> = HashMap::new();
    for w in &writes {
        let body: serde_json::Value = serde_json::from_str(w.body.as_deref().unwrap()).unwrap();
        let seq: i64 = body["u_seq"].as_str().unwrap().parse().unwrap();
        let previous = last_seq.insert(w.path.as_str(), seq).unwrap_or(-1);
        assert!(seq > previous, "{}: u_seq {seq} written after {previous}", w.path);
    }
    assert!(journal.max_in_flight <= CAP, "never more than {CAP} requests in flight, saw {}", journal.max_in_flight);
    assert!(journal.max_in_flight >= 4, "partitions were written in parallel: at most {} in flight", journal.max_in_flight);
    // No two requests ever shared a session, and sessions were kept (not one per request).
    assert!(journal.entries.iter().all(|e| e.session_in_flight <= 1), "a session carried two requests at once");
    let sessions: HashSet<&str> = journal.entries.iter().filter_map(|e| e.session.as_deref()).collect();
    assert!((CAP..=4 * CAP).contains(&sessions.len()), "{} sessions for {} requests", sessions.len(), journal.entries.len());
    // Each row ends at its key's last update, applied once per record.
    assert_last_updates(&fake, "incident", &records);
    for row in fake.rows("incident") {
        let id = row["sys_id"].as_str().unwrap();
        assert_eq!(row["sys_mod_count"].as_str(), Some("10"), "{id}: ten updates applied once each");
    }
    // Exactly one report per record, each for its own partition and offset.
    let reports = read_until(bootstrap, &format!("{name}-ok"), Duration::from_secs(60), |r| r.len() >= RECORDS);
    let mut seen = HashSet::new();
    for r in &reports {
        let v = r.json();
        assert_eq!((v["outcome"].as_str(), v["operation"].as_str(), v["status"].as_u64()), (Some("written"), Some("patch"), Some(200)));
        assert_eq!(v["key"].as_str(), v["sys_id"].as_str());
        assert!(seen.insert((v["partition"].as_i64().unwrap(), v["offset"].as_i64().unwrap())), "a second report of {v}");
    }
    assert_eq!(seen.len(), RECORDS);
    assert!(log.contains(&format!("{RECORDS} records written (0 created, {RECORDS} patched")), "{}", tail(&log, 5));
}

#[test]
fn poison_records_go_to_the_dead_letter_queue_and_their_partition_goes_on() {
    let fake = FakeSnow::start(FakeOptions::default()).unwrap();
    fake.create_table("incident");
    let (name, topic) = (unique("poison"), unique("mixed"));
    let bootstrap = kafka_harness::shared().bootstrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(create_topic(bootstrap, &topic, 1));
    let header = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
    let record = |value: &str, headers: Vec<(String, String)>| Produced { key: None, value: Some(value.into()), headers };
    let records = vec![
        record(r#"{"short_description":"first"}"#, vec![]),
        // Not JSON.
        record(r#"{"short_description": "#, header("trace", "t-1")),
        // A table outside the allow-list.
        record(r#"{"short_description":"escape"}"#, header("snow.table", "sys_user")),
        // A table the instance does not have: ServiceNow refuses the write.
        record(r#"{"short_description":"nowhere"}"#, header("snow.table", "u_missing")),
        // A nested object, which snow.sink.nested.policy=reject forbids.
        record(r#"{"short_description":"nested","caller_id":{"name":"x"}}"#, vec![]),
        record(r#"{"short_description":"last"}"#, vec![]),
    ];
    rt.block_on(produce_records(bootstrap, &topic, &records));

    let dir = work_dir("poison");
    let config = sink_entries(
        &fake.url(),
        &name,
        &topic,
        "incident",
        &[
            ("snow.auth.type", "none"),
            ("snow.sink.table.header", "snow.table"),
            ("snow.sink.table.header.allowed", "incident,u_missing"),
            ("snow.sink.nested.policy", "reject"),
            ("errors.tolerance", "all"),
            ("behavior.on.api.errors", "log"),
            ("errors.deadletterqueue.topic.name", "${connector}-dlq"),
            ("reporter.error.topic.name", "${connector}-errors"),
        ],
    );
    let runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    wait_committed(&format!("connect-{name}"), &topic, 1, records.len() as i64, Duration::from_secs(120));
    let log = runner.stop();

    let written: Vec<String> = fake.rows("incident").iter().filter_map(|r| r["short_description"].as_str().map(String::from)).collect();
    assert_eq!(written, ["first", "last"], "the partition went on past each poison record; log:\n{}", tail(&log, 20));
    let dead = read_until(bootstrap, &format!("{name}-dlq"), Duration::from_secs(60), |r| r.len() >= 4);
    assert_eq!(dead.len(), 4);
    for (read, offset) in dead.iter().zip(1..) {
        let h = |k: &str| read.headers.get(&format!("__connect.errors.{k}")).cloned().unwrap_or_default();
        assert_eq!((h("topic"), h("partition"), h("offset")), (topic.clone(), "0".into(), offset.to_string()));
        assert_eq!((h("connector.name"), h("stage")), (name.clone(), "TASK_PUT".into()));
        assert_eq!(read.value, records[offset as usize].value.as_deref().unwrap().as_bytes(), "the record itself, unchanged");
        let (class, message) = (h("exception.class.name"), h("exception.message"));
        let expected = match offset {
            1 => ("snow_connect.RecordError", "not JSON"),
            2 => ("snow_connect.RecordError", "snow.sink.table.header.allowed"),
            3 => ("snow_connect.ApiError", "400"),
            _ => ("snow_connect.RecordError", "caller_id"),
        };
        assert_eq!(class, expected.0, "offset {offset}: {message}");
        assert!(message.contains(expected.1), "offset {offset}: {message}");
    }
    assert_eq!(dead[0].headers.get("trace").map(String::as_str), Some("t-1"), "the record's own headers are kept");
    let errors = read_until(bootstrap, &format!("{name}-errors"), Duration::from_secs(60), |r| r.len() >= 4);
    let offsets: Vec<i64> = errors.iter().map(|r| r.json()["offset"].as_i64().unwrap()).collect();
    assert_eq!(offsets, [1, 2, 3, 4], "one error report per poison record");
    assert!(errors.iter().all(|r| r.json()["outcome"] == "failed"));
}

#[test]
fn by_default_a_failed_record_stops_its_partition_and_the_others_go_on() {
    let fake = FakeSnow::start(FakeOptions::default()).unwrap();
    fake.create_table("incident");
    let (name, bad, good) = (unique("strict"), unique("strict-bad"), unique("strict-good"));
    let bootstrap = kafka_harness::shared().bootstrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(create_topic(bootstrap, &bad, 1));
    rt.block_on(create_topic(bootstrap, &good, 1));
    let value = |d: &str| (None, format!(r#"{{"short_description":"{d}"}}"#));
    rt.block_on(produce(bootstrap, &bad, &[value("bad-0"), (None, "{oops".into()), value("bad-2")]));
    rt.block_on(produce(bootstrap, &good, &[value("good-0"), value("good-1"), value("good-2")]));

    let dir = work_dir("strict");
    // The good topic is consumed through topics.regex (matched against whole names).
    let pattern = good.replacen("good", "g[o]+d", 1);
    let config: BTreeMap<String, String> =
        sink_entries(&fake.url(), &name, &bad, "incident", &[("snow.auth.type", "none"), ("topics.regex", &pattern)]);
    let mut runner = Runner::start_with_args(&dir, "run", &[&connector_file(&dir, &name, &config)], &["--status-listen", "127.0.0.1:0"]);
    let addr = support::status_address(&mut runner);
    let unit = format!("{bad}-0");
    let parked = wait_until("the bad partition parked", Duration::from_secs(120), || {
        support::unit_status_of(&addr, &name, &unit).filter(|u| u["state"] == "parked")
    });
    wait_committed(&format!("connect-{name}"), &good, 1, 3, Duration::from_secs(60));
    let log = runner.stop();
    // Read after the runner's final commit: nothing stored past the failed record.
    let committed_bad = support::kafka::committed(bootstrap, &format!("connect-{name}"), &bad, 1);

    let message = parked["message"].as_str().unwrap();
    assert!(message.contains(&format!("record {unit}@1 failed")) && message.contains("errors.tolerance=none"), "{message}");
    assert_eq!(committed_bad, [1], "committed up to the failed record, not past it");
    let mut written: Vec<String> = fake.rows("incident").iter().filter_map(|r| r["short_description"].as_str().map(String::from)).collect();
    written.sort();
    assert_eq!(written, ["bad-0", "good-0", "good-1", "good-2"], "nothing after the failed record; log:\n{}", tail(&log, 20));
}

#[test]
fn killed_at_random_points_while_writing_every_record_gets_an_outcome_and_commits_never_pass_one() {
    const ROWS: usize = 1_000;
    const KILLS: usize = 4;
    // 10,000 records under `make test`; `make soak` writes the 20,000 docs/delivery.md measured.
    let total = support::sized("SNOW_KILL_RECORDS", 10_000) as usize;
    let (patches, create_count) = (total - total / 10, total / 10);
    // Patches (repeatable) and creates named by a natural key (deterministic: never a second row).
    let creates = (0..create_count).map(|i| (None, format!(r#"{{"u_ref":"r{i}","short_description":"created"}}"#))).collect();
    let Scene { fake, name, topic, records, rt } = Scene::new("killed", ROWS, latency(1, 0), 4, patches, 13, creates);
    let bootstrap = kafka_harness::shared().bootstrap();
    rt.block_on(create_topic(bootstrap, &format!("{name}-ok"), 1));

    let dir = work_dir("killed");
    let config = sink_entries(
        &fake.url(),
        &name,
        &topic,
        "incident",
        &[("snow.auth.type", "none"), ("snow.sink.natural.key.fields", "u_ref"), ("reporter.result.topic.name", "${connector}-ok")],
    );
    let file = connector_file(&dir, &name, &config);
    let group = format!("connect-{name}");
    let writes = || fake.journal().entries.iter().filter(|e| matches!(e.method.as_str(), "PATCH" | "POST")).count();
    let mut seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    eprintln!("kill points seeded with {seed}");
    let mut random = move |below: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % below as u64) as usize
    };
    for kill in 0..KILLS {
        let before = writes();
        // Somewhere between 300 and 2,300 writes into this run.
        let at = before + 300 + random(2_000);
        let runner = Runner::start(&dir, "run", &[&file]);
        wait_until(&format!("run {kill} reached write {at}"), Duration::from_secs(120), || (writes() >= at).then_some(()));
        runner.kill();
        assert!(writes() > before, "run {kill}: the kill landed after writes flowed");
        // Committed offsets never passed a record without its report.
        let committed = wait_until("the committed offsets", Duration::from_secs(30), || try_committed(bootstrap, &group, &topic, 4).ok());
        let reports = read_until(bootstrap, &format!("{name}-ok"), Duration::from_secs(60), |_| true);
        let reported: HashSet<(i64, i64)> =
            reports.iter().map(Read::json).map(|v| (v["partition"].as_i64().unwrap(), v["offset"].as_i64().unwrap())).collect();
        for (p, c) in committed.iter().enumerate() {
            for offset in 0..*c {
                assert!(reported.contains(&(p as i64, offset)), "run {kill}: {topic}-{p}@{offset} committed without an outcome");
            }
        }
        eprintln!("run {kill}: killed at {} writes, committed {committed:?}", writes());
    }
    let runner = Runner::start(&dir, "run", &[&file]);
    wait_committed(&group, &topic, 4, total as i64, Duration::from_secs(300));
    let log = runner.stop();

    // Every record has an outcome; repeats only from restarts, counted.
    let reports = read_until(bootstrap, &format!("{name}-ok"), Duration::from_secs(60), |r| r.len() >= total);
    let mut per_record: HashMap<(i64, i64), usize> = HashMap::new();
    for r in &reports {
        let v = r.json();
        assert_eq!(v["outcome"], "written", "{v}");
        *per_record.entry((v["partition"].as_i64().unwrap(), v["offset"].as_i64().unwrap())).or_default() += 1;
    }
    assert_eq!(per_record.len(), total, "every record has an outcome; log:\n{}", tail(&log, 20));
    let repeated: usize = per_record.values().map(|n| n - 1).sum();
    let executed = writes();
    eprintln!("{KILLS} kills: {repeated} records reported twice or more, {} writes executed for {total} records", executed);
    // No partition skipped a record: each row holds its last update; each create made one row.
    assert_last_updates(&fake, "incident", &records);
    let rows = fake.rows("incident");
    let created: Vec<&str> = rows.iter().filter_map(|r| r.get("u_ref").and_then(|v| v.as_str())).collect();
    assert_eq!((created.len(), created.iter().collect::<HashSet<_>>().len()), (create_count, create_count), "one row per create");
    // A record written but killed before its report was acknowledged is written again without a
    // second report: repeated writes are at least the repeated reports.
    assert!(executed - total >= repeated, "{executed} writes, {repeated} repeated reports");
}

#[test]
fn two_runners_share_the_partitions_and_the_survivor_takes_over_a_killed_ones() {
    const ROWS: usize = 400;
    const RECORDS: usize = 2_400;
    let Scene { fake, name, topic, records, .. } = Scene::new("shared", ROWS, latency(20, 0), 4, RECORDS, 11, Vec::new());
    let bootstrap = kafka_harness::shared().bootstrap();
    let config = sink_entries(
        &fake.url(),
        &name,
        &topic,
        "incident",
        &[("snow.auth.type", "none"), ("reporter.result.topic.name", "${connector}-ok")],
    );
    let (dir_a, dir_b) = (work_dir("shared-a"), work_dir("shared-b"));
    let writes = || fake.journal().entries.iter().filter(|e| e.method == "PATCH").count();

    let mut a = Runner::start_with_args(&dir_a, "run", &[&connector_file(&dir_a, &name, &config)], &["--status-listen", "127.0.0.1:0"]);
    a.wait_for_log("assigned 4 partition(s)", Duration::from_secs(60));
    // Puts of up to 200 records take seconds here: the join lands while they are in progress.
    wait_until("the first runner writing", Duration::from_secs(60), || (writes() >= 100).then_some(()));
    // A second runner of the same connector joins the group: the partitions are shared.
    let mut b = Runner::start_with_args(&dir_b, "run", &[&connector_file(&dir_b, &name, &config)], &["--status-listen", "127.0.0.1:0"]);
    let addr_b = support::status_address(&mut b);
    a.wait_for_log("was revoked; its lane stops", Duration::from_secs(60));
    b.wait_for_log("assigned 2 partition(s)", Duration::from_secs(60));
    // Both runners write: the second has written a put of its own.
    wait_until("the second runner writing", Duration::from_secs(60), || {
        (0..4).find_map(|p| support::unit_status_of(&addr_b, &name, &format!("{topic}-{p}")).filter(|u| u["state"] == "running"))
    });
    // The first runner dies; the survivor takes its partitions after the session timeout.
    let at_kill = writes();
    let killed_at_ms = fake.journal().entries.iter().map(|e| e.done_ms).max().unwrap_or(0);
    a.kill();
    // The rebalance is cooperative: the survivor is assigned the dead runner's two partitions
    // beside its own two.
    wait_until("the survivor holding all four partitions", Duration::from_secs(60), || {
        (assigned_partitions(&b.log()).len() == 4).then_some(())
    });
    wait_committed(&format!("connect-{name}"), &topic, 4, RECORDS as i64, Duration::from_secs(300));
    let lanes: Vec<serde_json::Value> = (0..4).filter_map(|p| support::unit_status_of(&addr_b, &name, &format!("{topic}-{p}"))).collect();
    let log_b = b.stop();
    assert!(at_kill < RECORDS, "the kill landed mid-way ({at_kill} writes)");
    assert_eq!(lanes.len(), 4, "the survivor shows every lane: {lanes:?}");

    let reports = read_until(bootstrap, &format!("{name}-ok"), Duration::from_secs(60), |r| r.len() >= RECORDS);
    let reported: HashSet<(i64, i64)> =
        reports.iter().map(Read::json).map(|v| (v["partition"].as_i64().unwrap(), v["offset"].as_i64().unwrap())).collect();
    assert_eq!(reported.len(), RECORDS, "every record has an outcome; log:\n{}", tail(&log_b, 20));
    // Until the kill, no record was written twice and no row went back: the revocation waited
    // for each put in progress and committed its offset, so the new owner started right after it
    // (without that wait, the runner that joined replays records the other is still writing).
    let journal = fake.journal();
    let mut last: HashMap<&str, i64> = HashMap::new();
    for e in journal.entries.iter().filter(|e| e.method == "PATCH" && e.at_ms < killed_at_ms) {
        let seq: i64 =
            serde_json::from_str::<serde_json::Value>(e.body.as_deref().unwrap()).unwrap()["u_seq"].as_str().unwrap().parse().unwrap();
        let before = last.insert(e.path.as_str(), seq).unwrap_or(-1);
        assert!(seq > before, "{}: u_seq {seq} written after {before} before the kill", e.path);
    }
    assert_last_updates(&fake, "incident", &records);
}

/// The partitions a runner's log says it was assigned and not revoked since.
fn assigned_partitions(log: &str) -> std::collections::BTreeSet<String> {
    let mut held = std::collections::BTreeSet::new();
    for line in log.lines() {
        if let Some((_, list)) = line.split_once(" partition(s): ").filter(|_| line.contains(" INFO assigned ")) {
            let list = list.split(" connector=").next().unwrap_or_default();
            held.extend(list.split(", ").filter(|p| !p.trim().is_empty()).map(|p| p.trim().to_string()));
        } else if let Some((partition, _)) = line.split_once("INFO partition ").and_then(|(_, rest)| rest.split_once(" was revoked")) {
            held.remove(partition);
        }
    }
    held
}

#[test]
fn a_lane_whose_component_keeps_trapping_is_parked_after_its_budget_and_the_others_go_on() {
    let fake = FakeSnow::start(FakeOptions::default()).unwrap();
    let (name, bad, good) = (unique("traps"), unique("traps-bad"), unique("traps-good"));
    let bootstrap = kafka_harness::shared().bootstrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(create_topic(bootstrap, &bad, 1));
    rt.block_on(create_topic(bootstrap, &good, 1));
    rt.block_on(produce(bootstrap, &bad, &[(None, "{}".into()), (None, "trap".into()), (None, "{}".into())]));
    rt.block_on(produce(bootstrap, &good, &[(None, "{}".into()), (None, "{}".into()), (None, "{}".into())]));
    let dir = work_dir("traps");
    let mut config = sink_entries(&fake.url(), &name, &bad, "incident", &[("snow.auth.type", "none"), ("component.trap.budget", "3")]);
    config.insert("component.path".into(), support::signed(guest_artifacts::ROGUE_SINK).into());
    config.insert("topics".into(), format!("{bad},{good}"));
    let mut runner = Runner::start_with_args(&dir, "run", &[&connector_file(&dir, &name, &config)], &["--status-listen", "127.0.0.1:0"]);
    let addr = support::status_address(&mut runner);
    let unit = format!("{bad}-0");
    let parked = wait_until("the trapping lane parked", Duration::from_secs(120), || {
        support::unit_status_of(&addr, &name, &unit).filter(|u| u["state"] == "parked")
    });
    wait_committed(&format!("connect-{name}"), &good, 1, 3, Duration::from_secs(60));
    let good_lane = support::unit_status_of(&addr, &name, &format!("{good}-0")).unwrap();
    let log = runner.stop();
    let message = parked["message"].as_str().unwrap();
    assert!(message.contains("trapped 3 times in a row") && message.contains("component.trap.budget=3"), "{message}");
    assert_eq!(good_lane["state"], "running", "{good_lane}");
    // Three traps in a row on the second record (and one more when a put also held the first).
    let traps = log.matches("the component trapped in put").count();
    assert!((3..=4).contains(&traps), "{traps} traps: {}", tail(&log, 20));
    let committed = support::kafka::committed(bootstrap, &format!("connect-{name}"), &bad, 1);
    assert_eq!(committed, [1], "committed up to the record it traps on, not past it");
}

#[test]
fn creates_that_name_no_row_make_one_row_each_across_kills_under_correlation_lookup() {
    const CREATES: usize = 1_000;
    const KILLS: usize = 3;
    let creates = (0..CREATES).map(|i| (None, format!(r#"{{"u_ref":"c{i}","short_description":"created"}}"#))).collect();
    let Scene { fake, name, topic, rt, .. } = Scene::new("lookup-kills", 10, latency(2, 1), 2, 0, 1, creates);
    let bootstrap = kafka_harness::shared().bootstrap();
    rt.block_on(create_topic(bootstrap, &format!("{name}-ok"), 1));
    let dir = work_dir("lookup-kills");
    let config = sink_entries(
        &fake.url(),
        &name,
        &topic,
        "incident",
        &[
            ("snow.auth.type", "none"),
            ("snow.sink.operation", "create"),
            ("snow.sink.unknown.outcome", "correlation_lookup"),
            ("snow.sink.correlation.field", "u_ref"),
            ("reporter.result.topic.name", "${connector}-ok"),
        ],
    );
    let file = connector_file(&dir, &name, &config);
    let group = format!("connect-{name}");
    let posts = || fake.journal().entries.iter().filter(|e| e.method == "POST").count();
    for kill in 0..KILLS {
        let at = posts() + 100 + kill * 50;
        let runner = Runner::start(&dir, "run", &[&file]);
        wait_until(&format!("run {kill} reached create {at}"), Duration::from_secs(120), || (posts() >= at).then_some(()));
        runner.kill();
        assert!(posts() < CREATES, "run {kill}: the kill landed while creating ({} of {CREATES})", posts());
    }
    let runner = Runner::start(&dir, "run", &[&file]);
    wait_committed(&group, &topic, 2, CREATES as i64, Duration::from_secs(300));
    let log = runner.stop();
    let rows = fake.rows("incident");
    let created: Vec<&str> = rows.iter().filter_map(|r| r.get("u_ref").and_then(|v| v.as_str())).collect();
    let distinct: HashSet<&&str> = created.iter().collect();
    assert_eq!((created.len(), distinct.len()), (CREATES, CREATES), "one row per create, no duplicate; log:\n{}", tail(&log, 20));
    let lookups =
        fake.journal().entries.iter().filter(|e| e.method == "GET" && e.query.as_deref().is_some_and(|q| q.contains("u_ref"))).count();
    assert!(lookups > 0, "the records taken over were looked up before they were created again");
    eprintln!("{KILLS} kills over {CREATES} creates: {} creates sent, {lookups} look-ups, no duplicate", posts());
}

#[test]
fn a_dead_letter_kafka_refuses_for_good_is_truncated_or_parks_its_partition_as_configured() {
    let fake = FakeSnow::start(FakeOptions::default()).unwrap();
    fake.create_table("incident");
    let bootstrap = kafka_harness::shared().bootstrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    // Not JSON, and so large that with the dead letter's headers it is over librdkafka's
    // message.max.bytes (1,000,000) while the record itself was not.
    let huge = format!("{{\"short_description\": \"{}", "x".repeat(999_400));
    let record = |value: &str| Produced { key: None, value: Some(value.into()), headers: vec![] };
    let records = vec![record(r#"{"short_description":"before"}"#), record(&huge), record(r#"{"short_description":"after"}"#)];
    let dir = work_dir("refused-dlq");
    for behavior in ["truncate", "park"] {
        let (name, topic) = (unique(&format!("refused-{behavior}")), unique("big"));
        rt.block_on(create_topic(bootstrap, &topic, 1));
        rt.block_on(produce_records(bootstrap, &topic, &records));
        let config = sink_entries(
            &fake.url(),
            &name,
            &topic,
            "incident",
            &[
                ("snow.auth.type", "none"),
                ("errors.tolerance", "all"),
                ("errors.deadletterqueue.topic.name", "${connector}-dlq"),
                ("reporter.refused.behavior", behavior),
            ],
        );
        let mut runner = Runner::spawn_with_args(
            &dir,
            behavior,
            &[&connector_file(&dir, &name, &config)],
            support::DEFAULT_LOG,
            &[],
            &["--status-listen", "127.0.0.1:0"],
        );
        let addr = support::status_address(&mut runner);
        if behavior == "truncate" {
            wait_committed(&format!("connect-{name}"), &topic, 1, 3, Duration::from_secs(120));
            let dead = read_until(bootstrap, &format!("{name}-dlq"), Duration::from_secs(60), |r| !r.is_empty());
            let from: usize = dead[0].headers.get("snow.truncated.from.bytes").unwrap().parse().unwrap();
            assert!(from > 1_000_000 && dead[0].value.len() <= 64 * 1024, "a truncated dead letter of a {from}-byte one");
            assert_eq!(dead[0].headers.get("__connect.errors.offset").map(String::as_str), Some("1"), "its coordinates are kept");
        } else {
            let parked = wait_until("the partition parked", Duration::from_secs(120), || {
                support::unit_status_of(&addr, &name, &format!("{topic}-0")).filter(|u| u["state"] == "parked")
            });
            assert!(parked["message"].as_str().unwrap().contains("Kafka refuses"), "{parked}");
        }
        runner.stop();
        let committed = try_committed(bootstrap, &format!("connect-{name}"), &topic, 1).unwrap_or_default();
        let written: Vec<String> = fake.rows("incident").iter().filter_map(|r| r["short_description"].as_str().map(String::from)).collect();
        if behavior == "truncate" {
            assert_eq!(written, ["before", "after"], "the partition went on");
        } else {
            assert!(committed.first().copied().unwrap_or(0) <= 1, "nothing committed past the refused dead letter: {committed:?}");
        }
    }
}

#[test]
fn connects_transforms_reshape_drop_and_route_records_before_they_are_written() {
    let fake = FakeSnow::start(FakeOptions::default()).unwrap();
    fake.create_table("incident");
    fake.create_table("problem");
    let (name, topic) = (unique("smt"), unique("smt-in"));
    let bootstrap = kafka_harness::shared().bootstrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(create_topic(bootstrap, &topic, 1));
    let record = |value: &str, headers: Vec<(String, String)>| Produced { key: None, value: Some(value.into()), headers };
    let records = vec![
        record(r#"{"desc":"one","secret":"s1","internal":"x"}"#, vec![]),
        record(r#"{"desc":"dropped","secret":"s2"}"#, vec![("skip".into(), "yes".into())]),
        record(r#"{"desc":"three","secret":"s3"}"#, vec![]),
        // Not an object: ReplaceField has nothing to work on, a record error under errors.tolerance=all.
        record(r#"[1,2]"#, vec![]),
        record(r#"{"desc":"five","secret":"s5"}"#, vec![]),
    ];
    rt.block_on(produce_records(bootstrap, &topic, &records));
    let dir = work_dir("sink-transforms");
    let config = sink_entries(
        &fake.url(),
        &name,
        &topic,
        "incident",
        &[
            ("snow.auth.type", "none"),
            // The routed topic names the table the record is written to.
            ("snow.sink.table", ""),
            ("snow.sink.table.map", &format!("{topic}-routed:problem")),
            ("errors.tolerance", "all"),
            ("errors.deadletterqueue.topic.name", "${connector}-dlq"),
            ("reporter.result.topic.name", "${connector}-ok"),
            ("transforms", "skip,rename,mask,label,route"),
            ("transforms.skip.type", "org.apache.kafka.connect.transforms.Filter"),
            ("transforms.skip.predicate", "flagged"),
            ("transforms.rename.type", "org.apache.kafka.connect.transforms.ReplaceField$Value"),
            ("transforms.rename.renames", "desc:short_description"),
            ("transforms.rename.exclude", "internal"),
            ("transforms.mask.type", "org.apache.kafka.connect.transforms.MaskField$Value"),
            ("transforms.mask.fields", "secret"),
            ("transforms.mask.replacement", "***"),
            // The JavaScript example transform component, in order with Connect's transforms.
            ("transforms.label.type", "io.snowconnect.transforms.Component"),
            ("transforms.label.component.path", support::label_transform()),
            ("transforms.label.field", "short_description"),
            ("transforms.label.labels", "one:1,three:3,five:5"),
            ("transforms.label.into", "rank"),
            ("transforms.route.type", "org.apache.kafka.connect.transforms.RegexRouter"),
            ("transforms.route.regex", "(.*)"),
            ("transforms.route.replacement", "$1-routed"),
            ("predicates", "flagged"),
            ("predicates.flagged.type", "org.apache.kafka.connect.transforms.predicates.HasHeaderKey"),
            ("predicates.flagged.name", "skip"),
        ],
    );
    let runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    wait_committed(&format!("connect-{name}"), &topic, 1, records.len() as i64, Duration::from_secs(120));
    let log = runner.stop();

    let rows = fake.rows("problem");
    let written: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap_or("").to_string();
            (text("short_description"), text("secret"), text("rank"))
        })
        .collect();
    let expected: Vec<(String, String, String)> =
        [("one", "1"), ("three", "3"), ("five", "5")].iter().map(|(d, r)| (d.to_string(), "***".to_string(), r.to_string())).collect();
    assert_eq!(written, expected, "renamed, masked, labelled, routed to problem; the flagged record dropped; log:\n{}", tail(&log, 20));
    assert!(rows.iter().all(|r| r.get("internal").is_none() && r.get("desc").is_none()), "{rows:?}");
    assert!(fake.rows("incident").is_empty(), "nothing written under the original topic's table");
    let reports = read_until(bootstrap, &format!("{name}-ok"), Duration::from_secs(60), |r| r.len() >= 4);
    let skipped: Vec<i64> =
        reports.iter().filter(|r| r.json()["reason"] == "filtered").map(|r| r.json()["offset"].as_i64().unwrap()).collect();
    assert_eq!(skipped, [1], "the filtered record is reported as skipped and committed past");
    let dead = read_until(bootstrap, &format!("{name}-dlq"), Duration::from_secs(60), |r| !r.is_empty());
    let h = |k: &str| dead[0].headers.get(&format!("__connect.errors.{k}")).cloned().unwrap_or_default();
    assert_eq!((h("offset"), h("stage")), ("3".to_string(), "TRANSFORMATION".to_string()));
    assert_eq!(h("class.name"), "org.apache.kafka.connect.transforms.ReplaceField$Value");
    assert!(
        h("exception.message").contains("Only Map objects supported in absence of schema for [field replacement]"),
        "{}",
        h("exception.message")
    );
}
