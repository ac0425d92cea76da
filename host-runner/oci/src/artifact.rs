//! The Wasm OCI artifact (CNCF TAG Runtime's layout, which `wkg oci push` writes): an image
//! manifest whose config is `application/vnd.wasm.config.v0+json` (created, architecture `wasm`,
//! os `wasip2`, the layer digests, the component's imports and exports) and whose one layer is the
//! component, `application/wasm`. A component's Sigstore bundle is a second manifest that refers
//! to it (`subject`) with `artifactType` `application/vnd.dev.sigstore.bundle.v0.3+json`, as
//! cosign attaches its bundles: found by the referrers API, or by the tag schema `sha256-<hex>`
//! on registries without it.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use crate::reference::sha256_hex;

/// An OCI image manifest.
pub const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// An OCI image index.
pub const INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// The Wasm config.
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// The component layer.
pub const WASM_LAYER: &str = "application/wasm";
/// A Sigstore bundle (artifact type and layer).
pub const BUNDLE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
/// The empty config of an artifact without one.
pub const EMPTY: &str = "application/vnd.oci.empty.v1+json";

/// A content descriptor.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Media type.
    pub media_type: String,
    /// `sha256:<hex>`.
    pub digest: String,
    /// Size in bytes.
    pub size: u64,
    /// The artifact type of a manifest it describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

impl Descriptor {
    /// The descriptor of `bytes` as `media_type`.
    pub fn of(media_type: &str, bytes: &[u8]) -> Self {
        Self {
            media_type: media_type.into(),
            digest: format!("sha256:{}", sha256_hex(bytes)),
            size: bytes.len() as u64,
            artifact_type: None,
            annotations: None,
        }
    }

    /// The hex digest, if it is a SHA-256 one.
    pub fn hex(&self) -> Option<&str> {
        self.digest.strip_prefix("sha256:").filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    }
}

/// An image manifest.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 2.
    pub schema_version: u32,
    /// [`MANIFEST`].
    #[serde(default)]
    pub media_type: Option<String>,
    /// The artifact type (a referrer's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// The config blob.
    pub config: Descriptor,
    /// The layers.
    pub layers: Vec<Descriptor>,
    /// The manifest this one refers to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Descriptor>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// An image index (the referrers API's answer, the tag schema's list).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    /// Always 2.
    #[serde(default = "two")]
    pub schema_version: u32,
    /// [`INDEX`].
    #[serde(default)]
    pub media_type: Option<String>,
    /// The manifests.
    #[serde(default)]
    pub manifests: Vec<Descriptor>,
}

fn two() -> u32 {
    2
}

/// The Wasm config.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WasmConfig {
    /// RFC 3339.
    pub created: String,
    /// `wasm`.
    pub architecture: String,
    /// `wasip2`.
    pub os: String,
    /// The layers' digests.
    pub layer_digests: Vec<String>,
    /// The component's world.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<ComponentTypes>,
}

/// A component's top-level imports and exports.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct ComponentTypes {
    /// Interfaces and functions it exports.
    pub exports: Vec<String>,
    /// Interfaces and functions it imports.
    pub imports: Vec<String>,
    /// The world it targets, when known.
    pub target: Option<String>,
}

/// What `artefact push` uploads: the config and manifest for a component.
pub struct Built {
    /// The config's bytes.
    pub config: Vec<u8>,
    /// The manifest's bytes.
    pub manifest: Vec<u8>,
}

/// The artifact for the component `bytes`, created at `created` (RFC 3339: the release's
/// SOURCE_DATE_EPOCH, so the same component gives the same manifest digest), with `annotations`.
pub fn component_artifact(bytes: &[u8], created: &str, annotations: BTreeMap<String, String>) -> Result<Built> {
    let component = component_types(bytes)?;
    let layer = Descriptor::of(WASM_LAYER, bytes);
    let config = WasmConfig {
        created: created.to_string(),
        architecture: "wasm".into(),
        os: "wasip2".into(),
        layer_digests: vec![layer.digest.clone()],
        component: Some(component),
    };
    let config = serde_json::to_vec(&config)?;
    let mut annotations = annotations;
    annotations.insert("org.opencontainers.image.created".into(), created.to_string());
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(MANIFEST.into()),
        artifact_type: None,
        config: Descriptor::of(WASM_CONFIG, &config),
        layers: vec![layer],
        subject: None,
        annotations: Some(annotations),
    };
    Ok(Built { manifest: serde_json::to_vec(&manifest)?, config })
}

/// The referrer carrying `bundle` for the manifest `subject`; its config is the empty blob `{}`.
pub fn bundle_artifact(bundle: &[u8], subject: Descriptor, created: &str) -> Result<Vec<u8>> {
    let mut annotations = BTreeMap::new();
    annotations.insert("org.opencontainers.image.created".to_string(), created.to_string());
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(MANIFEST.into()),
        artifact_type: Some(BUNDLE.into()),
        config: Descriptor::of(EMPTY, b"{}"),
        layers: vec![Descriptor::of(BUNDLE, bundle)],
        subject: Some(subject),
        annotations: Some(annotations),
    };
    Ok(serde_json::to_vec(&manifest)?)
}

/// The component layer of a pulled manifest, checked: an image manifest with exactly one
/// `application/wasm` layer (other Wasm artifacts' layer type `application/vnd.wasm.content.
/// layer.v1+wasm` is taken too) with a SHA-256 digest.
pub fn component_layer(manifest: &[u8], media_type: &str, max: u64) -> Result<Descriptor> {
    if media_type == INDEX {
        bail!("it names an image index (several platforms), not a component: name the component's own manifest");
    }
    let manifest: Manifest =
        serde_json::from_slice(manifest).map_err(|e| anyhow::anyhow!("its manifest is not an OCI image manifest: {e}"))?;
    if manifest.schema_version != 2 {
        bail!("its manifest has schemaVersion {}, not 2", manifest.schema_version);
    }
    let wasm: Vec<&Descriptor> = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == WASM_LAYER || l.media_type == "application/vnd.wasm.content.layer.v1+wasm")
        .collect();
    let [layer] = wasm.as_slice() else {
        bail!("it is not a Wasm component artifact: {} application/wasm layers (config {})", wasm.len(), manifest.config.media_type);
    };
    if layer.hex().is_none() {
        bail!("its layer's digest {:?} is not sha256:<64 hex>", layer.digest);
    }
    if layer.size > max {
        bail!("its component is {} bytes; at most {max} are taken", layer.size);
    }
    Ok((*layer).clone())
}

/// The bundle layer of a referrer's manifest.
pub fn bundle_layer(manifest: &[u8]) -> Option<Descriptor> {
    let manifest: Manifest = serde_json::from_slice(manifest).ok()?;
    manifest.layers.into_iter().find(|l| l.media_type == BUNDLE && l.hex().is_some())
}

/// A component's top-level imports and exports, read from its sections (nothing compiled).
pub fn component_types(bytes: &[u8]) -> Result<ComponentTypes> {
    use wasmparser::{Encoding, Parser, Payload};
    let mut types = ComponentTypes::default();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(|e| anyhow::anyhow!("not a WebAssembly component: {e}"))? {
            Payload::Version { encoding, .. } => {
                if depth == 0 && encoding != Encoding::Component {
                    bail!("a core WebAssembly module, not a component (WASI 0.2)");
                }
                depth += 1;
            }
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(section) if depth == 1 => {
                for import in section {
                    types.imports.push(import.map_err(|e| anyhow::anyhow!("reading its imports: {e}"))?.name.name.to_string());
                }
            }
            Payload::ComponentExportSection(section) if depth == 1 => {
                for export in section {
                    types.exports.push(export.map_err(|e| anyhow::anyhow!("reading its exports: {e}"))?.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    Ok(types)
}

/// `secs` since the epoch as RFC 3339 UTC.
pub fn rfc3339(secs: i64) -> String {
    format!("{}Z", snow_core::time::Timestamp(secs).to_string().replace(' ', "T"))
}

/// When an artifact pushed now is created: `SOURCE_DATE_EPOCH` when set (reproducible builds),
/// else now.
pub fn created_now() -> String {
    let secs = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64));
    rfc3339(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_component_artifact_names_its_layer_and_world() {
        let wasm = std::fs::read(guest_artifacts::GUEST_SINK).unwrap();
        let built = component_artifact(&wasm, &rfc3339(1_700_000_000), BTreeMap::new()).unwrap();
        let manifest: Manifest = serde_json::from_slice(&built.manifest).unwrap();
        assert_eq!(manifest.config.media_type, WASM_CONFIG);
        assert_eq!(manifest.config.digest, format!("sha256:{}", sha256_hex(&built.config)));
        let layer = component_layer(&built.manifest, MANIFEST, 1 << 30).unwrap();
        assert_eq!(layer.digest, format!("sha256:{}", sha256_hex(&wasm)));
        let config: WasmConfig = serde_json::from_slice(&built.config).unwrap();
        assert_eq!((config.architecture.as_str(), config.os.as_str(), config.created.as_str()), ("wasm", "wasip2", "2023-11-14T22:13:20Z"));
        let types = config.component.unwrap();
        assert!(types.imports.iter().any(|i| i.starts_with("wasi:http/outgoing-handler")), "{:?}", types.imports);
        assert!(!types.exports.is_empty());
        let again = component_artifact(&wasm, &rfc3339(1_700_000_000), BTreeMap::new()).unwrap();
        assert_eq!(again.manifest, built.manifest, "the same component at the same time gives the same manifest");
        assert!(component_layer(&built.manifest, MANIFEST, 10).unwrap_err().to_string().contains("at most 10"));
        assert!(component_layer(b"{}", INDEX, 10).unwrap_err().to_string().contains("image index"));
        assert!(component_types(b"\0asm\x01\0\0\0").unwrap_err().to_string().contains("core WebAssembly module"));
    }
}
