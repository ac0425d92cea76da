//! A fleet end to end: `snow-connect worker` processes of one group, connectors created and run
//! through Kafka Connect's REST API with curl, state in Kafka topics, units shared by Kafka's group
//! protocol, the real components reading the fake over HTTP and a real broker.
//!
//! Longer than our 600-line mark: the fleet's scenarios share one set-up (workers, topics, REST
//! calls) and each is a long story of steps against it.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fake_snow::FakeSnow;
use serde_json::{Value, json};
use support::fleet::{curl, start_worker, tasks_in, wait_status, worker_properties};
use support::kafka::read_until;
use support::{now_secs, tail, unique, work_dir};

const USER: &str = "snow-fleet";
const PASSWORD: &str = "fleet-Secret-Pw-77";
const PASSWORD_ENV: (&str, &str) = ("SNOW_FLEET_PASSWORD", PASSWORD);

fn fake(now: i64) -> FakeSnow {
    support::fake_with_user(USER, PASSWORD, Some(now))
}

/// A source connector's configuration for the fleet: the password as a reference, no offsets file.
fn source_config(fake: &FakeSnow, name: &str, topic: &str, tables: &[&str]) -> Value {
    source_config_batch(fake, name, topic, tables, 500)
}

/// [`source_config`] reading `batch` rows a request.
fn source_config_batch(fake: &FakeSnow, name: &str, topic: &str, tables: &[&str], batch: usize) -> Value {
    let batch = batch.to_string();
    let extra = [
        ("snow.auth.username", USER),
        ("snow.auth.password", "${env:SNOW_FLEET_PASSWORD}"),
        ("snow.batch.size", batch.as_str()),
        ("connector.class", "io.snowconnect.ServiceNowSourceConnector"),
    ];
    let mut config: BTreeMap<String, String> = support::source_entries(&fake.url(), name, topic, tables, &extra);
    config.remove("offset.storage.file.filename");
    config.remove("kafka.bootstrap.servers");
    config.remove("component.trusted.keys");
    config.remove("name");
    json!(config)
}

#[test]
fn a_connector_created_over_rest_runs_and_answers_in_connects_shapes() {
    let now = now_secs();
    let fake = fake(now);
    let ids = fake.shared().seed("incident", 2000, now - 3600, 3000);
    let dir = work_dir("fleet-one");
    let group = unique("fleet-one");
    let status_port = support::fleet::free_port();
    let status_listen = format!("127.0.0.1:{status_port}");
    let spec = worker_properties(&dir, "w1", &group, &[("status.listen", &status_listen)]);
    let mut worker = start_worker(&dir, "w1", &spec, &[PASSWORD_ENV]);
    let (name, topic) = (unique("fsrc"), unique("incident"));

    let root = curl(spec.port, "GET", "/", None);
    assert_eq!(root.status, 200);
    assert!(root.body["version"].is_string() && root.body["kafka_cluster_id"].is_string(), "{}", root.text);
    let commit = root.body["commit"].as_str().unwrap_or_default();
    assert!(commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit()), "the build's commit: {}", root.text);
    let health = curl(spec.port, "GET", "/health", None);
    assert_eq!((health.status, health.body["status"].as_str()), (200, Some("healthy")), "{}", health.text);
    let plugins = curl(spec.port, "GET", "/connector-plugins", None);
    assert!(plugins.text.contains("io.snowconnect.ServiceNowSourceConnector"), "{}", plugins.text);

    let created = curl(
        spec.port,
        "POST",
        "/connectors",
        Some(&json!({ "name": name, "config": source_config(&fake, &name, &topic, &["incident"]) })),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(created.body["name"], name.as_str());
    assert_eq!(created.body["type"], "source");
    assert_eq!(
        curl(spec.port, "POST", "/connectors", Some(&json!({ "name": name, "config": {} }))).status,
        409,
        "a second create conflicts"
    );

    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| r.len() >= ids.len());
    let keys: BTreeSet<&str> = records.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys.len(), ids.len(), "every row arrived; log:\n{}", tail(&worker.log(), 30));
    let status = wait_status(spec.port, &name, Duration::from_secs(30), "RUNNING", |s| {
        s["connector"]["state"] == "RUNNING" && tasks_in(s, "RUNNING") == 1
    });
    assert_eq!(status["tasks"][0]["worker_id"], format!("127.0.0.1:{}", spec.port));
    assert_eq!(status["type"], "source");
    let info = curl(spec.port, "GET", &format!("/connectors/{name}"), None);
    assert_eq!(info.body["tasks"], json!([{ "connector": name, "task": 0 }]), "{}", info.text);

    assert_eq!(curl(spec.port, "GET", "/connectors", None).body, json!([name]));
    let config = curl(spec.port, "GET", &format!("/connectors/{name}/config"), None);
    assert_eq!(config.body["snow.auth.password"], "${env:SNOW_FLEET_PASSWORD}", "the reference, never the value");
    let tasks = curl(spec.port, "GET", &format!("/connectors/{name}/tasks"), None);
    assert_eq!(tasks.body[0]["id"], json!({ "connector": name, "task": 0 }), "{}", tasks.text);
    let task = curl(spec.port, "GET", &format!("/connectors/{name}/tasks/0/status"), None);
    assert_eq!((task.status, task.body["state"].as_str()), (200, Some("RUNNING")), "{}", task.text);
    assert_eq!(curl(spec.port, "GET", &format!("/connectors/{name}/tasks/7/status"), None).status, 404);
    assert_eq!(curl(spec.port, "GET", "/connectors/nope", None).body["error_code"], 404);
    let expanded = curl(spec.port, "GET", "/connectors?expand=status&expand=info", None);
    assert!(expanded.body[&name]["status"]["connector"]["state"] == "RUNNING", "{}", expanded.text);
    // Log levels at run time (KIP-495), for this worker and for the fleet (KIP-976).
    let loggers = curl(spec.port, "GET", "/admin/loggers", None);
    assert!(loggers.body["root"]["level"].is_string(), "{}", loggers.text);
    let set = curl(spec.port, "PUT", "/admin/loggers/snow_runtime::outbound", Some(&json!({ "level": "WARN" })));
    assert_eq!((set.status, set.body.clone()), (200, json!(["snow_runtime::outbound"])), "{}", set.text);
    assert_eq!(curl(spec.port, "GET", "/admin/loggers/snow_runtime::outbound", None).body["level"], "WARN");
    let bad = curl(spec.port, "PUT", "/admin/loggers/x", Some(&json!({ "level": "LOUD" })));
    assert_eq!(bad.status, 400, "{}", bad.text);
    let cluster = curl(spec.port, "PUT", "/admin/loggers/snow_runtime::outbound?scope=cluster", Some(&json!({ "level": "DEBUG" })));
    assert_eq!(cluster.status, 204, "{}", cluster.text);
    worker.wait_for_log("log level set for the fleet", Duration::from_secs(30));

    // Its active topics (KIP-558), and their reset.
    let topics = curl(spec.port, "GET", &format!("/connectors/{name}/topics"), None);
    assert_eq!(topics.body, json!({ name.clone(): { "topics": [topic.clone()] } }), "{}", topics.text);
    let reset = curl(spec.port, "PUT", &format!("/connectors/{name}/topics/reset"), None);
    assert_eq!(reset.status, 200, "{}", reset.text);
    let topics = curl(spec.port, "GET", &format!("/connectors/{name}/topics"), None);
    assert_eq!(topics.body, json!({ name.clone(): { "topics": [] } }), "{}", topics.text);

    // The secret is in neither the configuration nor the status topic, nor in a metric (the
    // offsets topic holds positions only, written in transactions).
    let bootstrap = kafka_harness::shared().bootstrap();
    for state in ["configs", "status"] {
        let held = read_until(bootstrap, &format!("{group}-{state}"), Duration::from_secs(30), |_| true);
        assert!(!held.is_empty(), "{state} holds records");
        assert!(held.iter().all(|r| !String::from_utf8_lossy(&r.value).contains(PASSWORD)), "no secret in the {state} topic");
    }
    let metrics = support::fleet::curl_with(&[], &format!("http://{status_listen}/metrics"), "GET", None);
    assert!(metrics.status == 200 && metrics.text.contains("snow_source_records_total"), "{}", metrics.text);
    assert!(!metrics.text.contains(PASSWORD), "no secret in a metric");

    let log = worker.wait_for_log("unit started on this worker", Duration::from_secs(1));
    let deleted = curl(spec.port, "DELETE", &format!("/connectors/{name}"), None);
    assert_eq!(deleted.status, 204);
    worker.wait_for_log("connector deleted; its units here stopped", Duration::from_secs(30));
    assert_eq!(curl(spec.port, "GET", &format!("/connectors/{name}"), None).status, 404);
    let log = log + &worker.stop();
    assert!(!log.contains(PASSWORD), "the password never reaches the log");
}

#[test]
fn a_wrong_key_is_refused_in_connects_error_shape_by_validate_and_create() {
    let now = now_secs();
    let fake = fake(now);
    let dir = work_dir("fleet-validate");
    let spec = worker_properties(&dir, "w1", &unique("fleet-validate"), &[]);
    let worker = start_worker(&dir, "w1", &spec, &[PASSWORD_ENV]);
    let name = unique("fbad");
    let mut config = source_config(&fake, &name, "t", &["incident"]);
    config["snow.tabels"] = json!("incident");
    config["kafka.typo"] = json!("1");
    let validated = curl(spec.port, "PUT", "/connector-plugins/io.snowconnect.ServiceNowSourceConnector/config/validate", Some(&config));
    assert_eq!(validated.status, 200, "{}", validated.text);
    assert_eq!(validated.body["name"], "io.snowconnect.ServiceNowSourceConnector");
    assert!(validated.body["error_count"].as_u64().unwrap() >= 2, "{}", validated.text);
    let errors_of = |key: &str| support::fleet::validation_errors(&validated.body, key);
    assert!(errors_of("kafka.typo").iter().any(|e| e.contains("unknown key")), "{}", validated.text);
    assert!(!errors_of("snow.tabels").is_empty(), "the component's own check names its key: {}", validated.text);
    assert!(errors_of("snow.instance.url").is_empty());

    // Every error at once: a missing instance URL does not hide a misspelled key; an empty table
    // list does not make the per-table keys unknown; a class that is not the plugin validated is named.
    let mut partial = config.clone();
    partial.as_object_mut().unwrap().remove("snow.instance.url");
    let answer = curl(spec.port, "PUT", "/connector-plugins/io.snowconnect.ServiceNowSourceConnector/config/validate", Some(&partial));
    let errors_in = |answer: &support::fleet::Answer, key: &str| support::fleet::validation_errors(&answer.body, key);
    assert!(!errors_in(&answer, "snow.instance.url").is_empty(), "{}", answer.text);
    assert!(!errors_in(&answer, "snow.tabels").is_empty(), "the misspelled key too: {}", answer.text);
    let mut empty = source_config(&fake, &name, "t", &["incident"]);
    empty["snow.tables"] = json!("");
    let answer = curl(spec.port, "PUT", "/connector-plugins/ServiceNowSourceConnector/config/validate", Some(&empty));
    assert!(!errors_in(&answer, "snow.tables").is_empty(), "{}", answer.text);
    assert!(errors_in(&answer, "snow.table.incident.topic").is_empty(), "not unknown: {}", answer.text);
    let mut other = source_config(&fake, &name, "t", &["incident"]);
    other["connector.class"] = json!("io.snowconnect.ServiceNowSinkConnector");
    let answer = curl(spec.port, "PUT", "/connector-plugins/io.snowconnect.ServiceNowSourceConnector/config/validate", Some(&other));
    assert!(errors_in(&answer, "connector.class").iter().any(|e| e.contains("is not the plugin validated here")), "{}", answer.text);

    let refused = curl(spec.port, "POST", "/connectors", Some(&json!({ "name": name, "config": config })));
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert_eq!(refused.body["error_code"], 400);
    let message = refused.body["message"].as_str().unwrap();
    assert!(
        message.starts_with("Connector configuration is invalid and contains the following") && message.contains("kafka.typo"),
        "{message}"
    );
    assert_eq!(curl(spec.port, "GET", "/connectors", None).body, json!([]), "nothing was stored");

    // Connect's worker key: without exactly.once.source.support=enabled, required is refused
    // (attached to the connector's key), requested is accepted (and runs at least once).
    let mut eos = source_config(&fake, &name, "t", &["incident"]);
    eos["exactly.once.support"] = json!("required");
    let answer = curl(spec.port, "PUT", "/connector-plugins/io.snowconnect.ServiceNowSourceConnector/config/validate", Some(&eos));
    assert!(
        errors_in(&answer, "exactly.once.support").iter().any(|e| e.contains("exactly.once.source.support is disabled")),
        "{}",
        answer.text
    );
    eos["exactly.once.support"] = json!("requested");
    let answer = curl(spec.port, "PUT", "/connector-plugins/io.snowconnect.ServiceNowSourceConnector/config/validate", Some(&eos));
    assert!(errors_in(&answer, "exactly.once.support").is_empty(), "{}", answer.text);

    let mut literal = source_config(&fake, &name, "t", &["incident"]);
    literal["snow.auth.password"] = json!(PASSWORD);
    let refused = curl(spec.port, "POST", "/connectors", Some(&json!({ "name": name, "config": literal })));
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.text.contains("snow.auth.password: must be given as a provider reference"), "{}", refused.text);
    assert!(!refused.text.contains(PASSWORD), "the secret is not echoed");
    let validated = curl(spec.port, "PUT", "/connector-plugins/ServiceNowSourceConnector/config/validate", Some(&literal));
    assert!(!validated.text.contains(PASSWORD), "nor answered by validate: {}", validated.text);

    // A sink whose consumer cannot start (a pattern librdkafka refuses when it subscribes): the
    // connector is FAILED with why, not RUNNING with no tasks.
    let sink = unique("fsinkfail");
    let mut sink_config: BTreeMap<String, String> = support::sink_entries(
        &fake.url(),
        &sink,
        "unused",
        "incident",
        &[("snow.auth.username", USER), ("snow.auth.password", "${env:SNOW_FLEET_PASSWORD}")],
    );
    for k in ["name", "kafka.bootstrap.servers", "component.trusted.keys", "topics"] {
        sink_config.remove(k);
    }
    sink_config.insert("topics.regex".into(), "(unclosed".into());
    let created = curl(spec.port, "POST", "/connectors", Some(&json!({ "name": sink, "config": sink_config })));
    assert_eq!(created.status, 201, "{}", created.text);
    let failed = wait_status(spec.port, &sink, Duration::from_secs(60), "the sink FAILED", |s| s["connector"]["state"] == "FAILED");
    assert!(failed["connector"]["trace"].as_str().unwrap_or_default().contains("subscribing"), "{failed}");

    let log = worker.stop();
    assert!(!log.contains(PASSWORD), "nor logged");
}

/// Rows per table of the fleet test: `SNOW_FLEET_ROWS` (the issue's 10,000 in `make fleet`), else
/// a size `make test` runs in a minute or two.
/// A sink's configuration as a fleet caller posts it: writes `table` from `topic` with the fleet's
/// credentials (by reference) and `extra`; what the worker owns left out.
fn fleet_sink_config(fake: &FakeSnow, sink: &str, topic: &str, table: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut entries = vec![("snow.auth.username", USER), ("snow.auth.password", "${env:SNOW_FLEET_PASSWORD}")];
    entries.extend_from_slice(extra);
    let mut config = support::sink_entries(&fake.url(), sink, topic, table, &entries);
    for k in ["name", "kafka.bootstrap.servers", "component.trusted.keys"] {
        config.remove(k);
    }
    config
}

/// Whether `status` shows `lanes` tasks spread over exactly `workers` workers.
fn lanes_spread(status: &Value, lanes: usize, workers: usize) -> bool {
    let ids: BTreeSet<&str> =
        status["tasks"].as_array().map(|t| t.iter().filter_map(|t| t["worker_id"].as_str()).collect()).unwrap_or_default();
    status["tasks"].as_array().is_some_and(|t| t.len() == lanes) && ids.len() == workers
}

/// The most rows of `stamps` (sorted) inside any `seconds`-long window: what one overlap re-read
/// can repeat at most.
fn densest_window(stamps: &mut [i64], seconds: i64) -> usize {
    stamps.sort_unstable();
    let mut best = 0;
    let mut start = 0;
    for end in 0..stamps.len() {
        while stamps[end] - stamps[start] > seconds {
            start += 1;
        }
        best = best.max(end - start + 1);
    }
    best
}

/// Asserts that no two workers' requests for one table overlap in time, from the fake's journal
/// (`X-Snow-Worker`); returns how often each table moved from one worker to another.
fn assert_no_overlap(fake: &FakeSnow, tables: &[String]) -> BTreeMap<String, usize> {
    let journal = fake.journal();
    let units = tables
        .iter()
        .map(|table| {
            let path = format!("/api/now/table/{table}");
            (table.clone(), journal.entries.iter().filter(|e| e.path == path).collect())
        })
        .collect();
    assert_units_never_overlap(units)
}

/// Asserts that no two workers wrote one partition of a sink at once: each `PATCH` in the fake's
/// journal is the record whose `u_seq` its body carries, read back from `topic` for its partition.
/// Returns how often each partition's lane moved from one worker to another.
fn assert_lanes_never_overlap(fake: &FakeSnow, topic: &str, records: usize) -> BTreeMap<String, usize> {
    let u_seq = |text: &str| serde_json::from_str::<Value>(text).ok().and_then(|v| v["u_seq"].as_str().map(str::to_string));
    let partition_of: BTreeMap<String, i32> =
        read_until(kafka_harness::shared().bootstrap(), topic, Duration::from_secs(60), |r| r.len() >= records)
            .iter()
            .filter_map(|r| Some((u_seq(std::str::from_utf8(&r.value).ok()?)?, r.partition)))
            .collect();
    assert_eq!(partition_of.len(), records, "every sink record read back with its partition");
    let journal = fake.journal();
    let mut units: BTreeMap<String, Vec<&fake_snow::journal::JournalEntry>> = BTreeMap::new();
    for e in journal.entries.iter().filter(|e| e.method == "PATCH") {
        let seq = e.body.as_deref().and_then(u_seq).unwrap_or_else(|| panic!("a PATCH without u_seq: {e:?}"));
        units.entry(format!("{topic}-{}", partition_of[&seq])).or_default().push(e);
    }
    assert_units_never_overlap(units)
}

/// Asserts, for each unit's requests, that none of one worker starts before every earlier request
/// of another worker ended; returns how often each unit moved from one worker to another.
fn assert_units_never_overlap(units: BTreeMap<String, Vec<&fake_snow::journal::JournalEntry>>) -> BTreeMap<String, usize> {
    let mut moves = BTreeMap::new();
    for (unit, mut entries) in units {
        entries.sort_by_key(|e| (e.at_ms, e.seq));
        assert!(entries.iter().all(|e| e.worker.is_some()), "every request of {unit} names its worker");
        let mut last_done: BTreeMap<&str, u64> = BTreeMap::new();
        let mut previous: Option<&str> = None;
        let mut moved = 0;
        for e in &entries {
            let worker = e.worker.as_deref().unwrap();
            for (other, done) in &last_done {
                assert!(
                    *other == worker || *done <= e.at_ms,
                    "{unit}: a request of {worker} at {} ms overlaps one of {other} that ended at {done} ms",
                    e.at_ms
                );
            }
            let done = last_done.entry(worker).or_insert(0);
            *done = (*done).max(e.done_ms.max(e.at_ms));
            if previous.is_some_and(|p| p != worker) {
                moved += 1;
            }
            previous = Some(worker);
        }
        moves.insert(unit, moved);
    }
    moves
}

#[test]
fn three_workers_share_fifty_tables_and_a_sink_survive_a_kill_and_take_in_a_fourth() {
    // 1,000 rows a table under `make test`; `make soak` runs the issue's 10,000.
    let rows = support::sized("SNOW_FLEET_ROWS", 1_000);
    // 25 requests a table, 150 ms each: the backfill lasts long enough to kill a worker in it.
    let batch = (rows as usize / 25).max(20);
    let now = now_secs();
    let fake = fake(now);
    // Slow enough that the kill lands in the middle of the backfill, at any size.
    fake.add_fault(fake_snow::Fault::always(fake_snow::FaultAction::Latency { ms: 150 }).on_method("GET"));
    let tables: Vec<String> = (0..50).map(|i| format!("u_fleet_{i:02}")).collect();
    let mut ids: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for table in &tables {
        ids.insert(table.clone(), fake.shared().seed(table, rows, now - 7200, 7000));
    }
    let total = tables.len() as u64 * rows;
    let dir = work_dir("fleet-three");
    let group = unique("fleet-three");
    let specs: Vec<_> = (1..=4).map(|i| worker_properties(&dir, &format!("w{i}"), &group, &[])).collect();
    let mut workers: Vec<Option<support::Runner>> =
        specs[..3].iter().enumerate().map(|(i, s)| Some(start_worker(&dir, &format!("w{}", i + 1), s, &[PASSWORD_ENV]))).collect();
    let id_of = |i: usize| format!("127.0.0.1:{}", specs[i].port);

    // The source and a sink, created with curl against the first worker.
    let (source, topic) = (unique("fleet-src"), unique("fleet-rows"));
    let table_refs: Vec<&str> = tables.iter().map(String::as_str).collect();
    let created = curl(
        specs[0].port,
        "POST",
        "/connectors",
        Some(&json!({ "name": source, "config": source_config_batch(&fake, &source, &topic, &table_refs, batch) })),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    let (sink, sink_topic) = (unique("fleet-sink"), unique("fleet-updates"));
    support::kafka::create_topic_blocking(kafka_harness::shared().bootstrap(), &sink_topic, 4);
    let targets = fake.shared().seed("u_sink_target", 200, now - 100, 50);
    let sink_config = fleet_sink_config(&fake, &sink, &sink_topic, "u_sink_target", &[("snow.sink.operation", "patch")]);
    let created = curl(specs[0].port, "POST", "/connectors", Some(&json!({ "name": sink, "config": sink_config })));
    assert_eq!(created.status, 201, "{}", created.text);
    let updates = support::keyed_updates(&targets, 4_000, 7);
    support::kafka::produce_blocking(kafka_harness::shared().bootstrap(), &sink_topic, &updates[..2_000]);

    // Visible with status on all three, the tables shared between them.
    let started = std::time::Instant::now();
    for spec in &specs[..3] {
        wait_status(spec.port, &source, Duration::from_secs(120), "50 tasks running", |s| tasks_in(s, "RUNNING") == 50);
        eprintln!("fleet: 50 tasks running on {} after {:?}", spec.port, started.elapsed());
    }
    let status = curl(specs[2].port, "GET", &format!("/connectors/{source}/status"), None).body;
    let per_worker = |status: &Value, id: &str| status["tasks"].as_array().unwrap().iter().filter(|t| t["worker_id"] == id).count();
    for i in 0..3 {
        assert!(per_worker(&status, &id_of(i)) > 0, "worker {} runs tables: {status}", id_of(i));
    }
    let victim = 1;
    let victims_tables = per_worker(&status, &id_of(victim));
    // The sink's four lanes too, on all three, shared between them.
    let lanes_on = |s: &Value| -> BTreeSet<String> {
        s["tasks"]
            .as_array()
            .map(|t| t.iter().filter(|t| t["state"] == "RUNNING").filter_map(|t| t["worker_id"].as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    for spec in &specs[..3] {
        wait_status(spec.port, &sink, Duration::from_secs(120), "4 sink lanes running on the three workers", |s| {
            tasks_in(s, "RUNNING") == 4 && lanes_on(s).len() == 3
        });
    }

    // SIGKILL the second worker once rows flowed and before the backfill is done.
    let bootstrap = kafka_harness::shared().bootstrap();
    let before = support::kafka::read_at_least(bootstrap, &topic, Duration::from_secs(300), total as usize / 10);
    workers[victim].take().unwrap().kill();
    let killed = std::time::Instant::now();
    let at_kill = before.iter().collect::<BTreeSet<_>>().len() as u64;
    assert!(at_kill < total, "the kill landed during the backfill ({at_kill} of {total} rows had arrived)");
    let session = Duration::from_millis(6_000);
    // Before the session expires, the dead worker's tables read UNASSIGNED, not RUNNING on it.
    let running_on_victim = |s: &Value| {
        s["tasks"].as_array().unwrap().iter().filter(|t| t["state"] == "RUNNING" && t["worker_id"] == id_of(victim).as_str()).count()
    };
    let unassigned = wait_status(specs[2].port, &source, session, "the victim's tables UNASSIGNED", |s| {
        running_on_victim(s) == 0 && tasks_in(s, "UNASSIGNED") > 0
    });
    let seen_unassigned = killed.elapsed();
    assert!(seen_unassigned < session, "UNASSIGNED {seen_unassigned:?} after the kill, within the session ({session:?}): {unassigned}");
    let why = unassigned["tasks"].as_array().unwrap().iter().find(|t| t["state"] == "UNASSIGNED").unwrap()["message"].clone();
    assert!(why.as_str().unwrap_or_default().contains("has not been heard of"), "{why}");
    let moved = wait_status(specs[0].port, &source, session + Duration::from_secs(10), "the victim's tables running elsewhere", |s| {
        tasks_in(s, "RUNNING") == 50 && per_worker(s, &id_of(victim)) == 0
    });
    let failover = killed.elapsed();
    assert!(per_worker(&moved, &id_of(0)) + per_worker(&moved, &id_of(2)) == 50, "{moved}");
    let left = (session + Duration::from_secs(10)).saturating_sub(killed.elapsed());
    wait_status(specs[2].port, &sink, left, "the victim's sink lanes running elsewhere", |s| {
        tasks_in(s, "RUNNING") == 4 && !lanes_on(s).contains(&id_of(victim))
    });
    let sink_failover = killed.elapsed();
    eprintln!(
        "fleet: {victims_tables} tables of the killed worker UNASSIGNED {:.1} s after SIGKILL, ran elsewhere {:.1} s after, its sink lanes {:.1} s after",
        seen_unassigned.as_secs_f64(),
        failover.as_secs_f64(),
        sink_failover.as_secs_f64()
    );

    // Rows change meanwhile; the final versions must arrive.
    fake.clock().advance(1);
    let mut changes = serde_json::Map::new();
    changes.insert("state".into(), Value::String("2".into()));
    for (table, table_ids) in &ids {
        fake.shared().update_rows(table, &table_ids[..20], &changes);
    }
    fake.clock().advance(3);

    // A fourth worker joins and takes a share; the second half of the sink's records follows.
    workers.push(Some(start_worker(&dir, "w4", &specs[3], &[PASSWORD_ENV])));
    wait_status(specs[3].port, &source, Duration::from_secs(60), "the fourth worker running tables", |s| {
        tasks_in(s, "RUNNING") == 50 && per_worker(s, &id_of(3)) > 0
    });
    wait_status(specs[3].port, &sink, Duration::from_secs(60), "the fourth worker writing a sink lane", |s| {
        tasks_in(s, "RUNNING") == 4 && lanes_on(s).contains(&id_of(3))
    });
    support::kafka::produce_blocking(bootstrap, &sink_topic, &updates[2_000..]);

    let table_names: Vec<&str> = tables.iter().map(String::as_str).collect();
    let finals = support::final_versions(&fake, &table_names);
    let records = read_until(bootstrap, &topic, Duration::from_secs(600), support::has_every(&finals));
    assert!(support::has_every(&finals)(&records), "every final row version arrived");
    support::kafka::wait_committed(&format!("connect-{sink}"), &sink_topic, 4, updates.len() as i64, Duration::from_secs(180));
    support::assert_last_updates(&fake, "u_sink_target", &updates);

    // Nothing ran on two workers at once; duplicates within the bound, per table and per move.
    let moves = assert_no_overlap(&fake, &tables);
    for table in &tables {
        let mut stamps: Vec<i64> = fake
            .fields(table, ["sys_updated_on"])
            .iter()
            .filter_map(|[at]| snow_core::time::Timestamp::parse(at).ok().map(|t| t.as_millis() / 1000))
            .collect();
        let window = densest_window(&mut stamps, 30);
        let bound = moves[table] * (window + snow_runtime::source::pipeline::MAX_UNACKNOWLEDGED * batch);
        let table_ids: BTreeSet<&str> = ids[table].iter().map(String::as_str).collect();
        let of_table: Vec<&support::kafka::Read> = records.iter().filter(|r| table_ids.contains(r.key.as_str())).collect();
        let distinct: BTreeSet<(&str, &str)> = of_table
            .iter()
            .map(|r| (r.key.as_str(), r.headers.get("snow.sys_mod_count").map(String::as_str).unwrap_or_default()))
            .collect();
        let duplicates = of_table.len() - distinct.len();
        assert!(duplicates <= bound, "{table}: {duplicates} duplicates, bound {bound} ({} moves)", moves[table]);
    }
    let lane_moves = assert_lanes_never_overlap(&fake, &sink_topic, updates.len());
    let writes = fake.journal().entries.iter().filter(|e| e.method == "PATCH").count();
    assert!(writes >= updates.len(), "every sink record written ({writes} writes)");
    eprintln!(
        "fleet: the sink wrote {} records in {writes} writes; its lanes moved {} times",
        updates.len(),
        lane_moves.values().sum::<usize>()
    );
    let total_moves: usize = moves.values().sum();
    assert!(total_moves >= victims_tables, "the killed worker's tables moved ({total_moves} moves)");
    let duplicates = records.len()
        - records.iter().map(|r| (r.key.as_str(), r.headers.get("snow.sys_mod_count").map(String::as_str))).collect::<BTreeSet<_>>().len();
    eprintln!("fleet: {} records for {} row versions, {duplicates} duplicates, {total_moves} table moves", records.len(), finals.len());
    for worker in workers.into_iter().flatten() {
        let log = worker.stop();
        assert!(!log.contains(PASSWORD), "the password never reaches a log");
    }
}

#[test]
fn a_sink_in_a_fleet_shares_its_lanes_survives_a_kill_and_writes_every_record() {
    let now = now_secs();
    let fake = fake(now);
    fake.shared().set_latency(fake_snow::server::Latency { request_ms: 0, write_ms: 20, batch_quota_ms: None });
    let dir = work_dir("fleet-sink");
    let group = unique("fleet-sink");
    let specs: Vec<_> = (1..=3).map(|i| worker_properties(&dir, &format!("w{i}"), &group, &[])).collect();
    let mut workers: Vec<Option<support::Runner>> =
        specs[..2].iter().enumerate().map(|(i, s)| Some(start_worker(&dir, &format!("w{}", i + 1), s, &[PASSWORD_ENV]))).collect();
    let (sink, topic) = (unique("fsink"), unique("fsink-updates"));
    let bootstrap = kafka_harness::shared().bootstrap();
    support::kafka::create_topic_blocking(bootstrap, &topic, 4);
    let targets = fake.shared().seed("incident", 100, now - 100, 50);
    let updates = support::keyed_updates(&targets, 2_000, 7);
    support::kafka::produce_blocking(bootstrap, &topic, &updates);
    let config = fleet_sink_config(&fake, &sink, &topic, "incident", &[]);
    let created = curl(specs[1].port, "POST", "/connectors", Some(&json!({ "name": sink, "config": config })));
    assert_eq!(created.status, 201, "{}", created.text);
    let status = wait_status(specs[0].port, &sink, Duration::from_secs(60), "4 lanes on both workers", |s| lanes_spread(s, 4, 2));
    assert_eq!(status["type"], "sink", "{status}");
    // Each worker counts the group: an instance's request budget is shared by both (ADR 0034).
    for worker in workers.iter_mut().flatten() {
        worker.wait_for_log("the fleet has 2 workers: each spends 1/2 of an instance's request budget", Duration::from_secs(60));
    }
    support::wait_until("writes under way", Duration::from_secs(60), || {
        (fake.journal().entries.iter().filter(|e| e.method == "PATCH").count() >= 300).then_some(())
    });
    workers[1].take().unwrap().kill();
    let written_at_kill = fake.journal().entries.iter().filter(|e| e.method == "PATCH").count();
    assert!(written_at_kill < updates.len(), "the kill landed while writing ({written_at_kill} of {})", updates.len());
    workers.push(Some(start_worker(&dir, "w3", &specs[2], &[PASSWORD_ENV])));
    support::kafka::wait_committed(&format!("connect-{sink}"), &topic, 4, updates.len() as i64, Duration::from_secs(180));
    let writes = fake.journal().entries.iter().filter(|e| e.method == "PATCH").count();
    assert!(writes >= updates.len(), "every record written ({writes} writes)");
    support::assert_last_updates(&fake, "incident", &updates);
    for worker in workers.into_iter().flatten() {
        worker.stop();
    }
}

/// The issue's slow instance: every write takes 120 ms, so a 200-record put would take 24 s and a
/// rebalance that moves a lane would wait for it. Puts stop starting writes after the host's put
/// budget (20 s, a third of the revocation wait): when a second worker joins a sink that one
/// worker is writing, the lanes reach it within about one budget, and a put that a kill
/// interrupts held at most a budget of writes.
#[test]
fn a_sink_busy_on_a_slow_instance_shares_its_lanes_with_a_joining_worker_within_a_put_budget() {
    let now = now_secs();
    let fake = fake(now);
    fake.shared().set_latency(fake_snow::server::Latency { request_ms: 0, write_ms: 120, batch_quota_ms: None });
    let dir = work_dir("fleet-slow-sink");
    let group = unique("fleet-slow-sink");
    let specs: Vec<_> = (1..=2).map(|i| worker_properties(&dir, &format!("w{i}"), &group, &[])).collect();
    let mut workers = vec![start_worker(&dir, "w1", &specs[0], &[PASSWORD_ENV])];
    let (sink, topic) = (unique("fslow"), unique("fslow-updates"));
    let bootstrap = kafka_harness::shared().bootstrap();
    support::kafka::create_topic_blocking(bootstrap, &topic, 4);
    let targets = fake.shared().seed("incident", 100, now - 100, 50);
    // Far more than the lanes can write while the test watches: every put is a full one.
    let updates = support::keyed_updates(&targets, 4_000, 7);
    support::kafka::produce_blocking(bootstrap, &topic, &updates);
    let config = fleet_sink_config(&fake, &sink, &topic, "incident", &[]);
    let created = curl(specs[0].port, "POST", "/connectors", Some(&json!({ "name": sink, "config": config })));
    assert_eq!(created.status, 201, "{}", created.text);
    let patches = || fake.journal().entries.iter().filter(|e| e.method == "PATCH").count();
    support::wait_until("the first worker writing", Duration::from_secs(60), || (patches() >= 20).then_some(()));
    let joined_at = std::time::Instant::now();
    workers.push(start_worker(&dir, "w2", &specs[1], &[PASSWORD_ENV]));
    wait_status(specs[1].port, &sink, Duration::from_secs(120), "4 lanes on both workers", |s| lanes_spread(s, 4, 2));
    let spread = joined_at.elapsed();
    const BUDGET: Duration = Duration::from_secs(20);
    assert!(spread < BUDGET + Duration::from_secs(15), "the lanes moved {:.1} s after the second worker started", spread.as_secs_f64());
    let writes = patches();
    assert!(writes < updates.len(), "the lanes moved while the backlog was being written ({writes} of {})", updates.len());
    let stopping = std::time::Instant::now();
    let deleted = curl(specs[0].port, "DELETE", &format!("/connectors/{sink}"), None);
    assert_eq!(deleted.status, 204, "{}", deleted.text);
    let delete_answered = stopping.elapsed();
    let mut stops = Vec::new();
    for worker in workers {
        let t = std::time::Instant::now();
        worker.stop();
        // The put in progress ends within its budget and no lane starts another (before the lane
        // preferred its stop signal, a stopping worker went on for one or two more puts: 40 s).
        assert!(t.elapsed() < BUDGET + Duration::from_secs(10), "a worker stopped {:.1} s after its signal", t.elapsed().as_secs_f64());
        stops.push(format!("{:.1}", t.elapsed().as_secs_f64()));
    }
    eprintln!(
        "fleet-slow-sink: 120 ms writes; lanes on both workers {:.1} s after the second worker started ({writes} writes by then); delete answered in {:.1} s, workers stopped in {} s",
        spread.as_secs_f64(),
        delete_answered.as_secs_f64(),
        stops.join(" and ")
    );
}

/// A worker with one source connector over `tables` (200 rows each), created over REST and
/// running: the fake, the worker, the connector's name and topic, and the worker's port.
struct Running {
    fake: FakeSnow,
    worker: support::Runner,
    port: u16,
    name: String,
    topic: String,
    now: i64,
}

fn running_source(label: &str, tables: &[&str], faults: &[fake_snow::Fault]) -> Running {
    let now = now_secs();
    let fake = fake(now);
    for table in tables {
        fake.shared().seed(table, 200, now - 3600, 3000);
    }
    for fault in faults {
        fake.add_fault(fault.clone());
    }
    let dir = work_dir(label);
    let spec = worker_properties(&dir, "w1", &unique(label), &[]);
    let worker = start_worker(&dir, "w1", &spec, &[PASSWORD_ENV]);
    let (name, topic) = (unique(label), unique(&format!("{label}-rows")));
    let created =
        curl(spec.port, "POST", "/connectors", Some(&json!({ "name": name, "config": source_config(&fake, &name, &topic, tables) })));
    assert_eq!(created.status, 201, "{}", created.text);
    Running { fake, worker, port: spec.port, name, topic, now }
}

impl Running {
    fn path(&self, verb: &str) -> String {
        format!("/connectors/{}{verb}", self.name)
    }

    fn status(&self, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        wait_status(self.port, &self.name, Duration::from_secs(60), what, check)
    }

    /// Requests for `table` the fake has seen.
    fn reads_of(&self, table: &str) -> usize {
        let path = format!("/api/now/table/{table}");
        self.fake.journal().entries.iter().filter(|e| e.path == path).count()
    }

    fn records(&self, count: usize) -> Vec<support::kafka::Read> {
        read_until(kafka_harness::shared().bootstrap(), &self.topic, Duration::from_secs(120), |r| r.len() >= count)
    }
}

#[test]
fn pause_stops_the_units_and_resume_goes_on_where_they_were() {
    let r = running_source("fleet-pause", &["incident"], &[]);
    r.records(200);
    r.status("running", |s| tasks_in(s, "RUNNING") == 1);
    let paused = curl(r.port, "PUT", &r.path("/pause"), None);
    assert_eq!((paused.status, paused.text.as_str()), (202, ""), "202 Accepted, no body");
    let status = r.status("paused", |s| s["connector"]["state"] == "PAUSED" && tasks_in(s, "PAUSED") == 1);
    assert_eq!(status["tasks"][0]["worker_id"], format!("127.0.0.1:{}", r.port));
    // While paused nothing reads the table: five poll intervals go by without a request.
    let reads = r.reads_of("incident");
    r.fake.clock().advance(1);
    let ids = r.fake.shared().seed("incident", 50, r.now + 1, 0);
    r.fake.clock().advance(5);
    let quiet_until = std::time::Instant::now() + Duration::from_secs(1);
    while std::time::Instant::now() < quiet_until {
        assert_eq!(r.reads_of("incident"), reads, "a paused connector reads nothing");
        std::thread::sleep(Duration::from_millis(50));
    }
    let resumed = curl(r.port, "PUT", &r.path("/resume"), None);
    assert_eq!(resumed.status, 202);
    r.status("running again", |s| s["connector"]["state"] == "RUNNING" && tasks_in(s, "RUNNING") == 1);
    let records = read_until(kafka_harness::shared().bootstrap(), &r.topic, Duration::from_secs(60), |recs| {
        ids.iter().all(|id| recs.iter().any(|x| &x.key == id))
    });
    assert!(records.len() < 200 + 50 + 60, "resumed from its offset, not from the start: {} records", records.len());
    assert_eq!(curl(r.port, "PUT", "/connectors/nope/pause", None).status, 404);
    r.worker.stop();
}

#[test]
fn stop_releases_the_units_and_offsets_are_read_altered_and_reset_only_while_stopped() {
    let r = running_source("fleet-offsets", &["incident", "problem"], &[]);
    r.records(400);
    r.status("running", |s| tasks_in(s, "RUNNING") == 2);
    let refused = curl(r.port, "PATCH", &r.path("/offsets"), Some(&json!({ "offsets": [] })));
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.body["message"].as_str().unwrap().starts_with("Connectors must be in the STOPPED state"), "{}", refused.text);
    assert_eq!(curl(r.port, "DELETE", &r.path("/offsets"), None).status, 400, "nor reset while running");

    let stopped = curl(r.port, "PUT", &r.path("/stop"), None);
    assert_eq!((stopped.status, stopped.text.as_str()), (204, ""));
    let status = r.status("stopped", |s| s["connector"]["state"] == "STOPPED");
    assert_eq!(status["tasks"], json!([]), "a stopped connector has no tasks: {status}");
    let offsets = curl(r.port, "GET", &r.path("/offsets"), None);
    assert_eq!(offsets.status, 200);
    let entries = offsets.body["offsets"].as_array().unwrap().clone();
    assert_eq!(entries.len(), 2, "{}", offsets.text);
    let of = |table: &str| entries.iter().find(|e| e["partition"]["table"] == table).cloned().unwrap();
    assert!(of("problem")["offset"]["ts"].is_string(), "the position: {}", offsets.text);

    // Reset one table: its offset goes (null), the other's stays.
    let reset_incident = json!({ "offsets": [{ "partition": of("incident")["partition"], "offset": null }] });
    let altered = curl(r.port, "PATCH", &r.path("/offsets"), Some(&reset_incident));
    assert_eq!(altered.status, 200, "{}", altered.text);
    assert_eq!(altered.body["message"], "The offsets for this connector have been altered successfully");
    let after = curl(r.port, "GET", &r.path("/offsets"), None).body;
    assert_eq!(after["offsets"].as_array().unwrap().len(), 1, "{after}");
    assert_eq!(after["offsets"][0], of("problem"), "the other table's offset is untouched");
    let bad = curl(r.port, "PATCH", &r.path("/offsets"), Some(&json!({ "offsets": [{ "partition": { "table": "x" }, "offset": null }] })));
    assert_eq!(bad.status, 400, "{}", bad.text);

    // Resumed, the reset table is read again from its start; the other goes on from its offset.
    let before = r.records(400).len();
    let incident_reads = r.reads_of("incident");
    assert_eq!(curl(r.port, "PUT", &r.path("/resume"), None).status, 202);
    r.status("running again", |s| s["connector"]["state"] == "RUNNING" && tasks_in(s, "RUNNING") == 2);
    let records = r.records(before + 200);
    assert!(r.reads_of("incident") > incident_reads, "the reset table was read again");
    assert!(records.len() < before + 200 + 60, "only the reset table was read again ({} records after {before})", records.len());

    // Reset all while stopped.
    assert_eq!(curl(r.port, "PUT", &r.path("/stop"), None).status, 204);
    r.status("stopped", |s| s["connector"]["state"] == "STOPPED");
    let reset = curl(r.port, "DELETE", &r.path("/offsets"), None);
    assert_eq!(reset.status, 200, "{}", reset.text);
    assert_eq!(reset.body["message"], "The offsets for this connector have been reset successfully");
    assert_eq!(curl(r.port, "GET", &r.path("/offsets"), None).body, json!({ "offsets": [] }));
    r.worker.stop();
}

#[test]
fn restart_restarts_failed_units_and_delete_removes_the_connector_from_the_fleet() {
    // The first read of `problem` is refused: its unit fails (parked) until restarted.
    let refuse = fake_snow::Fault::always(fake_snow::FaultAction::Status { status: 403, retry_after: None })
        .on_path("/api/now/table/problem")
        .times(1);
    let r = running_source("fleet-restart", &["incident", "problem"], &[refuse]);
    let failed = r.status("one failed task", |s| tasks_in(s, "FAILED") == 1 && tasks_in(s, "RUNNING") == 1);
    let task = failed["tasks"].as_array().unwrap().iter().find(|t| t["state"] == "FAILED").unwrap().clone();
    assert!(task["trace"].as_str().is_some_and(|t| !t.is_empty()), "a failed task says why: {task}");
    let id = task["id"].as_u64().unwrap();
    let task_status = curl(r.port, "GET", &r.path(&format!("/tasks/{id}/status")), None);
    assert_eq!(task_status.body["state"], "FAILED");

    let plain = curl(r.port, "POST", &r.path("/restart"), None);
    assert_eq!((plain.status, plain.text.as_str()), (204, ""), "restarting only the connector: 204");
    let restarted = curl(r.port, "POST", &r.path("/restart?includeTasks=true&onlyFailed=true"), None);
    assert_eq!(restarted.status, 202, "{}", restarted.text);
    assert_eq!(restarted.body["tasks"][id as usize]["state"], "RESTARTING", "{}", restarted.text);
    assert_ne!(restarted.body["tasks"][1 - id as usize]["state"], "RESTARTING", "only the failed one: {}", restarted.text);
    r.status("both running", |s| tasks_in(s, "RUNNING") == 2);
    r.records(400);

    // One named task, running: restarted (Connect restarts the task named, failed or not).
    let mut r = r;
    let one = curl(r.port, "POST", &r.path("/tasks/0/restart"), None);
    assert_eq!((one.status, one.text.as_str()), (204, ""), "{}", one.text);
    r.worker.wait_for_log("task restart asked for: restarting it", Duration::from_secs(30));
    r.status("both running after the task restart", |s| tasks_in(s, "RUNNING") == 2 && s["tasks"][0]["version"].is_string());
    assert_eq!(curl(r.port, "POST", &r.path("/tasks/9/restart"), None).status, 404, "an unknown task");

    let deleted = curl(r.port, "DELETE", &r.path(""), None);
    assert_eq!((deleted.status, deleted.text.as_str()), (204, ""));
    assert_eq!(curl(r.port, "GET", &r.path(""), None).status, 404);
    assert_eq!(curl(r.port, "GET", &r.path("/status"), None).status, 404);
    assert_eq!(curl(r.port, "DELETE", &r.path(""), None).status, 404, "deleting twice: not found");
    let mut worker = r.worker;
    worker.wait_for_log("connector deleted; its units here stopped", Duration::from_secs(30));
    let reads = (r.fake.journal().entries.len(), std::time::Instant::now());
    while reads.1.elapsed() < Duration::from_secs(1) {
        assert_eq!(r.fake.journal().entries.len(), reads.0, "a deleted connector reads nothing more");
        std::thread::sleep(Duration::from_millis(50));
    }
    worker.stop();
}

#[test]
fn the_rest_listener_requires_basic_credentials_and_speaks_tls() {
    let dir = work_dir("fleet-tls");
    let (cert, key) = (dir.join("rest.crt"), dir.join("rest.key"));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .args(["-addext", "subjectAltName=IP:127.0.0.1", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(made.status.success(), "openssl: {}", String::from_utf8_lossy(&made.stderr));
    let users = dir.join("rest-users.properties");
    const REST_PASSWORD: &str = "rest-Admin-Pw-31";
    std::fs::write(&users, format!("admin={REST_PASSWORD}\n")).unwrap();
    let port = support::fleet::free_port();
    let listener = format!("https://127.0.0.1:{port}");
    let (cert_s, key_s, users_s) = (cert.display().to_string(), key.display().to_string(), users.display().to_string());
    let mut spec = worker_properties(
        &dir,
        "w1",
        &unique("fleet-tls"),
        &[
            ("listeners", &listener),
            ("rest.tls.certificate.file", &cert_s),
            ("rest.tls.key.file", &key_s),
            ("rest.basic.auth.file", &users_s),
        ],
    );
    spec.port = port;
    let mut worker =
        support::Runner::command(&dir, "w1", &["worker".as_ref(), "--config".as_ref(), spec.file.as_os_str()], support::DEFAULT_LOG, &[]);
    worker.wait_for_log("REST API on https://", Duration::from_secs(120));
    let url = format!("{listener}/connectors");
    let credentials = format!("admin:{REST_PASSWORD}");
    let tls = ["--cacert", cert_s.as_str()];
    let open = support::fleet::curl_with(&tls, &url, "GET", None);
    assert_eq!(open.status, 401, "no credentials: {}", open.text);
    assert_eq!(open.body["error_code"], 401);
    let wrong = support::fleet::curl_with(&[tls[0], tls[1], "-u", "admin:wrong"], &url, "GET", None);
    assert_eq!(wrong.status, 401);
    let ok = support::fleet::curl_with(&[tls[0], tls[1], "-u", &credentials], &url, "GET", None);
    assert_eq!((ok.status, ok.body.clone()), (200, json!([])), "{}", ok.text);
    let plain = std::process::Command::new("curl")
        .args(["-sS", "-u", &credentials, &format!("http://127.0.0.1:{port}/connectors")])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&plain.stdout).contains("[]"), "plain HTTP is not answered");
    let log = worker.stop();
    assert!(!log.contains(REST_PASSWORD), "the REST password never reaches the log");
}

#[test]
fn components_reach_every_worker_by_a_digest_pinned_reference_and_a_mismatch_is_refused() {
    let now = now_secs();
    let fake = fake(now);
    let ids = fake.shared().seed("incident", 300, now - 3600, 3000);
    let dir = work_dir("fleet-components");
    let group = unique("fleet-components");
    let specs: Vec<_> = (1..=2).map(|i| worker_properties(&dir, &format!("w{i}"), &group, &[])).collect();
    let component = support::signed(guest_artifacts::GUEST_SOURCE);
    let config_path = specs[0].file.display().to_string();
    let (ok, out, err) = support::snow_connect(&dir, &["component", "push", component, "--config", &config_path]);
    assert!(ok, "push: {err}");
    let reference = out.trim().strip_prefix("component.ref=").expect("push prints the reference").to_string();
    let digest = sha2_hex(&std::fs::read(component).unwrap());
    assert_eq!(reference, format!("sha256:{digest}"), "the reference is the SHA-256 of the bytes");
    // A transform component is pushed and named the same way.
    let transform = support::signed(guest_artifacts::TRANSFORM_EXPLODE);
    let (ok, out, err) = support::snow_connect(&dir, &["component", "push", transform, "--config", &config_path]);
    assert!(ok, "push: {err}");
    let transform_ref = out.trim().strip_prefix("component.ref=").expect("push prints the reference").to_string();

    let mut workers: Vec<support::Runner> =
        specs.iter().enumerate().map(|(i, s)| start_worker(&dir, &format!("w{}", i + 1), s, &[PASSWORD_ENV])).collect();
    let (name, topic) = (unique("fref"), unique("fref-rows"));
    let mut config = source_config(&fake, &name, &topic, &["incident"]);
    config.as_object_mut().unwrap().remove("component.path");
    config["component.ref"] = json!(reference);
    config["transforms"] = json!("copy");
    config["transforms.copy.type"] = json!("io.snowconnect.transforms.Component");
    config["transforms.copy.component.ref"] = json!(transform_ref);
    config["transforms.copy.field"] = json!("number");
    config["transforms.copy.into"] = json!("number_copy");
    let created = curl(specs[1].port, "POST", "/connectors", Some(&json!({ "name": name, "config": config })));
    assert_eq!(created.status, 201, "{}", created.text);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| r.len() >= ids.len());
    assert_eq!(records.iter().map(|r| r.key.as_str()).collect::<BTreeSet<_>>().len(), ids.len());
    assert!(records.iter().all(|r| r.json()["number_copy"] == r.json()["number"]), "the transform component ran on every row");
    let mut elsewhere = config.clone();
    elsewhere.as_object_mut().unwrap().remove("transforms.copy.component.ref");
    elsewhere["transforms.copy.component.path"] = json!(dir.join("elsewhere.wasm").display().to_string());
    let refused = curl(specs[0].port, "POST", "/connectors", Some(&json!({ "name": unique("fpath"), "config": elsewhere })));
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(
        refused.text.contains("transforms.copy.component.path") && refused.text.contains("name it by transforms.copy.component.ref"),
        "{}",
        refused.text
    );
    for worker in &mut workers {
        worker.wait_for_log(&format!("component sha256:{digest} resolved"), Duration::from_secs(30));
    }

    // A reference to bytes nobody pushed, and bytes that do not hash to their key: refused.
    let mut missing = config.clone();
    missing["component.ref"] = json!(format!("sha256:{}", "0".repeat(64)));
    let refused = curl(specs[0].port, "POST", "/connectors", Some(&json!({ "name": unique("fmissing"), "config": missing })));
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.text.contains("no such component"), "{}", refused.text);
    let forged = "f".repeat(64);
    let components_topic = format!("{group}-components");
    support::kafka::produce_blocking(
        kafka_harness::shared().bootstrap(),
        &components_topic,
        &[
            (Some(format!("component-{forged}-0")), "not the component".to_string()),
            (Some(format!("component-{forged}")), r#"{"size":17,"chunks":1}"#.to_string()),
        ],
    );
    let mut tampered = config.clone();
    tampered["component.ref"] = json!(format!("sha256:{forged}"));
    let refused = curl(specs[0].port, "POST", "/connectors", Some(&json!({ "name": unique("fforged"), "config": tampered })));
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.text.contains("the stored bytes have digest sha256:"), "{}", refused.text);
    // A manifest that claims 2^62 bytes (or more chunks than bytes): refused, no worker aborts.
    for (digit, manifest) in [('e', r#"{"size":4611686018427387904,"chunks":1}"#), ('d', r#"{"size":17,"chunks":1099511627776}"#)] {
        let huge = digit.to_string().repeat(64);
        support::kafka::produce_blocking(
            kafka_harness::shared().bootstrap(),
            &components_topic,
            &[(Some(format!("component-{huge}")), manifest.to_string())],
        );
        let mut claimed = config.clone();
        claimed["component.ref"] = json!(format!("sha256:{huge}"));
        let refused = curl(specs[0].port, "POST", "/connectors", Some(&json!({ "name": unique("fhuge"), "config": claimed })));
        assert_eq!(refused.status, 400, "{}", refused.text);
        assert!(refused.text.contains("the manifest in") && refused.text.contains("is refused"), "{}", refused.text);
    }
    for spec in &specs {
        assert_eq!(curl(spec.port, "GET", "/", None).status, 200, "every worker is still up");
    }
    for worker in workers {
        worker.stop();
    }

    // Standalone: component.digest pins the file named by component.path.
    let mut pinned = support::source_entries(
        &fake.url(),
        "pinned",
        "t",
        &["incident"],
        &[("snow.auth.username", USER), ("snow.auth.password", PASSWORD)],
    );
    pinned.insert("component.digest".into(), format!("sha256:{}", "a".repeat(64)));
    let file = support::connector_file(&dir, "pinned", &pinned);
    let (ok, _, err) = support::snow_connect(&dir, &["validate", file.to_str().unwrap()]);
    assert!(!ok && err.contains(&format!("has digest sha256:{digest}, the configuration pins sha256:{}", "a".repeat(64))), "{err}");
    pinned.insert("component.digest".into(), reference.clone());
    let file = support::connector_file(&dir, "pinned", &pinned);
    let (ok, out, err) = support::snow_connect(&dir, &["validate", file.to_str().unwrap()]);
    assert!(ok, "the right digest passes: {out} {err}");
}

fn sha2_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_standalone_run_answers_the_rest_api_read_only() {
    let now = now_secs();
    let fake = fake(now);
    let ids = fake.shared().seed("incident", 300, now - 3600, 3000);
    let dir = work_dir("standalone-rest");
    let (name, topic) = (unique("srest"), unique("srest-rows"));
    let config = support::source_entries(
        &fake.url(),
        &name,
        &topic,
        &["incident"],
        &[("snow.auth.username", USER), ("snow.auth.password", PASSWORD)],
    );
    let file = support::connector_file(&dir, &name, &config);
    let port = support::fleet::free_port();
    let address = format!("127.0.0.1:{port}");
    let mut runner = support::Runner::start_with_args(&dir, "run", &[&file], &["--rest", &address]);
    runner.wait_for_log("REST API (read-only: a standalone run) on", Duration::from_secs(60));
    read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(60), |r| r.len() >= ids.len());
    assert_eq!(curl(port, "GET", "/connectors", None).body, json!([name]));
    let status = wait_status(port, &name, Duration::from_secs(30), "running", |s| tasks_in(s, "RUNNING") == 1);
    assert_eq!(
        (status["connector"]["state"].as_str(), status["tasks"][0]["worker_id"].as_str()),
        (Some("RUNNING"), Some(address.as_str()))
    );
    let shown = curl(port, "GET", &format!("/connectors/{name}/config"), None);
    assert_eq!(shown.body["snow.auth.password"], "[hidden]", "{}", shown.text);
    assert!(!shown.text.contains(PASSWORD));
    let offsets = curl(port, "GET", &format!("/connectors/{name}/offsets"), None);
    assert_eq!(offsets.body["offsets"][0]["partition"]["table"], "incident", "{}", offsets.text);
    let paused = curl(port, "PUT", &format!("/connectors/{name}/pause"), None);
    assert_eq!(paused.status, 405, "{}", paused.text);
    assert!(paused.text.contains("standalone"), "{}", paused.text);
    let levels = curl(port, "GET", "/admin/loggers", None).body;
    for scope in ["", "?scope=cluster"] {
        let logger = curl(port, "PUT", &format!("/admin/loggers/root{scope}"), Some(&json!({ "level": "OFF" })));
        assert_eq!(logger.status, 405, "levels are read-only here too: {}", logger.text);
    }
    assert_eq!(curl(port, "GET", "/admin/loggers", None).body, levels, "unchanged");
    let mut bad = config.clone();
    bad.insert("kafka.typo".into(), "1".into());
    let validated = curl(port, "PUT", "/connector-plugins/ServiceNowSourceConnector/config/validate", Some(&json!(bad)));
    assert_eq!((validated.status, validated.body["error_count"].as_u64()), (200, Some(1)), "{}", validated.text);
    assert!(!validated.text.contains(PASSWORD), "a literal secret is not answered");
    let log = runner.stop();
    assert!(!log.contains(PASSWORD));
}

/// Starts `snow-connect worker` for `spec` without waiting for it.
fn spawn_worker(dir: &std::path::Path, label: &str, spec: &support::fleet::WorkerSpec) -> support::Runner {
    support::Runner::command(
        dir,
        label,
        &[std::ffi::OsStr::new("worker"), std::ffi::OsStr::new("--config"), spec.file.as_os_str()],
        support::DEFAULT_LOG,
        &[PASSWORD_ENV],
    )
}

#[test]
fn new_fleets_started_at_once_all_come_up_and_survive_their_broker_restarting_under_them() {
    // Five new fleets at once on the shared broker: each first worker creates its five topics and
    // reads them while the others do the same (leaders being elected everywhere).
    let dir = work_dir("fleet-new");
    let specs: Vec<_> = (0..5).map(|i| worker_properties(&dir, &format!("n{i}"), &unique("fleet-new"), &[])).collect();
    let mut workers: Vec<support::Runner> = specs.iter().enumerate().map(|(i, s)| spawn_worker(&dir, &format!("n{i}"), s)).collect();
    for (worker, spec) in workers.iter_mut().zip(&specs) {
        worker.wait_for_log("REST API on http://", Duration::from_secs(180));
        assert_eq!(curl(spec.port, "GET", "/connectors", None).status, 200);
    }
    for worker in workers {
        worker.stop();
    }

    // Three new fleets on a broker of their own, which is killed while they open their topics and
    // started again: each waits it out and comes up.
    let mut broker = kafka_harness::KafkaBroker::start().unwrap();
    let bootstrap = broker.bootstrap().to_string();
    let specs: Vec<_> =
        (0..3).map(|i| worker_properties(&dir, &format!("r{i}"), &unique("fleet-restart"), &[("bootstrap.servers", &bootstrap)])).collect();
    let mut workers: Vec<support::Runner> = specs.iter().enumerate().map(|(i, s)| spawn_worker(&dir, &format!("r{i}"), s)).collect();
    support::wait_until("a worker creating its topics", Duration::from_secs(120), || {
        workers.iter().any(|w| w.log().contains("created config.storage.topic")).then_some(())
    });
    broker.kill();
    let up_at_kill = workers.iter().filter(|w| w.log().contains("REST API on http://")).count();
    assert!(up_at_kill < workers.len(), "the broker went down while workers were still starting ({up_at_kill} up)");
    broker.restart().unwrap();
    for (worker, spec) in workers.iter_mut().zip(&specs) {
        worker.wait_for_log("REST API on http://", Duration::from_secs(180));
        assert_eq!(curl(spec.port, "GET", "/connectors", None).status, 200);
    }
    let met = workers
        .iter()
        .filter(|w| {
            let log = w.log();
            log.contains("Connection refused") || log.contains("All broker connections are down") || log.contains("trying again in")
        })
        .count();
    for worker in workers {
        worker.stop();
    }
    assert_eq!(met, specs.len(), "every worker met the outage while starting and waited it out");
}

#[test]
fn a_tenants_credential_goes_only_to_the_destinations_the_worker_bound_it_to() {
    let now = now_secs();
    let (team_a, team_b) = (fake(now), fake(now));
    let ids = team_a.shared().seed("incident", 40, now - 3600, 3000);
    team_b.shared().seed("incident", 40, now - 3600, 3000);
    let dir = work_dir("fleet-tenants");
    let group = unique("fleet-tenants");
    let (a_url, b_url) = (team_a.url(), team_b.url());
    let spec = worker_properties(
        &dir,
        "w1",
        &group,
        &[
            ("credentials", "team-a,team-b"),
            ("credentials.team-a.references", "${env:SNOW_TEAM_A_*}"),
            ("credentials.team-a.destinations", &a_url),
            ("credentials.team-b.references", "${env:SNOW_TEAM_B_*}"),
            ("credentials.team-b.destinations", &b_url),
        ],
    );
    let worker = start_worker(&dir, "w1", &spec, &[("SNOW_TEAM_A_PASSWORD", PASSWORD), ("SNOW_TEAM_B_PASSWORD", PASSWORD)]);
    let config = |fake: &FakeSnow, name: &str, topic: &str, reference: &str, extra: &[(&str, &str)]| {
        let mut config = source_config(fake, name, topic, &["incident"]);
        config["snow.auth.password"] = json!(reference);
        for (k, v) in extra {
            config[*k] = json!(v);
        }
        config
    };

    // Team B names team A's credential with its own instance: refused, naming the key and where
    // it may not go, never the value; team B's instance is asked nothing.
    let (name, topic) = (unique("stolen"), unique("stolen"));
    let stolen = curl(
        spec.port,
        "POST",
        "/connectors",
        Some(&json!({ "name": name, "config": config(&team_b, &name, &topic, "${env:SNOW_TEAM_A_PASSWORD}", &[]) })),
    );
    assert_eq!(stolen.status, 400, "{}", stolen.text);
    let b_port = b_url.rsplit(':').next().unwrap();
    assert!(
        stolen.text.contains("snow.auth.password") && stolen.text.contains(&format!("may not be sent to http://127.0.0.1:{b_port}")),
        "{}",
        stolen.text
    );
    assert!(!stolen.text.contains(PASSWORD));
    // A registry on a link-local address (a cloud's metadata service) is no destination either.
    let (name, topic) = (unique("metadata"), unique("metadata"));
    let registry = [
        ("value.converter", "io.confluent.connect.avro.AvroConverter"),
        ("value.converter.schema.registry.url", "http://169.254.169.254/latest"),
    ];
    let metadata = curl(
        spec.port,
        "POST",
        "/connectors",
        Some(&json!({ "name": name, "config": config(&team_a, &name, &topic, "${env:SNOW_TEAM_A_PASSWORD}", &registry) })),
    );
    assert_eq!(metadata.status, 400, "{}", metadata.text);
    assert!(
        metadata.text.contains("value.converter.schema.registry.url") && metadata.text.contains("destinations.registries"),
        "{}",
        metadata.text
    );

    // Team A's credential with team A's instance runs.
    let (name, topic) = (unique("own"), unique("own"));
    let created = curl(
        spec.port,
        "POST",
        "/connectors",
        Some(&json!({ "name": name, "config": config(&team_a, &name, &topic, "${env:SNOW_TEAM_A_PASSWORD}", &[]) })),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| r.len() >= ids.len());
    let log = worker.stop();
    assert_eq!(records.iter().map(|r| r.key.as_str()).collect::<BTreeSet<_>>().len(), ids.len(), "{}", tail(&log, 20));
    assert!(team_b.journal().entries.is_empty(), "team B's instance was asked nothing");
}
