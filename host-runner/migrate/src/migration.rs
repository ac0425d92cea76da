//! One run of the translator: its options (what the old configurations cannot say), the
//! connectors it made from the given files, and writing them out.

use super::{check, fold, input, output, report, rules, translate};

/// What the translation cannot read from the old configurations: where this runtime's pieces are.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `--bootstrap`: the Kafka cluster (connector files only; a fleet's worker has its own).
    pub bootstrap: Option<String>,
    /// `--source-component` / `--sink-component`: the `.wasm` files (`component.path`).
    pub source_component: Option<String>,
    /// See `source_component`.
    pub sink_component: Option<String>,
    /// `--trusted-keys`: `component.trusted.keys` (connector files only; a fleet's worker has its own).
    pub trusted_keys: Option<String>,
    /// `--schema-registry`: the registry Confluent Cloud supplied implicitly.
    pub schema_registry: Option<String>,
}

/// The component a product's connectors run, unless `--source-component`/`--sink-component` say.
pub const DEFAULT_SOURCE_COMPONENT: &str = "guest_source.wasm";
/// See [`DEFAULT_SOURCE_COMPONENT`].
pub const DEFAULT_SINK_COMPONENT: &str = "guest_sink.wasm";

/// What one run of the translator made.
pub struct Migration {
    /// Our connectors, ready to write.
    pub connectors: Vec<output::Connector>,
    /// Input that could not be translated.
    pub invalid: Vec<input::Invalid>,
    /// Every literal secret of the inputs (to scrub what is written).
    pub secrets: Vec<String>,
}

impl Migration {
    /// 0 clean, 1 review, 2 manual, 4 invalid input.
    pub fn exit_code(&self) -> u8 {
        report::exit_code(&self.connectors, &self.invalid)
    }

    /// Writes the connector files and the reports into `dir`.
    pub fn write(&self, dir: &std::path::Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
        let md = report::markdown(&self.connectors, &self.invalid);
        let json = report::json(&self.connectors, &self.invalid);
        output::write_all(dir, &self.connectors, &md, &json, &self.secrets)
    }
}

/// Translates the configurations in `paths` (files or directories).
pub fn translate_paths(paths: &[std::path::PathBuf], options: &Options) -> Migration {
    let (old, invalid) = input::read(paths);
    let mut secrets: Vec<String> = old
        .iter()
        .flat_map(|o| o.entries.iter().filter(|(k, v)| rules::is_secret_key(k) && !rules::is_reference(v)).map(|(_, v)| v.clone()))
        .filter(|v| !v.trim().is_empty())
        .collect();
    secrets.sort();
    secrets.dedup();
    let translations = old.iter().map(|o| translate::translate(o, options)).collect();
    let mut connectors = output::assemble(&fold::fold(translations), options);
    for c in &mut connectors {
        check::check(c);
    }
    Migration { connectors, invalid, secrets }
}
