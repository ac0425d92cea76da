//! Signed artefacts end to end, through the real binary: `artefact keygen | sign | verify`, the
//! host refusing what does not verify before compiling it (one line naming the file and the
//! reason), `component.allow.unsigned` warning at every start, `inspect` reporting the signature,
//! and interoperability with the `cosign` CLI both ways.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use support::{DEV_KEY, DEV_PUB, cosign, entries, snow_connect, work_dir};

/// A copy of the sink component in `dir`, so that each test signs and spoils its own.
fn component(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::copy(guest_artifacts::GUEST_SINK, &path).unwrap();
    path
}

/// A sink connector on `component` trusting `keys`; nothing is reached (validate only compiles,
/// links and asks the component to validate its settings).
fn connector(dir: &Path, component: &Path, extra: &[(&str, &str)]) -> PathBuf {
    let mut config: BTreeMap<String, String> = entries(&[
        ("name", "signed"),
        ("component.path", component.to_str().unwrap()),
        ("kafka.bootstrap.servers", "127.0.0.1:9"),
        ("topics", "t"),
        ("snow.instance.url", "http://127.0.0.1:9"),
        ("snow.auth.type", "none"),
        ("snow.sink.table", "incident"),
    ]);
    config.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    support::connector_file(dir, "signed", &config)
}

/// `snow-connect validate` with info logs (which say when a component is compiled).
fn validate(dir: &Path, file: &Path) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_snow-connect"))
        .args(["validate", file.to_str().unwrap(), "--component-cache", "off"])
        .current_dir(dir)
        .env("SNOW_LOG", "info")
        .output()
        .unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn sign(dir: &Path, component: &Path, key: &str) -> PathBuf {
    let (ok, stdout, stderr) = snow_connect(dir, &["artefact", "sign", component.to_str().unwrap(), "--key", key]);
    assert!(ok, "{stderr}");
    let bundle = PathBuf::from(format!("{}.sigstore.json", component.display()));
    assert!(stdout.contains(&bundle.display().to_string()), "{stdout}");
    bundle
}

/// The error line of a refusal: exactly one line names the file and says why.
fn refusal_line(output: &str, component: &Path) -> String {
    let lines: Vec<&str> = output.lines().filter(|l| l.contains(&format!("component {} refused: ", component.display()))).collect();
    assert_eq!(lines.len(), 1, "one line names the file and the reason:\n{output}");
    lines[0].to_string()
}

#[test]
fn keygen_sign_and_verify_round_trip_and_the_host_runs_what_verifies() {
    let dir = work_dir("artefact-roundtrip");
    let (ok, stdout, stderr) = snow_connect(&dir, &["artefact", "keygen", "release"]);
    assert!(ok && stdout.contains("release.key") && stdout.contains("release.pub"), "{stdout}{stderr}");
    let wasm = component(&dir, "sink.wasm");
    sign(&dir, &wasm, "release.key");
    let (ok, stdout, stderr) = snow_connect(&dir, &["artefact", "verify", "sink.wasm", "--trusted-keys", "release.pub"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("verified: signed by the trusted key release.pub"), "{stdout}");
    let (ok, out) = validate(&dir, &connector(&dir, &wasm, &[("component.trusted.keys", &format!("{DEV_PUB},release.pub"))]));
    assert!(ok && out.contains("component signature verified") && out.contains("component compiled"), "{out}");
    // The same bundle, but only the development key trusted.
    let (ok, out) = validate(&dir, &connector(&dir, &wasm, &[("component.trusted.keys", DEV_PUB)]));
    assert!(!ok);
    let line = refusal_line(&out, &wasm);
    assert!(line.contains("it is signed by a key that is not trusted (key hint ") && line.contains(DEV_PUB), "{line}");
}

#[test]
fn what_does_not_verify_is_refused_before_compiling_with_one_line_naming_file_and_reason() {
    let dir = work_dir("artefact-refused");
    let trusted = [("component.trusted.keys", DEV_PUB)];

    let unsigned = component(&dir, "unsigned.wasm");
    let (ok, out) = validate(&dir, &connector(&dir, &unsigned, &trusted));
    assert!(!ok);
    assert!(refusal_line(&out, &unsigned).contains("it is unsigned: no bundle at"), "{out}");

    let flipped = component(&dir, "flipped.wasm");
    sign(&dir, &flipped, DEV_KEY);
    let mut bytes = std::fs::read(&flipped).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&flipped, &bytes).unwrap();
    let (ok, out) = validate(&dir, &connector(&dir, &flipped, &trusted));
    assert!(!ok);
    assert!(refusal_line(&out, &flipped).contains("the file changed after it was signed"), "{out}");
    assert!(!out.contains("component compiled"), "refused before compiling: {out}");

    let other = component(&dir, "other.wasm");
    std::fs::copy(guest_artifacts::GUEST_SOURCE, &other).unwrap();
    let other_bundle = sign(&dir, &other, DEV_KEY);
    let sink = component(&dir, "sink.wasm");
    let (ok, out) = validate(&dir, &connector(&dir, &sink, &[trusted[0], ("component.bundle.path", other_bundle.to_str().unwrap())]));
    assert!(!ok);
    let line = refusal_line(&out, &sink);
    assert!(line.contains("signs ") && line.contains("or the bundle is another artefact's"), "{line}");

    let tampered = component(&dir, "tampered.wasm");
    let bundle = sign(&dir, &tampered, DEV_KEY);
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&bundle).unwrap()).unwrap();
    let mut signature: Vec<char> = json["messageSignature"]["signature"].as_str().unwrap().chars().collect();
    let at = signature.len() / 2;
    signature[at] = if signature[at] == 'A' { 'B' } else { 'A' };
    json["messageSignature"]["signature"] = serde_json::Value::String(signature.into_iter().collect());
    std::fs::write(&bundle, json.to_string()).unwrap();
    let (ok, out) = validate(&dir, &connector(&dir, &tampered, &trusted));
    assert!(!ok);
    assert!(refusal_line(&out, &tampered).contains("its signature does not verify with the trusted key"), "{out}");
}

#[test]
fn allow_unsigned_runs_it_with_a_warning_at_every_start() {
    let dir = work_dir("artefact-unsigned");
    let unsigned = component(&dir, "unsigned.wasm");
    let file = connector(&dir, &unsigned, &[("component.allow.unsigned", "true")]);
    for _ in 0..2 {
        let (ok, out) = validate(&dir, &file);
        assert!(ok, "{out}");
        assert!(
            out.lines().any(|l| l.contains("WARN")
                && l.contains("NOT VERIFIED (it is unsigned")
                && l.contains("component.allow.unsigned=true")
                && l.contains("unsigned.wasm")),
            "a warning naming the file and why, at every start:\n{out}"
        );
    }
    let (ok, out) = validate(&dir, &connector(&dir, &unsigned, &[]));
    assert!(!ok && out.contains("component.trusted.keys: is required"), "{out}");
}

#[test]
fn inspect_reports_the_signature_status() {
    let dir = work_dir("artefact-inspect");
    let wasm = component(&dir, "sink.wasm");
    let (ok, stdout, stderr) = snow_connect(&dir, &["inspect", "sink.wasm", "--instantiations", "1"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("signature      not verified: it is unsigned: no bundle at sink.wasm.sigstore.json"), "{stdout}");
    sign(&dir, &wasm, DEV_KEY);
    let (_, stdout, _) = snow_connect(&dir, &["inspect", "sink.wasm", "--instantiations", "1"]);
    assert!(stdout.contains("signature      bundle at sink.wasm.sigstore.json, not checked (give --trusted-keys"), "{stdout}");
    let (_, stdout, _) = snow_connect(&dir, &["inspect", "sink.wasm", "--instantiations", "1", "--trusted-keys", DEV_PUB]);
    assert!(
        stdout.contains("signature      verified: signed by the trusted key")
            && stdout.contains("world          snow:connector/sink@0.2.0"),
        "{stdout}"
    );
}

#[test]
fn a_bundle_made_by_cosign_verifies_in_the_host_and_cosign_verifies_ours() {
    let dir = work_dir("artefact-cosign");
    // cosign's own key pair (encrypted cosign.key, cosign.pub) and its bundle of the component.
    let (ok, out) = cosign::run(&dir, &["generate-key-pair", "--output-key-prefix", "cosign"]);
    assert!(ok, "{out}");
    let wasm = component(&dir, "sink.wasm");
    let (ok, out) = cosign::run(
        &dir,
        &[
            "sign-blob",
            "--key",
            "cosign.key",
            "--bundle",
            "by-cosign.json",
            "--tlog-upload=false",
            "--use-signing-config=false",
            "--yes",
            "sink.wasm",
        ],
    );
    assert!(ok, "{out}");
    let bundle: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("by-cosign.json")).unwrap()).unwrap();
    assert_eq!(bundle["mediaType"], "application/vnd.dev.sigstore.bundle.v0.3+json", "{bundle}");
    let by_cosign = dir.join("by-cosign.json");
    let (ok, out) = validate(
        &dir,
        &connector(&dir, &wasm, &[("component.trusted.keys", "cosign.pub"), ("component.bundle.path", by_cosign.to_str().unwrap())]),
    );
    assert!(ok, "cosign's bundle verifies in the host: {out}");
    // A flipped byte is refused on cosign's bundle too.
    let mut bytes = std::fs::read(&wasm).unwrap();
    bytes[1000] ^= 0x80;
    let flipped = dir.join("flipped.wasm");
    std::fs::write(&flipped, &bytes).unwrap();
    let (ok, out) = validate(
        &dir,
        &connector(&dir, &flipped, &[("component.trusted.keys", "cosign.pub"), ("component.bundle.path", by_cosign.to_str().unwrap())]),
    );
    assert!(!ok && refusal_line(&out, &flipped).contains("the file changed after it was signed"), "{out}");

    // Our key pair and bundle, checked by cosign.
    let (ok, _, stderr) = snow_connect(&dir, &["artefact", "keygen", "ours"]);
    assert!(ok, "{stderr}");
    let ours = component(&dir, "ours.wasm");
    let bundle = sign(&dir, &ours, "ours.key");
    let verify = |key: &str, file: &str| {
        cosign::run(&dir, &["verify-blob", "--key", key, "--bundle", bundle.to_str().unwrap(), "--insecure-ignore-tlog=true", file])
    };
    let (ok, out) = verify("ours.pub", "ours.wasm");
    assert!(ok && out.contains("Verified OK"), "cosign verifies our bundle: {out}");
    let (ok, out) = verify("cosign.pub", "ours.wasm");
    assert!(!ok, "cosign refuses it with another key: {out}");
    let (ok, out) = verify("ours.pub", "flipped.wasm");
    assert!(!ok, "cosign refuses it for other bytes: {out}");
}
