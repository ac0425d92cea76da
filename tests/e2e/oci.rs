//! Components in an OCI registry end to end, through the real binary and a real registry
//! (go-containerregistry's, with token authentication): `artefact push` writes the Wasm OCI
//! artifact with its Sigstore bundle as a referrer; a connector names it by
//! `component.ref=oci://…@sha256:…` or by a tag (resolved and pinned), and it is verified exactly
//! as a file beside its bundle is; a fleet pins a tag when the configuration is written and lets
//! connectors name only the registries its operator lists. `wkg` (the Wasm package tool) reads what
//! we push and we run what it pushes (ignored here: it builds wkg; `make release-test` runs it).

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use support::kafka::read_until;
use support::oci_registry::{Registry, auth_file, run_wkg};
use support::{DEFAULT_LOG, Runner, connector_file, now_secs, snow_connect, unique, work_dir};

const USER: &str = "snow-oci";
const PASSWORD: &str = "oci-Instance-Pw-41";
const REGISTRY_USER: &str = "robot";
const REGISTRY_PASSWORD: &str = "registry-Secret-93";

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// `artefact push <component> <target> --plain-http [extra]`: the reference it printed.
fn push(dir: &Path, component: &str, target: &str, extra: &[&str]) -> String {
    let mut args = vec!["artefact", "push", component, target, "--plain-http"];
    args.extend_from_slice(extra);
    let (ok, out, err) = snow_connect(dir, &args);
    assert!(ok, "push {component} to {target}: {err}");
    out.trim().strip_prefix("component.ref=").unwrap_or_else(|| panic!("push prints the reference: {out}")).to_string()
}

/// `snow-connect validate <file>` with the OCI cache at `cache` and info logs; `env` added.
fn validate(dir: &Path, file: &Path, cache: &Path, env: &[(&str, &str)]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_snow-connect"))
        .args(["validate", file.to_str().unwrap(), "--component-cache"])
        .arg(dir.join("compiled"))
        .current_dir(dir)
        .env("SNOW_LOG", "info")
        .env("SNOW_OCI_CACHE", cache)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// A standalone source connector on `fake` naming its component by `reference`, reaching
/// `registry` over plain HTTP with the credentials in `auth` (a file of its own each time).
fn oci_connector(dir: &Path, fake: &fake_snow::FakeSnow, topic: &str, reference: &str, registry: &str, auth: Option<&Path>) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let file = format!("from-oci-{}", N.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
    let auth = auth.map(|p| p.display().to_string()).unwrap_or_default();
    let mut extra = vec![("snow.auth.username", USER), ("snow.auth.password", PASSWORD), ("component.registry.plain.http.hosts", registry)];
    if !auth.is_empty() {
        extra.push(("component.registry.auth.file", &auth));
    }
    let mut entries = support::source_entries(&fake.url(), "from-oci", topic, &["incident"], &extra);
    entries.remove("component.path");
    entries.insert("component.ref".into(), reference.into());
    connector_file(dir, &file, &entries)
}

#[test]
fn a_component_pushed_to_a_registry_runs_by_digest_and_by_tag_verified_as_a_file_is() {
    let dir = work_dir("oci-standalone");
    let registry = Registry::start(&dir, Some((REGISTRY_USER, REGISTRY_PASSWORD)), true);
    let auth = auth_file(&dir, &registry.address, REGISTRY_USER, REGISTRY_PASSWORD);
    let auth_arg = auth.display().to_string();
    let component = support::signed(guest_artifacts::GUEST_SOURCE);
    let component_hex = sha256_hex(&std::fs::read(component).unwrap());
    let tag = format!("oci://{}/snow/source:1.0", registry.address);
    let reference = push(&dir, component, &tag, &["--auth-file", &auth_arg]);
    assert!(reference.starts_with(&format!("{tag}@sha256:")), "{reference}");
    let requests = registry.requests();
    assert!(requests.contains("PUT /v2/snow/source/manifests/1.0 auth=bearer"), "pushed with a token:\n{requests}");
    assert!(requests.lines().filter(|l| l.starts_with("GET /token")).all(|l| l.ends_with("auth=basic")), "{requests}");
    assert!(requests.lines().filter(|l| l.starts_with("GET /token")).count() >= 1, "the token service was asked:\n{requests}");
    assert!(
        requests.lines().any(|l| l.starts_with("PUT /v2/snow/source/manifests/sha256:")),
        "the bundle was pushed as a manifest of its own (a referrer):\n{requests}"
    );

    // By digest: the connector runs the component from the registry and moves every row.
    let now = now_secs();
    let fake = support::fake_with_user(USER, PASSWORD, Some(now));
    let ids = fake.shared().seed("incident", 300, now - 3600, 3000);
    let topic = unique("oci-rows");
    let file = oci_connector(&dir, &fake, &topic, &reference, &registry.address, Some(&auth));
    let cache = dir.join("oci-cache");
    let cache_env = cache.display().to_string();
    let run = Runner::spawn(&dir, "run", &[&file], DEFAULT_LOG, &[("SNOW_OCI_CACHE", &cache_env)]);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| r.len() >= ids.len());
    let keys: std::collections::BTreeSet<&str> = records.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys.len(), ids.len(), "every row, from the component the registry holds");
    let log = run.stop();
    assert!(log.contains(&format!("component.ref: {reference} is sha256:{component_hex}")), "{}", support::tail(&log, 40));
    assert!(log.contains("signed by the trusted key"), "verified as a file is:\n{}", support::tail(&log, 40));
    assert!(!log.contains(REGISTRY_PASSWORD), "the registry password never reaches the log");
    let kept = cache.join(format!("components/sha256-{component_hex}.wasm"));
    assert_eq!(sha256_hex(&std::fs::read(&kept).unwrap()), component_hex);

    // By tag: resolved to the digest it names now, and pinned.
    let by_tag = oci_connector(&dir, &fake, &topic, &tag, &registry.address, Some(&auth));
    let (ok, out) = validate(&dir, &by_tag, &cache, &[]);
    assert!(ok && out.contains(&format!("component.ref: {reference} is sha256:{component_hex}")), "{out}");
    let pins = std::fs::read_to_string(cache.join("pins.json")).unwrap();
    let manifest_hex = reference.rsplit("sha256:").next().unwrap();
    assert!(pins.contains(manifest_hex), "{pins}");
    // A new build under the same tag: the tag now names it.
    let rebuilt = support::new_build(guest_artifacts::GUEST_SOURCE, 7, &dir);
    let rebuilt_hex = sha256_hex(&std::fs::read(&rebuilt).unwrap());
    let moved = push(&dir, rebuilt.to_str().unwrap(), &tag, &["--auth-file", &auth_arg]);
    assert_ne!(moved, reference);
    let (ok, out) = validate(&dir, &by_tag, &cache, &[]);
    assert!(ok && out.contains(&format!("is sha256:{rebuilt_hex}")), "{out}");

    // Running by tag, a new build pushed under it and SIGHUP: the tag is resolved again and the
    // new build hot-swapped.
    let mut run = Runner::spawn(&dir, "run-tag", &[&by_tag], DEFAULT_LOG, &[("SNOW_OCI_CACHE", &cache_env)]);
    run.wait_for_log("connector ready", Duration::from_secs(120));
    let next = support::new_build(guest_artifacts::GUEST_SOURCE, 12, &dir);
    let next_hex = sha256_hex(&std::fs::read(&next).unwrap());
    push(&dir, next.to_str().unwrap(), &tag, &["--auth-file", &auth_arg]);
    run.hangup();
    let log = run.wait_for_log(&format!("replaced by {}", &next_hex[..12]), Duration::from_secs(120));
    assert!(log.contains(&format!("is sha256:{next_hex}")), "{}", support::tail(&log, 30));
    run.stop();
    let rebuilt_hex = next_hex;

    // A component changed on disk is fetched again, never run.
    std::fs::write(&kept, b"not the component").unwrap();
    let (ok, out) = validate(&dir, &file, &cache, &[]);
    assert!(ok && out.contains(&format!("fetched the component sha256:{component_hex}")), "{out}");
    assert_eq!(sha256_hex(&std::fs::read(&kept).unwrap()), component_hex);

    // Signed by a key the connector does not trust, or not signed: refused before compiling.
    let (ok, _, err) = snow_connect(&dir, &["artefact", "keygen", dir.join("other").to_str().unwrap()]);
    assert!(ok, "{err}");
    let foreign = support::new_build(guest_artifacts::GUEST_SOURCE, 8, &dir);
    let other_key = dir.join("other.key").display().to_string();
    let (ok, _, err) = snow_connect(&dir, &["artefact", "sign", foreign.to_str().unwrap(), "--key", &other_key]);
    assert!(ok, "{err}");
    let foreign_ref =
        push(&dir, foreign.to_str().unwrap(), &format!("oci://{}/snow/source:foreign", registry.address), &["--auth-file", &auth_arg]);
    let (ok, out) = validate(&dir, &oci_connector(&dir, &fake, &topic, &foreign_ref, &registry.address, Some(&auth)), &cache, &[]);
    assert!(!ok && out.contains("refused") && out.contains("signed by a key that is not trusted"), "{out}");
    let bare = support::new_build(guest_artifacts::GUEST_SOURCE, 9, &dir);
    let bare_ref = push(
        &dir,
        bare.to_str().unwrap(),
        &format!("oci://{}/snow/source:bare", registry.address),
        &["--unsigned", "--auth-file", &auth_arg],
    );
    let (ok, out) = validate(&dir, &oci_connector(&dir, &fake, &topic, &bare_ref, &registry.address, Some(&auth)), &cache, &[]);
    assert!(!ok && out.contains("unsigned"), "{out}");

    // Without credentials the registry's token service refuses; a registry not listed is refused.
    let anonymous = oci_connector(&dir, &fake, &topic, &format!("oci://{}/snow/source:missing", registry.address), &registry.address, None);
    let (ok, out) = validate(&dir, &anonymous, &dir.join("fresh-cache"), &[("REGISTRY_AUTH_FILE", "/nonexistent")]);
    assert!(!ok && out.contains("component.ref") && out.contains("refused an anonymous token"), "{out}");
    let mut listed =
        support::source_entries(&fake.url(), "listed", &topic, &["incident"], &[("component.registry.hosts", "registry.example")]);
    listed.remove("component.path");
    listed.insert("component.ref".into(), reference.clone());
    let (ok, out) = validate(&dir, &connector_file(&dir, "listed", &listed), &cache, &[]);
    assert!(!ok && out.contains("component.ref") && out.contains("not in component.registry.hosts"), "{out}");
    assert!(!out.contains(REGISTRY_PASSWORD));

    // The registry gone: a digest runs from the store, a tag from its pin, with a warning.
    let address = registry.address.clone();
    registry.stop();
    let (ok, out) = validate(&dir, &file, &cache, &[]);
    assert!(ok, "a digest needs no registry once fetched: {out}");
    let (ok, out) = validate(&dir, &by_tag, &cache, &[]);
    assert!(ok && out.contains("pinned here") && out.contains(&format!("is sha256:{rebuilt_hex}")), "{out}");
    let (ok, out) = validate(&dir, &by_tag, &dir.join("empty-cache"), &[]);
    assert!(!ok && out.contains(&address), "no pin, no registry: refused naming it: {out}");
}

#[test]
fn a_fleet_pins_a_tag_when_the_configuration_is_written_and_names_only_registries_it_lists() {
    let dir = work_dir("oci-fleet");
    let registry = Registry::start(&dir, None, false);
    let address = registry.address.clone();
    let component = support::signed(guest_artifacts::GUEST_SOURCE);
    let tag = format!("oci://{address}/snow/source:2.0");
    let reference = push(&dir, component, &tag, &[]);
    assert!(
        registry
            .requests()
            .lines()
            .any(|l| l.starts_with(&format!("PUT /v2/snow/source/manifests/sha256-{}", reference.rsplit("sha256:").next().unwrap()))),
        "without the referrers API the bundle is listed under the tag schema:\n{}",
        registry.requests()
    );
    let now = now_secs();
    let fake = support::fake_with_user(USER, PASSWORD, Some(now));
    let ids = fake.shared().seed("incident", 200, now - 3600, 3000);
    let group = unique("oci-fleet");
    let spec = support::fleet::worker_properties(
        &dir,
        "w1",
        &group,
        &[("component.registry.hosts", &address), ("component.registry.plain.http.hosts", &address)],
    );
    let worker = support::fleet::start_worker(&dir, "w1", &spec, &[("SNOW_OCI_PASSWORD", PASSWORD)]);
    let (name, topic) = (unique("foci"), unique("foci-rows"));
    let mut config: BTreeMap<String, String> = support::source_entries(
        &fake.url(),
        &name,
        &topic,
        &["incident"],
        &[("snow.auth.username", USER), ("snow.auth.password", "${env:SNOW_OCI_PASSWORD}")],
    );
    for key in ["offset.storage.file.filename", "kafka.bootstrap.servers", "component.trusted.keys", "name", "component.path"] {
        config.remove(key);
    }
    config.insert("component.ref".into(), tag.clone());
    let created = support::fleet::curl(spec.port, "POST", "/connectors", Some(&json!({ "name": name, "config": config })));
    assert_eq!(created.status, 201, "{}", created.text);
    let stored = support::fleet::curl(spec.port, "GET", &format!("/connectors/{name}/config"), None);
    assert_eq!(stored.body["component.ref"], json!(reference), "the tag is stored pinned to its digest: {}", stored.text);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| r.len() >= ids.len());
    assert!(records.len() >= ids.len());

    // The tag moves on; the connector keeps the bytes it was written with.
    let rebuilt = support::new_build(guest_artifacts::GUEST_SOURCE, 11, &dir);
    let moved = push(&dir, rebuilt.to_str().unwrap(), &tag, &[]);
    assert_ne!(moved, reference);
    let stored = support::fleet::curl(spec.port, "GET", &format!("/connectors/{name}/config"), None);
    assert_eq!(stored.body["component.ref"], json!(reference));

    // Registries the worker does not list, and registry settings of a caller's: refused.
    let mut elsewhere = config.clone();
    elsewhere.insert("component.ref".into(), "oci://registry.example/x/y:1".into());
    let refused = support::fleet::curl(spec.port, "POST", "/connectors", Some(&json!({ "name": unique("foci-x"), "config": elsewhere })));
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.text.contains("component.ref") && refused.text.contains("not in component.registry.hosts"), "{}", refused.text);
    let mut own = config.clone();
    own.insert("component.registry.auth.file".into(), dir.join("registry-auth.json").display().to_string());
    let refused = support::fleet::curl(spec.port, "POST", "/connectors", Some(&json!({ "name": unique("foci-y"), "config": own })));
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.text.contains("component.registry.auth.file") && refused.text.contains("worker's"), "{}", refused.text);
    worker.stop();
}

#[test]
#[ignore = "builds wkg from crates.io (about three minutes); make release-test runs it"]
fn wkg_pulls_what_we_push_and_we_verify_and_run_what_wkg_pushes() {
    let dir = work_dir("oci-wkg");
    let registry = Registry::start(&dir, None, true);
    let address = registry.address.clone();
    // Ours → wkg: the same bytes.
    let sink = support::signed(guest_artifacts::GUEST_SINK);
    push(&dir, sink, &format!("oci://{address}/snow/sink:3.0"), &[]);
    let pulled = dir.join("wkg-pulled.wasm");
    let (ok, out) =
        run_wkg(&dir, &["oci", "pull", &format!("{address}/snow/sink:3.0"), "--insecure", &address, "-o", pulled.to_str().unwrap()]);
    assert!(ok, "{out}");
    assert_eq!(std::fs::read(&pulled).unwrap(), std::fs::read(sink).unwrap(), "wkg pulls the bytes we pushed");

    // wkg → ours: pulled, signed and attached by us, then run verified by tag.
    let source = dir.join("source-for-wkg.wasm");
    std::fs::copy(guest_artifacts::GUEST_SOURCE, &source).unwrap();
    let (ok, out) = run_wkg(&dir, &["oci", "push", &format!("{address}/wkg/source:1.0"), source.to_str().unwrap(), "--insecure", &address]);
    assert!(ok, "{out}");
    let tag = format!("oci://{address}/wkg/source:1.0");
    let fetched = dir.join("fetched.wasm");
    let (ok, out, err) = snow_connect(&dir, &["artefact", "pull", &tag, "--plain-http", "--out", fetched.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("no bundle"), "{out}");
    assert_eq!(std::fs::read(&fetched).unwrap(), std::fs::read(&source).unwrap());
    let (ok, _, err) = snow_connect(&dir, &["artefact", "sign", fetched.to_str().unwrap(), "--key", support::DEV_KEY]);
    assert!(ok, "{err}");
    let bundle = format!("{}.sigstore.json", fetched.display());
    let (ok, out, err) = snow_connect(&dir, &["artefact", "attach", &tag, "--bundle", &bundle, "--plain-http"]);
    assert!(ok, "{err}");
    let reference = out.trim().strip_prefix("component.ref=").unwrap().to_string();
    let now = now_secs();
    let fake = support::fake_with_user(USER, PASSWORD, Some(now));
    let ids = fake.shared().seed("incident", 150, now - 3600, 3000);
    let topic = unique("oci-wkg-rows");
    let file = oci_connector(&dir, &fake, &topic, &tag, &address, None);
    let cache = dir.join("oci-cache").display().to_string();
    let run = Runner::spawn(&dir, "run", &[&file], DEFAULT_LOG, &[("SNOW_OCI_CACHE", &cache)]);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| r.len() >= ids.len());
    assert!(records.len() >= ids.len());
    let log = run.stop();
    assert!(log.contains(&reference) && log.contains("signed by the trusted key"), "{}", support::tail(&log, 40));
}
