//! Exactly-once sources (ADR 0030): a table's polls and positions go through Kafka transactions,
//! a restart rebuilds the dedup window from the topic, and a `read_committed` consumer sees every
//! final version once, through SIGKILLs with a transaction open.
#![allow(clippy::unwrap_used)] // a panic is how a test fails

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fake_snow::{FakeOptions, FakeSnow, Fault, FaultAction};
use support::kafka::{Read, read_until};
use support::{Runner, connector_file, now_secs, tail, unique, work_dir};

const USER: &str = "eos-user";
const PASSWORD: &str = "Eos-Secret-Pw-7";

fn fake(frozen_at: Option<i64>) -> FakeSnow {
    FakeSnow::start(FakeOptions { users: vec![(USER.into(), PASSWORD.into())], frozen_at, ..Default::default() }).unwrap()
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
    records
        .iter()
        .map(|r| (r.key.clone(), r.headers.get("snow.sys_mod_count").cloned().unwrap_or_default()))
        .filter(|v| !seen.insert(v.clone()))
        .collect()
}

#[test]
fn file_offsets_are_refused_for_required_and_requested_falls_back_saying_why() {
    let fake = fake(Some(now_secs()));
    let (name, topic) = (unique("eosfile"), unique("eosfile"));
    let dir = work_dir("eos-file");
    let mut c = support::source_entries(
        &fake.url(),
        &name,
        &topic,
        &["incident"],
        &[("snow.auth.username", USER), ("snow.auth.password", PASSWORD), ("exactly.once.support", "required")],
    );
    let file = connector_file(&dir, &name, &c);
    let (ok, out, err) = support::snow_connect(&dir, &["validate", file.to_str().unwrap()]);
    assert!(!ok, "{out}");
    assert!(err.contains("exactly.once.support=required: offsets in a file") && err.contains("offset.storage.topic"), "{err}");
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
