//! Pushing a component to a registry as a Wasm OCI artifact, and its Sigstore bundle as a
//! referrer of it: the config, the layer and the manifest (under the reference's tag, else by
//! digest), then the bundle's empty config, the bundle and its manifest with `subject` set; a
//! registry that does not take the subject (no `OCI-Subject` in its answer) gets the bundle
//! listed in the tag schema's index `sha256-<hex>` too, where clients without the referrers API
//! look. [`attach`] adds a bundle to a component another tool pushed (`wkg oci push`).

use std::collections::BTreeMap;

use anyhow::{Result, bail};

use crate::artifact::{self, BUNDLE, Descriptor, INDEX, MANIFEST};
use crate::reference::Reference;
use crate::resolve::Resolver;

/// What was pushed.
#[derive(Debug, Clone)]
pub struct Pushed {
    /// The reference pinned to the component manifest's digest.
    pub pinned: Reference,
    /// The component's hex SHA-256.
    pub component: String,
    /// The bundle manifest's hex digest, when a bundle was pushed.
    pub bundle: Option<String>,
}

/// Pushes `bytes` (with `bundle`, the JSON of its Sigstore bundle) to `reference`.
pub async fn push(
    resolver: &Resolver,
    reference: &Reference,
    bytes: &[u8],
    bundle: Option<&[u8]>,
    annotations: BTreeMap<String, String>,
) -> Result<Pushed> {
    if reference.digest.is_some() {
        bail!("{reference}: push to a tag (the registry gives the digest), not to a digest");
    }
    let registry = resolver.registry(&reference.registry).await?;
    let repository = &reference.repository;
    let created = artifact::created_now();
    let built = artifact::component_artifact(bytes, &created, annotations)?;
    registry.push_blob(repository, &built.config).await?;
    let component = registry.push_blob(repository, bytes).await?;
    let (hex, _) = registry.push_manifest(repository, &reference.manifest_ref(), &built.manifest, MANIFEST).await?;
    let pinned = reference.pinned(&hex);
    let Some(bundle) = bundle else { return Ok(Pushed { pinned, component, bundle: None }) };
    let referrer = attach_bundle(&registry, repository, &built.manifest, bundle, &created).await?;
    Ok(Pushed { pinned, component, bundle: Some(referrer) })
}

/// Attaches `bundle` to the component `reference` names (already in the registry, pushed by
/// any tool): checked first to be a signature of that component's bytes. Returns what
/// [`push`] would.
pub async fn attach(resolver: &Resolver, reference: &Reference, bundle: &[u8]) -> Result<Pushed> {
    let registry = resolver.registry(&reference.registry).await?;
    let manifest = registry
        .manifest(&reference.repository, &reference.manifest_ref())
        .await?
        .ok_or_else(|| anyhow::anyhow!("{reference}: the registry has no such manifest"))?;
    let layer = artifact::component_layer(&manifest.bytes, &manifest.media_type, crate::resolve::MAX_COMPONENT)?;
    let component = layer.hex().unwrap_or_default().to_string();
    match signed_digest(bundle) {
        Some(signed) if signed == component => {}
        Some(signed) => bail!("the bundle signs sha256:{signed}, not the component {reference} names (sha256:{component})"),
        None => bail!("the bundle is not a Sigstore bundle of a signed file (cosign sign-blob --bundle, snow-connect artefact sign)"),
    }
    let referrer = attach_bundle(&registry, &reference.repository, &manifest.bytes, bundle, &artifact::created_now()).await?;
    Ok(Pushed { pinned: reference.pinned(&manifest.digest), component, bundle: Some(referrer) })
}

/// The hex SHA-256 a bundle's message signature covers.
fn signed_digest(bundle: &[u8]) -> Option<String> {
    use base64::Engine as _;
    let value: serde_json::Value = serde_json::from_slice(bundle).ok()?;
    let digest = value.pointer("/messageSignature/messageDigest/digest")?.as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(digest).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Pushes `bundle` as a referrer of the manifest `subject` (its bytes); returns the referrer's
/// hex digest.
async fn attach_bundle(
    registry: &crate::client::Registry,
    repository: &str,
    subject: &[u8],
    bundle: &[u8],
    created: &str,
) -> Result<String> {
    let hex = crate::reference::sha256_hex(subject);
    registry.push_blob(repository, b"{}").await?;
    registry.push_blob(repository, bundle).await?;
    let referrer = artifact::bundle_artifact(bundle, Descriptor::of(MANIFEST, subject), created)?;
    let referrer_hex = crate::reference::sha256_hex(&referrer);
    let (_, subject_taken) = registry.push_manifest(repository, &format!("sha256:{referrer_hex}"), &referrer, MANIFEST).await?;
    if !subject_taken {
        let mut index = crate::resolve::tag_schema_index(registry, repository, &hex).await?;
        if !index.manifests.iter().any(|d| d.digest == format!("sha256:{referrer_hex}")) {
            let mut entry = Descriptor::of(MANIFEST, &referrer);
            entry.artifact_type = Some(BUNDLE.into());
            index.manifests.push(entry);
        }
        index.media_type = Some(INDEX.into());
        let bytes = serde_json::to_vec(&index)?;
        registry.push_manifest(repository, &format!("sha256-{hex}"), &bytes, INDEX).await?;
    }
    Ok(referrer_hex)
}
