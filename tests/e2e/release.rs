//! The release as its users use it (issue 36, ADR 0041): the artefacts `make release` wrote
//! (`SNOW_RELEASE_DIR`), each used the way its user would. The static binary alone in an empty
//! root moves rows from the fake into Kafka; the Connect archive unzipped into a fresh Connect
//! worker's plugin.path (nothing else copied) runs a source and a sink; the image unpacked by
//! `umoci` runs under `runc` as its non-root user and moves rows; the aarch64 binary, static too,
//! moves rows under Debian's qemu-user (its component compiled to ARM code by the emulated host);
//! the image and the components come out with the same digests when built again (the components
//! from a copy of the tree in another directory); the provenance verifies with the release key and
//! names every artefact.
//! Ignored in `make test` (they need `make release`, about ten minutes of building): `make
//! release-test` runs them, and CI runs that.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use support::connect::{ConnectWorker, connect_config, executors};
use support::kafka::read_until;
use support::{now_secs, tail, unique, wait_until, work_dir};

const USER: &str = "release-user";
const PASSWORD: &str = "Release-Secret-Pw-36";
const PASSWORD_VARIABLE: &str = "SNOW_E2E_RELEASE_PASSWORD";

/// What `make release` wrote.
fn release() -> PathBuf {
    let dir =
        std::env::var_os("SNOW_RELEASE_DIR").map(PathBuf::from).expect("SNOW_RELEASE_DIR: the release tests run by `make release-test`");
    assert!(dir.join("provenance.json").is_file(), "{} holds no release: run `make release`", dir.display());
    dir
}

fn provenance() -> Value {
    serde_json::from_slice(&fs::read(release().join("provenance.json")).unwrap()).unwrap()
}

fn version() -> String {
    provenance()["version"].as_str().unwrap().to_string()
}

fn static_binary() -> PathBuf {
    release().join(format!("snow-connect-{}-x86_64-linux-musl", version()))
}

fn aarch64_binary() -> PathBuf {
    release().join(format!("snow-connect-{}-aarch64-linux-musl", version()))
}

fn sha256(path: &Path) -> String {
    hex(&Sha256::digest(fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn run(program: &str, args: &[&str], dir: &Path) -> String {
    let out = Command::new(program).args(args).current_dir(dir).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn is_root() -> bool {
    run("id", &["-u"], Path::new("/")).trim() == "0"
}

/// A process killed on drop, its output in a file.
struct Spawned {
    child: Child,
    log: PathBuf,
}

impl Spawned {
    fn start(command: &mut Command, log: PathBuf) -> Self {
        let out = fs::File::create(&log).unwrap();
        let child = command.stdout(out.try_clone().unwrap()).stderr(out).stdin(Stdio::null()).spawn().expect("starting");
        Self { child, log }
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `binary`'s ELF headers (`readelf -h -l -d`), after checking it is static: no program
/// interpreter, no shared library needed.
fn assert_static(binary: &Path) -> String {
    let headers = run("readelf", &["-h", "-l", "-d", binary.to_str().unwrap()], Path::new("/"));
    assert!(!headers.contains("program interpreter") && !headers.contains("(NEEDED)"), "static: {headers}");
    headers
}

/// Runs `command` (its output in `dir`/run.log) until `topic` holds a record of every one of `ids`,
/// waiting up to `wait`, and checks it holds exactly those keys; returns the log. `what` names the
/// run in a failure.
fn every_row(command: &mut Command, dir: &Path, topic: &str, ids: &[String], wait: Duration, what: &str) -> String {
    let runner = Spawned::start(command, dir.join("run.log"));
    let records = read_until(kafka_harness::shared().bootstrap(), topic, wait, |r| r.len() >= ids.len());
    let log = runner.log();
    drop(runner);
    assert_eq!(records.len(), ids.len(), "every row from {what}; log:\n{}", tail(&log, 30));
    let keys: BTreeSet<&str> = records.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ids.iter().map(String::as_str).collect::<BTreeSet<_>>());
    log
}

/// A connector file's text reading the fake's incidents into `topic`, with the component, key and
/// offsets file at `component`, `key` and `state` (paths as the process sees them).
fn source_in(fake: &fake_snow::FakeSnow, topic: &str, component: &str, key: &str, state: &str) -> String {
    let name = unique("release-src");
    let entries = [
        ("name", name.as_str()),
        ("component.path", component),
        ("component.trusted.keys", key),
        ("kafka.bootstrap.servers", kafka_harness::shared().bootstrap()),
        ("offset.storage.file.filename", state),
        ("snow.instance.url", &fake.url()),
        ("snow.auth.username", USER),
        ("snow.auth.password", PASSWORD),
        ("snow.tables", "incident"),
        ("snow.table.incident.topic", topic),
        ("snow.poll.interval.ms", "200"),
        ("snow.safety.lag.seconds", "2"),
    ];
    entries.iter().map(|(k, v)| format!("{k}={v}\n")).collect()
}

#[test]
#[ignore = "needs `make release`: run by `make release-test`"]
fn the_static_binary_alone_in_an_empty_root_moves_rows_into_kafka() {
    let binary = static_binary();
    // Not dynamic: ldd says so, and the file has no program interpreter and needs no library.
    let ldd = Command::new("ldd").arg(&binary).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&ldd.stdout), String::from_utf8_lossy(&ldd.stderr));
    assert!(said.contains("not a dynamic executable") || said.contains("statically linked"), "ldd: {said}");
    assert_static(&binary);

    // The root: the binary, one component with its bundle, the key, a connector file, an empty
    // directory for state and one for the component cache. No libc, no /etc, no /dev, no /proc.
    let dir = work_dir("release-static");
    let root = dir.join("root");
    for d in ["components", "keys", "state", "cache"] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    fs::copy(&binary, root.join("snow-connect")).unwrap();
    let components = release().join("components");
    fs::copy(components.join("guest_source.wasm"), root.join("components/guest_source.wasm")).unwrap();
    fs::copy(components.join("guest_source.wasm.sigstore.json"), root.join("components/guest_source.wasm.sigstore.json")).unwrap();
    let key = release_key();
    fs::copy(&key, root.join("keys/release.pub")).unwrap();
    let now = now_secs();
    let fake = support::fake_with_user(USER, PASSWORD, Some(now));
    let ids = fake.shared().seed("incident", 2000, now - 3600, 3000);
    let topic = unique("release-static");
    fs::write(
        root.join("connector.properties"),
        source_in(&fake, &topic, "/components/guest_source.wasm", "/keys/release.pub", "/state/offsets.json"),
    )
    .unwrap();
    let files = tree(&root);
    assert_eq!(
        files,
        [
            "cache/",
            "components/",
            "components/guest_source.wasm",
            "components/guest_source.wasm.sigstore.json",
            "connector.properties",
            "keys/",
            "keys/release.pub",
            "snow-connect",
            "state/"
        ]
        .map(String::from)
        .into_iter()
        .collect::<BTreeSet<_>>(),
        "nothing else in the root"
    );

    // chroot as root; otherwise in a user namespace that maps this user to root.
    let mut command = if is_root() {
        Command::new("chroot")
    } else {
        let mut c = Command::new("unshare");
        c.args(["--user", "--map-root-user", "chroot"]);
        c
    };
    command
        .arg(&root)
        .args(["/snow-connect", "run", "/connector.properties", "--component-cache", "/cache"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default()) // to find chroot; nothing in the root has a PATH to use
        .env("SNOW_LOG", "info");
    let log = every_row(&mut command, &dir, &topic, &ids, Duration::from_secs(180), "the empty root");
    assert!(log.contains("component signature verified"), "the component's signature was checked in the root: {}", tail(&log, 30));
    assert!(root.join("state/offsets.json").is_file(), "its position stored inside the root");
    assert!(fs::read_dir(root.join("cache")).unwrap().next().is_some(), "the compiled component cached inside the root");
    assert!(!log.contains(PASSWORD), "no password in the log");
}

#[test]
#[ignore = "needs `make release`: run by `make release-test`"]
fn the_aarch64_binary_is_static_and_moves_rows_under_qemu_user() {
    let binary = aarch64_binary();
    let headers = assert_static(&binary);
    assert!(headers.contains("AArch64"), "an ARM 64-bit executable: {}", tail(&headers, 20));

    // Started the way an ARM machine would, but through qemu-user on this x86_64 one.
    let out = Command::new("qemu-aarch64-static").arg(&binary).arg("--version").output().expect("qemu-aarch64-static (qemu-user-static)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("aarch64"), "--version under qemu names the platform: {text}");
    assert!(text.contains(&provenance()["source"]["commit"].as_str().unwrap()[..12]), "--version names the commit: {text}");

    // And it works: the release's component, verified and compiled to ARM code inside the
    // emulated process, moves rows from the fake into Kafka.
    let dir = work_dir("release-aarch64");
    let components = release().join("components");
    let now = now_secs();
    let fake = support::fake_with_user(USER, PASSWORD, Some(now));
    let ids = fake.shared().seed("incident", 300, now - 3600, 3000);
    let topic = unique("release-aarch64");
    let connector = dir.join("connector.properties");
    fs::write(
        &connector,
        source_in(
            &fake,
            &topic,
            components.join("guest_source.wasm").to_str().unwrap(),
            release_key().to_str().unwrap(),
            dir.join("offsets.json").to_str().unwrap(),
        ),
    )
    .unwrap();
    let mut command = Command::new("qemu-aarch64-static");
    command.arg(&binary).arg("run").arg(&connector).arg("--component-cache").arg(dir.join("cache")).env("SNOW_LOG", "info");
    let log = every_row(&mut command, &dir, &topic, &ids, Duration::from_secs(300), "the aarch64 binary");
    assert!(log.contains("component signature verified"), "the signature was checked: {}", tail(&log, 30));
}

/// Every path under `root`, directories with a trailing `/`.
fn tree(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            if path.is_dir() {
                out.insert(format!("{rel}/"));
                stack.push(path);
            } else {
                out.insert(rel);
            }
        }
    }
    out
}

/// The public key the release was signed with (in the archive's keys/).
fn release_key() -> PathBuf {
    let zip = archive();
    let listing = run("unzip", &["-Z1", zip.to_str().unwrap()], Path::new("/"));
    let key = listing.lines().find(|l| l.contains("/keys/") && l.ends_with(".pub")).expect("a key in the archive's keys/");
    let dir = work_dir("release-key");
    run("unzip", &["-q", "-o", zip.to_str().unwrap(), key, "-d", dir.to_str().unwrap()], Path::new("/"));
    let path = dir.join(key);
    let expected = provenance()["signing_key"]["sha256"].as_str().unwrap().to_string();
    assert_eq!(sha256(&path), expected, "the archive trusts the key the provenance names");
    path
}

fn archive() -> PathBuf {
    release().join(format!("snow-connect-servicenow-{}.zip", version()))
}

#[test]
#[ignore = "needs `make release`: run by `make release-test`"]
fn the_connect_archive_unzipped_into_a_fresh_workers_plugin_path_runs_a_source_and_a_sink() {
    let dir = work_dir("release-connect");
    let plugins = dir.join("plugins");
    fs::create_dir_all(&plugins).unwrap();
    // As a user installs it: unzip into plugin.path. Nothing else is copied.
    run("unzip", &["-q", archive().to_str().unwrap(), "-d", plugins.to_str().unwrap()], &dir);
    let home = plugins.join(format!("snow-connect-servicenow-{}", version()));
    let manifest: Value = serde_json::from_slice(&fs::read(home.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["version"], json!(version()));
    assert_eq!(manifest["component_types"], json!(["source", "sink"]));
    assert_eq!(
        manifest["connector_classes"],
        json!(["io.snowconnect.ServiceNowSourceConnector", "io.snowconnect.ServiceNowSinkConnector"])
    );
    assert!(home.join("lib/snow-connect-plugin.jar").is_file() && home.join("doc/README.md").is_file() && home.join("etc").is_dir());
    let executor = home.join(format!("bin/linux-{}/snow-connect", std::env::consts::ARCH));
    let meta = fs::symlink_metadata(&executor).unwrap();
    assert!(meta.file_type().is_file(), "the executor is a real file (Strimzi drops symlinks)");
    assert_eq!(meta.permissions().mode() & 0o777, 0o755, "unzipped executable");
    assert_eq!(sha256(&executor), sha256(&static_binary()), "the executor is the release's static binary");

    let now = now_secs();
    let fake = support::fake_with_user(USER, PASSWORD, Some(now));
    let ids = fake.shared().seed("incident", 600, now - 3600, 3000);
    let group = unique("release-connect");
    let worker = ConnectWorker::start(&dir, "connect", &group, &plugins, &[(PASSWORD_VARIABLE, PASSWORD)]);
    let bootstrap = kafka_harness::shared().bootstrap();

    // The source, with the archive's own component (no component.path) and operator file.
    let (source, topic) = (unique("release-src"), unique("incident"));
    let mut config = connect_config(
        &support::source_entries(&fake.url(), &source, &topic, &["incident"], &[("snow.auth.username", USER), ("tasks.max", "1")]),
        "io.snowconnect.ServiceNowSourceConnector",
    );
    config.insert("snow.auth.password".into(), json!(format!("${{env:{PASSWORD_VARIABLE}}}")));
    let created = worker.rest("POST", "/connectors", Some(&json!({ "name": source, "config": config })));
    assert_eq!(created.status, 201, "{}", created.text);
    let records = read_until(bootstrap, &topic, Duration::from_secs(240), |r| {
        r.iter().map(|x| x.key.as_str()).collect::<BTreeSet<_>>().len() >= ids.len()
    });
    let keys: BTreeSet<&str> = records.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ids.iter().map(String::as_str).collect::<BTreeSet<_>>(), "every row through the installed archive");
    let running = executors(&plugins);
    assert!(!running.is_empty(), "the archive's executor runs the task");
    for pid in &running {
        let exe = fs::read_link(format!("/proc/{pid}/exe")).unwrap();
        assert_eq!(exe, executor.canonicalize().unwrap(), "the task's process is the archive's executor");
    }

    // The sink, writing updates back.
    let (sink, updates) = (unique("release-sink"), unique("updates"));
    support::kafka::create_topic_blocking(bootstrap, &updates, 2);
    let records = support::keyed_updates(&ids, 120, 7);
    support::kafka::produce_blocking(bootstrap, &updates, &records);
    let mut config = connect_config(
        &support::sink_entries(&fake.url(), &sink, &updates, "incident", &[("snow.auth.username", USER), ("tasks.max", "1")]),
        "io.snowconnect.ServiceNowSinkConnector",
    );
    config.insert("snow.auth.password".into(), json!(format!("${{env:{PASSWORD_VARIABLE}}}")));
    let created = worker.rest("POST", "/connectors", Some(&json!({ "name": sink, "config": config })));
    assert_eq!(created.status, 201, "{}", created.text);
    let patches = || fake.journal().entries.iter().filter(|e| e.method == "PATCH" && e.status == 200).count();
    wait_until("every update written", Duration::from_secs(180), || (patches() >= records.len()).then_some(()));
    support::assert_last_updates(&fake, "incident", &records);
    assert!(!worker.log().contains(PASSWORD), "no password in Connect's log");
}

#[test]
#[ignore = "needs `make release`: run by `make release-test`"]
fn the_image_unpacked_by_umoci_runs_under_runc_as_its_user_and_is_reproducible() {
    assert!(is_root(), "runc runs containers as root here (CI is root)");
    let release = release();
    let layout = release.join(format!("snow-connect-{}-image", version()));
    let dir = work_dir("release-image");

    // Reproducible: the same inputs through the same step give the same digests.
    let again = dir.join("again");
    let epoch = provenance()["source_date_epoch"].as_i64().unwrap().to_string();
    let key = release_key();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("python3")
        .arg(repo.join("release/image.py"))
        .args(["--binary", static_binary().to_str().unwrap(), "--components", release.join("components").to_str().unwrap()])
        .args(["--trusted-key", key.to_str().unwrap(), "--version", &version()])
        .args(["--commit", provenance()["source"]["commit"].as_str().unwrap(), "--out", again.to_str().unwrap()])
        .env("SOURCE_DATE_EPOCH", &epoch)
        .output()
        .unwrap();
    assert!(out.status.success(), "image.py: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(fs::read(again.join("index.json")).unwrap(), fs::read(layout.join("index.json")).unwrap(), "the same image digest");
    let tar = |dir: &Path| PathBuf::from(format!("{}.tar", dir.display()));
    assert_eq!(sha256(&tar(&again)), sha256(&tar(&layout)), "the same archive");

    // Unpacked by umoci, the standard OCI tool, into a runtime bundle; run by runc.
    let bundle = dir.join("bundle");
    run("umoci", &["unpack", "--image", &format!("{}:{}", layout.display(), version()), bundle.to_str().unwrap()], &dir);
    let config_path = bundle.join("config.json");
    let mut config: Value = serde_json::from_slice(&fs::read(&config_path).unwrap()).unwrap();
    assert_eq!(config["process"]["user"]["uid"], json!(65532), "the image runs as its non-root user");
    assert_eq!(
        config["process"]["args"],
        json!(["/usr/local/bin/snow-connect", "worker", "--config", "/etc/snow-connect/worker.properties"])
    );
    let rootfs = bundle.join("rootfs");
    assert!(rootfs.join("etc/snow-connect/worker.properties").is_file(), "the default operator file");

    // The user's command: a connector file of theirs (mounted at /config; here copied in), the
    // image's components and key. The host's network, so the fake and the broker are reachable.
    let now = now_secs();
    let fake = support::fake_with_user(USER, PASSWORD, Some(now));
    let ids = fake.shared().seed("incident", 1000, now - 3600, 3000);
    let topic = unique("release-image");
    let key_name = key.file_name().unwrap().to_string_lossy().into_owned();
    fs::create_dir_all(rootfs.join("config")).unwrap();
    fs::write(
        rootfs.join("config/connector.properties"),
        source_in(
            &fake,
            &topic,
            "/usr/share/snow-connect/components/guest_source.wasm",
            &format!("/etc/snow-connect/keys/{key_name}"),
            "/tmp/offsets.json",
        ),
    )
    .unwrap();
    config["process"]["args"] = json!(["/usr/local/bin/snow-connect", "run", "/config/connector.properties"]);
    config["process"]["terminal"] = json!(false);
    let namespaces = config["linux"]["namespaces"].as_array_mut().unwrap();
    namespaces.retain(|n| n["type"] != "network");
    fs::write(&config_path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();

    let id = unique("snow-release");
    let container = Spawned::start(Command::new("runc").args(["run", "--bundle", bundle.to_str().unwrap(), &id]), dir.join("runc.log"));
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(180), |r| r.len() >= ids.len());
    let state = Command::new("runc").args(["state", &id]).output().unwrap();
    let log = container.log();
    let _ = Command::new("runc").args(["kill", &id, "KILL"]).status();
    drop(container);
    let _ = Command::new("runc").args(["delete", "--force", &id]).status();
    assert_eq!(records.len(), ids.len(), "every row from the container; log:\n{}", tail(&log, 30));
    let state: Value = serde_json::from_slice(&state.stdout).unwrap_or(Value::Null);
    assert_eq!(state["status"], json!("running"), "runc ran it: {state}");
    assert!(log.contains("component signature verified"), "the image's component verified with the image's key: {}", tail(&log, 20));
}

#[test]
#[ignore = "needs `make release`: run by `make release-test`"]
fn the_components_built_again_in_another_directory_have_the_same_digests() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();
    let copy = work_dir("release-reproducible").join("snow-connect-elsewhere");
    fs::create_dir_all(&copy).unwrap();
    // The tracked files as they are (a clean build of what make release built), elsewhere.
    let files = run("git", &["ls-files", "-z"], &repo);
    let list = copy.with_extension("files");
    fs::write(&list, files).unwrap();
    let tar = Command::new("sh")
        .arg("-c")
        .arg(format!("tar -C '{}' --null -T '{}' -cf - | tar -C '{}' -xf -", repo.display(), list.display(), copy.display()))
        .status()
        .unwrap();
    assert!(tar.success(), "copying the tree");
    let out = copy.join("out");
    let built = Command::new("bash")
        .args(["release/components.sh", copy.join("target/guests").to_str().unwrap(), out.to_str().unwrap()])
        .current_dir(&copy)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let mut digests = BTreeMap::new();
    for w in ["guest_source.wasm", "guest_sink.wasm"] {
        let (here, there) = (sha256(&release().join("components").join(w)), sha256(&out.join(w)));
        assert_eq!(here, there, "{w}: the release's and a second clean build's SHA-256");
        digests.insert(w, here);
    }
    // And the provenance names them.
    let provenance = provenance();
    for (w, digest) in digests {
        let named = provenance["artefacts"].as_array().unwrap().iter().find(|a| a["name"] == json!(format!("components/{w}"))).cloned();
        assert_eq!(named.map(|a| a["sha256"].clone()), Some(json!(digest)), "{w} in the provenance");
    }
}

#[test]
#[ignore = "needs `make release`: run by `make release-test`"]
fn the_provenance_is_signed_and_every_checksum_holds() {
    let release = release();
    let key = release_key();
    let (ok, out, err) = support::snow_connect(
        &release,
        &["artefact", "verify", "provenance.json", "--trusted-keys", key.to_str().unwrap(), "--bundle", "provenance.json.sigstore.json"],
    );
    assert!(ok, "the provenance verifies with the release key: {out}{err}");
    let sums = run("sha256sum", &["--check", "--strict", "SHA256SUMS"], &release);
    let sums512 = run("sha512sum", &["--check", "--strict", "SHA512SUMS"], &release);
    for expected in [
        "snow-connect-servicenow-",
        "components/guest_source.wasm",
        "sbom/snow-connect.cdx.json",
        "sbom/snow-connect-aarch64.cdx.json",
        "-image.tar",
        "-x86_64-linux-musl",
        "-aarch64-linux-musl",
    ] {
        assert!(sums.contains(expected) && sums512.contains(expected), "{expected} is checksummed:\n{sums}");
    }
    // The release notes: the decisions since the last tag (here none: all of them) and the digests.
    assert!(sums.contains("RELEASE-NOTES.md"), "the notes are checksummed:\n{sums}");
    let notes = fs::read_to_string(release.join("RELEASE-NOTES.md")).unwrap();
    for adr in ["docs/adr/0041-", "docs/adr/0042-"] {
        assert!(notes.contains(adr), "the notes name {adr}:\n{notes}");
    }
    for line in fs::read_to_string(release.join("SHA256SUMS")).unwrap().lines().filter(|l| !l.contains("RELEASE-NOTES.md")) {
        let (digest, name) = line.split_once("  ").unwrap();
        assert!(notes.contains(&format!("`{name}` `{digest}`")), "the notes give {name}'s SHA-256");
    }
    let provenance = provenance();
    assert_eq!(provenance["source"]["commit"].as_str().map(str::len), Some(40));
    assert!(provenance["toolchain"]["rustc"].as_str().unwrap().starts_with("rustc 1."));
    for sbom in
        ["sbom/snow-connect.cdx.json", "sbom/snow-connect-aarch64.cdx.json", "sbom/guest_source.cdx.json", "sbom/guest_sink.cdx.json"]
    {
        let bom: Value = serde_json::from_slice(&fs::read(release.join(sbom)).unwrap()).unwrap();
        assert_eq!(bom["bomFormat"], json!("CycloneDX"), "{sbom}");
        assert!(bom["components"].as_array().is_some_and(|c| c.len() > 10), "{sbom} lists the dependencies");
    }
    let bom: Value = serde_json::from_slice(&fs::read(release.join("sbom/snow-connect.cdx.json")).unwrap()).unwrap();
    let names: BTreeSet<&str> = bom["components"].as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
    for dependency in ["wasmtime", "rdkafka-sys", "openssl-src", "curl-sys"] {
        assert!(names.contains(dependency), "the binary's SBOM names {dependency}");
    }
    // The version names the commit.
    let out = Command::new(static_binary()).arg("--version").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&provenance["source"]["commit"].as_str().unwrap()[..12]), "--version names the commit: {text}");
}
