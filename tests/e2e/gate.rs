//! The outbound gate: a hostile component in the real host cannot reach a host other than its
//! configured instance, and requests to the instance carry credentials the guest never saw.
#![allow(clippy::unwrap_used)] // a panic is how a test fails

mod support;

use std::time::Duration;

use fake_snow::{FakeOptions, FakeSnow};
use support::{Runner, connector_file, entries, unique, work_dir};

fn rogue_config(allowed: &FakeSnow, target: &str, name: &str) -> std::collections::BTreeMap<String, String> {
    entries(&[
        ("name", name),
        ("component.path", guest_artifacts::ROGUE_GUEST),
        ("kafka.bootstrap.servers", "127.0.0.1:9"),
        ("offset.storage.file.filename", "offsets.json"),
        ("snow.instance.url", &allowed.url()),
        ("snow.auth.username", "gatekeeper"),
        ("snow.auth.password", "gate-Pw-1"),
        ("snow.rogue.url", target),
    ])
}

#[test]
fn a_request_to_another_host_is_refused_and_the_instance_is_reached_with_host_credentials() {
    let allowed = FakeSnow::start(FakeOptions {
        users: vec![("gatekeeper".into(), "gate-Pw-1".into())],
        tables: vec!["incident".into()],
        ..Default::default()
    })
    .unwrap();
    let other = FakeSnow::start(FakeOptions::default()).unwrap();
    let dir = work_dir("gate");

    let target = format!("{}/api/now/table/incident", other.url());
    let name = unique("rogue");
    let file = connector_file(&dir, &name, &rogue_config(&allowed, &target, &name));
    let mut runner = Runner::start(&dir, "refused", &[&file]);
    let log = runner.wait_for_log("unit parked", Duration::from_secs(60));
    runner.kill();
    let (allowed_at, other_at) = (allowed.addr().to_string(), other.addr().to_string());
    assert!(
        log.contains(&format!("refused a guest request to http://{other_at}/api/now/table/incident: only http://{allowed_at} is allowed")),
        "the host logs the refusal:\n{log}"
    );
    assert!(log.contains(&format!("denied: GET /api/now/table/incident: the host refused a request to {other_at}: only the configured ServiceNow instance may be called")), "the guest got a clear error:\n{log}");
    assert!(other.journal().entries.is_empty(), "nothing reached the other host");

    let target = format!("{}/api/now/table/incident", allowed.url());
    let name = unique("rogue");
    let file = connector_file(&dir, &name, &rogue_config(&allowed, &target, &name));
    let mut runner = Runner::start(&dir, "allowed", &[&file]);
    let log = runner.wait_for_log("unit parked", Duration::from_secs(60));
    runner.kill();
    assert!(log.contains("reached it: status 404"), "the configured instance is reachable:\n{log}");
    let journal = allowed.journal();
    assert_eq!(journal.entries.len(), 1);
    assert_eq!(journal.entries[0].auth, "basic:gatekeeper", "the host attached credentials the guest never had");
    assert!(!log.contains("gate-Pw-1"));
}

#[test]
fn a_component_that_traps_on_every_poll_is_parked_once_its_trap_budget_is_spent() {
    let allowed = FakeSnow::start(FakeOptions::default()).unwrap();
    let dir = work_dir("traps");
    let name = unique("trapper");
    let mut config = rogue_config(&allowed, "trap", &name);
    config.insert("component.trap.budget".into(), "3".into());
    let file = connector_file(&dir, &name, &config);
    let mut runner = Runner::start(&dir, "traps", &[&file]);
    let log = runner.wait_for_log("unit parked", Duration::from_secs(60));
    runner.kill();
    assert_eq!(log.matches("ERROR the component trapped in poll:").count(), 3, "three traps, each logged whole:\n{log}");
    let parked = log.lines().find(|l| l.contains("unit parked")).unwrap();
    assert!(parked.contains("trapped 3 times in a row without a successful poll (component.trap.budget=3)"), "{parked}");
    assert!(parked.contains("wasm trap: wasm `unreachable` instruction executed"), "the trap itself is named: {parked}");
    assert_eq!(log.matches("reopening at the stored offset").count(), 2, "reopened after the first two traps only:\n{log}");
}
