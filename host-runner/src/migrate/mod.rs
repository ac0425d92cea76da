//! `snow-connect migrate`: translating the configurations of Confluent's five ServiceNow
//! connectors, the open Kafka Connect ServiceNow connector and Kafka Connect's own keys into
//! this runtime's (ADR 0029, docs/migration.md).
//!
//! What it owns: recognising an old connector ([`input`]), the rules per product as data
//! ([`rules`], [`tables`], with their value [`conversions`]), applying them key by key
//! ([`translate`]), folding one-table sources into one connector ([`fold`]), checking the result
//! with the runtime's own configuration parsers ([`check`]), and what is written: connector
//! files, the fleet's JSON and the report ([`output`], [`report`]). What it does not own:
//! running anything; `--apply` and the cutover reach a service only when asked.

pub mod apply;
pub mod check;
pub mod conversions;
pub mod cutover;
pub mod docs;
pub mod fold;
pub mod input;
pub mod open_conversions;
pub mod output;
pub mod report;
pub mod rules;
pub mod tables;
pub mod translate;
pub mod verify;

#[cfg(test)]
mod cases;

/// The connector a configuration was written for, recognised by its `connector.class`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Product {
    /// ServiceNow Source Connector for Confluent Platform.
    PlatformSource,
    /// ServiceNow Source [Legacy] for Confluent Cloud (the same class underneath).
    CloudSourceLegacy,
    /// ServiceNow Source V2 for Confluent Cloud (Confluent's HTTP source underneath).
    CloudSourceV2,
    /// ServiceNow Sink Connector for Confluent Platform.
    PlatformSink,
    /// ServiceNow Sink for Confluent Cloud.
    CloudSink,
    /// The open Kafka Connect ServiceNow source (`sh.oso.servicenow`).
    OpenSource,
    /// The open Kafka Connect ServiceNow sink.
    OpenSink,
}

impl Product {
    /// Every product, in the documentation's order.
    pub const ALL: [Product; 7] = [
        Product::PlatformSource,
        Product::CloudSourceLegacy,
        Product::CloudSourceV2,
        Product::PlatformSink,
        Product::CloudSink,
        Product::OpenSource,
        Product::OpenSink,
    ];

    /// The product a `connector.class` names.
    pub fn from_class(class: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.class() == class.trim())
    }

    /// The `connector.class` that names it.
    pub fn class(self) -> &'static str {
        match self {
            Product::PlatformSource => "io.confluent.connect.servicenow.ServiceNowSourceConnector",
            Product::CloudSourceLegacy => "ServiceNowSource",
            Product::CloudSourceV2 => "ServiceNowSourceV2",
            Product::PlatformSink => "io.confluent.connect.servicenow.ServiceNowSinkConnector",
            Product::CloudSink => "ServiceNowSink",
            Product::OpenSource => "sh.oso.servicenow.source.ServiceNowSourceConnector",
            Product::OpenSink => "sh.oso.servicenow.sink.ServiceNowSinkConnector",
        }
    }

    /// The name the report and `snow.migrated.from` use.
    pub fn id(self) -> &'static str {
        match self {
            Product::PlatformSource => "confluent-platform-source",
            Product::CloudSourceLegacy => "confluent-cloud-source-legacy",
            Product::CloudSourceV2 => "confluent-cloud-source-v2",
            Product::PlatformSink => "confluent-platform-sink",
            Product::CloudSink => "confluent-cloud-sink",
            Product::OpenSource => "open-source",
            Product::OpenSink => "open-sink",
        }
    }

    /// The product's name as its documentation gives it.
    pub fn title(self) -> &'static str {
        match self {
            Product::PlatformSource => "ServiceNow Source Connector for Confluent Platform",
            Product::CloudSourceLegacy => "ServiceNow Source [Legacy] for Confluent Cloud",
            Product::CloudSourceV2 => "ServiceNow Source V2 for Confluent Cloud",
            Product::PlatformSink => "ServiceNow Sink Connector for Confluent Platform",
            Product::CloudSink => "ServiceNow Sink for Confluent Cloud",
            Product::OpenSource => "open Kafka Connect ServiceNow source",
            Product::OpenSink => "open Kafka Connect ServiceNow sink",
        }
    }

    /// True for the sinks.
    pub fn is_sink(self) -> bool {
        matches!(self, Product::PlatformSink | Product::CloudSink | Product::OpenSink)
    }

    /// True for the sources.
    pub fn is_source(self) -> bool {
        !self.is_sink()
    }

    /// True for Confluent Cloud's (fully managed) connectors.
    pub fn is_cloud(self) -> bool {
        matches!(self, Product::CloudSourceLegacy | Product::CloudSourceV2 | Product::CloudSink)
    }
}

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
