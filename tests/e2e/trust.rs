//! The trust boundary (design §6): whoever may write a connector configuration — a REST caller of
//! a fleet, a standalone run's validate route, a connector file given to `validate` — gets no more
//! than a connector. No native code through librdkafka properties (a library whose constructor
//! leaves a mark proves nothing was loaded), no worker file or variable through a provider, no
//! weaker signing policy, no component file the operator did not offer, no resolved value echoed,
//! and a worker that stays up whatever it is sent.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use support::fleet::{curl, start_worker, worker_properties};
use support::{Runner, now_secs, unique, work_dir};

const USER: &str = "snow-trust";
const PASSWORD: &str = "trust-Secret-Pw-31";

/// A shared library whose constructor writes `marker`: loading it is visible.
fn marking_library(dir: &Path, marker: &Path) -> PathBuf {
    let source = dir.join("mark.c");
    std::fs::write(
        &source,
        format!(
            "#include <stdio.h>\n__attribute__((constructor)) static void mark(void) {{ FILE *f = fopen(\"{}\", \"w\"); if (f) {{ fputs(\"loaded\", f); fclose(f); }} }}\n",
            marker.display()
        ),
    )
    .unwrap();
    let library = dir.join("libmark.so");
    let out = std::process::Command::new("cc").args(["-shared", "-fPIC", "-o"]).arg(&library).arg(&source).output().unwrap();
    assert!(out.status.success(), "cc: {}", String::from_utf8_lossy(&out.stderr));
    library
}

#[test]
fn validate_never_loads_a_librdkafka_plugin_named_by_a_connector_file() {
    let dir = work_dir("trust-plugin");
    let marker = dir.join("plugin-was-loaded");
    let library = marking_library(&dir, &marker);
    for (key, name) in [("kafka.producer.plugin.library.paths", "psrc"), ("kafka.producer.ssl.engine.location", "esrc")] {
        let mut config = support::source_entries("http://127.0.0.1:9", name, "t", &["incident"], &[("snow.auth.type", "none")]);
        config.insert(key.into(), library.display().to_string());
        let file = support::connector_file(&dir, name, &config);
        let (ok, _, err) = support::snow_connect(&dir, &["validate", file.to_str().unwrap()]);
        assert!(!ok, "{key} is refused");
        assert!(err.contains(&format!("{key}: refused: it makes the worker load")), "{err}");
        assert!(!marker.exists(), "{key}: the library was never loaded");
    }
    let mut sink = support::sink_entries("http://127.0.0.1:9", "psink", "t", "incident", &[("snow.auth.type", "none")]);
    sink.insert("kafka.consumer.plugin.library.paths".into(), library.display().to_string());
    let (ok, _, err) = support::snow_connect(&dir, &["validate", support::connector_file(&dir, "psink", &sink).to_str().unwrap()]);
    assert!(!ok && err.contains("kafka.consumer.plugin.library.paths: refused"), "{err}");
    assert!(!marker.exists(), "the sink's consumer never loaded it either");

    // A sink's producer (its reports and dead letters) may not lose what Kafka acknowledged either.
    let mut sink = support::sink_entries("http://127.0.0.1:9", "acks", "t", "incident", &[("snow.auth.type", "none")]);
    sink.insert("kafka.producer.acks".into(), "0".into());
    let (ok, _, err) = support::snow_connect(&dir, &["validate", support::connector_file(&dir, "acks", &sink).to_str().unwrap()]);
    assert!(!ok && err.contains("kafka.producer.acks=0: a record counts as done once Kafka acknowledged it"), "{err}");
}

/// Keys set (or, `None`, removed) in a configuration.
type Changes<'a> = Vec<(&'a str, Option<&'a str>)>;

/// Posts `config` (a source otherwise valid) with `changes` applied; the answer.
fn create_with(port: u16, base: &Value, changes: &[(&str, Option<&str>)]) -> support::fleet::Answer {
    let mut config = base.clone();
    for (k, v) in changes {
        match v {
            Some(v) => config[*k] = json!(v),
            None => {
                config.as_object_mut().unwrap().remove(*k);
            }
        }
    }
    curl(port, "POST", "/connectors", Some(&json!({ "name": unique("trust"), "config": config })))
}

#[test]
fn a_fleet_connector_gets_no_more_than_a_connector() {
    let now = now_secs();
    let fake = support::fake_with_user(USER, PASSWORD, Some(now));
    let dir = work_dir("trust-fleet");
    let marker = dir.join("plugin-was-loaded");
    let library = marking_library(&dir, &marker);
    // A file the worker can read that no connector may: outside config.providers.file.allowed.paths.
    let private = dir.join("worker-private.properties");
    std::fs::write(&private, "token=Worker-Private-Value-99\n").unwrap();
    let allowed = dir.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    std::fs::write(allowed.join("snow.properties"), format!("password={PASSWORD}\n")).unwrap();
    let spec =
        worker_properties(&dir, "w1", &unique("trust-fleet"), &[("config.providers.file.allowed.paths", &allowed.display().to_string())]);
    let worker = start_worker(&dir, "w1", &spec, &[("SNOW_TRUST_PASSWORD", PASSWORD), ("WORKER_ONLY", "Worker-Env-Value-77")]);
    let topic = unique("trust-rows");
    let mut base: std::collections::BTreeMap<String, String> =
        support::source_entries(&fake.url(), "x", &topic, &["incident"], &[("snow.auth.username", USER)]);
    for k in ["name", "offset.storage.file.filename", "kafka.bootstrap.servers", "component.trusted.keys"] {
        base.remove(k);
    }
    base.insert("snow.auth.password".into(), format!("${{file:{}/snow.properties:password}}", allowed.display()));
    let base = json!(base);

    let outside = dir.join("outside.wasm");
    std::fs::copy(guest_artifacts::GUEST_SOURCE, &outside).unwrap();
    std::fs::copy(format!("{}.sigstore.json", guest_artifacts::GUEST_SOURCE), dir.join("outside.wasm.sigstore.json")).unwrap();
    let library_path = library.display().to_string();
    let private_ref = format!("${{file:{}:token}}", private.display());
    let cases: Vec<(Changes, &str)> = vec![
        (vec![("kafka.producer.plugin.library.paths", Some(&library_path))], "kafka.producer.plugin.library.paths: refused"),
        (vec![("kafka.producer.sasl.kerberos.kinit.cmd", Some("touch /tmp/x"))], "kafka.producer.sasl.kerberos.kinit.cmd: refused"),
        (vec![("kafka.producer.transactional.id", Some("fence-me"))], "kafka.producer.transactional.id: is the host's"),
        (vec![("component.allow.unsigned", Some("true"))], "component.allow.unsigned: the signing policy is the worker's"),
        (vec![("component.trusted.keys", Some("/tmp/mine.pub"))], "component.trusted.keys: the signing policy is the worker's"),
        (vec![("component.bundle.path", Some("/etc/passwd"))], "component.bundle.path: the signing policy is the worker's"),
        (vec![("component.path", Some(outside.to_str().unwrap()))], "component.path: "),
        (vec![("component.path", Some("/etc/passwd"))], "component.path: "),
        (vec![("kafka.security.protocol", Some("SASL_SSL"))], "kafka.security.protocol: the Kafka connection's security is the worker's"),
        (vec![("kafka.bootstrap.servers", Some("127.0.0.1:1"))], "kafka.bootstrap.servers: a connector runs on the worker's Kafka cluster"),
        (vec![("kafka.bootstrap.servers", Some(&private_ref))], "kafka.bootstrap.servers: "),
        (vec![("snow.instance.url", Some(&private_ref))], "snow.instance.url: picks a destination"),
        (vec![("snow.tables", Some(&private_ref))], "snow.tables: a configuration provider is resolved only in secret keys"),
        (vec![("snow.auth.password", Some(&private_ref))], "is not under config.providers.file.allowed.paths"),
        (vec![("snow.auth.password", Some("${file:/dev/zero:k}"))], "is not under config.providers.file.allowed.paths"),
        (vec![("snow.auth.password", Some("${env:WORKER_ONLY}"))], "is not one a connector may read"),
    ];
    for (changes, expected) in &cases {
        let answer = create_with(spec.port, &base, changes);
        assert_eq!(answer.status, 400, "{changes:?}: {}", answer.text);
        assert!(answer.text.contains(expected), "{changes:?}: expected {expected:?} in {}", answer.text);
        for secret in ["Worker-Private-Value-99", "Worker-Env-Value-77", PASSWORD] {
            assert!(!answer.text.contains(secret), "{changes:?}: a resolved value is never answered: {}", answer.text);
        }
        let validated = curl(
            spec.port,
            "PUT",
            "/connector-plugins/io.snowconnect.ServiceNowSourceConnector/config/validate",
            Some(&{
                let mut c = base.clone();
                for (k, v) in changes {
                    if let Some(v) = v {
                        c[*k] = json!(v);
                    }
                }
                c
            }),
        );
        assert!(validated.body["error_count"].as_u64().unwrap_or(0) > 0, "{changes:?}: validate reports it: {}", validated.text);
        assert!(!validated.text.contains("Worker-Private-Value-99") && !validated.text.contains("Worker-Env-Value-77"));
    }
    assert!(!marker.exists(), "no plugin library was ever loaded");
    assert_eq!(curl(spec.port, "GET", "/", None).status, 200, "the worker is still up");

    // A thousand idle sockets: the worker keeps at most its cap of them open, drops the silent
    // ones after the header deadline, and answers again.
    let descriptors = || std::fs::read_dir(format!("/proc/{}/fd", worker.pid())).unwrap().count();
    let before = descriptors();
    let idle: Vec<std::net::TcpStream> = (0..1000).map(|_| std::net::TcpStream::connect(("127.0.0.1", spec.port)).unwrap()).collect();
    let most = support::wait_until("the worker accepted the idle sockets", Duration::from_secs(30), || {
        let now = descriptors();
        (now >= before + 200).then_some(now)
    });
    std::thread::sleep(Duration::from_millis(500));
    let held = descriptors().max(most);
    assert!(held <= before + 256 + 16, "{held} descriptors with 1000 idle sockets (before: {before}): the cap holds");
    let answered = support::wait_until("an answer while the idle sockets are open", Duration::from_secs(60), || {
        use std::io::{Read, Write};
        let mut client = std::net::TcpStream::connect(("127.0.0.1", spec.port)).ok()?;
        client.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").ok()?;
        let mut answer = String::new();
        let _ = client.read_to_string(&mut answer);
        answer.starts_with("HTTP/1.1 200").then_some(answer)
    });
    assert!(answered.contains("kafka_cluster_id"), "{answered}");
    drop(idle);

    // What the operator allows does run: the password from the allowed directory and, by env, a
    // variable the worker lists.
    let answer = create_with(spec.port, &base, &[]);
    assert_eq!(answer.status, 201, "{}", answer.text);
    let answer = create_with(spec.port, &base, &[("snow.auth.password", Some("${env:SNOW_TRUST_PASSWORD}"))]);
    assert_eq!(answer.status, 201, "{}", answer.text);
    let log = worker.stop();
    for secret in ["Worker-Private-Value-99", "Worker-Env-Value-77", PASSWORD] {
        assert!(!log.contains(secret), "{secret} never reaches the log");
    }
}

#[test]
fn a_standalone_runs_validate_route_runs_nothing_a_start_would_not() {
    let now = now_secs();
    let fake = support::fake_with_user(USER, PASSWORD, Some(now));
    fake.shared().seed("incident", 5, now - 3600, 60);
    let dir = work_dir("trust-standalone");
    let marker = dir.join("plugin-was-loaded");
    let library = marking_library(&dir, &marker);
    let config = support::source_entries(
        &fake.url(),
        "run",
        &unique("trust-standalone"),
        &["incident"],
        &[("snow.auth.username", USER), ("snow.auth.password", "${env:SNOW_TRUST_PASSWORD}")],
    );
    let file = support::connector_file(&dir, "run", &config);
    let port = support::fleet::free_port();
    let mut runner = Runner::spawn_with_args(
        &dir,
        "run",
        &[&file],
        support::DEFAULT_LOG,
        &[("SNOW_TRUST_PASSWORD", PASSWORD), ("WORKER_ONLY", "Worker-Env-Value-77")],
        &["--rest", &format!("127.0.0.1:{port}")],
    );
    runner.wait_for_log("REST API (read-only", Duration::from_secs(120));
    let validate = |changes: &[(&str, &str)]| {
        let mut c = config.clone();
        c.remove("name");
        for (k, v) in changes {
            c.insert(k.to_string(), v.to_string());
        }
        curl(port, "PUT", "/connector-plugins/io.snowconnect.ServiceNowSourceConnector/config/validate", Some(&json!(c)))
    };
    let ok = validate(&[]);
    assert_eq!(ok.body["error_count"], 0, "the run's own configuration validates: {}", ok.text);
    let outside = dir.join("outside.wasm");
    std::fs::copy(guest_artifacts::GUEST_SOURCE, &outside).unwrap();
    for (changes, key) in [
        (vec![("kafka.producer.plugin.library.paths", library.to_str().unwrap())], "kafka.producer.plugin.library.paths"),
        (vec![("component.path", outside.to_str().unwrap()), ("component.allow.unsigned", "true")], "component.allow.unsigned"),
        (vec![("component.path", outside.to_str().unwrap())], "component.path"),
        (vec![("snow.tables", "${env:WORKER_ONLY}")], "snow.tables"),
    ] {
        let answer = validate(&changes);
        let errors = support::fleet::validation_errors(&answer.body, key);
        assert!(!errors.is_empty(), "{changes:?}: {key} has an error: {}", answer.text);
        assert!(!answer.text.contains("Worker-Env-Value-77"), "{}", answer.text);
    }
    assert!(!marker.exists(), "no plugin library was ever loaded");
    runner.stop();
}
