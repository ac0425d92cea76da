//! Source end to end: the real source component in the real host, reading the fake over HTTP and
//! producing to a real Kafka broker. Journal entries and attachments are tested
//! in [`crate::journal`] and [`crate::attachments`].

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use fake_snow::{FakeSnow, Fault, FaultAction};
use serde_json::Value;
use support::kafka::read_until;
use support::{Runner, connector_file, now_secs, stored_position, tail, unique, wait_until, work_dir};

const USER: &str = "snow-e2e";
const PASSWORD: &str = "e2e-Secret-Pw-42";

fn fake(now: i64) -> FakeSnow {
    support::fake_with_user(USER, PASSWORD, Some(now))
}

fn source_config(fake: &FakeSnow, name: &str, topic: &str, batch: &str) -> BTreeMap<String, String> {
    let extra = [("snow.auth.username", USER), ("snow.auth.password", PASSWORD), ("snow.batch.size", batch)];
    support::source_entries(&fake.url(), name, topic, &["incident"], &extra)
}

#[test]
fn five_thousand_rows_arrive_in_kafka_exactly_once() {
    let now = now_secs();
    let fake = fake(now);
    let ids = fake.shared().seed("incident", 5000, now - 3600, 3000);
    // Transient faults on the way: each must be retried without losing or repeating a row.
    let list = "/api/now/table/incident";
    fake.add_fault(Fault::always(FaultAction::Status { status: 503, retry_after: None }).on_method("GET").on_path(list).after(1).times(2));
    fake.add_fault(Fault::always(FaultAction::DropConnection).on_method("GET").on_path(list).after(3).times(1));
    fake.add_fault(Fault::always(FaultAction::MalformedBody).on_method("GET").on_path(list).after(5).times(1));
    let (name, topic) = (unique("src5k"), unique("incident"));
    let dir = work_dir("five-thousand");
    let file = connector_file(&dir, &name, &source_config(&fake, &name, &topic, "1000"));
    let runner = Runner::start(&dir, "run", &[&file]);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(180), |r| r.len() >= ids.len());
    let log = runner.stop();

    assert_eq!(records.len(), 5000, "every row once, no duplicates without restarts; log:\n{}", tail(&log, 40));
    let keys: BTreeSet<&str> = records.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ids.iter().map(String::as_str).collect::<BTreeSet<_>>(), "the set of keys is the set of seeded sys_ids");
    let first: Value = serde_json::from_slice(&records[0].value).unwrap();
    assert_eq!(first["sys_id"], records[0].key.as_str(), "the value is the row, keyed by its sys_id");
    assert_eq!(first.as_object().unwrap().len(), fake.rows("incident")[0].len(), "every field passes through");
    let mut served = fake.rows("incident").into_iter().find(|r| r["sys_id"] == records[0].key.as_str()).unwrap();
    // With sysparm_display_value=false a reference is served as {link, value}.
    for value in served.values_mut() {
        if let Value::Object(reference) = value {
            reference.remove("display_value");
        }
    }
    assert_eq!(first, Value::Object(served), "values are passed through unchanged");
    assert_eq!(records[0].headers.get("snow.table").map(String::as_str), Some("incident"));
    assert_eq!(records[0].headers.get("snow.source.operation").map(String::as_str), Some("UPSERT"));
    let updated = first["sys_updated_on"].as_str().unwrap();
    let ts = snow_core::time::Timestamp::parse(updated).unwrap();
    assert_eq!(records[0].timestamp_ms, Some(ts.as_millis()), "the record timestamp is the row's cursor timestamp");

    let journal = fake.journal();
    assert!(journal.entries.iter().all(|e| e.auth == format!("basic:{USER}")), "the host attached the credentials to every request");
    assert!(journal.entries.iter().all(|e| e.dropped_terms.is_empty()), "ServiceNow would have applied every term");
    assert!(
        journal.entries.iter().all(|e| e.query.as_deref().is_some_and(|q| q.contains("ORDERBY"))),
        "every read is ordered by the cursor"
    );
    assert!(!log.contains(PASSWORD), "the password never reaches the log");
    // 503s and the dropped connection are retried inside the component (same request id); the
    // malformed page fails the poll and the host polls again from the same cursor.
    assert_eq!(log.matches("poll failed, retrying").count(), 1, "only the malformed body reached the host:\n{}", tail(&log, 40));
    let retried = journal.entries.windows(2).filter(|w| matches!(w[0].status, 0 | 503) && w[1].request_id == w[0].request_id).count();
    assert_eq!(retried, 3, "two 503s and a dropped connection retried with the same X-Request-Id");
    assert!(log.contains("5000 records produced and acknowledged by Kafka"), "summary:\n{}", tail(&log, 5));
    let stored = stored_position(&dir, &name).expect("an offset was stored");
    let last = ids.last().unwrap();
    let newest = fake.rows("incident").into_iter().find(|r| r["sys_id"] == last.as_str()).unwrap();
    assert_eq!(
        (stored["ts"].as_str(), stored["id"].as_str()),
        (newest["sys_updated_on"].as_str(), Some(last.as_str())),
        "the stored offset is the last row"
    );
}

#[test]
fn killed_mid_table_the_host_resumes_from_the_stored_offset_without_losing_a_row() {
    let now = now_secs();
    let fake = fake(now);
    let ids = fake.shared().seed("incident", 3000, now - 7200, 6000);
    // Slow reads down so the kill lands in the middle of the table.
    fake.add_fault(Fault::always(FaultAction::Latency { ms: 60 }).on_method("GET").on_path("/api/now/table/incident"));
    let (name, topic) = (unique("srcrestart"), unique("incident"));
    let dir = work_dir("restart");
    let file = connector_file(&dir, &name, &source_config(&fake, &name, &topic, "100"));

    let first = Runner::start(&dir, "first", &[&file]);
    wait_until("a stored offset", Duration::from_secs(120), || stored_position(&dir, &name));
    first.kill();
    let stored = stored_position(&dir, &name).unwrap();
    let before = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(30), |_| true);
    assert!(!before.is_empty() && before.len() < ids.len(), "the kill landed mid-table ({} of {} records)", before.len(), ids.len());

    let mut second = Runner::start(&dir, "second", &[&file]);
    let opened = format!("opened at cursor {} {:?}", stored["ts"].as_str().unwrap(), stored["id"].as_str().unwrap());
    second.wait_for_log(&opened, Duration::from_secs(60));
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(240), |r| {
        r.iter().map(|x| x.key.as_str()).collect::<BTreeSet<_>>().len() >= ids.len()
    });
    let log = second.stop();

    let keys: BTreeSet<&str> = records.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ids.iter().map(String::as_str).collect::<BTreeSet<_>>(), "no row is lost across the kill");
    // The stated bound, with the default overlap (30 s) and batch.size=100.
    let stamps: Vec<String> = fake.fields("incident", ["sys_updated_on"]).into_iter().map(|[s]| s).collect();
    let bound = support::restart_duplicate_bound(&stamps, stored["ts"].as_str().unwrap(), 30, 100);
    let duplicates = records.len() - keys.len();
    assert!(duplicates <= bound, "{duplicates} duplicates, stated bound {bound} (overlap rows + 4 polls of 100)");
    assert!(!log.contains("opened at cursor 1970-01-01 00:00:00"), "the second run did not start over");
}

/// The stored position of `connector` in offset topic `topic`, read with `snow-connect offsets list`.
fn position_in_topic(dir: &Path, topic: &str, connector: &str) -> Option<Value> {
    let bootstrap = kafka_harness::shared().bootstrap();
    let (ok, out, err) =
        support::snow_connect(dir, &["offsets", "list", "--topic", topic, "--bootstrap", bootstrap, "--connector", connector]);
    assert!(ok, "offsets list: {err}");
    let line: Value = serde_json::from_str(out.lines().next()?).unwrap();
    Some(line["position"].clone())
}

#[test]
fn offsets_in_a_kafka_topic_survive_a_kill_and_can_be_reset() {
    let now = now_secs();
    let fake = fake(now);
    let ids = fake.shared().seed("incident", 3000, now - 7200, 6000);
    fake.add_fault(Fault::always(FaultAction::Latency { ms: 60 }).on_method("GET").on_path("/api/now/table/incident"));
    let (name, topic, offsets) = (unique("srctopic"), unique("incident"), unique("offsets"));
    let dir = work_dir("offsets-topic");
    let mut config = source_config(&fake, &name, &topic, "100");
    config.remove("offset.storage.file.filename");
    config.insert("offset.storage.topic".into(), offsets.clone());
    config.insert("offset.storage.partitions".into(), "3".into());
    let file = connector_file(&dir, &name, &config);

    let mut first = Runner::start(&dir, "first", &[&file]);
    first.wait_for_log(&format!("offsets in offset.storage.topic {offsets}"), Duration::from_secs(60));
    wait_until("a stored offset in the topic", Duration::from_secs(120), || position_in_topic(&dir, &offsets, &name));
    first.kill();
    let stored = position_in_topic(&dir, &offsets, &name).unwrap();
    assert!(!dir.join("offsets.json").exists(), "nothing went to a file");
    let before = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(30), |_| true);
    assert!(!before.is_empty() && before.len() < ids.len(), "the kill landed mid-table ({} of {} records)", before.len(), ids.len());

    let mut second = Runner::start(&dir, "second", &[&file]);
    let opened = format!("opened at cursor {} {:?}", stored["ts"].as_str().unwrap(), stored["id"].as_str().unwrap());
    second.wait_for_log(&opened, Duration::from_secs(60));
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(240), |r| {
        r.iter().map(|x| x.key.as_str()).collect::<BTreeSet<_>>().len() >= ids.len()
    });
    second.stop();
    let keys: BTreeSet<&str> = records.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ids.iter().map(String::as_str).collect::<BTreeSet<_>>(), "no row is lost across the kill");
    let stamps: Vec<String> = fake.fields("incident", ["sys_updated_on"]).into_iter().map(|[s]| s).collect();
    let bound = support::restart_duplicate_bound(&stamps, stored["ts"].as_str().unwrap(), 30, 100);
    assert!(records.len() - keys.len() <= bound, "{} duplicates, stated bound {bound}", records.len() - keys.len());

    // Reset while stopped: a tombstone, and the table starts over.
    let bootstrap = kafka_harness::shared().bootstrap();
    let (ok, out, err) = support::snow_connect(
        &dir,
        &["offsets", "reset", "--topic", &offsets, "--bootstrap", bootstrap, "--connector", &name, "--table", "incident"],
    );
    assert!(ok && out.contains("removed 1 offset(s)"), "{out} {err}");
    assert_eq!(position_in_topic(&dir, &offsets, &name), None, "the offset is gone");
}

#[test]
fn requests_in_flight_to_one_instance_are_capped_across_tables() {
    let now = now_secs();
    let fake = fake(now);
    let tables = ["t1", "t2", "t3", "t4", "t5", "t6"];
    let mut ids = BTreeSet::new();
    for t in tables {
        ids.extend(fake.shared().seed(t, 300, now - 3600, 3000));
    }
    fake.add_fault(Fault::always(FaultAction::Latency { ms: 100 }).on_method("GET"));
    let (name, topic) = (unique("srccap"), unique("capped"));
    let dir = work_dir("cap");
    let mut config = source_config(&fake, &name, &topic, "50");
    config.insert("snow.tables".into(), tables.join(","));
    config.insert("snow.instance.max.in.flight".into(), "2".into());
    config.remove("snow.table.incident.topic");
    for t in tables {
        config.insert(format!("snow.table.{t}.topic"), topic.clone());
    }
    let file = connector_file(&dir, &name, &config);
    let runner = Runner::start(&dir, "run", &[&file]);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(180), |r| r.len() >= ids.len());
    let log = runner.stop();

    let keys: BTreeSet<String> = records.iter().map(|r| r.key.clone()).collect();
    assert_eq!(keys, ids, "every table arrives; log:\n{}", tail(&log, 30));
    assert_eq!(fake.journal().max_in_flight, 2, "six tables polled at once never had more than the cap of 2 requests in flight");
}

/// The partition count and the `cleanup.policy` of `topic` on the shared broker.
fn topic_shape(topic: &str) -> (usize, String) {
    use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let bootstrap = kafka_harness::shared().bootstrap();
    let consumer: BaseConsumer = rdkafka::ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10)).unwrap();
    let partitions = metadata.topics().iter().find(|t| t.name() == topic).map_or(0, |t| t.partitions().len());
    let admin: AdminClient<DefaultClientContext> = rdkafka::ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let described = rt.block_on(admin.describe_configs(&[ResourceSpecifier::Topic(topic)], &AdminOptions::new())).unwrap();
    let policy = described.into_iter().flatten().find_map(|r| r.get("cleanup.policy").and_then(|e| e.value.clone())).unwrap_or_default();
    (partitions, policy)
}

#[test]
fn topic_creation_creates_each_tables_topic_with_its_groups_settings() {
    let now = now_secs();
    let fake = fake(now);
    fake.shared().seed("incident", 30, now - 600, 300);
    fake.shared().seed("problem", 20, now - 600, 300);
    let (name, incidents, problems) = (unique("tcreate"), unique("tcreate-incident"), unique("tcreate-problem"));
    let mut config = source_config(&fake, &name, &incidents, "100");
    config.insert("snow.tables".into(), "incident,problem".into());
    config.insert("snow.table.problem.topic".into(), problems.clone());
    for (k, v) in [
        ("topic.creation.default.replication.factor", "1"),
        ("topic.creation.default.partitions", "3"),
        ("topic.creation.groups", "compacted"),
        ("topic.creation.compacted.include", ".*-incident-.*"),
        ("topic.creation.compacted.partitions", "2"),
        ("topic.creation.compacted.cleanup.policy", "compact"),
    ] {
        config.insert(k.into(), v.into());
    }
    let dir = work_dir("topic-creation");
    let runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    let bootstrap = kafka_harness::shared().bootstrap();
    let got_incidents = read_until(bootstrap, &incidents, Duration::from_secs(120), |r| r.len() >= 30).len();
    let got_problems = read_until(bootstrap, &problems, Duration::from_secs(120), |r| r.len() >= 20).len();
    let log = runner.stop();
    assert_eq!((got_incidents, got_problems), (30, 20), "{}", tail(&log, 20));
    assert_eq!(topic_shape(&incidents), (2, "compact".to_string()), "the compacted group's settings");
    assert_eq!(topic_shape(&problems), (3, "delete".to_string()), "the default group's");
    assert!(log.contains(&format!("created topic {incidents} (topic.creation group compacted: 2 partitions")), "{}", tail(&log, 20));
}

#[test]
fn a_routed_topic_the_broker_will_not_create_holds_the_table_and_is_tried_again_instead_of_parking_it() {
    let now = now_secs();
    let fake = fake(now);
    fake.shared().seed("incident", 5, now - 600, 300);
    let (name, topic) = (unique("srcroute"), unique("srcroute"));
    let mut config = source_config(&fake, &name, &topic, "100");
    for (k, v) in [
        ("topic.creation.default.replication.factor", "1"),
        ("topic.creation.default.partitions", "1"),
        ("topic.creation.groups", "wide"),
        // A single broker cannot hold three replicas: the routed topic's creation is refused.
        ("topic.creation.wide.include", ".*-routed"),
        ("topic.creation.wide.replication.factor", "3"),
        ("transforms", "route"),
        ("transforms.route.type", "org.apache.kafka.connect.transforms.RegexRouter"),
        ("transforms.route.regex", "(.*)"),
        ("transforms.route.replacement", "$1-routed"),
    ] {
        config.insert(k.into(), v.into());
    }
    let dir = work_dir("source-routed-refused");
    let runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    let refusal = format!("creating topic {topic}-routed");
    // Refused, the unit reopened at its stored offset and read the rows again, refused again.
    wait_until("the routed topic's creation tried twice", Duration::from_secs(120), || {
        (runner.log().lines().filter(|l| l.contains(&refusal) && l.contains("trying again")).count() >= 2).then_some(())
    });
    let log = runner.stop();
    let line = log.lines().find(|l| l.contains(&refusal)).unwrap_or_default();
    assert!(line.contains("replication factor 3"), "{line}");
    assert!(!log.contains("unit parked"), "{}", tail(&log, 20));
}

#[test]
fn a_source_without_converters_transforms_the_rows_json_and_a_failing_transform_stops_the_table() {
    let now = now_secs();
    let fake = fake(now);
    let ids = fake.shared().seed("incident", 10, now - 600, 300);
    let (name, topic) = (unique("srcmask"), unique("srcmask"));
    let mut config = source_config(&fake, &name, &topic, "100");
    for (k, v) in [
        ("transforms", "mask,tag"),
        ("transforms.mask.type", "org.apache.kafka.connect.transforms.MaskField$Value"),
        ("transforms.mask.fields", "short_description,description"),
        ("transforms.mask.replacement", "***"),
        ("transforms.tag.type", "org.apache.kafka.connect.transforms.InsertHeader"),
        ("transforms.tag.header", "origin"),
        ("transforms.tag.value.literal", "servicenow"),
    ] {
        config.insert(k.into(), v.into());
    }
    let dir = work_dir("source-transforms");
    let runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| r.len() >= 10);
    runner.stop();
    assert_eq!(records.len(), 10);
    for r in &records {
        let v = r.json();
        assert_eq!((v["short_description"].as_str(), v["description"].as_str()), (Some("***"), Some("***")), "{v}");
        assert!(v["number"].as_str().is_some_and(|n| n.starts_with("INC")), "other fields as read: {v}");
        assert_eq!(r.headers.get("origin").map(String::as_str), Some("servicenow"));
        assert!(ids.contains(&r.key), "the key is still the sys_id");
    }

    // A transform that cannot work on the row (ExtractField's field is not a map) stops the
    // table under errors.tolerance=none, naming the transform.
    let (name, topic) = (unique("srcfail"), unique("srcfail"));
    let mut config = source_config(&fake, &name, &topic, "100");
    for (k, v) in [
        ("transforms", "pick"),
        ("transforms.pick.type", "org.apache.kafka.connect.transforms.ExtractField$Value"),
        ("transforms.pick.field", "number.x"),
        ("transforms.pick.field.syntax.version", "V2"),
    ] {
        config.insert(k.into(), v.into());
    }
    let dir = work_dir("source-transform-fails");
    let mut runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    let log = runner.wait_for_log("unit parked", Duration::from_secs(120));
    runner.stop();
    let parked = log.lines().find(|l| l.contains("unit parked")).unwrap_or_default().to_string();
    assert!(
        parked.contains("transform pick (org.apache.kafka.connect.transforms.ExtractField$Value) failed")
            && parked.contains("errors.tolerance=all would skip it"),
        "{parked}"
    );
}

#[test]
fn transform_components_in_rust_and_javascript_run_in_the_chain_with_connects_transforms() {
    let now = now_secs();
    let fake = fake(now);
    let ids = fake.shared().seed("incident", 30, now - 600, 300);
    // Ten rows watched by two users, ten by one, ten by nobody (no record for them).
    let watch = |ids: &[String], list: &str| {
        let change = serde_json::json!({ "watch_list": list });
        fake.shared().update_rows("incident", ids, change.as_object().unwrap())
    };
    assert_eq!(watch(&ids[..10], "u1,u2") + watch(&ids[10..20], "u3"), 20);
    // The changes are stamped at the frozen clock's now: move it past the safety lag.
    fake.clock().advance(10);
    let (name, topic) = (unique("srccomp"), unique("srccomp"));
    let routed = format!("{topic}-watchers");
    let mut config = source_config(&fake, &name, &topic, "100");
    for (k, v) in [
        ("transforms", "explode,label,route"),
        ("transforms.explode.type", "io.snowconnect.transforms.Component"),
        ("transforms.explode.component.path", support::signed(guest_artifacts::TRANSFORM_EXPLODE)),
        ("transforms.explode.field", "watch_list"),
        ("transforms.explode.key.suffix", "true"),
        ("transforms.label.type", "io.snowconnect.transforms.Component"),
        ("transforms.label.component.path", support::label_transform()),
        ("transforms.label.field", "priority"),
        ("transforms.label.labels", "1:Critical,2:High,3:Moderate,4:Low,5:Planning"),
        ("transforms.route.type", "org.apache.kafka.connect.transforms.RegexRouter"),
        ("transforms.route.regex", "(.*)"),
        ("transforms.route.replacement", "$1-watchers"),
    ] {
        config.insert(k.into(), v.into());
    }
    let dir = work_dir("source-transform-components");
    let runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    let records = read_until(kafka_harness::shared().bootstrap(), &routed, Duration::from_secs(180), |r| r.len() >= 30);
    let log = runner.stop();
    assert_eq!(records.len(), 30, "two records for each of ten rows, one for each of ten; log:\n{}", tail(&log, 30));
    let labels = ["Critical", "High", "Moderate", "Low", "Planning"];
    let mut keys = BTreeSet::new();
    for r in &records {
        let v = r.json();
        let (sys_id, user) = r.key.split_once(':').expect("the key carries its item");
        assert_eq!(v["sys_id"].as_str(), Some(sys_id), "{v}");
        assert_eq!(v["watch_list"].as_str(), Some(user), "each record holds one item: {v}");
        let priority: usize = v["priority"].as_str().unwrap().parse().unwrap();
        assert_eq!(v["priority_label"].as_str(), Some(labels[priority - 1]), "the JavaScript component labelled it: {v}");
        keys.insert(r.key.clone());
    }
    assert_eq!(keys.len(), 30, "no record twice");
    for id in &ids[20..] {
        assert!(!records.iter().any(|r| r.key.starts_with(id.as_str())), "a row watched by nobody made no record");
    }
    for alias in ["explode", "label"] {
        assert!(log.contains(&format!("transform=\"{alias}\"")) && log.contains("transform component ready"), "{}", tail(&log, 30));
    }

    // An unsigned transform component is refused like an unsigned connector, naming the stage.
    let unsigned = dir.join("unsigned-explode.wasm");
    std::fs::copy(guest_artifacts::TRANSFORM_EXPLODE, &unsigned).unwrap();
    config.insert("transforms.explode.component.path".into(), unsigned.display().to_string());
    config.insert("name".into(), unique("srcunsigned"));
    let file = connector_file(&dir, &config["name"], &config);
    let (ok, _, stderr) = support::snow_connect(&dir, &["run", file.to_str().unwrap(), "--for-seconds", "5"]);
    assert!(!ok, "an unsigned transform must not run");
    assert!(stderr.contains("transform explode") && stderr.contains("refused"), "{stderr}");
}
