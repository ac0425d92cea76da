//! The same signed `guest_source.wasm` and `guest_sink.wasm` in a WASI host that is not ours:
//! transpiled by jco and driven from Node through preview2-shim (`tests/hosts/jco/drive.mjs`),
//! against the fake over loopback, compared byte for byte with what snow-connect produces and
//! writes on the same data. And the connectors composed with the HTTP adapter (`wac plug`), served
//! by `jco serve`: `POST /poll` and `/put` give the same bytes again.

use crate::support;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use fake_snow::{FakeOptions, FakeSnow};
use serde_json::{Value, json};
use support::kafka::{Read, create_topic, produce, read_until, wait_committed};
use support::{Runner, connector_file, now_secs, signed, unique, work_dir};

/// `tests/hosts/jco`: the Node host (its packages installed by `make test`).
fn jco_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/hosts/jco")
}

fn sha256(bytes: &[u8]) -> String {
    <sha2::Sha256 as sha2::Digest>::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// `component` transpiled by jco into `tests/hosts/jco/out/<name>-<digest>` (once per build), its
/// `snow:connector/host` import mapped to `host.js`.
fn transpiled(component: &str, name: &str) -> PathBuf {
    // Tests of this binary run at once: one transpiles while the others wait.
    static TRANSPILING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = TRANSPILING.lock().unwrap_or_else(|e| e.into_inner());
    let digest = sha256(&std::fs::read(component).unwrap());
    let out = jco_dir().join("out").join(format!("{name}-{}", &digest[..12]));
    if !out.join(format!("{name}.js")).exists() {
        let status = Command::new(jco_dir().join("node_modules/.bin/jco"))
            .args(["transpile", component, "-q", "--name", name, "--map", "snow:connector/host=../../host.js", "-o"])
            .arg(&out)
            .status()
            .unwrap_or_else(|e| panic!("running jco (make test installs it in tests/hosts/jco): {e}"));
        assert!(status.success(), "jco transpile {component}");
    }
    out
}

/// Runs `node drive.mjs mode dir config arg`: one JSON value per stdout line.
fn drive(mode: &str, dir: &Path, config: &BTreeMap<String, String>, arg: &str, work: &Path) -> Vec<Value> {
    let config_file = work.join(format!("{mode}-config.json"));
    std::fs::write(&config_file, serde_json::to_string(config).unwrap()).unwrap();
    let out = Command::new("node").arg(jco_dir().join("drive.mjs")).arg(mode).arg(dir).arg(&config_file).arg(arg).output().unwrap();
    assert!(out.status.success(), "node drive.mjs {mode}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The composed HTTP connector served by another host on a free loopback port; stopped on drop.
struct Served {
    child: std::process::Child,
    addr: String,
}

impl Served {
    /// Under `jco serve`.
    fn start(component: &Path, dir: &Path) -> Self {
        Self::spawn("jco serve", dir, |port| {
            let mut cmd = Command::new(jco_dir().join("node_modules/.bin/jco"));
            cmd.arg("serve")
                .arg(component)
                .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--jco-dir"])
                .arg(jco_dir().join("out").join(format!("serve-{port}")));
            cmd
        })
    }

    /// Under `wasmtime serve` (wasmtime-cli 48, which `make hosts` builds into target/tools).
    fn wasmtime(component: &Path, dir: &Path) -> Self {
        let wasmtime = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/wasmtime-48.0.8/bin/wasmtime");
        assert!(wasmtime.is_file(), "{} is missing: `make hosts` builds it", wasmtime.display());
        Self::spawn("wasmtime serve", dir, |port| {
            let mut cmd = Command::new(&wasmtime);
            // -S cli: the wasi:cli interfaces Rust's standard library imports (stderr for the logs).
            cmd.args(["serve", "-S", "cli", "--addr", &format!("127.0.0.1:{port}")]).arg(component);
            cmd
        })
    }

    fn spawn(what: &str, dir: &Path, command: impl FnOnce(u16) -> Command) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = std::fs::File::create(dir.join(format!("{}.log", what.replace(' ', "-")))).unwrap();
        // Its own process group: `jco serve` starts node children that outlive a killed jco, so
        // stopping it means stopping the group.
        let child = std::os::unix::process::CommandExt::process_group(&mut command(port), 0)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let served = Self { child, addr: format!("127.0.0.1:{port}") };
        support::wait_until(&format!("{what} listening"), Duration::from_secs(120), || {
            std::net::TcpStream::connect(&served.addr).ok().map(drop)
        });
        served
    }

    /// `POST path` with a JSON body; the status and the JSON answer.
    fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        use std::io::{Read as _, Write as _};
        let body = body.to_string();
        let mut stream = std::net::TcpStream::connect(&self.addr).unwrap();
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        )
        .unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).unwrap();
        let text = String::from_utf8_lossy(&answer).into_owned();
        let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") { dechunk(rest) } else { rest.to_string() };
        (status, serde_json::from_str(&body).unwrap_or_else(|e| panic!("POST {path}: {e}: {body}")))
    }
}

/// The body of a chunked answer.
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].strip_prefix("\r\n").unwrap_or(&tail[n..]);
    }
    out
}

impl Served {
    /// Processes of this host's group still running (the served host and its children).
    fn group_alive(&self) -> Vec<u32> {
        let group = self.child.id().to_string();
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|stat| stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().map(str::to_string).collect::<Vec<_>>()))
                    // Fields after the name: state, ppid, pgrp; a zombie is gone already.
                    .is_some_and(|f| f.first().is_some_and(|state| state != "Z") && f.get(2) == Some(&group))
            })
            .collect()
    }

    /// Stops the host and every process it started, and checks that none is left.
    fn stop(mut self) {
        self.kill_group();
        let left = support::wait_until("the served host's processes gone", Duration::from_secs(30), || {
            let left = self.group_alive();
            left.is_empty().then_some(left)
        });
        assert!(left.is_empty());
    }

    fn kill_group(&mut self) {
        let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", self.child.id())]).status();
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // Also when a test fails: nothing it started outlives it.
        self.kill_group();
    }
}

/// The `snow.*` keys of a connector's entries, except the host's own: what the guest sees.
fn guest_config(entries: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    entries.iter().filter(|(k, _)| k.starts_with("snow.") && !k.starts_with("snow.auth.")).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// A record as both hosts are compared: key, value, headers (sorted), timestamp.
type Produced = (Option<Vec<u8>>, Vec<u8>, BTreeMap<String, String>, Option<i64>);

fn from_kafka(r: &Read) -> Produced {
    (Some(r.key.clone().into_bytes()), r.value.clone(), r.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect(), r.timestamp_ms)
}

fn from_json(v: &Value) -> Produced {
    let bytes = |v: &Value| v.as_str().map(|s| STANDARD.decode(s).unwrap());
    let headers = v["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h[0].as_str().unwrap().to_string(), String::from_utf8(bytes(&h[1]).unwrap()).unwrap()))
        .collect();
    (bytes(&v["key"]), bytes(&v["value"]).unwrap_or_default(), headers, v["timestamp_ms"].as_i64())
}

#[test]
fn the_source_component_produces_the_same_bytes_under_jco_as_in_snow_connect() {
    const ROWS: usize = 2_500;
    let now = now_secs();
    let fake = FakeSnow::start(FakeOptions { frozen_at: Some(now), ..Default::default() }).unwrap();
    fake.shared().seed("incident", ROWS as u64, now - 3600, 3000);
    let (name, topic) = (unique("jcosrc"), unique("jcosrc"));
    let dir = work_dir("jco-source");
    // No overlap re-read: the HTTP adapter opens the table afresh at the offset on every request.
    let config = support::source_entries(
        &fake.url(),
        &name,
        &topic,
        &["incident"],
        &[("snow.auth.type", "none"), ("snow.batch.size", "500"), ("snow.overlap.seconds", "0")],
    );
    let runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    let ours = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| r.len() >= ROWS);
    runner.stop();

    let theirs = drive(
        "source",
        &transpiled(signed(guest_artifacts::GUEST_SOURCE), "guest_source"),
        &guest_config(&config),
        &ROWS.to_string(),
        &dir,
    );
    assert_eq!((ours.len(), theirs.len()), (ROWS, ROWS), "every row once in both hosts");
    assert!(theirs.iter().all(|r| r["topic"] == topic.as_str()), "the same topic");
    for (i, (a, b)) in ours.iter().map(from_kafka).zip(theirs.iter().map(from_json)).enumerate() {
        assert_eq!(a, b, "record {i}: key, value, headers and timestamp are the same bytes");
    }

    // The connectors composed with the HTTP adapter, under jco serve: poll by poll, the caller
    // keeping the offset.
    let composed = support::tools::composed_http_connector();
    let (ok, stdout, stderr) =
        support::snow_connect(&dir, &["artefact", "verify", composed.to_str().unwrap(), "--trusted-keys", support::DEV_PUB]);
    assert!(ok && stdout.contains("verified"), "the composed artefact is signed: {stderr}");
    let served = Served::start(&composed, &dir);
    let (status, answer) = served.post("/validate", &json!({ "config": guest_config(&config) }));
    assert_eq!((status, &answer["valid"]), (200, &json!(true)), "{answer}");
    let via_http = poll_all(&served, &guest_config(&config), ROWS);
    assert_eq!(via_http.len(), ROWS, "every row once through the adapter");
    for (i, (a, b)) in ours.iter().map(from_kafka).zip(via_http.iter().map(from_json)).enumerate() {
        assert_eq!(a, b, "record {i} through the adapter: the same bytes");
    }
    // `jco serve` and the node processes it started are all gone afterwards.
    served.stop();
}

/// Records for the sink comparison: patches of `ids`, a delete, a create, and one that is not JSON.
fn sink_records(ids: &[String]) -> Vec<(Option<String>, String)> {
    let mut records: Vec<(Option<String>, String)> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (Some(id.clone()), format!(r#"{{"short_description":"from kafka {i}","u_seq":"{i}"}}"#)))
        .collect();
    records.push((None, r#"{"short_description":"a new one"}"#.into()));
    records.push((None, "not json".into()));
    records
}

/// The writes a fake received: method, path and body, in order.
fn writes(fake: &FakeSnow) -> Vec<(String, String, String)> {
    fake.journal()
        .entries
        .iter()
        .filter(|e| e.method != "GET")
        .map(|e| (e.method.clone(), e.path.clone(), e.body.clone().unwrap_or_default()))
        .collect()
}

/// An outcome as both hosts are compared.
fn outcome_of_report(v: &Value) -> Value {
    match v["outcome"].as_str() {
        Some("written") => json!({ "written": [v["operation"], v["table"], v["sys_id"], v["status"]] }),
        Some("failed") => json!({ "failed": v["classification"] }),
        other => json!({ "other": other }),
    }
}

fn outcome_of_wit(v: &Value) -> Value {
    match v["tag"].as_str() {
        Some("written") => json!({ "written": [v["val"]["operation"], v["val"]["table"], v["val"]["sysId"], v["val"]["status"]] }),
        Some("failed") => json!({ "failed": v["val"]["val"]["class"] }),
        other => json!({ "other": other }),
    }
}

#[test]
fn the_sink_component_writes_the_same_bytes_under_jco_as_in_snow_connect() {
    let now = now_secs();
    let start = || {
        let fake = FakeSnow::start(FakeOptions { frozen_at: Some(now), ..Default::default() }).unwrap();
        let ids = fake.shared().seed("incident", 40, now - 3600, 600);
        (fake, ids)
    };
    let ((ours_fake, ids), (their_fake, their_ids)) = (start(), start());
    assert_eq!(ids, their_ids, "both fakes hold the same rows");
    let records = sink_records(&ids);
    let (name, topic) = (unique("jcosink"), unique("jcosink"));
    let bootstrap = kafka_harness::shared().bootstrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(create_topic(bootstrap, &topic, 1));
    rt.block_on(produce(bootstrap, &topic, &records));
    let dir = work_dir("jco-sink");
    let config = support::sink_entries(
        &ours_fake.url(),
        &name,
        &topic,
        "incident",
        &[
            ("snow.auth.type", "none"),
            ("errors.tolerance", "all"),
            ("reporter.result.topic.name", "${connector}-ok"),
            ("reporter.error.topic.name", "${connector}-err"),
        ],
    );
    let runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    wait_committed(&format!("connect-{name}"), &topic, 1, records.len() as i64, Duration::from_secs(120));
    runner.stop();
    let mut reports: HashMap<i64, Value> = HashMap::new();
    for t in [format!("{name}-ok"), format!("{name}-err")] {
        for r in read_until(bootstrap, &t, Duration::from_secs(60), |_| true) {
            let v = Read::json(&r);
            reports.insert(v["offset"].as_i64().unwrap(), outcome_of_report(&v));
        }
    }

    // The same records, as the sink component sees them, through the Node host.
    let as_json: Vec<Value> = records
        .iter()
        .enumerate()
        .map(|(i, (key, value))| {
            json!({ "topic": topic, "partition": 0, "offset": i, "key": key.as_ref().map(|k| STANDARD.encode(k)),
                    "value": STANDARD.encode(value), "headers": [], "timestamp_ms": null })
        })
        .collect();
    let records_file = dir.join("records.json");
    std::fs::write(&records_file, Value::Array(as_json).to_string()).unwrap();
    let mut guest = guest_config(&config);
    guest.insert("snow.instance.url".into(), their_fake.url());
    let theirs =
        drive("sink", &transpiled(signed(guest_artifacts::GUEST_SINK), "guest_sink"), &guest, records_file.to_str().unwrap(), &dir);

    assert_eq!((reports.len(), theirs.len()), (records.len(), records.len()), "one outcome per record in both hosts");
    for (i, theirs) in theirs.iter().enumerate() {
        assert_eq!(reports[&(i as i64)], outcome_of_wit(theirs), "record {i}: the same outcome");
    }
    let written = reports.values().filter(|o| o.get("written").is_some()).count();
    assert_eq!(written, ids.len() + 1, "the patches and the create were written: {reports:?}");
    assert_eq!(reports[&(records.len() as i64 - 1)], json!({ "failed": "fatal" }), "the record that is not JSON failed");
    let (a, b) = (writes(&ours_fake), writes(&their_fake));
    assert_eq!(a.len(), ids.len() + 1, "a write per patch and the create");
    assert_eq!(a, b, "the same requests, bodies byte for byte");

    // Through the HTTP adapter under jco serve, against a third fake holding the same rows.
    let (http_fake, _) = start();
    let served = Served::start(&support::tools::composed_http_connector(), &dir);
    guest.insert("snow.instance.url".into(), http_fake.url());
    let records_json: Value = serde_json::from_str(&std::fs::read_to_string(&records_file).unwrap()).unwrap();
    let (status, answer) = served.post("/put", &json!({ "config": guest, "records": records_json }));
    assert_eq!(status, 200, "{answer}");
    let outcomes = answer["outcomes"].as_array().unwrap();
    assert_eq!(outcomes.len(), records.len());
    for (i, o) in outcomes.iter().enumerate() {
        let seen = match (&o["written"], &o["failed"]) {
            (w, _) if !w.is_null() => json!({ "written": [w["operation"], w["table"], w["sys_id"], w["status"]] }),
            (_, f) => json!({ "failed": f["data"]["class"] }),
        };
        assert_eq!(reports[&(i as i64)], seen, "record {i} through the adapter: the same outcome");
    }
    assert_eq!(writes(&http_fake), a, "the same requests through the adapter");
    served.stop();
}

/// Polls `served` from no offset until `rows` records (or three empty batches); the records.
fn poll_all(served: &Served, config: &BTreeMap<String, String>, rows: usize) -> Vec<Value> {
    let (mut all, mut offsets, mut empty) = (Vec::new(), json!([]), 0);
    while all.len() < rows && empty < 3 {
        let (status, batch) = served.post("/poll", &json!({ "config": config, "offsets": offsets }));
        assert_eq!(status, 200, "{batch}");
        let records = batch["records"].as_array().unwrap();
        empty = if records.is_empty() { empty + 1 } else { 0 };
        all.extend(records.iter().cloned());
        if !batch["offset"].is_null() {
            offsets = json!([batch["offset"]]);
        }
    }
    all
}

#[test]
#[ignore = "needs wasmtime-cli 48 in target/tools: run by `make hosts`, which builds it"]
fn the_composed_connector_serves_the_same_bytes_under_wasmtime_serve() {
    const ROWS: usize = 1_200;
    let now = now_secs();
    let fake = FakeSnow::start(FakeOptions { frozen_at: Some(now), ..Default::default() }).unwrap();
    let ids = fake.shared().seed("incident", ROWS as u64, now - 3600, 3000);
    let dir = work_dir("wasmtime-serve");
    let config: BTreeMap<String, String> = [
        ("snow.instance.url", fake.url()),
        ("snow.tables", "incident".into()),
        ("snow.batch.size", "500".into()),
        ("snow.overlap.seconds", "0".into()),
        ("snow.safety.lag.seconds", "2".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let composed = support::tools::composed_http_connector();
    let served = Served::wasmtime(&composed, &dir);
    let via_wasmtime = poll_all(&served, &config, ROWS);
    let via_node = drive("source", &transpiled(signed(guest_artifacts::GUEST_SOURCE), "guest_source"), &config, &ROWS.to_string(), &dir);
    assert_eq!((via_wasmtime.len(), via_node.len()), (ROWS, ROWS), "every row once under both hosts");
    for (i, (a, b)) in via_wasmtime.iter().map(from_json).zip(via_node.iter().map(from_json)).enumerate() {
        assert_eq!(a, b, "record {i}: the same bytes under wasmtime serve as under jco");
    }
    let sink: BTreeMap<String, String> =
        [("snow.instance.url".to_string(), fake.url()), ("snow.sink.table".to_string(), "incident".to_string())].into_iter().collect();
    let records = json!([{ "topic": "t", "partition": 0, "offset": 0, "key": STANDARD.encode(&ids[0]),
                           "value": STANDARD.encode(r#"{"short_description":"from wasmtime serve"}"#), "headers": [], "timestamp_ms": null }]);
    let (status, answer) = served.post("/put", &json!({ "config": sink, "records": records }));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["outcomes"][0]["written"]["sys_id"], ids[0].as_str(), "{answer}");
    let row = fake.rows("incident").into_iter().find(|r| r["sys_id"] == ids[0].as_str()).unwrap();
    assert_eq!(row["short_description"], "from wasmtime serve");
}
