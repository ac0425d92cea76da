//! Sink end to end: records in a real Kafka topic, consumed by the real host, written to the fake
//! by the real sink component.

use crate::support;

use std::time::Duration;

use fake_snow::{FakeOptions, FakeSnow};
use support::kafka::{committed, create_topic, produce};
use support::{Runner, connector_file, now_secs, sink_entries, tail, unique, wait_until, work_dir};

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
    let config =
        sink_entries(&fake.url(), &name, &topic, "incident", &[("snow.auth.username", "sinker"), ("snow.auth.password", "sink-Pw-7")]);
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
    assert!(
        log.contains("500 records written (400 created, 100 patched, 0 replaced, 0 deleted), 0 skipped, 0 failed"),
        "summary:\n{}",
        tail(&log, 5)
    );
    let offsets = committed(bootstrap, &format!("connect-{name}"), &topic, 3);
    assert_eq!(offsets.iter().sum::<i64>(), 500, "the group committed past every written record: {offsets:?}");
}

#[test]
fn tombstones_delete_headers_choose_operations_and_tables_and_bodies_are_mapped() {
    use support::kafka::{Produced, produce_records};
    let now = now_secs();
    let fake = FakeSnow::start(FakeOptions::default()).unwrap();
    let existing = fake.shared().seed("incident", 4, now - 600, 60);
    fake.create_table("problem");
    let missing = "0123456789abcdef0123456789abcdef";
    let also_missing = "fedcba9876543210fedcba9876543210";
    let (name, topic) = (unique("sinkops"), unique("ops"));
    let bootstrap = kafka_harness::shared().bootstrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(create_topic(bootstrap, &topic, 1));
    let header = |k: &str, v: &str| (k.to_string(), v.to_string());
    let records = vec![
        // A tombstone keyed by a sys_id deletes that row.
        Produced { key: Some(existing[0].clone()), value: None, headers: vec![] },
        // A renamed field; a field the deny list drops; a system field that is never written.
        Produced {
            key: Some(existing[1].clone()),
            value: Some(r#"{"desc":"renamed","secret":"s","sys_created_by":"x"}"#.into()),
            headers: vec![],
        },
        // An upsert of a row that does not exist creates it under that sys_id.
        Produced {
            key: Some(missing.into()),
            value: Some(r#"{"desc":"upserted"}"#.into()),
            headers: vec![header("snow.operation", "upsert")],
        },
        // A patch of a row that does not exist is skipped (snow.sink.not.found=ignore).
        Produced { key: Some(also_missing.into()), value: Some(r#"{"desc":"nowhere"}"#.into()), headers: vec![] },
        // A header routes to a table of the allow-list.
        Produced { key: None, value: Some(r#"{"desc":"a problem"}"#.into()), headers: vec![header("snow.table", "problem")] },
        // ... but never to one outside it: the record fails, the partition goes on.
        Produced { key: None, value: Some(r#"{"desc":"escape"}"#.into()), headers: vec![header("snow.table", "sys_user")] },
        // A PUT replaces the row.
        Produced {
            key: Some(existing[2].clone()),
            value: Some(r#"{"desc":"replaced"}"#.into()),
            headers: vec![header("snow.operation", "put")],
        },
    ];
    rt.block_on(produce_records(bootstrap, &topic, &records));

    let dir = work_dir("sinkops");
    let config = sink_entries(
        &fake.url(),
        &name,
        &topic,
        "incident",
        &[
            ("snow.auth.type", "none"),
            ("snow.sink.table.header", "snow.table"),
            ("snow.sink.table.header.allowed", "incident,problem"),
            ("snow.sink.fields.rename", "desc:short_description"),
            ("snow.sink.fields.deny", "secret"),
            ("snow.sink.not.found", "ignore"),
            // The record routed outside the allow-list fails and its partition goes on.
            ("errors.tolerance", "all"),
        ],
    );
    let file = connector_file(&dir, &name, &config);
    let runner = Runner::start(&dir, "run", &[&file]);
    wait_until("every record with an outcome", Duration::from_secs(120), || {
        let offsets = support::kafka::try_committed(bootstrap, &format!("connect-{name}"), &topic, 1).ok()?;
        (offsets[0] >= records.len() as i64).then_some(())
    });
    let log = runner.stop();

    let incidents = fake.rows("incident");
    let row = |id: &str| incidents.iter().find(|r| r["sys_id"] == id).cloned();
    let field = |r: &fake_snow::store::Row, k: &str| r.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
    assert!(row(&existing[0]).is_none(), "the tombstone deleted its row");
    let renamed = row(&existing[1]).unwrap();
    assert_eq!(field(&renamed, "short_description"), "renamed");
    assert!(
        !renamed.contains_key("secret") && !renamed.contains_key("desc") && field(&renamed, "sys_created_by") == "admin",
        "{renamed:?}"
    );
    assert_eq!(field(&row(missing).unwrap(), "short_description"), "upserted", "created under the sys_id it named");
    assert!(row(also_missing).is_none(), "the patch of a missing row created nothing");
    let problems = fake.rows("problem");
    assert_eq!(problems.len(), 1);
    assert_eq!(field(&problems[0], "short_description"), "a problem");
    let replaced = row(&existing[2]).unwrap();
    assert_eq!(field(&replaced, "short_description"), "replaced");
    assert_eq!(field(&replaced, "number"), "", "a PUT replaced the row's other fields");
    assert!(!fake.journal().entries.iter().any(|e| e.path.contains("sys_user")), "no request to a table outside the allow-list");
    assert!(log.contains("which snow.sink.table.header.allowed does not allow"), "{}", tail(&log, 20));
    assert!(
        log.contains("5 records written (2 created, 1 patched, 1 replaced, 1 deleted), 1 skipped, 1 failed"),
        "every record has one outcome; summary:\n{}",
        tail(&log, 5)
    );
}

#[test]
fn each_unknown_outcome_policy_under_answers_cut_off_after_the_create_committed() {
    use support::kafka::{Produced, produce_records};
    const RECORDS: usize = 20;
    const CUT: u32 = 3;
    let fake = FakeSnow::start(FakeOptions::default()).unwrap();
    let bootstrap = kafka_harness::shared().bootstrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = work_dir("unknown");
    // One connector per policy, each writing its own table; the first CUT creates of each table
    // are committed by the fake, whose answer is then cut off.
    let policies: [(&str, &[(&str, &str)]); 4] = [
        ("fail", &[]),
        ("retry", &[("snow.sink.unknown.outcome", "retry")]),
        ("lookup", &[("snow.sink.unknown.outcome", "correlation_lookup"), ("snow.sink.correlation.field", "u_ref")]),
        ("natural", &[("snow.sink.natural.key.fields", "u_ref")]),
    ];
    let mut files = Vec::new();
    let mut names = Vec::new();
    for (policy, extra) in &policies {
        let table = format!("u_{policy}");
        fake.create_table(&table);
        fake.add_fault(
            fake_snow::Fault::always(fake_snow::FaultAction::TimeoutAfterWrite { stall_ms: 50 })
                .on_method("POST")
                .on_path(&format!("/api/now/table/{table}"))
                .times(CUT),
        );
        let topic = unique(&format!("unknown-{policy}"));
        rt.block_on(create_topic(bootstrap, &topic, 1));
        let records: Vec<Produced> = (0..RECORDS)
            .map(|i| Produced {
                key: Some(format!("k{i}")),
                value: Some(format!(r#"{{"u_ref":"{policy}-{i}","short_description":"x"}}"#)),
                headers: vec![],
            })
            .collect();
        rt.block_on(produce_records(bootstrap, &topic, &records));
        let name = unique(&format!("unknown-{policy}"));
        // Reported and logged, and the partition goes on (the default, fail, would stop it).
        let mut config = sink_entries(&fake.url(), &name, &topic, &table, &[("snow.auth.type", "none"), ("behavior.on.api.errors", "log")]);
        config.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        files.push(connector_file(&dir, &name, &config));
        names.push((name, topic));
    }
    let refs: Vec<&std::path::Path> = files.iter().map(|p| p.as_path()).collect();
    let mut runner = Runner::start_with_args(&dir, "run", &refs, &["--status-listen", "127.0.0.1:0"]);
    let addr = support::status_address(&mut runner);
    wait_until("every record of every policy with an outcome", Duration::from_secs(180), || {
        names
            .iter()
            .all(|(name, topic)| {
                support::kafka::try_committed(bootstrap, &format!("connect-{name}"), topic, 1).is_ok_and(|o| o[0] >= RECORDS as i64)
            })
            .then_some(())
    });
    let metrics = support::http_get(&addr, "/metrics").1;
    let log = runner.stop();
    let rows = |policy: &str| fake.rows(&format!("u_{policy}"));
    let refs_of = |policy: &str| -> Vec<String> { rows(policy).iter().filter_map(|r| r["u_ref"].as_str().map(str::to_string)).collect() };
    let metric = |name: &str, connector: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(&format!("{name}{{connector=\"{connector}\"")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // fail: the cut creates did land; the records are reported ambiguous, nothing is sent again.
    assert_eq!(rows("fail").len(), RECORDS, "{}", tail(&log, 20));
    assert_eq!(log.matches("failed (api error, ambiguous)").count(), CUT as usize, "fail reports each as ambiguous");
    // retry: each cut create is sent again: a duplicate each, counted.
    assert_eq!(rows("retry").len(), RECORDS + CUT as usize, "retry may duplicate");
    assert_eq!(metric("snow_sink_resent_blind_total", &names[1].0), f64::from(CUT), "counted:\n{metrics}");
    // correlation_lookup and deterministic creates: exactly one row per record.
    for (i, policy) in ["lookup", "natural"].iter().enumerate() {
        let mut seen = refs_of(policy);
        seen.sort();
        seen.dedup();
        assert_eq!((rows(policy).len(), seen.len()), (RECORDS, RECORDS), "{policy}: exactly one row each");
        assert_eq!(metric("snow_sink_found_after_unknown_total", &names[2 + i].0), f64::from(CUT), "{policy}: found, not sent again");
    }
}

#[test]
fn the_stale_guard_keeps_each_row_at_its_highest_version_across_restarts() {
    use support::kafka::read_until;
    const KEYS: usize = 20;
    let now = now_secs();
    let fake = FakeSnow::start(FakeOptions::default()).unwrap();
    let ids = fake.shared().seed("incident", KEYS as u64, now - 600, 60);
    let (name, topic) = (unique("stale"), unique("versions"));
    let bootstrap = kafka_harness::shared().bootstrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(create_topic(bootstrap, &topic, 2));
    // Each key's versions arrive out of order: 3, 1, 5, 2, 4. Versions 1, 2 and 4 are stale.
    let update = |id: &String, v: u32| (Some(id.clone()), format!(r#"{{"u_ver":{v},"short_description":"v{v}"}}"#));
    let round: Vec<(Option<String>, String)> = [3, 1, 5, 2, 4].iter().flat_map(|v| ids.iter().map(move |id| update(id, *v))).collect();
    rt.block_on(produce(bootstrap, &topic, &round));

    let dir = work_dir("stale");
    let config = sink_entries(
        &fake.url(),
        &name,
        &topic,
        "incident",
        &[("snow.auth.type", "none"), ("snow.sink.version.field", "u_ver"), ("reporter.result.topic.name", "${connector}-ok")],
    );
    let file = connector_file(&dir, &name, &config);
    let group = format!("connect-{name}");
    let runner = Runner::start(&dir, "run", &[&file]);
    support::kafka::wait_committed(&group, &topic, 2, 5 * KEYS as i64, Duration::from_secs(120));
    let first = runner.stop();
    // A restart with no memory of what it wrote: older versions replayed are still refused, by
    // the versions the rows hold.
    rt.block_on(produce(bootstrap, &topic, &[1, 4, 2].iter().flat_map(|v| ids.iter().map(move |id| update(id, *v))).collect::<Vec<_>>()));
    let runner = Runner::start(&dir, "run", &[&file]);
    support::kafka::wait_committed(&group, &topic, 2, 8 * KEYS as i64, Duration::from_secs(120));
    let second = runner.stop();

    for row in fake.rows("incident") {
        let id = row["sys_id"].as_str().unwrap();
        assert_eq!((row["u_ver"].as_str(), row["short_description"].as_str()), (Some("5"), Some("v5")), "{id}");
        assert_eq!(row["sys_mod_count"].as_str(), Some("2"), "{id}: written twice (versions 3 and 5), nothing else");
    }
    let reports = read_until(bootstrap, &format!("{name}-ok"), Duration::from_secs(60), |r| r.len() >= 8 * KEYS);
    let stale = reports.iter().filter(|r| r.json()["reason"] == "stale").count();
    assert_eq!(stale, 6 * KEYS, "three stale versions per key in each run, every one reported");
    let summary = |log: &str| log.lines().find(|l| l.contains("records written")).unwrap_or_default().to_string();
    assert!(summary(&first).contains(&format!("{} records written", 2 * KEYS)), "{}", tail(&first, 5));
    assert!(summary(&first).contains(&format!("{} skipped", 3 * KEYS)), "{}", tail(&first, 5));
    assert!(
        summary(&second).contains(&format!("0 records written (0 created, 0 patched, 0 replaced, 0 deleted), {} skipped", 3 * KEYS)),
        "{}",
        tail(&second, 5)
    );
}

#[test]
fn fields_a_table_does_not_have_fail_or_are_dropped_instead_of_vanishing() {
    let fake = FakeSnow::start(FakeOptions::default()).unwrap();
    // incident extends task; ServiceNow drops fields neither has, silently.
    fake.shared().store().set_dictionary("task", &["state".into(), "short_description".into()], None, now_secs());
    fake.shared().store().set_dictionary("incident", &["caller_id".into()], Some("task"), now_secs());
    let bootstrap = kafka_harness::shared().bootstrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = work_dir("fields");
    let mut files = Vec::new();
    let mut names = Vec::new();
    for policy in ["fail", "drop"] {
        let (name, topic) = (unique(&format!("fields-{policy}")), unique(&format!("fields-{policy}")));
        rt.block_on(create_topic(bootstrap, &topic, 1));
        let records = [
            (None, format!(r#"{{"short_description":"{policy}-ok","state":"2","caller_id":"c"}}"#)),
            (None, format!(r#"{{"short_description":"{policy}-typo","u_stat":"7"}}"#)),
        ];
        rt.block_on(produce(bootstrap, &topic, &records));
        let extra = [("snow.auth.type", "none"), ("snow.sink.unknown.fields", policy), ("errors.tolerance", "all")];
        files.push(connector_file(&dir, &name, &sink_entries(&fake.url(), &name, &topic, "incident", &extra)));
        names.push((name, topic));
    }
    let refs: Vec<&std::path::Path> = files.iter().map(|p| p.as_path()).collect();
    let runner = Runner::start(&dir, "run", &refs);
    wait_until("both connectors done", Duration::from_secs(120), || {
        names
            .iter()
            .all(|(name, topic)| support::kafka::try_committed(bootstrap, &format!("connect-{name}"), topic, 1).is_ok_and(|o| o[0] >= 2))
            .then_some(())
    });
    let log = runner.stop();
    let written: Vec<String> = fake.rows("incident").iter().filter_map(|r| r["short_description"].as_str().map(String::from)).collect();
    assert!(written.contains(&"fail-ok".to_string()) && written.contains(&"drop-ok".to_string()), "{written:?}");
    assert!(!written.contains(&"fail-typo".to_string()), "fail: the record with an unknown field was not written");
    assert!(log.contains("table incident has no field u_stat (snow.sink.unknown.fields=fail)"), "{}", tail(&log, 20));
    assert!(written.contains(&"drop-typo".to_string()), "drop: written without the field");
    assert!(log.contains("table incident has no field u_stat: left out of every write"), "{}", tail(&log, 20));
    let sent: Vec<String> = fake.journal().entries.iter().filter(|e| e.method == "POST").filter_map(|e| e.body.clone()).collect();
    assert!(sent.iter().all(|b| !b.contains("u_stat")), "the unknown field was never sent: {sent:?}");
    assert!(sent.iter().any(|b| b.contains("caller_id")), "an inherited table's own field passes: {sent:?}");
}

#[test]
fn a_replayed_deterministic_create_ends_written_whatever_the_instance_answers_to_the_duplicate_insert() {
    const ROWS: usize = 60;
    let fake = FakeSnow::start(FakeOptions::default()).unwrap();
    fake.shared().seed("incident", 1, now_secs() - 600, 0);
    let topic = unique("natural");
    let bootstrap = kafka_harness::shared().bootstrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(create_topic(bootstrap, &topic, 1));
    let records: Vec<(Option<String>, String)> =
        (0..ROWS).map(|i| (None, format!(r#"{{"number":"NAT{i:04}","short_description":"natural-{i}"}}"#))).collect();
    rt.block_on(produce(bootstrap, &topic, &records));
    let dir = work_dir("sink-natural");
    // The same records written by one connector, then replayed in full by three more (each a new
    // consumer group: as after a crash before any commit), while the instance refuses an insert
    // under an existing sys_id with 403, 409 and 500 in turn.
    for (round, refusal) in [None, Some(403u16), Some(409), Some(500)].into_iter().enumerate() {
        fake.shared().refuse_duplicate_inserts(refusal);
        let name = unique("natural");
        let config = sink_entries(
            &fake.url(),
            &name,
            &topic,
            "incident",
            &[
                ("snow.auth.type", "none"),
                ("snow.sink.operation", "create"),
                ("snow.sink.natural.key.fields", "number"),
                ("reporter.result.topic.name", "${connector}-ok"),
                ("reporter.error.topic.name", "${connector}-errors"),
            ],
        );
        let file = connector_file(&dir, &name, &config);
        let runner = Runner::start(&dir, &format!("round{round}"), &[&file]);
        let ok = support::kafka::read_until(bootstrap, &format!("{name}-ok"), Duration::from_secs(120), |r| r.len() >= ROWS);
        let log = runner.stop();
        assert_eq!(ok.len(), ROWS, "{refusal:?}: every create reported written; log:\n{}", tail(&log, 20));
        assert!(log.contains(&format!("{ROWS} records written ({ROWS} created")), "{refusal:?}: none failed:\n{}", tail(&log, 5));
        let rows = fake.rows("incident");
        assert_eq!(rows.len(), ROWS + 1, "{refusal:?}: one row per natural key, no duplicate");
        if let Some(status) = refusal {
            let refused = fake.journal().entries.iter().filter(|e| e.method == "POST" && e.status == status).count();
            assert!(refused >= ROWS, "{status}: the replayed inserts were refused ({refused}) and still ended written");
        }
    }
}

#[test]
fn a_sink_whose_topics_regex_matches_its_own_reports_stops_with_why() {
    let fake = FakeSnow::start(FakeOptions::default()).unwrap();
    let name = unique("selffeed");
    let bootstrap = kafka_harness::shared().bootstrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(create_topic(bootstrap, &format!("{name}-in"), 1));
    rt.block_on(create_topic(bootstrap, &format!("{name}-ok"), 1));
    let dir = work_dir("selffeed");
    let mut config = sink_entries(
        &fake.url(),
        &name,
        "unused",
        "incident",
        &[("snow.auth.type", "none"), ("reporter.result.topic.name", "${connector}-ok")],
    );
    config.remove("topics");
    config.insert("topics.regex".into(), format!("{name}-.*"));
    let mut runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    // Refused before anything is consumed: the pattern matches the result topic's name.
    let log = runner.wait_for_log("matches topics.regex", Duration::from_secs(120));
    assert!(log.contains(&format!("reporter.result.topic.name: {name}-ok matches topics.regex")), "{}", tail(&log, 10));
    runner.stop();
}
