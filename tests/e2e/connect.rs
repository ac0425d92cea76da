//! The same signed components inside Apache Kafka Connect (issue 23, ADR 0037): a real Connect
//! 4.1.1 distributed worker with our plugin on its plugin.path, connectors created through
//! Connect's REST API (found by `plugin.discovery=service_load`). A source delivers every row,
//! also when the worker is SIGKILLed mid-backfill and started again (duplicates only where the
//! stated bound allows them), and under Connect's exactly-once with its tables spread over tasks;
//! one configuration gives the same records under our worker and under Connect; a sink writes a
//! topic with per-key order and one write per record, through Connect's transforms, its refused
//! record in Connect's dead letter queue; a tampered component is refused; the password stays a
//! reference in Connect's config topic.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fake_snow::{FakeSnow, Fault, FaultAction};
use serde_json::{Value, json};

use support::connect::{ConnectWorker, connect_config, executors, plugin_path};
use support::kafka::read_until;
use support::{now_secs, unique, wait_until, work_dir};

const USER: &str = "connect-user";
const PASSWORD: &str = "Connect-Secret-Pw-31";
const PASSWORD_VARIABLE: &str = "SNOW_E2E_CONNECT_PASSWORD";
const SOURCE: &str = "io.snowconnect.ServiceNowSourceConnector";
const SINK: &str = "io.snowconnect.ServiceNowSinkConnector";

fn fake() -> FakeSnow {
    support::fake_with_user(USER, PASSWORD, None)
}

/// The last position Connect stored for `connector` in its offsets topic: the last of those
/// written by the time one is there while the worker runs, or the last of all once it stopped
/// (`settled`).
fn stored_position(group: &str, connector: &str, settled: bool) -> Option<Value> {
    let prefix = format!("[\"{connector}\",");
    let ours = |r: &support::kafka::Read| r.key.starts_with(&prefix) && !r.value.is_empty();
    let topic = format!("{group}-offsets");
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(30), |r| settled || r.iter().any(ours));
    records.iter().rev().find(|r| ours(r)).map(|r| r.json())
}

#[test]
fn a_source_connector_in_kafka_connect_delivers_every_row_also_across_a_sigkill_of_the_worker() {
    let now = now_secs();
    let fake = fake();
    let ids = fake.shared().seed("incident", 3000, now - 7200, 6000);
    // Slow reads down so the kill lands in the middle of the backfill.
    fake.add_fault(Fault::always(FaultAction::Latency { ms: 300 }).on_method("GET").on_path("/api/now/table/incident"));
    let dir = work_dir("connect-source");
    let plugins = plugin_path(&dir);
    let group = unique("connect-src");
    let mut worker = ConnectWorker::start(&dir, "connect", &group, &plugins, &[(PASSWORD_VARIABLE, PASSWORD)]);
    let (name, topic) = (unique("snow-src"), unique("incident"));
    let entries = support::source_entries(
        &fake.url(),
        &name,
        &topic,
        &["incident"],
        &[("snow.auth.username", USER), ("snow.batch.size", "100"), ("tasks.max", "1")],
    );
    let mut config = connect_config(&entries, SOURCE);
    config.insert("snow.auth.password".into(), json!(format!("${{env:{PASSWORD_VARIABLE}}}")));
    let created = worker.rest("POST", "/connectors", Some(&json!({"name": name, "config": config})));
    assert_eq!(created.status, 201, "created: {}", created.text);
    worker.wait_status(&name, "a running task", Duration::from_secs(120), |s| s["tasks"][0]["state"] == "RUNNING");

    // Kill the worker once Connect stored a position and a third of the rows are in Kafka.
    let bootstrap = kafka_harness::shared().bootstrap();
    wait_until("a stored position", Duration::from_secs(120), || stored_position(&group, &name, false));
    read_until(bootstrap, &topic, Duration::from_secs(120), |r| r.len() >= ids.len() / 3);
    let executor_pids = executors(&plugins);
    assert_eq!(executor_pids.len(), 1, "one executor for the one task");
    worker.kill();
    let stored = stored_position(&group, &name, true).expect("a stored position");
    let before = read_until(bootstrap, &topic, Duration::from_secs(30), |_| true);
    assert!(before.len() < ids.len(), "the kill landed mid-backfill ({} of {} records)", before.len(), ids.len());
    // The executor ends with its plugin (its stdin closed): no orphan keeps reading.
    wait_until("the executor to end with the killed worker", Duration::from_secs(30), || executors(&plugins).is_empty().then_some(()));

    worker.restart();
    let records = read_until(bootstrap, &topic, Duration::from_secs(300), |r| {
        r.iter().map(|x| x.key.as_str()).collect::<BTreeSet<_>>().len() >= ids.len()
    });
    let keys: BTreeSet<&str> = records.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ids.iter().map(String::as_str).collect::<BTreeSet<_>>(), "no row is lost across the kill");
    assert!(worker.log().contains("1 stored positions"), "the restarted task opened at Connect's stored offset");

    // Duplicates only where the restart may make them: rows at or after the stored position less
    // the overlap (30 s) are read again; every other row arrived exactly once, and none more than twice.
    let stored_ts = stored["ts"].as_str().expect("a cursor position").to_string();
    let from = snow_core::time::Timestamp::parse(&stored_ts).unwrap().plus_seconds(-30).to_string();
    let rows: BTreeMap<String, String> = fake
        .rows("incident")
        .iter()
        .map(|r| (r["sys_id"].as_str().unwrap().to_string(), r["sys_updated_on"].as_str().unwrap().to_string()))
        .collect();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &records {
        *counts.entry(r.key.as_str()).or_default() += 1;
    }
    for (key, count) in &counts {
        let ts = &rows[*key];
        if ts.as_str() < from.as_str() {
            assert_eq!(*count, 1, "row {key} ({ts}) lies before the restart's re-read ({from}): exactly once");
        } else {
            assert!(*count <= 2, "row {key} ({ts}) arrived {count} times");
        }
    }
    let duplicates = records.len() - keys.len();
    assert!(duplicates > 0, "the restart re-read its overlap (the kill landed where it matters)");

    // Records as Connect's converters made them: the row as JSON, the headers as ours.
    let value = records[0].json();
    assert!(value["sys_id"].is_string() && value["sys_updated_on"].is_string(), "a row: {value}");
    assert_eq!(records[0].headers.get("snow.table").map(String::as_str), Some("incident"));

    // Connect's config topic holds the reference, never the password.
    let configs = read_until(bootstrap, &format!("{group}-configs"), Duration::from_secs(30), |_| true);
    assert!(configs.iter().any(|r| String::from_utf8_lossy(&r.value).contains(PASSWORD_VARIABLE)), "the connector's config is stored");
    assert!(!configs.iter().any(|r| String::from_utf8_lossy(&r.value).contains(PASSWORD)), "no password in Connect's config topic");
    assert!(!worker.log().contains(PASSWORD), "no password in Connect's log");
}

#[test]
fn one_connector_configuration_runs_unchanged_under_our_worker_and_under_kafka_connect() {
    let now = now_secs();
    let fake = fake();
    let ids = fake.shared().seed("incident", 500, now - 3600, 3000);
    let dir = work_dir("connect-same");
    let plugins = plugin_path(&dir);
    let env = [(PASSWORD_VARIABLE, PASSWORD)];
    let connect = ConnectWorker::start(&dir, "connect", &unique("connect-same"), &plugins, &env);
    let spec = support::fleet::worker_properties(&dir, "fleet", &unique("fleet-same"), &[]);
    let _ours = support::fleet::start_worker(&dir, "fleet", &spec, &env);
    // One configuration, as a user writes it once: posted as it is to both REST APIs (each
    // runtime keeps its own offsets), both writing to the same topic.
    let (name, topic) = (unique("snow-same"), unique("same"));
    let body = json!({"name": name, "config": {
        "connector.class": SOURCE,
        "tasks.max": "1",
        "component.path": support::signed(guest_artifacts::GUEST_SOURCE),
        "snow.instance.url": fake.url(),
        "snow.auth.username": USER,
        "snow.auth.password": format!("${{env:{PASSWORD_VARIABLE}}}"),
        "snow.tables": "incident",
        "snow.table.incident.topic": topic,
        "snow.poll.interval.ms": "200",
        "snow.safety.lag.seconds": "2",
    }});
    let created = connect.rest("POST", "/connectors", Some(&body));
    assert_eq!(created.status, 201, "Connect: {}", created.text);
    let created = support::fleet::curl(spec.port, "POST", "/connectors", Some(&body));
    assert_eq!(created.status, 201, "our worker: {}", created.text);

    // Each runtime writes every row once: each version twice in the topic, the two copies alike.
    let bootstrap = kafka_harness::shared().bootstrap();
    let records = read_until(bootstrap, &topic, Duration::from_secs(240), |r| r.len() >= 2 * ids.len());
    let mut copies: BTreeMap<(String, String), Vec<&support::kafka::Read>> = BTreeMap::new();
    for r in &records {
        copies.entry(r.version()).or_default().push(r);
    }
    assert_eq!(copies.len(), ids.len(), "every row, and only the rows");
    for (version, pair) in &copies {
        assert_eq!(pair.len(), 2, "{version:?} was written once by each runtime");
        assert_eq!(pair[0].json(), pair[1].json(), "{version:?}: the same value under both runtimes");
        assert_eq!(pair[0].headers, pair[1].headers, "{version:?}: the same headers under both runtimes");
        assert_eq!(pair[0].timestamp_ms, pair[1].timestamp_ms, "{version:?}: the same timestamp under both runtimes");
    }
}

#[test]
fn a_sink_connector_in_kafka_connect_writes_each_record_once_in_per_key_order_with_connects_transforms_and_dlq() {
    let now = now_secs();
    let fake = fake();
    let ids = fake.shared().seed("incident", 40, now - 600, 300);
    let dir = work_dir("connect-sink");
    let plugins = plugin_path(&dir);
    let group = unique("connect-sink");
    let worker = ConnectWorker::start(&dir, "connect", &group, &plugins, &[(PASSWORD_VARIABLE, PASSWORD)]);
    let bootstrap = kafka_harness::shared().bootstrap();
    let (name, topic, dlq) = (unique("snow-sink"), unique("updates"), unique("dlq"));
    support::kafka::create_topic_blocking(bootstrap, &topic, 3);
    let mut records = support::keyed_updates(&ids, 400, 7);
    // A record the component cannot make a write of (a JSON array, not a row), amid the others.
    records.insert(200, (Some(ids[3].clone()), "[1,2]".to_string()));
    support::kafka::produce_blocking(bootstrap, &topic, &records);
    let entries = support::sink_entries(&fake.url(), &name, &topic, "incident", &[("snow.auth.username", USER), ("tasks.max", "2")]);
    let mut config = connect_config(&entries, SINK);
    config.insert("snow.auth.password".into(), json!(format!("${{env:{PASSWORD_VARIABLE}}}")));
    // Connect's own transform and dead letter queue, as for any Connect connector.
    for (k, v) in [
        ("transforms", "origin"),
        ("transforms.origin.type", "org.apache.kafka.connect.transforms.InsertField$Value"),
        ("transforms.origin.static.field", "u_origin"),
        ("transforms.origin.static.value", "kafka-connect"),
        ("errors.tolerance", "all"),
        ("errors.deadletterqueue.topic.name", dlq.as_str()),
        ("errors.deadletterqueue.topic.replication.factor", "1"),
        ("errors.deadletterqueue.context.headers.enable", "true"),
    ] {
        config.insert(k.into(), json!(v));
    }
    let created = worker.rest("POST", "/connectors", Some(&json!({"name": name, "config": config})));
    assert_eq!(created.status, 201, "created: {}", created.text);

    let updates = records.len() - 1;
    let patches = || fake.journal().entries.iter().filter(|e| e.method == "PATCH" && e.status == 200).count();
    wait_until("every update written", Duration::from_secs(180), || (patches() >= updates).then_some(()));
    support::kafka::wait_committed(&format!("connect-{name}"), &topic, 3, records.len() as i64, Duration::from_secs(60));
    assert_eq!(patches(), updates, "one write per record: {updates} updates, {} PATCHes", patches());
    support::assert_last_updates(&fake, "incident", &records);
    let row = fake.rows("incident").into_iter().find(|r| r["sys_id"] == json!(ids[0])).unwrap();
    assert_eq!(row["u_origin"], json!("kafka-connect"), "Connect's InsertField reached the write");
    let dead = read_until(bootstrap, &dlq, Duration::from_secs(60), |r| !r.is_empty());
    assert_eq!(dead.len(), 1, "the one record the component refused is in Connect's dead letter queue");
    assert_eq!((dead[0].key.as_str(), dead[0].value.as_slice()), (ids[3].as_str(), &b"[1,2]"[..]));
    let why = dead[0].headers.get("__connect.errors.exception.message").cloned().unwrap_or_default();
    assert!(!why.is_empty() && !why.contains(PASSWORD), "Connect's error context says why: {:?}", dead[0].headers);
    let status = worker.rest("GET", &format!("/connectors/{name}/status"), None).body;
    assert_eq!(status["tasks"].as_array().map(Vec::len), Some(2), "tasks.max spreads the partitions: {status}");
    assert!(status["tasks"].as_array().unwrap().iter().all(|t| t["state"] == "RUNNING"), "{status}");
}

#[test]
fn exactly_once_inside_kafka_connect_commits_each_poll_with_its_offset() {
    let now = now_secs();
    let fake = fake();
    // Tables the component's plan puts in two tasks (rendezvous hashing decides; the first pair
    // that splits is taken, so the test shows the spread whatever the hash).
    let candidates = ["incident", "problem", "change_request", "sc_task", "sc_req_item", "kb_knowledge"];
    let tables: Vec<&str> = (2..=candidates.len())
        .map(|n| candidates[..n].to_vec())
        .find(|tables| {
            let mut entries = support::entries(&[("snow.instance.url", "https://x.service-now.com")]);
            entries.insert("snow.tables".into(), tables.join(","));
            snow_core::source::plan(&entries, 2).unwrap().iter().filter(|t| !t.is_empty()).count() == 2
        })
        .expect("some tables the plan splits over two tasks");
    let mut ids = Vec::new();
    for table in &tables {
        ids.extend(fake.shared().seed(table, 150, now - 3600, 3000));
    }
    let dir = work_dir("connect-eos");
    let plugins = plugin_path(&dir);
    let group = unique("connect-eos");
    let env = [(PASSWORD_VARIABLE, PASSWORD)];
    let worker = ConnectWorker::start_with(&dir, "connect", &group, &plugins, &env, &[("exactly.once.source.support", "enabled")]);
    let (name, topic) = (unique("snow-eos"), unique("incident"));
    let entries = support::source_entries(
        &fake.url(),
        &name,
        &topic,
        &tables,
        &[("snow.auth.username", USER), ("snow.batch.size", "100"), ("tasks.max", "2")],
    );
    let mut config = connect_config(&entries, SOURCE);
    config.insert("snow.auth.password".into(), json!(format!("${{env:{PASSWORD_VARIABLE}}}")));
    config.insert("exactly.once.support".into(), json!("required"));
    let created = worker.rest("POST", "/connectors", Some(&json!({"name": name, "config": config})));
    assert_eq!(created.status, 201, "Connect takes the connector's exactly-once support: {}", created.text);
    let bootstrap = kafka_harness::shared().bootstrap();
    let records = read_until(bootstrap, &topic, Duration::from_secs(180), |r| r.len() >= ids.len());
    let keys: BTreeSet<&str> = records.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys.len(), ids.len(), "every row");
    assert_eq!(records.len(), ids.len(), "each once");
    // Transactions leave their commit markers in the log: the topic's end lies past its records.
    let end = support::kafka::Ends::new(bootstrap, &topic).stable();
    assert!(end > records.len() as i64, "the records were written in transactions (end {end}, {} records)", records.len());
    assert!(stored_position(&group, &name, false).is_some(), "the offsets committed with them");
    // tasks.max spreads the tables as Connect tasks, as the component plans them.
    let status = worker.rest("GET", &format!("/connectors/{name}/status"), None).body;
    assert_eq!(status["tasks"].as_array().map(Vec::len), Some(2), "the tables over two tasks: {status}");
    assert!(status["tasks"].as_array().unwrap().iter().all(|t| t["state"] == "RUNNING"), "{status}");
    let written: BTreeSet<&str> = records.iter().filter_map(|r| r.headers.get("snow.table").map(String::as_str)).collect();
    assert_eq!(written, tables.iter().copied().collect::<BTreeSet<_>>());
}

#[test]
fn a_tampered_component_is_refused_by_the_plugin_as_by_our_host() {
    let fake = fake();
    let dir = work_dir("connect-tampered");
    let plugins = plugin_path(&dir);
    let group = unique("connect-tampered");
    let worker = ConnectWorker::start(&dir, "connect", &group, &plugins, &[]);
    // One byte changed after signing, its bundle beside it, inside the plugin's components.
    let components = plugins.join("snow-connect-servicenow/components");
    let mut bytes = std::fs::read(components.join("guest_source.wasm")).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let tampered = components.join("tampered.wasm");
    std::fs::write(&tampered, bytes).unwrap();
    std::fs::copy(components.join("guest_source.wasm.sigstore.json"), components.join("tampered.wasm.sigstore.json")).unwrap();
    let name = unique("snow-tampered");
    let entries = support::source_entries(&fake.url(), &name, "t", &["incident"], &[("snow.auth.username", USER)]);
    let mut config = connect_config(&entries, SOURCE);
    config.insert("component.path".into(), json!(tampered.display().to_string()));
    config.insert("snow.auth.password".into(), json!(PASSWORD));

    let validated = worker.rest("PUT", &format!("/connector-plugins/{SOURCE}/config/validate"), Some(&Value::Object(config.clone())));
    assert_eq!(validated.status, 200, "{}", validated.text);
    let errors = support::fleet::validation_errors(&validated.body, "component.path");
    assert!(errors.iter().any(|e| e.contains("refused") && e.contains("changed after it was signed")), "component.path: {errors:?}");
    let created = worker.rest("POST", "/connectors", Some(&json!({"name": name, "config": config})));
    assert_eq!(created.status, 400, "a tampered component is not created: {}", created.text);
    // A component outside the plugin's component paths is refused without being read.
    config.insert("component.path".into(), json!("/etc/passwd"));
    let validated = worker.rest("PUT", &format!("/connector-plugins/{SOURCE}/config/validate"), Some(&Value::Object(config)));
    let errors = support::fleet::validation_errors(&validated.body, "component.path");
    assert!(errors.iter().any(|e| e.contains("is not a component this worker lets")), "component.path: {errors:?}");
    assert!(fake.journal().entries.is_empty(), "nothing reached the instance");

    // Connect shows the keys the host documents (less Connect's own and ours that have no place
    // in it), and the component's own errors come back attached to their keys.
    let keys = worker.rest("GET", &format!("/connector-plugins/{SOURCE}/config"), None).body;
    let names: BTreeSet<&str> = keys.as_array().unwrap().iter().filter_map(|k| k["name"].as_str()).collect();
    for key in ["snow.tables", "snow.batch.size", "snow.instance.url", "snow.auth.password", "snow.value.schema"] {
        assert!(names.contains(key), "{key} is shown: {names:?}");
    }
    for key in ["kafka.bootstrap.servers", "component.trusted.keys", "reporter.result.topic.name", "snow.sink.table"] {
        assert!(!names.contains(key), "{key} is not a source key inside Connect");
    }
    let mut bad = connect_config(&entries, SOURCE);
    bad.insert("snow.batch.size".into(), json!("0"));
    bad.insert("snow.auth.password".into(), json!(PASSWORD));
    bad.insert("reporter.result.topic.name".into(), json!("results"));
    let validated = worker.rest("PUT", &format!("/connector-plugins/{SOURCE}/config/validate"), Some(&Value::Object(bad)));
    let errors = support::fleet::validation_errors(&validated.body, "reporter.result.topic.name");
    assert!(errors.iter().any(|e| e.contains("dead letter queue")), "reporter.result.topic.name: {errors:?}");
    let mut bad = connect_config(&entries, SOURCE);
    bad.insert("snow.batch.size".into(), json!("0"));
    bad.insert("snow.auth.password".into(), json!(PASSWORD));
    let validated = worker.rest("PUT", &format!("/connector-plugins/{SOURCE}/config/validate"), Some(&Value::Object(bad)));
    let errors = support::fleet::validation_errors(&validated.body, "snow.batch.size");
    assert!(!errors.is_empty(), "the component's error is on snow.batch.size: {}", validated.text);
    assert!(!validated.text.contains(PASSWORD), "no password in a validation answer");
}

#[test]
fn the_operators_request_budget_holds_across_all_tasks_of_a_connector_in_kafka_connect() {
    const PER_MINUTE: f64 = 60.0;
    const TASKS: usize = 4;
    let now = now_secs();
    let fake = fake();
    let tables: Vec<String> = (0..8).map(|i| format!("u_budget{i}")).collect();
    for table in &tables {
        fake.shared().seed(table, 300, now - 7200, 6000);
    }
    let dir = work_dir("connect-budget");
    let plugins = plugin_path(&dir);
    // The operator's budget, in the plugin's operator file: 60 requests a minute for the instance.
    let operator_file = plugins.join("snow-connect-servicenow/snow-connect.properties");
    let mut operator = std::fs::read_to_string(&operator_file).unwrap();
    operator.push_str("snow.instance.requests.per.minute=60\n");
    std::fs::write(&operator_file, operator).unwrap();
    let group = unique("connect-budget");
    let mut worker = ConnectWorker::start(&dir, "connect", &group, &plugins, &[(PASSWORD_VARIABLE, PASSWORD)]);
    let (name, topic) = (unique("snow-budget"), unique("budget"));
    let table_names: Vec<&str> = tables.iter().map(String::as_str).collect();
    let entries = support::source_entries(
        &fake.url(),
        &name,
        &topic,
        &table_names,
        &[("snow.auth.username", USER), ("snow.batch.size", "10"), ("tasks.max", "4")],
    );
    let mut config = connect_config(&entries, SOURCE);
    config.insert("snow.auth.password".into(), json!(format!("${{env:{PASSWORD_VARIABLE}}}")));
    let created = worker.rest("POST", "/connectors", Some(&json!({"name": name, "config": config})));
    assert_eq!(created.status, 201, "created: {}", created.text);
    worker.wait_status(&name, "four running tasks", Duration::from_secs(120), |s| {
        s["tasks"].as_array().is_some_and(|t| t.len() == TASKS && t.iter().all(|t| t["state"] == "RUNNING"))
    });
    assert_eq!(executors(&plugins).len(), TASKS, "each task is a process of its own");
    // Eight tables asking every 200 ms want far more than a request a second; let them ask for 40 s.
    wait_until("40 s of requests", Duration::from_secs(180), || {
        let journal = fake.journal();
        let first = journal.entries.first()?.at_ms;
        (journal.entries.last()?.at_ms >= first + 40_000).then_some(())
    });
    let journal = fake.journal();
    worker.kill();
    // Checked at each request: however many tasks, the requests so far never exceed what the one
    // budget allows since the first (59/60 of the rate, plus each task's burst of one).
    let first = journal.entries[0].at_ms;
    for (i, entry) in journal.entries.iter().enumerate() {
        let allowed = (entry.at_ms - first) as f64 / 1000.0 * PER_MINUTE / 60.0 * 59.0 / 60.0 + TASKS as f64 + 1.0;
        assert!(
            (i + 1) as f64 <= allowed,
            "request {} at {} ms after the first is over the budget ({allowed:.1} allowed): 4 tasks each spent a whole budget; the first: {:?}",
            i + 1,
            entry.at_ms - first,
            journal
                .entries
                .iter()
                .take(12)
                .map(|e| (e.at_ms - first, e.method.as_str(), e.path.as_str(), e.query.as_deref().unwrap_or("")))
                .collect::<Vec<_>>()
        );
    }
    assert!(journal.entries.len() >= 30, "the tables kept asking ({} requests)", journal.entries.len());
}
