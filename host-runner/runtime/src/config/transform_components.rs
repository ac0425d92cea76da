//! The keys of a connector's transform components (`transforms.<alias>.type=`
//! `io.snowconnect.transforms.Component`, docs/transforms.md): which file, pinned to which
//! digest, signed by which bundle (the connector's `component.trusted.*` keys decide who may sign
//! it), and the limits of its stores. Every other key under the alias is the component's own
//! configuration. [`ConnectorSpec::transform_component`] is the one check of a transform
//! component's file against the connector, at start and at a SIGHUP hot-swap alike.

use snow_core::error::ConfigError;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

use super::ConnectorSpec;
use crate::artefact::Checked;

/// Keys under `transforms.<alias>.` the host reads (the component never sees them).
const HOST_KEYS: [&str; 6] =
    ["component.path", "component.ref", "component.digest", "component.bundle.path", "memory.max.bytes", "call.timeout.ms"];

/// One transform component stage.
#[derive(Debug, Clone)]
pub struct TransformComponentSpec {
    /// The stage's alias.
    pub alias: String,
    /// `transforms.<alias>.component.path`.
    pub path: PathBuf,
    /// `transforms.<alias>.component.digest` (hex), set from `.component.ref` in a fleet.
    pub digest: Option<String>,
    /// `transforms.<alias>.component.bundle.path` (default: `<component>.sigstore.json`).
    pub bundle: Option<PathBuf>,
    /// `transforms.<alias>.memory.max.bytes` (default 256 MiB, as a connector's: a JavaScript
    /// component's heap grows to tens of MiB before it collects).
    pub memory_max_bytes: usize,
    /// `transforms.<alias>.call.timeout.ms` (default 5 s): one record's call.
    pub call_timeout: Duration,
    /// The component's own keys (without the prefix).
    pub config: BTreeMap<String, String>,
}

/// Reads each component stage of `chain`; problems go to `errors`, each naming its key.
pub fn read(chain: &snow_data::transform::Chain, errors: &mut Vec<ConfigError>) -> Vec<TransformComponentSpec> {
    let mut out = Vec::new();
    for (alias, own) in chain.components() {
        let key = |k: &str| format!("transforms.{alias}.{k}");
        let get = |k: &str| own.get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let number = |k: &str, default: u64, min: u64, max: u64, errors: &mut Vec<ConfigError>| match get(k).map(|v| v.parse::<u64>()) {
            None => default,
            Some(Ok(v)) if (min..=max).contains(&v) => v,
            Some(_) => {
                errors.push(ConfigError::new(key(k), format!("must be a whole number between {min} and {max}")));
                default
            }
        };
        if own.contains_key("component.ref") {
            errors.push(ConfigError::new(
                key("component.ref"),
                format!(
                    "names a component in a fleet's component.storage.topic (snow-connect worker); a standalone run names its file with {}",
                    key("component.path")
                ),
            ));
            continue;
        }
        let Some(path) = get("component.path") else {
            errors.push(ConfigError::missing(key("component.path"), "is required: the transform component's .wasm file"));
            continue;
        };
        let digest = get("component.digest").and_then(|d| match crate::artefact::parse_ref(&d) {
            Ok(hex) => Some(hex),
            Err(e) => {
                errors.push(ConfigError::new(key("component.digest"), format!("{e:#}")));
                None
            }
        });
        let memory_max_bytes = number("memory.max.bytes", 256 << 20, 16 << 20, 4 << 30, errors) as usize;
        let call_timeout = Duration::from_millis(number("call.timeout.ms", 5_000, 10, 600_000, errors));
        out.push(TransformComponentSpec {
            alias: alias.to_string(),
            path: PathBuf::from(path),
            digest,
            bundle: get("component.bundle.path").map(PathBuf::from),
            memory_max_bytes,
            call_timeout,
            config: own.iter().filter(|(k, _)| !HOST_KEYS.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect(),
        });
    }
    out
}

impl ConnectorSpec {
    /// Reads transform component `stage` and checks it against the connector: its signature
    /// under the connector's trust policy (with the stage's own bundle) and the digest it pins.
    pub fn transform_component(&self, stage: &TransformComponentSpec) -> Result<Checked> {
        let bundle = stage.bundle.clone().unwrap_or_else(|| crate::artefact::default_bundle_path(&stage.path));
        let artefact = Checked::read_bundled(&stage.path, &self.trust, &bundle)
            .with_context(|| format!("connector {}: transform {}", self.name, stage.alias))?;
        if let Some(pinned) = stage.digest.as_deref().filter(|pinned| *pinned != artefact.digest()) {
            return Err(super::InvalidConfig::one(
                &self.name,
                ConfigError::refused(
                    format!("transforms.{}.component.digest", stage.alias),
                    format!(
                        "component {} has digest sha256:{}, the configuration pins sha256:{pinned}; refused",
                        stage.path.display(),
                        artefact.digest()
                    ),
                ),
            )
            .into());
        }
        Ok(artefact)
    }
}
