//! A fleet end to end: `snow-connect worker` processes of one group, connectors created and run
//! through Kafka Connect's REST API with curl, state in Kafka topics, units shared by Kafka's group
//! protocol, the real components reading the fake over HTTP and a real broker.
#![allow(clippy::unwrap_used)] // a panic is how a test fails

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fake_snow::{FakeOptions, FakeSnow};
use serde_json::{Value, json};
use support::fleet::{curl, start_worker, tasks_in, wait_status, worker_properties};
use support::kafka::read_until;
use support::{now_secs, tail, unique, work_dir};

const USER: &str = "snow-fleet";
const PASSWORD: &str = "fleet-Secret-Pw-77";
const PASSWORD_ENV: (&str, &str) = ("SNOW_FLEET_PASSWORD", PASSWORD);

fn fake(now: i64) -> FakeSnow {
    FakeSnow::start(FakeOptions { users: vec![(USER.into(), PASSWORD.into())], frozen_at: Some(now), ..Default::default() }).unwrap()
}

/// A source connector's configuration for the fleet: the password as a reference, no offsets file.
fn source_config(fake: &FakeSnow, name: &str, topic: &str, tables: &[&str]) -> Value {
    let extra = [
        ("snow.auth.username", USER),
        ("snow.auth.password", "${env:SNOW_FLEET_PASSWORD}"),
        ("snow.batch.size", "500"),
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
    let spec = worker_properties(&dir, "w1", &group, &[]);
    let mut worker = start_worker(&dir, "w1", &spec, &[PASSWORD_ENV]);
    let (name, topic) = (unique("fsrc"), unique("incident"));

    let root = curl(spec.port, "GET", "/", None);
    assert_eq!(root.status, 200);
    assert!(root.body["version"].is_string(), "{}", root.text);
    let plugins = curl(spec.port, "GET", "/connector-plugins", None);
    assert!(plugins.text.contains("io.snowconnect.ServiceNowSourceConnector"), "{}", plugins.text);

    let created = curl(spec.port, "POST", "/connectors", Some(&json!({ "name": name, "config": source_config(&fake, &name, &topic, &["incident"]) })));
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(created.body["name"], name.as_str());
    assert_eq!(created.body["type"], "source");
    assert_eq!(curl(spec.port, "POST", "/connectors", Some(&json!({ "name": name, "config": {} }))).status, 409, "a second create conflicts");

    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| r.len() >= ids.len());
    let keys: BTreeSet<&str> = records.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys.len(), ids.len(), "every row arrived; log:\n{}", tail(&worker.log(), 30));
    let status = wait_status(spec.port, &name, Duration::from_secs(30), "RUNNING", |s| s["connector"]["state"] == "RUNNING" && tasks_in(s, "RUNNING") == 1);
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
    let errors_of = |key: &str| -> Vec<String> {
        validated.body["configs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["value"]["name"] == key)
            .map(|c| c["value"]["errors"].as_array().unwrap().iter().map(|e| e.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    assert!(errors_of("kafka.typo").iter().any(|e| e.contains("unknown key")), "{}", validated.text);
    assert!(!errors_of("snow.tabels").is_empty(), "the component's own check names its key: {}", validated.text);
    assert!(errors_of("snow.instance.url").is_empty());

    let refused = curl(spec.port, "POST", "/connectors", Some(&json!({ "name": name, "config": config })));
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert_eq!(refused.body["error_code"], 400);
    let message = refused.body["message"].as_str().unwrap();
    assert!(message.starts_with("Connector configuration is invalid and contains the following") && message.contains("kafka.typo"), "{message}");
    assert_eq!(curl(spec.port, "GET", "/connectors", None).body, json!([]), "nothing was stored");

    let mut literal = source_config(&fake, &name, "t", &["incident"]);
    literal["snow.auth.password"] = json!(PASSWORD);
    let refused = curl(spec.port, "POST", "/connectors", Some(&json!({ "name": name, "config": literal })));
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.text.contains("snow.auth.password must be given as a provider reference"), "{}", refused.text);
    assert!(!refused.text.contains(PASSWORD), "the secret is not echoed");
    let validated = curl(spec.port, "PUT", "/connector-plugins/ServiceNowSourceConnector/config/validate", Some(&literal));
    assert!(!validated.text.contains(PASSWORD), "nor answered by validate: {}", validated.text);
    let log = worker.stop();
    assert!(!log.contains(PASSWORD), "nor logged");
}
