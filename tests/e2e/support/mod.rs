//! Shared pieces of the end-to-end tests: a work directory per test, the real `snow-connect`
//! binary as a child process, connector files, and Kafka helpers that wait for what a topic holds.

pub mod connect;
pub mod cosign;
pub mod fleet;
pub mod forward_proxy;
pub mod idp;
pub mod kafka;
pub mod oci_registry;
pub mod old_poller;
pub mod passed;
pub mod tls_proxy;
pub mod tools;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A fresh directory under `target/e2e/` for one test.
pub fn work_dir(test: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/e2e").join(format!(
        "{test}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// The development public key (tests/keys): what every test connector trusts.
pub const DEV_PUB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/keys/development-only.pub");
/// The development private key: signs the test components. Never trusted outside tests and demos.
pub const DEV_KEY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/keys/development-only.key");
/// The connector entry that trusts the development key.
pub const TRUSTED_KEYS: (&str, &str) = ("component.trusted.keys", DEV_PUB);

/// `component`, signed with the development key (`<component>.sigstore.json`, written once per
/// test binary and replaced atomically, so test binaries running at once each see a whole bundle).
pub fn signed(component: &'static str) -> &'static str {
    static SIGNED: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut signed = SIGNED.lock().unwrap_or_else(|e| e.into_inner());
    if !signed.contains(&component) {
        let key = snow_runtime::artefact::SigningKey::from_pem_file(Path::new(DEV_KEY)).unwrap();
        snow_runtime::artefact::sign_file(Path::new(component), &key, None).unwrap();
        signed.push(component);
    }
    component
}

/// The JavaScript example transform (examples/transform-js), built by `make test` with
/// ComponentizeJS, signed with the development key.
pub fn label_transform() -> &'static str {
    assert!(
        Path::new(guest_artifacts::TRANSFORM_LABEL).is_file(),
        "{} is missing: `make test` builds it (node examples/transform-js/build.mjs)",
        guest_artifacts::TRANSFORM_LABEL
    );
    signed(guest_artifacts::TRANSFORM_LABEL)
}

/// Runs `snow-connect args` in `dir` to its end; returns whether it succeeded, its stdout and stderr.
pub fn snow_connect(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_snow-connect")).args(args).current_dir(dir).env("SNOW_LOG", "warn").output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A new build of `component` in `dir` ([`guest_artifacts::new_build`]), signed with the
/// development key.
pub fn new_build(component: &str, build: u32, dir: &Path) -> PathBuf {
    let stem = Path::new(component).file_stem().unwrap().to_string_lossy().into_owned();
    let path = dir.join(format!("{stem}-build{build}.wasm"));
    fs::write(&path, guest_artifacts::new_build(&fs::read(component).unwrap(), build)).unwrap();
    let key = snow_runtime::artefact::SigningKey::from_pem_file(Path::new(DEV_KEY)).unwrap();
    snow_runtime::artefact::sign_file(&path, &key, None).unwrap();
    path
}

/// A build of a rogue component (`guest_artifacts::ROGUE_GUEST` or `ROGUE_SINK`) that traps on
/// every call that does work, signed with the development key: its mode bytes rewritten.
pub fn trapping_build(rogue: &str, dir: &Path) -> PathBuf {
    let (from, to) = (b"snow-rogue-mode:normal", b"snow-rogue-mode:trap!!");
    let mut bytes = fs::read(rogue).unwrap();
    let mut found = 0;
    let mut i = 0;
    while let Some(at) = bytes[i..].windows(from.len()).position(|w| w == from) {
        bytes[i + at..i + at + to.len()].copy_from_slice(to);
        i += at + to.len();
        found += 1;
    }
    assert!(found > 0, "{rogue} has no mode bytes");
    let stem = Path::new(rogue).file_stem().unwrap().to_string_lossy().into_owned();
    let path = dir.join(format!("{stem}-trapping.wasm"));
    fs::write(&path, bytes).unwrap();
    let key = snow_runtime::artefact::SigningKey::from_pem_file(Path::new(DEV_KEY)).unwrap();
    snow_runtime::artefact::sign_file(&path, &key, None).unwrap();
    path
}

/// A name no other test uses (topics, connectors).
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("{prefix}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst))
}

/// Writes a properties connector file.
pub fn connector_file(dir: &Path, name: &str, entries: &BTreeMap<String, String>) -> PathBuf {
    let path = dir.join(format!("{name}.properties"));
    let text: String = entries.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    fs::write(&path, text).unwrap();
    path
}

/// Writes a JSON connector file (`{"name":..,"config":{..}}`): values exactly as given.
pub fn connector_json(dir: &Path, name: &str, entries: &BTreeMap<String, String>) -> PathBuf {
    let path = dir.join(format!("{name}.json"));
    fs::write(&path, serde_json::json!({ "name": name, "config": entries }).to_string()).unwrap();
    path
}

/// The fake ServiceNow with one Basic user, its clock frozen at `frozen_at` (Unix seconds) when
/// given: what most tests start from (their own user and password, so a leaked secret names its test).
pub fn fake_with_user(user: &str, password: &str, frozen_at: Option<i64>) -> fake_snow::FakeSnow {
    fake_snow::FakeSnow::start(fake_snow::FakeOptions { users: vec![(user.into(), password.into())], frozen_at, ..Default::default() })
        .unwrap()
}

/// A source connector on the fake at `fake_url` reading `tables` into `topic`, through the shared
/// broker, polling every 200 ms with a 2 s safety lag; `extra` (credentials, overrides) last.
pub fn source_entries(fake_url: &str, name: &str, topic: &str, tables: &[&str], extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut c = entries(&[
        ("name", name),
        ("component.path", signed(guest_artifacts::GUEST_SOURCE)),
        TRUSTED_KEYS,
        ("kafka.bootstrap.servers", kafka_harness::shared().bootstrap()),
        ("offset.storage.file.filename", "offsets.json"),
        ("snow.instance.url", fake_url),
        ("snow.tables", &tables.join(",")),
        ("snow.poll.interval.ms", "200"),
        ("snow.safety.lag.seconds", "2"),
    ]);
    for t in tables {
        c.insert(format!("snow.table.{t}.topic"), topic.to_string());
    }
    for (k, v) in extra {
        c.insert(k.to_string(), v.to_string());
    }
    c
}

/// A sink connector on the fake at `fake_url` consuming `topic` into `table`, through the shared
/// broker; `extra` (credentials, policies, overrides) last.
pub fn sink_entries(fake_url: &str, name: &str, topic: &str, table: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut c = entries(&[
        ("name", name),
        ("component.path", signed(guest_artifacts::GUEST_SINK)),
        TRUSTED_KEYS,
        ("kafka.bootstrap.servers", kafka_harness::shared().bootstrap()),
        ("topics", topic),
        ("snow.instance.url", fake_url),
        ("snow.sink.table", table),
    ]);
    c.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    c
}

/// `count` updates of the rows `ids`: record `i` patches `ids[(i * stride) % ids.len()]` with
/// `u_seq` = `i` (and a `short_description`), so a row's updates are spread over the whole run.
pub fn keyed_updates(ids: &[String], count: usize, stride: usize) -> Vec<(Option<String>, String)> {
    (0..count).map(|i| (Some(ids[(i * stride) % ids.len()].clone()), format!(r#"{{"u_seq":"{i}","short_description":"v{i}"}}"#))).collect()
}

/// Asserts that every row a record of `records` patches (keyed by its sys_id, `u_seq` in its
/// value) holds the `u_seq` of the last such record: no record of a row was lost or overtaken.
pub fn assert_last_updates(fake: &fake_snow::FakeSnow, table: &str, records: &[(Option<String>, String)]) {
    let mut last: std::collections::HashMap<&str, String> = std::collections::HashMap::new();
    for (key, value) in records {
        let seq = serde_json::from_str::<serde_json::Value>(value).ok().and_then(|v| v["u_seq"].as_str().map(str::to_string));
        if let (Some(key), Some(seq)) = (key, seq) {
            last.insert(key, seq);
        }
    }
    let rows = fake.rows(table);
    for (id, seq) in &last {
        let row = rows.iter().find(|r| r.get("sys_id").and_then(|v| v.as_str()) == Some(id)).unwrap_or_else(|| panic!("row {id} is gone"));
        assert_eq!(row.get("u_seq").and_then(|v| v.as_str()), Some(seq.as_str()), "row {id} holds its last update");
    }
}

/// Builds entries from pairs.
pub fn entries(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The runner's usual log filter.
pub const DEFAULT_LOG: &str = "debug,rdkafka=info,wasmtime=info,cranelift=info,hyper=info";

/// A running `snow-connect run` process; killed on drop.
pub struct Runner {
    child: Child,
    log: PathBuf,
}

impl Runner {
    /// Starts `snow-connect run <files>` with its log in `dir/<label>.log`.
    pub fn start(dir: &Path, label: &str, files: &[&Path]) -> Self {
        Self::spawn(dir, label, files, DEFAULT_LOG, &[])
    }

    /// Like [`Runner::start`] with the log filter `filter` (`SNOW_LOG`) and extra environment
    /// variables for the runner (what `${env:NAME}` providers read).
    pub fn spawn(dir: &Path, label: &str, files: &[&Path], filter: &str, env: &[(&str, &str)]) -> Self {
        Self::spawn_with_args(dir, label, files, filter, env, &[])
    }

    /// Like [`Runner::start`] with extra command-line arguments after the files.
    pub fn start_with_args(dir: &Path, label: &str, files: &[&Path], args: &[&str]) -> Self {
        Self::spawn_with_args(dir, label, files, DEFAULT_LOG, &[], args)
    }

    /// Like [`Runner::spawn`] with extra command-line arguments after the files.
    pub fn spawn_with_args(dir: &Path, label: &str, files: &[&Path], filter: &str, env: &[(&str, &str)], args: &[&str]) -> Self {
        let mut all: Vec<&std::ffi::OsStr> = vec![std::ffi::OsStr::new("run")];
        all.extend(files.iter().map(|f| f.as_os_str()));
        all.extend(args.iter().map(|a| std::ffi::OsStr::new(*a)));
        Self::command(dir, label, &all, filter, env)
    }

    /// `snow-connect <args>` with its log in `dir/<label>.log`.
    pub fn command(dir: &Path, label: &str, args: &[&std::ffi::OsStr], filter: &str, env: &[(&str, &str)]) -> Self {
        let log = dir.join(format!("{label}.log"));
        let out = fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_snow-connect"))
            .args(args)
            .env("SNOW_LOG", filter)
            .envs(env.iter().copied())
            .current_dir(dir)
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .stdin(Stdio::null())
            .spawn()
            .expect("starting snow-connect");
        Self { child, log }
    }

    /// The log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Asks the process to re-read its connector files (SIGHUP).
    pub fn hangup(&self) {
        let status = Command::new("kill").arg("-HUP").arg(self.child.id().to_string()).status().unwrap();
        assert!(status.success(), "kill -HUP");
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the process at once (SIGKILL): nothing is flushed, nothing is committed on the way out.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Asks the process to stop (SIGTERM) and waits for it; returns its log.
    pub fn stop(mut self) -> String {
        // SAFETY-free: the standard library has no SIGTERM, so use the kill command.
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return self.log();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        panic!("snow-connect did not stop within 60 s of SIGTERM; log:\n{}", tail(&self.log(), 60));
    }

    /// Waits until the log contains `needle`, or fails with the log's tail.
    pub fn wait_for_log(&mut self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let log = self.log();
            if log.contains(needle) {
                return log;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                // Read once more: it may have logged the needle just before it exited.
                let log = self.log();
                if log.contains(needle) {
                    return log;
                }
                panic!("snow-connect exited ({status}) before logging {needle:?}; log:\n{}", tail(&log, 60));
            }
            assert!(Instant::now() < deadline, "no {needle:?} in the log after {timeout:?}; log:\n{}", tail(&log, 60));
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The duplicates one restart may cause, as docs/delivery.md states them: the row versions whose
/// timestamps (`stamps`, as the fake serves them) lie in the `overlap_seconds` before the stored
/// position `stored_ts` the restart resumes from, plus the polls produced and not yet acknowledged
/// when the run before it stopped ([`snow_runtime::source::pipeline::MAX_UNACKNOWLEDGED`] of `batch`).
pub fn restart_duplicate_bound(stamps: &[String], stored_ts: &str, overlap_seconds: i64, batch: usize) -> usize {
    let from = snow_core::time::Timestamp::parse(stored_ts).unwrap().plus_seconds(-overlap_seconds).to_string();
    stamps.iter().filter(|s| s.as_str() >= from.as_str() && s.as_str() <= stored_ts).count()
        + snow_runtime::source::pipeline::MAX_UNACKNOWLEDGED * batch
}

/// The single stored position of `connector` in the offset file `offsets.json` of `dir`, once
/// there is one.
pub fn stored_position(dir: &Path, connector: &str) -> Option<serde_json::Value> {
    let text = fs::read_to_string(dir.join("offsets.json")).ok()?;
    let file: serde_json::Value = serde_json::from_str(&text).ok()?;
    let (_, position) = file["offsets"][connector].as_object()?.iter().next()?;
    serde_json::from_str(position.as_str()?).ok()
}

/// The address `--status-listen 127.0.0.1:0` bound, from the runner's log.
pub fn status_address(runner: &mut Runner) -> String {
    let log = runner.wait_for_log("status endpoint on http://", Duration::from_secs(60));
    log.split("status endpoint on http://").nth(1).and_then(|r| r.split('/').next()).unwrap().to_string()
}

/// The status of `unit` in `/status` at `addr`, if it is listed.
pub fn unit_status(addr: &str, unit: &str) -> Option<serde_json::Value> {
    units(addr).into_iter().find(|u| u["unit"] == unit)
}

/// The status of `unit` of `connector` in `/status` at `addr`, if it is listed.
pub fn unit_status_of(addr: &str, connector: &str, unit: &str) -> Option<serde_json::Value> {
    units(addr).into_iter().find(|u| u["connector"] == connector && u["unit"] == unit)
}

/// Every unit in `/status` at `addr`.
fn units(addr: &str) -> Vec<serde_json::Value> {
    let (code, body) = http_get(addr, "/status");
    assert_eq!(code, 200, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    status["units"].as_array().cloned().unwrap_or_default()
}

/// The value of the metric line `series` (name and labels as rendered) in `/metrics` at `addr`.
pub fn metric(addr: &str, series: &str) -> Option<f64> {
    let body = http_get(addr, "/metrics").1;
    body.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// How many sweeps over `table` the fake has seen: each begins with the drain of its overlap start,
/// a drain without a `sys_id>` term.
pub fn sweep_starts(fake: &fake_snow::FakeSnow, table: &str) -> usize {
    let path = format!("/api/now/table/{table}");
    fake.journal()
        .entries
        .iter()
        .filter(|e| {
            e.path == path
                && e.query.as_deref().is_some_and(|q| q.starts_with("sys_updated_on=") && !q.contains("sys_id>") && !q.contains("DESC"))
        })
        .count()
}

/// `GET path` from an HTTP/1.1 server at `addr`: the status code and the body.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, body.to_string())
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A test's size or duration: `default` under `make test`, what `var` says otherwise (`make soak`
/// sets the full sizes the docs quote).
pub fn sized(var: &str, default: u64) -> u64 {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Waits until `check` returns `Some`, polling an external effect (another process's writes).
pub fn wait_until<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every final row version `(sys_id, sys_mod_count)` the fake's `tables` hold now.
pub fn final_versions(fake: &fake_snow::FakeSnow, tables: &[&str]) -> BTreeSet<(String, String)> {
    tables.iter().flat_map(|t| fake.fields(t, ["sys_id", "sys_mod_count"]).into_iter().map(|[id, count]| (id, count))).collect()
}

/// Lets a writer thread (switched by `writing`, counting its `rounds`) write `more` rounds more,
/// then stops it and waits for it: the final run read while rows changed under it.
pub fn stop_writer_after(
    writing: &std::sync::atomic::AtomicBool,
    rounds: &std::sync::atomic::AtomicUsize,
    writer: std::thread::JoinHandle<()>,
    more: usize,
) {
    let written = rounds.load(Ordering::SeqCst);
    wait_until("more writes during the final run", Duration::from_secs(60), || {
        (rounds.load(Ordering::SeqCst) >= written + more).then_some(())
    });
    writing.store(false, Ordering::SeqCst);
    writer.join().unwrap();
}

/// A check for [`kafka::read_until`] that holds once every version in `wanted` was read: the
/// versions not read yet are taken off as records arrive, each record looked at once.
pub fn has_every(wanted: &BTreeSet<(String, String)>) -> impl FnMut(&[kafka::Read]) -> bool + use<> {
    let (mut missing, mut looked_at) = (wanted.clone(), 0);
    move |records| {
        for record in &records[looked_at..] {
            missing.remove(&record.version());
        }
        looked_at = records.len();
        missing.is_empty()
    }
}

/// Reads `topic` until it holds every final version of `table` on `fake` (within `timeout`),
/// stops `runner` and asserts every one arrived: the final versions, the records and the log.
pub fn read_every_final_version(
    fake: &fake_snow::FakeSnow,
    table: &str,
    topic: &str,
    timeout: Duration,
    runner: Runner,
) -> (BTreeSet<(String, String)>, Vec<kafka::Read>, String) {
    let finals = final_versions(fake, &[table]);
    let records = kafka::read_until(kafka_harness::shared().bootstrap(), topic, timeout, has_every(&finals));
    let log = runner.stop();
    assert!(has_every(&finals)(&records), "every final row version is in Kafka; log:\n{}", tail(&log, 20));
    (finals, records, log)
}

/// A random number generator for kill points (xorshift), seeded from the clock and the process
/// id; the seed is printed under `label` so a failing run can be told apart.
pub fn kill_points(label: &str) -> impl FnMut() -> u64 {
    let seed = now_secs() as u64 ^ u64::from(std::process::id());
    eprintln!("{label} seed {seed}");
    let mut rng = seed;
    move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    }
}

/// Seconds since the epoch now.
pub fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}
