//! The table of real-looking configurations (`tests/migrate/cases/<case>/input/`, from the
//! products' documented examples), each with its expected output and report
//! (`…/expected/`: the connector files, the fleet JSON, both reports and the exit code).
//! `SNOW_UPDATE_GOLDEN=1 cargo test -p host-runner --lib migrate::cases` rewrites the expected
//! files; a reviewer reads their diff.

use std::path::{Path, PathBuf};

use super::{Options, translate_paths};

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/migrate/cases")
}

/// The options a deployment would give (the same for every case).
fn options() -> Options {
    Options {
        bootstrap: Some("kafka-1.internal:9092".into()),
        source_component: Some("/opt/snow-connect/guest_source.wasm".into()),
        sink_component: Some("/opt/snow-connect/guest_sink.wasm".into()),
        trusted_keys: Some("/etc/snow-connect/release.pub".into()),
        schema_registry: None,
    }
}

#[test]
fn every_case_translates_to_its_expected_output_and_report() {
    let update = std::env::var_os("SNOW_UPDATE_GOLDEN").is_some();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(cases_dir()).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    cases.sort();
    assert!(cases.len() >= 10, "the cases are missing: {cases:?}");
    let mut failures = Vec::new();
    for case in &cases {
        let input = case.join("input");
        let migration = translate_paths(std::slice::from_ref(&input), &options());
        let out =
            std::env::temp_dir().join(format!("snow-migrate-case-{}-{}", std::process::id(), case.file_name().unwrap().to_string_lossy()));
        let _ = std::fs::remove_dir_all(&out);
        migration.write(&out).unwrap();
        std::fs::write(out.join("exit-code"), format!("{}\n", migration.exit_code())).unwrap();
        let expected_dir = case.join("expected");
        if update {
            let _ = std::fs::remove_dir_all(&expected_dir);
            std::fs::create_dir_all(&expected_dir).unwrap();
        }
        let mut produced: Vec<String> =
            std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        produced.sort();
        for name in &produced {
            let text = std::fs::read_to_string(out.join(name)).unwrap().replace(&format!("{}/", input.display()), "input/");
            assert!(!text.contains("MARKER"), "{}: {name} carries a planted secret", case.display());
            let golden = expected_dir.join(name);
            if update {
                std::fs::write(&golden, &text).unwrap();
            } else if std::fs::read_to_string(&golden).ok().as_deref() != Some(text.as_str()) {
                failures.push(format!("{}/expected/{name} differs (SNOW_UPDATE_GOLDEN=1 shows how)", case.display()));
            }
        }
        let mut expected: Vec<String> = std::fs::read_dir(&expected_dir)
            .map(|d| d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        expected.sort();
        if expected != produced {
            failures.push(format!("{}: wrote {produced:?}, expected {expected:?}", case.display()));
        }
        std::fs::remove_dir_all(&out).unwrap();
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn translated_connector_files_load_in_the_runtime() {
    // Whatever a case's verdict, the connector files written hold only what this runtime takes:
    // the loader `snow-connect run` uses accepts them (references standing in for the environment).
    for case in std::fs::read_dir(cases_dir()).unwrap().map(|e| e.unwrap().path()) {
        let expected = case.join("expected");
        for file in std::fs::read_dir(&expected).unwrap().map(|e| e.unwrap().path()) {
            if file.extension().is_some_and(|e| e == "properties") {
                let entries = snow_runtime::config::parse_properties(&std::fs::read_to_string(&file).unwrap()).unwrap();
                let resolved: std::collections::BTreeMap<String, String> = entries
                    .into_iter()
                    .map(|(k, v)| {
                        let v = match () {
                            _ if !v.starts_with("${env:") => v,
                            _ if k.ends_with(".url") => "https://x.invalid".into(),
                            _ if k.ends_with("user.info") => "x:x".into(),
                            _ => "x".into(),
                        };
                        (k, v)
                    })
                    .map(|(k, v)| if k == "component.trusted.keys" { ("component.allow.unsigned".into(), "true".into()) } else { (k, v) })
                    // TLS stores named by file live on the workers, as the signing keys do.
                    .filter(|(k, _)| !crate::check::is_store_file_key(k))
                    .collect();
                if let Err(e) = snow_runtime::config::ConnectorSpec::from_entries(resolved) {
                    panic!("{}: {e:#}", file.display());
                }
            }
        }
    }
}
