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
