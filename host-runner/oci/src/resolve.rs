//! Resolving `oci://…` to a verified local file: a tag to the manifest digest it names now (and
//! pinned: the digest is kept, and used with a warning when the registry cannot be reached), the
//! manifest and component fetched unless the store holds them intact, and of the Sigstore bundles
//! that refer to the manifest the first that verifies under the connector's trust policy kept
//! beside the component — so the usual check before compiling ([`snow_runtime::artefact`]) sees
//! exactly what a file beside its bundle would give it. Nothing fetched is trusted before its
//! digest and then its signature are checked.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use snow_core::error::ConfigError;
use snow_runtime::artefact::{Signature, TrustPolicy};
use tokio::sync::Mutex;

use crate::artifact::{self, BUNDLE, Descriptor, Index};
use crate::client::{Fetched, Registry};
use crate::reference::Reference;
use crate::settings::Settings;
use crate::store::Store;

/// Largest component taken from a registry.
pub const MAX_COMPONENT: u64 = 256 << 20;
/// Largest bundle taken.
pub const MAX_BUNDLE: usize = 1 << 20;
/// Most bundles tried for one component.
const MAX_BUNDLES_TRIED: usize = 16;

/// A component fetched and checked against its digests.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The component's file (its bundle, when one verified or was found, beside it).
    pub path: PathBuf,
    /// The hex SHA-256 of the component's bytes.
    pub component: String,
    /// The reference pinned to its manifest digest.
    pub pinned: Reference,
}

/// Fetches components for one set of [`Settings`]; registries' tokens are kept between calls.
pub struct Resolver {
    settings: Settings,
    store: Store,
    registries: Mutex<HashMap<String, Arc<Registry>>>,
}

impl Resolver {
    /// A resolver for `settings`.
    pub fn new(settings: Settings) -> Self {
        let store = Store::new(settings.cache.clone());
        Self { settings, store, registries: Mutex::new(HashMap::new()) }
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The client of `name`, with the credentials filed for it.
    pub async fn registry(&self, name: &str) -> Result<Arc<Registry>> {
        if let Some(why) = self.settings.refuses(name) {
            bail!("{why}");
        }
        let mut known = self.registries.lock().await;
        if let Some(r) = known.get(name) {
            return Ok(r.clone());
        }
        let auth_file = self.settings.auth_file.clone().or_else(crate::auth::default_auth_file);
        let credentials = auth_file.as_deref().map(|f| crate::auth::from_auth_file(f, name)).transpose()?.flatten();
        let plain = self.settings.plain_http.iter().any(|h| h == name);
        let registry = Arc::new(Registry::new(name, plain, self.settings.route.clone(), credentials));
        known.insert(name.to_string(), registry.clone());
        Ok(registry)
    }

    /// `reference` pinned to the digest of the manifest its tag names now (unchanged when it
    /// names a digest). When the registry cannot be reached, the digest the tag last resolved to
    /// here, with a warning.
    pub async fn pin(&self, reference: &Reference) -> Result<(Reference, Option<Fetched>)> {
        if let Some(hex) = &reference.digest {
            return Ok((reference.pinned(hex), None));
        }
        let registry = self.registry(&reference.registry).await?;
        match registry.manifest(&reference.repository, &reference.manifest_ref()).await {
            Ok(Some(fetched)) => {
                self.store.pin(&reference.tagged_name(), &fetched.digest)?;
                Ok((reference.pinned(&fetched.digest), Some(fetched)))
            }
            Ok(None) => bail!("{reference}: the registry has no such tag"),
            Err(e) => match self.store.pins().get(&reference.tagged_name()) {
                Some(pin) => {
                    tracing::warn!(
                        "{reference}: the registry cannot be asked ({e:#}); running sha256:{} that the tag named at {} (pinned here)",
                        pin.digest,
                        artifact::rfc3339(pin.at)
                    );
                    Ok((reference.pinned(&pin.digest), None))
                }
                None => Err(e.context(format!("resolving the tag of {reference}"))),
            },
        }
    }

    /// The component `reference` names, as a checked local file with the bundle that verifies
    /// under `policy` (if any does) beside it.
    pub async fn resolve(&self, reference: &Reference, policy: &TrustPolicy) -> Result<Resolved> {
        if let Some(why) = self.settings.refuses(&reference.registry) {
            bail!("{reference}: {why}");
        }
        let (pinned, fetched) = self.pin(reference).await?;
        let hex = pinned.digest.clone().unwrap_or_default();
        let manifest = match (fetched, self.store.manifest(&hex)) {
            (Some(fetched), _) => (fetched.bytes, fetched.media_type),
            (None, Some(kept)) => (kept, artifact::MANIFEST.to_string()),
            (None, None) => {
                let registry = self.registry(&pinned.registry).await?;
                let fetched = registry
                    .manifest(&pinned.repository, &format!("sha256:{hex}"))
                    .await?
                    .with_context(|| format!("{pinned}: the registry has no such manifest"))?;
                (fetched.bytes, fetched.media_type)
            }
        };
        let layer = artifact::component_layer(&manifest.0, &manifest.1, MAX_COMPONENT).with_context(|| format!("{pinned}"))?;
        self.store.keep_manifest(&manifest.0)?;
        let component = layer.hex().unwrap_or_default().to_string();
        let bytes = match self.store.component(&component) {
            Some(bytes) => bytes,
            None => {
                let registry = self.registry(&pinned.registry).await?;
                let bytes =
                    registry.blob(&pinned.repository, &component, layer.size as usize).await.with_context(|| format!("{pinned}"))?;
                self.store.keep_component(&bytes)?;
                tracing::info!("{pinned}: fetched the component sha256:{component} ({} bytes)", bytes.len());
                bytes
            }
        };
        let path = self.store.component_path(&component);
        self.bundle(&pinned, &hex, &bytes, &path, policy).await?;
        Ok(Resolved { path, component, pinned })
    }

    /// Puts beside `path` the first bundle referring to the manifest `hex` that verifies `bytes`
    /// under `policy`; if none does, the first found (the check before compiling then says why),
    /// and none when there is none.
    async fn bundle(&self, reference: &Reference, hex: &str, bytes: &[u8], path: &std::path::Path, policy: &TrustPolicy) -> Result<()> {
        let bundle_path = snow_runtime::artefact::default_bundle_path(path);
        let verifies = |policy: &TrustPolicy| {
            matches!(snow_runtime::artefact::verify::verify_bundled(bytes, policy, bundle_path.clone()), Ok(Signature::Verified { .. }))
        };
        if bundle_path.is_file() && verifies(policy) {
            return Ok(());
        }
        let registry = self.registry(&reference.registry).await?;
        let candidates = match referrers(&registry, &reference.repository, hex).await {
            Ok(c) => c,
            Err(e) if bundle_path.is_file() => {
                tracing::warn!("{reference}: its signatures cannot be listed ({e:#}); keeping the bundle fetched before");
                return Ok(());
            }
            Err(e) => return Err(e.context(format!("{reference}: listing its signatures"))),
        };
        let mut first = None;
        for candidate in candidates.iter().take(MAX_BUNDLES_TRIED) {
            let Some(manifest_hex) = candidate.hex() else { continue };
            let Some(manifest) = registry.manifest(&reference.repository, &format!("sha256:{manifest_hex}")).await? else { continue };
            let Some(layer) = artifact::bundle_layer(&manifest.bytes) else { continue };
            if layer.size as usize > MAX_BUNDLE {
                continue;
            }
            let bundle = registry.blob(&reference.repository, layer.hex().unwrap_or_default(), MAX_BUNDLE).await?;
            snow_runtime::files::write_atomically(&bundle_path, &bundle)?;
            if verifies(policy) {
                return Ok(());
            }
            first.get_or_insert(bundle);
        }
        match first {
            Some(bundle) => snow_runtime::files::write_atomically(&bundle_path, &bundle)?,
            None => {
                let _ = std::fs::remove_file(&bundle_path);
            }
        }
        Ok(())
    }
}

/// The referrers of the manifest `hex` that may be bundles, from the referrers API and the tag
/// schema both (a client that saw no `OCI-Subject` on push listed its bundle only in the latter).
/// A referrer typed as a bundle comes first; one typed by an empty config (what registries that
/// take the artifact type from the config report) is a candidate too: its layer decides.
pub async fn referrers(registry: &Registry, repository: &str, hex: &str) -> Result<Vec<Descriptor>> {
    let mut found = registry.referrers(repository, hex, BUNDLE).await?.unwrap_or_default();
    found.extend(tag_schema_index(registry, repository, hex).await?.manifests);
    let mut seen = std::collections::HashSet::new();
    found.retain(|d| seen.insert(d.digest.clone()));
    found.retain(|d| matches!(d.artifact_type.as_deref(), Some(BUNDLE | artifact::EMPTY) | None));
    found.sort_by_key(|d| d.artifact_type.as_deref() != Some(BUNDLE));
    Ok(found)
}

/// The index kept under the tag `sha256-<hex>` by registries without the referrers API (empty
/// when there is none).
pub async fn tag_schema_index(registry: &Registry, repository: &str, hex: &str) -> Result<Index> {
    match registry.manifest(repository, &format!("sha256-{hex}")).await? {
        Some(fetched) => {
            serde_json::from_slice(&fetched.bytes).with_context(|| format!("{}: the tag sha256-{hex} is not an index", registry.name()))
        }
        None => Ok(Index::default()),
    }
}

/// The keys naming components: `component.ref` and `transforms.<alias>.component.ref`.
pub fn reference_keys(entries: &BTreeMap<String, String>) -> Vec<String> {
    entries
        .keys()
        .filter(|k| *k == "component.ref" || (k.starts_with("transforms.") && k.ends_with(".component.ref")))
        .filter(|k| entries.get(*k).is_some_and(|v| v.trim().starts_with("oci://")))
        .cloned()
        .collect()
}

/// Replaces every `oci://` reference of `entries` by the file it resolves to
/// (`….component.path` and `….component.digest`), verifying bundles under the trust policy of
/// `entries`. Errors name the key.
pub async fn resolve_entries(entries: &mut BTreeMap<String, String>, resolver: &Resolver) -> Result<Vec<PathBuf>, Vec<ConfigError>> {
    let keys = reference_keys(entries);
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut errors = Vec::new();
    let policy = snow_runtime::config::artefact::trust_policy(entries, &mut errors);
    let mut files = Vec::new();
    for key in keys {
        let prefix = key.trim_end_matches("ref").to_string();
        for other in ["path", "bundle.path"] {
            if entries.contains_key(&format!("{prefix}{other}")) {
                errors.push(ConfigError::new(format!("{prefix}{other}"), format!("a component is named by {key} or by {prefix}path, not both (the bundle of an oci:// component comes from its registry)")));
            }
        }
        let value = entries.remove(&key).unwrap_or_default();
        let resolved = match Reference::parse(&value) {
            Ok(reference) => resolver.resolve(&reference, &policy).await,
            Err(e) => Err(e),
        };
        match resolved {
            Ok(resolved) => {
                tracing::info!("{key}: {} is sha256:{} ({})", resolved.pinned, resolved.component, resolved.path.display());
                entries.insert(format!("{prefix}path"), resolved.path.display().to_string());
                entries.insert(format!("{prefix}digest"), format!("sha256:{}", resolved.component));
                files.push(resolved.path);
            }
            Err(e) => errors.push(ConfigError::new(key.clone(), format!("{e:#}"))),
        }
    }
    if errors.is_empty() { Ok(files) } else { Err(errors) }
}
