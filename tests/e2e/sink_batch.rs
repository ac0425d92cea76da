//! The sink's Batch API path end to end: records packed into `POST /api/now/v1/batch` requests in
//! partition order, items left unserviced by the quota and a batch answer lost after it ran both
//! recovered without a lost or doubled write, and an instance without the Batch API written
//! through the Table API.

use crate::support;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use fake_snow::{FakeOptions, FakeSnow, Fault, FaultAction};
use support::kafka::{create_topic, produce, read_until, wait_committed};
use support::{Runner, connector_file, now_secs, sink_entries, tail, unique, work_dir};

#[test]
fn batches_keep_partition_order_through_unserviced_items_and_a_lost_answer() {
    const KEYS: usize = 200;
    const UPDATES: usize = 2_000;
    const CREATES: usize = 300;
    let now = now_secs();
    let fake = FakeSnow::start(FakeOptions::default()).unwrap();
    let ids = fake.shared().seed("incident", KEYS as u64, now - 3600, 600);
    // A write costs 2 ms and a batch may run 60 ms: bigger batches leave items unserviced.
    fake.shared().set_latency(fake_snow::server::Latency { request_ms: 1, write_ms: 2, batch_quota_ms: Some(60) });
    // One batch (after the lanes' probes and a few batches) runs and its answer is lost.
    fake.add_fault(
        Fault::always(FaultAction::TimeoutAfterWrite { stall_ms: 20 }).on_method("POST").on_path("/api/now/v1/batch").after(10).times(1),
    );
    let (name, topic) = (unique("batch"), unique("batched"));
    let bootstrap = kafka_harness::shared().bootstrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(create_topic(bootstrap, &topic, 4));
    // Updates of 200 rows (runs of two consecutive updates of a row, which merge), then creates
    // named by a natural key.
    let mut records: Vec<(Option<String>, String)> =
        (0..UPDATES).map(|i| (Some(ids[(i / 2 * 7) % KEYS].clone()), format!(r#"{{"u_seq":"{i}","short_description":"v{i}"}}"#))).collect();
    records.extend((0..CREATES).map(|i| (None, format!(r#"{{"u_ref":"new-{i}","short_description":"created"}}"#))));
    rt.block_on(produce(bootstrap, &topic, &records));

    let dir = work_dir("batch");
    let config = sink_entries(
        &fake.url(),
        &name,
        &topic,
        "incident",
        &[
            ("snow.auth.type", "none"),
            ("snow.sink.write.mode", "batch"),
            ("snow.sink.batch.size", "100"),
            ("snow.sink.natural.key.fields", "u_ref"),
            ("reporter.result.topic.name", "${connector}-ok"),
        ],
    );
    let runner = Runner::start_with_args(&dir, "run", &[&connector_file(&dir, &name, &config)], &["--status-listen", "127.0.0.1:0"]);
    wait_committed(&format!("connect-{name}"), &topic, 4, records.len() as i64, Duration::from_secs(180));
    let log = runner.stop();

    let journal = fake.journal();
    let batches = journal.entries.iter().filter(|e| e.path == "/api/now/v1/batch" && e.batch_item.is_none()).count();
    let items: Vec<&fake_snow::JournalEntry> = journal.entries.iter().filter(|e| e.batch_item.is_some() && e.method != "GET").collect();
    assert!((4..UPDATES / 4).contains(&batches), "{batches} batches for {} records; log:\n{}", records.len(), tail(&log, 20));
    let direct: Vec<_> = journal
        .entries
        .iter()
        .filter(|e| !(e.batch_item.is_some() || e.path == "/api/now/v1/batch" || e.method == "GET"))
        .map(|e| (e.method.clone(), e.path.clone(), e.status))
        .collect();
    assert!(direct.is_empty(), "no Table API write: {direct:?}");
    // Each row's writes ran in offset order (merged runs carry the later u_seq).
    let mut last: HashMap<&str, i64> = HashMap::new();
    for item in items.iter().filter(|e| e.method == "PATCH") {
        let body: serde_json::Value = serde_json::from_str(item.body.as_deref().unwrap()).unwrap();
        let seq: i64 = body["u_seq"].as_str().unwrap().parse().unwrap();
        let before = last.insert(item.path.as_str(), seq).unwrap_or(-1);
        assert!(seq >= before, "{}: u_seq {seq} ran after {before}", item.path);
    }
    let patches = items.iter().filter(|e| e.method == "PATCH").count();
    assert!(patches < UPDATES, "consecutive patches of a row merged: {patches} patch items for {UPDATES} updates");
    // Every row ends at its last update; every create made exactly one row.
    support::assert_last_updates(&fake, "incident", &records);
    let rows = fake.rows("incident");
    let refs: Vec<&str> = rows.iter().filter_map(|r| r.get("u_ref").and_then(|v| v.as_str())).collect();
    let distinct: HashSet<&str> = refs.iter().copied().collect();
    assert_eq!((refs.len(), distinct.len()), (CREATES, CREATES), "one row per create, despite the lost answer");
    // The quota left items unserviced, and the lost answer happened.
    assert!(log.contains("records written") && !log.contains(" failed ("), "{}", tail(&log, 10));
    assert!(journal.entries.iter().any(|e| e.path == "/api/now/v1/batch" && e.status == 0), "a batch answer was cut off");
    let unserviced: usize = journal.entries.iter().filter_map(|e| e.unserviced).sum();
    assert!(unserviced > 0, "the quota left items unserviced, and they were written later");
    let reports = read_until(bootstrap, &format!("{name}-ok"), Duration::from_secs(60), |r| r.len() >= records.len());
    let mut seen = HashSet::new();
    for r in &reports {
        let v = r.json();
        assert!(seen.insert((v["partition"].as_i64().unwrap(), v["offset"].as_i64().unwrap())), "a second report of {v}");
    }
    assert_eq!(seen.len(), records.len(), "one report per record");
}

#[test]
fn an_instance_without_the_batch_api_is_written_through_the_table_api() {
    let fake = FakeSnow::start(FakeOptions::default()).unwrap();
    fake.create_table("incident");
    fake.shared().set_batch_api(false);
    let (name, topic) = (unique("nobatch"), unique("nobatch"));
    let bootstrap = kafka_harness::shared().bootstrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(create_topic(bootstrap, &topic, 1));
    let records: Vec<(Option<String>, String)> = (0..50).map(|i| (None, format!(r#"{{"short_description":"n{i}"}}"#))).collect();
    rt.block_on(produce(bootstrap, &topic, &records));
    let dir = work_dir("nobatch");
    let config = sink_entries(&fake.url(), &name, &topic, "incident", &[("snow.auth.type", "none"), ("snow.sink.write.mode", "batch")]);
    let runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    wait_committed(&format!("connect-{name}"), &topic, 1, 50, Duration::from_secs(180));
    let log = runner.stop();
    assert_eq!(fake.rows("incident").len(), 50);
    let journal = fake.journal();
    assert_eq!(journal.entries.iter().filter(|e| e.path == "/api/now/v1/batch").count(), 1, "one probe, refused");
    assert_eq!(journal.entries.iter().filter(|e| e.method == "POST" && e.path == "/api/now/table/incident").count(), 50);
    assert!(log.contains("refused the Batch API; writing through the Table API"), "{}", tail(&log, 10));
}
