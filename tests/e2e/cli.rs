//! The command line and the configuration end to end: `validate` refuses what cannot run (settings
//! that cannot fit the component's memory, Kafka client settings librdkafka refuses or that can
//! lose records), unknown options are errors with the usage, two spellings of one offsets file are
//! one store, and a failing sink consumer or a connector that ended with an error is shown at once
//! whatever the order of the connectors.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use fake_snow::{FakeOptions, FakeSnow};
use serde_json::Value;
use support::kafka::read_until;
use support::{Runner, connector_file, entries, now_secs, snow_connect, unique, wait_until, work_dir};

fn source(fake_url: &str, name: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut c = support::source_entries(fake_url, name, &format!("snow.{name}"), &["incident"], &[("snow.auth.type", "none")]);
    c.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    c
}

/// A sink connector on the fake at `fake_url` consuming `topics`.
fn sink(fake_url: &str, name: &str, topics: &str) -> BTreeMap<String, String> {
    entries(&[
        ("name", name),
        ("component.path", support::signed(guest_artifacts::GUEST_SINK)),
        support::TRUSTED_KEYS,
        ("kafka.bootstrap.servers", kafka_harness::shared().bootstrap()),
        ("topics", topics),
        ("snow.instance.url", fake_url),
        ("snow.auth.type", "none"),
        ("snow.sink.table", "incident"),
    ])
}

#[test]
fn validate_refuses_settings_that_cannot_fit_the_components_memory() {
    let dir = work_dir("cli-memory");
    let file = connector_file(&dir, "m", &source("https://acme.service-now.com", "m", &[("snow.dedup.window.size", "5000000")]));
    let (ok, _, stderr) = snow_connect(&dir, &["validate", file.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        stderr.contains("snow.dedup.window.size: 5000000 dedup versions")
            && stderr.contains("component.memory.max.bytes=268435456")
            && stderr.contains("set it to at most 804864"),
        "the key, the limit and what fits:\n{stderr}"
    );
    let file = connector_file(
        &dir,
        "m2",
        &source(
            "https://acme.service-now.com",
            "m2",
            &[("snow.dedup.window.size", "5000000"), ("component.memory.max.bytes", "1073741824")],
        ),
    );
    let (ok, stdout, stderr) = snow_connect(&dir, &["validate", file.to_str().unwrap()]);
    assert!(ok, "with more memory it fits: {stderr}");
    assert!(stdout.contains("1 connector(s) valid"));
}

#[test]
fn validate_checks_the_kafka_client_settings_and_refuses_settings_that_can_lose_records() {
    let dir = work_dir("cli-kafka");
    let url = "https://acme.service-now.com";
    for (extra, expected) in [
        (vec![("kafka.producer.linger.ms", "soon")], "kafka.producer.linger.ms=soon: "),
        (vec![("kafka.producer.no.such.setting", "1")], "kafka.producer.no.such.setting: not a property a connector may set"),
        (vec![("kafka.producer.acks", "1")], "kafka.producer.acks=1: "),
        (vec![("kafka.producer.enable.idempotence", "false")], "kafka.producer.enable.idempotence=false: "),
    ] {
        let name = unique("k");
        let file = connector_file(&dir, &name, &source(url, &name, &extra));
        let (ok, _, stderr) = snow_connect(&dir, &["validate", file.to_str().unwrap()]);
        assert!(!ok && stderr.contains(expected), "{extra:?}: {stderr}");
    }
    let name = unique("k");
    let file = connector_file(&dir, &name, &source(url, &name, &[("kafka.producer.acks", "1"), ("kafka.producer.unsafe", "true")]));
    let (ok, _, stderr) = snow_connect(&dir, &["validate", file.to_str().unwrap()]);
    assert!(ok, "kafka.producer.unsafe=true accepts the loss: {stderr}");
}

#[test]
fn the_version_names_the_commit_it_was_built_from() {
    let dir = work_dir("cli-version");
    for flag in ["--version", "version", "-V"] {
        let (ok, stdout, _) = snow_connect(&dir, &[flag]);
        let commit = stdout.split("(commit ").nth(1).and_then(|r| r.split(',').next()).unwrap_or_default();
        assert!(ok && stdout.starts_with(&format!("snow-connect {} (commit ", env!("CARGO_PKG_VERSION"))), "{flag}: {stdout}");
        assert!(commit == "unknown" || (commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit())), "{flag}: {stdout}");
    }
}

#[test]
fn unknown_command_line_options_are_errors_with_the_usage() {
    let dir = work_dir("cli-options");
    for args in [
        &["run", "x.properties", "--status-listn", "127.0.0.1:0"][..],
        &["offsets", "list", "--file", "o.json", "-v"],
        &["inspect", "x.wasm", "--instantiation", "3"],
    ] {
        let (ok, _, stderr) = snow_connect(&dir, args);
        assert!(!ok, "{args:?}");
        assert!(stderr.contains("unknown option") && stderr.contains("usage:\n  snow-connect run"), "{args:?}: {stderr}");
    }
}

#[test]
fn two_spellings_of_one_offsets_file_are_one_store() {
    let now = now_secs();
    let fake = FakeSnow::start(FakeOptions { frozen_at: Some(now), ..Default::default() }).unwrap();
    fake.shared().seed("incident", 300, now - 600, 300);
    let dir = work_dir("cli-offsets");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let (a, b) = (unique("spell-a"), unique("spell-b"));
    let topic = unique("spell");
    let file_a = connector_file(&dir, &a, &source(&fake.url(), &a, &[("snow.table.incident.topic", &topic)]));
    let file_b = connector_file(
        &dir,
        &b,
        &source(&fake.url(), &b, &[("snow.table.incident.topic", &topic), ("offset.storage.file.filename", "./sub/../offsets.json")]),
    );
    let runner = Runner::start(&dir, "run", &[&file_a, &file_b]);
    read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| r.len() >= 600);
    let stored = |dir: &Path| -> Option<Value> { serde_json::from_str(&std::fs::read_to_string(dir.join("offsets.json")).ok()?).ok() };
    wait_until("both connectors' offsets in the one file", Duration::from_secs(30), || {
        stored(&dir).filter(|f| f["offsets"][&a].is_object() && f["offsets"][&b].is_object())
    });
    runner.stop();
    let file = stored(&dir).unwrap();
    assert!(file["offsets"][&a].is_object() && file["offsets"][&b].is_object(), "neither store replaced the other's offsets: {file}");
    assert!(!dir.join("sub").join("offsets.json").exists());
}

#[test]
fn a_failing_sink_consumer_is_shown_at_once_whatever_the_order_of_the_connectors() {
    let now = now_secs();
    let fake = FakeSnow::start(FakeOptions { frozen_at: Some(now), ..Default::default() }).unwrap();
    fake.shared().seed("incident", 10, now - 600, 10);
    let dir = work_dir("cli-order");
    let (source_name, sink_name) = (unique("first"), unique("second"));
    // A source that runs on (listed first), then a sink whose topic does not exist.
    let source_file = connector_file(&dir, &source_name, &source(&fake.url(), &source_name, &[]));
    let sink_file = connector_file(&dir, &sink_name, &sink(&fake.url(), &sink_name, &unique("no-such-topic")));
    let mut runner = Runner::start_with_args(&dir, "run", &[&source_file, &sink_file], &["--status-listen", "127.0.0.1:0"]);
    let addr = support::status_address(&mut runner);
    let unit = wait_until("the sink's consumer failure in /status", Duration::from_secs(60), || {
        support::unit_status_of(&addr, &sink_name, "consumer")
    });
    assert_eq!(unit["state"], "retrying", "{unit}");
    assert!(unit["message"].as_str().unwrap().contains("the Kafka consumer failed"), "{unit}");
    let log = runner.wait_for_log("the Kafka consumer failed", Duration::from_secs(5));
    assert!(!log.contains("unit stopped"), "logged while the source listed before it still runs");
    runner.stop();
}

#[test]
fn a_connector_that_ends_with_an_error_is_shown_and_logged_at_once() {
    let now = now_secs();
    let fake = FakeSnow::start(FakeOptions { frozen_at: Some(now), ..Default::default() }).unwrap();
    // A table to read, so the source runs on (the process ends once every connector has ended).
    fake.shared().seed("incident", 10, now - 600, 10);
    let dir = work_dir("cli-ended");
    let (source_name, sink_name) = (unique("first"), unique("broken"));
    let source_file = connector_file(&dir, &source_name, &source(&fake.url(), &source_name, &[]));
    // A topic regex librdkafka cannot compile: subscribing fails when the sink starts.
    let sink_file = connector_file(&dir, &sink_name, &sink(&fake.url(), &sink_name, "^(unclosed"));
    let mut runner = Runner::start_with_args(&dir, "run", &[&source_file, &sink_file], &["--status-listen", "127.0.0.1:0"]);
    let addr = support::status_address(&mut runner);
    let unit =
        wait_until("the ended connector in /status", Duration::from_secs(60), || support::unit_status_of(&addr, &sink_name, "connector"));
    assert_eq!(unit["state"], "parked", "{unit}");
    assert!(unit["message"].as_str().unwrap().starts_with("the connector ended with an error: subscribing to ^(unclosed"), "{unit}");
    let log = runner.wait_for_log("the connector ended with an error", Duration::from_secs(5));
    assert!(!log.contains("unit stopped"), "at once, while the source listed before it still runs");
    runner.stop();
}

#[test]
fn a_second_start_loads_the_component_from_the_compile_cache_and_a_spoilt_entry_is_compiled_again() {
    let dir = work_dir("cache");
    let file = connector_file(&dir, "cached", &sink("http://127.0.0.1:9", "cached", "t"));
    let cache = dir.join("compile-cache");
    let start = || {
        let out = Command::new(env!("CARGO_BIN_EXE_snow-connect"))
            .args(["validate", file.to_str().unwrap(), "--component-cache", cache.to_str().unwrap()])
            .current_dir(&dir)
            .env("SNOW_LOG", "info")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(start().contains("component compiled"), "the first start compiles");
    assert!(start().contains("component loaded from the compile cache"), "the second start does not");
    // Spoil the entry: it is not trusted, but compiled again (and replaced).
    let code = std::fs::read_dir(&cache).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension() == Some("cwasm".as_ref())).unwrap();
    std::fs::write(&code, b"not native code").unwrap();
    let log = start();
    assert!(log.contains("ignoring the compile cache entry") && log.contains("component compiled"), "{log}");
    assert!(start().contains("component loaded from the compile cache"));
}

#[test]
fn inspect_names_the_world_contract_version_and_digest() {
    let dir = work_dir("inspect");
    let (ok, stdout, stderr) = snow_connect(&dir, &["inspect", guest_artifacts::GUEST_SOURCE, "--instantiations", "2"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("world          snow:connector/source@0.2.0"), "{stdout}");
    let digest = {
        use std::fmt::Write;
        let bytes = std::fs::read(guest_artifacts::GUEST_SOURCE).unwrap();
        let hash = <sha2::Sha256 as sha2::Digest>::digest(&bytes);
        hash.iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    };
    assert!(stdout.contains(&format!("sha256         {digest}")), "{stdout}");
}
