//! Replays every committed seed and regression input through its target (see the crate's docs).

use std::path::{Path, PathBuf};

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(dir).map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_file()).collect()).unwrap_or_default();
    files.sort();
    files
}

#[test]
fn every_seed_and_every_regression_input_passes_its_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut replayed = 0;
    for (name, run) in fuzz_replay::TARGETS {
        let seeds = inputs(&root.join("seeds").join(name));
        assert!(!seeds.is_empty(), "{name} has no committed seed (tests/fuzz/seeds/{name})");
        for input in seeds.iter().chain(inputs(&root.join("regressions").join(name)).iter()) {
            let bytes = std::fs::read(input).unwrap();
            let outcome = std::panic::catch_unwind(|| run(&bytes));
            assert!(outcome.is_ok(), "{name} fails on {}", input.display());
            replayed += 1;
        }
    }
    assert!(replayed >= fuzz_replay::TARGETS.len(), "{replayed} inputs replayed");
}

/// A target added to tests/fuzz but not here (or not to `make fuzz`'s list) would be fuzzed never or
/// replayed never: the three lists are the same.
#[test]
fn every_fuzz_target_is_replayed_here_and_run_by_make_fuzz() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files: Vec<String> = inputs(&root.join("fuzz/fuzz_targets"))
        .iter()
        .filter_map(|p| p.file_name()?.to_str()?.strip_suffix(".rs").map(String::from))
        .collect();
    files.sort();
    let mut replayed: Vec<String> = fuzz_replay::TARGETS.iter().map(|(name, _)| name.to_string()).collect();
    replayed.sort();
    assert_eq!(replayed, files, "fuzz_replay::TARGETS against tests/fuzz/fuzz_targets/");
    let makefile = std::fs::read_to_string(root.join("../Makefile")).unwrap();
    let line = makefile.lines().find_map(|l| l.strip_prefix("FUZZ_TARGETS ?=")).expect("FUZZ_TARGETS in the Makefile");
    let mut made: Vec<String> = line.split_whitespace().map(String::from).collect();
    made.sort();
    assert_eq!(made, files, "the Makefile's FUZZ_TARGETS against tests/fuzz/fuzz_targets/");
}
