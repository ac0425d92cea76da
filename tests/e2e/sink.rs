//! Sink end to end: records in a real Kafka topic, consumed by the real host, written to the fake
//! by the real sink component.
#![allow(clippy::unwrap_used)] // a panic is how a test fails

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use fake_snow::{FakeOptions, FakeSnow};
use support::kafka::{committed, create_topic, produce};
use support::{Runner, connector_file, entries, now_secs, tail, unique, wait_until, work_dir};

#[test]
fn five_hundred_records_are_written_to_servicenow() {
    let now = now_secs();
    let fake = FakeSnow::start(FakeOptions { users: vec![("sinker".into(), "sink-Pw-7".into())], ..Default::default() }).unwrap();
    let existing = fake.shared().seed("incident", 100, now - 600, 500);
    let (name, topic) = (unique("sink"), unique("changes"));
    let bootstrap = kafka_harness::shared().bootstrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(create_topic(bootstrap, &topic, 3));
    let mut records: Vec<(Option<String>, String)> =
        (0..400).map(|i| (Some(format!("new-{i}")), format!(r#"{{"short_description":"sink-{i}","urgency":"2"}}"#))).collect();
    records.extend(existing.iter().map(|id| (Some(id.clone()), format!(r#"{{"sys_id":"{id}","state":"7"}}"#))));
    rt.block_on(produce(bootstrap, &topic, &records));

    let dir = work_dir("sink");
    let config: BTreeMap<String, String> = entries(&[
        ("name", &name),
        ("component.path", guest_artifacts::GUEST_SINK),
        ("kafka.bootstrap.servers", bootstrap),
        ("topics", &topic),
        ("snow.instance.url", &fake.url()),
        ("snow.auth.username", "sinker"),
        ("snow.auth.password", "sink-Pw-7"),
        ("snow.sink.table", "incident"),
    ]);
    let file = connector_file(&dir, &name, &config);
    let runner = Runner::start(&dir, "run", &[&file]);
    wait_until("500 writes in the fake", Duration::from_secs(180), || {
        let rows = fake.rows("incident");
        let field = |r: &fake_snow::store::Row, k: &str| r.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
        let created = rows.iter().filter(|r| field(r, "short_description").starts_with("sink-")).count();
        let patched = rows.iter().filter(|r| field(r, "state") == "7" && field(r, "sys_mod_count") == "1").count();
        (created == 400 && patched == 100).then_some(())
    });
    let log = runner.stop();

    let rows = fake.rows("incident");
    assert_eq!(rows.len(), 500, "100 existing rows plus 400 created, no duplicates; log:\n{}", tail(&log, 30));
    for i in 0..400 {
        let wanted = format!("sink-{i}");
        assert_eq!(
            rows.iter().filter(|r| r.get("short_description").and_then(|v| v.as_str()) == Some(wanted.as_str())).count(),
            1,
            "{wanted} created once"
        );
    }
    for id in &existing {
        let row = rows.iter().find(|r| r["sys_id"] == id.as_str()).unwrap();
        assert_eq!((row["state"].as_str(), row["sys_mod_count"].as_str()), (Some("7"), Some("1")), "{id} patched once");
    }
    assert!(fake.journal().entries.iter().all(|e| e.auth == "basic:sinker"));
    assert!(log.contains("500 records written (400 created, 100 patched), 0 failed"), "summary:\n{}", tail(&log, 5));
    let offsets = committed(bootstrap, &format!("connect-{name}"), &topic, 3);
    assert_eq!(offsets.iter().sum::<i64>(), 500, "the group committed past every written record: {offsets:?}");
}
