//! Where the release binaries and components are, and where results go.

use std::path::PathBuf;

/// The workspace root.
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A release binary of the workspace.
pub fn release_bin(name: &str) -> PathBuf {
    workspace().join("target/release").join(name)
}

/// The source component.
pub fn source_component() -> PathBuf {
    workspace().join("target/guests/wasm32-wasip2/wasm-release/guest_source.wasm")
}

/// The sink component.
pub fn sink_component() -> PathBuf {
    workspace().join("target/guests/wasm32-wasip2/wasm-release/guest_sink.wasm")
}

/// The connector line that trusts the development key `make wasm` signs the components with.
pub fn trusted_keys_line() -> String {
    format!("component.trusted.keys={}\n", workspace().join("tests/keys/development-only.pub").display())
}

/// Fails naming the first of `paths` that `make bench` should have built and did not.
pub fn require_built(paths: &[PathBuf]) -> anyhow::Result<()> {
    match paths.iter().find(|p| !p.exists()) {
        Some(missing) => anyhow::bail!("{} is missing: run `make bench`, which builds it", missing.display()),
        None => Ok(()),
    }
}

/// `target/<name>`, emptied.
pub fn fresh_dir(name: &str) -> anyhow::Result<PathBuf> {
    let dir = workspace().join("target").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// This machine as a report names it: `2 cores (Intel(R) Xeon(R) Processor)`.
pub fn machine() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| c.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    format!("{cores} cores ({model})")
}

/// Writes `report` into `docs/benchmarks.md` between the markers `<!-- {marker}:begin -->` and
/// `<!-- {marker}:end -->`, or appends it under `heading` with the markers when they are absent.
pub fn write_report(marker: &str, heading: &str, report: &str) -> anyhow::Result<()> {
    let (begin, end) = (format!("<!-- {marker}:begin -->"), format!("<!-- {marker}:end -->"));
    let path = workspace().join("docs/benchmarks.md");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let (before, after) = match (text.find(&begin), text.find(&end)) {
        (Some(b), Some(e)) if b < e => (text[..b].to_string(), text[e + end.len()..].to_string()),
        _ => (format!("{text}\n## {heading}\n\n"), String::new()),
    };
    std::fs::write(&path, format!("{before}{begin}\n{report}{end}{after}"))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
