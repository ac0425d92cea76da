//! Components reach every worker through Kafka (ADR 0023): `snow-connect component push` stores
//! a component's bytes and its Sigstore bundle in the fleet's compacted `component.storage.topic`,
//! keyed by the SHA-256 of the bytes, and prints the reference a connector names it by,
//! `component.ref=sha256:<hex>`. Every worker resolves a reference the same way: it reads the
//! chunks, checks that they hash to the digest the reference pins (refusing them otherwise), and
//! writes them with their bundle to its local directory of resolved components, from where the
//! signature check and compilation take them as any component file (ADR 0020, 0019).
//!
//! Records: `component-<hex>-<n>` → chunk n of the bytes (at most [`CHUNK`] bytes, under any
//! broker's default `message.max.bytes`), `component-<hex>-bundle` → the bundle's JSON, and
//! `component-<hex>` → the manifest `{"size","chunks"}`, written last: a manifest means every chunk
//! before it is there.
//!
//! Whoever may write the topic may offer components (and whoever may create connectors may name
//! them), so nothing read from it is trusted: a manifest's size and chunk count are bounded
//! ([`MAX_COMPONENT`]) and must agree, every chunk is at most [`CHUNK`] bytes and all of them add
//! up to the size before anything is assembled, a bundle is at most [`MAX_BUNDLE`] bytes, and the
//! files are written into a directory only this user may write, never through a planted link
//! ([`snow_runtime::files`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use snow_runtime::state::StateTopic;

/// Largest chunk of a component in one record.
pub const CHUNK: usize = 256 * 1024;

/// Largest component a fleet stores: our connectors are a few megabytes; a component compiled
/// with its dependencies in debug mode stays far below.
pub const MAX_COMPONENT: usize = 256 << 20;

/// Largest Sigstore bundle read (one is a few kilobytes).
pub const MAX_BUNDLE: usize = 1 << 20;

/// The fleet's components topic.
#[derive(Clone)]
pub struct ComponentStore {
    topic: Arc<StateTopic>,
}

#[derive(Serialize, Deserialize)]
struct Manifest {
    size: usize,
    chunks: usize,
}

impl ComponentStore {
    /// The store over `topic`.
    pub fn new(topic: Arc<StateTopic>) -> Self {
        Self { topic }
    }

    /// Stores `bytes` and their `bundle` (JSON); returns the hex digest.
    pub async fn push(&self, bytes: &[u8], bundle: Option<&[u8]>) -> Result<String> {
        if bytes.len() > MAX_COMPONENT {
            bail!("the component is {} bytes; a fleet stores components of at most {MAX_COMPONENT} bytes", bytes.len());
        }
        if bundle.is_some_and(|b| b.len() > MAX_BUNDLE) {
            bail!("the bundle is larger than {MAX_BUNDLE} bytes");
        }
        let digest = sigstore_verify::crypto::sha256(bytes).to_hex();
        let chunks: Vec<&[u8]> = bytes.chunks(CHUNK).collect();
        for (n, chunk) in chunks.iter().enumerate() {
            self.topic.write(format!("component-{digest}-{n}").as_bytes(), Some(chunk)).await?;
        }
        if let Some(bundle) = bundle {
            self.topic.write(format!("component-{digest}-bundle").as_bytes(), Some(bundle)).await?;
        }
        let manifest = serde_json::to_vec(&Manifest { size: bytes.len(), chunks: chunks.len() })?;
        self.topic.write(format!("component-{digest}").as_bytes(), Some(&manifest)).await?;
        Ok(digest)
    }

    /// The component `hex` as a file in `dir` (its bundle beside it), written once and checked
    /// against the digest every time.
    pub async fn resolve(&self, hex: &str, dir: &Path) -> Result<PathBuf> {
        let path = dir.join(format!("sha256-{hex}.wasm"));
        snow_runtime::files::private_dir(dir, "the directory of resolved components")?;
        if path.is_file() && std::fs::read(&path).is_ok_and(|b| sigstore_verify::crypto::sha256(&b).to_hex() == hex) {
            tracing::info!(component = %path.display(), "component sha256:{hex} resolved: already in {}", dir.display());
            return Ok(path);
        }
        self.topic.read_to_end().await?;
        let topic = self.topic.name();
        let stored = self.topic.get(format!("component-{hex}").as_bytes()).with_context(|| {
            format!("component.ref sha256:{hex}: no such component in {topic} (push it with `snow-connect component push`)")
        })?;
        let (size, chunks) = check_manifest(&stored)
            .map_err(|why| anyhow::anyhow!("component.ref sha256:{hex}: the manifest in {topic} is refused: {why}"))?;
        let manifest = Manifest { size, chunks };
        let mut chunks = Vec::with_capacity(manifest.chunks);
        let mut total = 0usize;
        for n in 0..manifest.chunks {
            let chunk = self
                .topic
                .get(format!("component-{hex}-{n}").as_bytes())
                .with_context(|| format!("component.ref sha256:{hex}: chunk {n} of {} is missing from {topic}", manifest.chunks))?;
            if chunk.len() > CHUNK || chunk.is_empty() {
                bail!("component.ref sha256:{hex}: chunk {n} in {topic} holds {} bytes (1 to {CHUNK}); refused", chunk.len());
            }
            total += chunk.len();
            if total > manifest.size {
                bail!("component.ref sha256:{hex}: the chunks in {topic} hold more than the manifest's {} bytes; refused", manifest.size);
            }
            chunks.push(chunk);
        }
        if total != manifest.size {
            bail!("component.ref sha256:{hex}: the chunks in {topic} hold {total} bytes, the manifest says {}; refused", manifest.size);
        }
        let bytes = chunks.concat();
        let actual = sigstore_verify::crypto::sha256(&bytes).to_hex();
        if actual != hex {
            bail!("component.ref sha256:{hex}: the stored bytes have digest sha256:{actual}; refused");
        }
        snow_runtime::files::private_dir(dir, "the directory of resolved components")?;
        let bundle = self.topic.get(format!("component-{hex}-bundle").as_bytes());
        let bundle_path = snow_runtime::artefact::default_bundle_path(&path);
        match bundle {
            Some(bundle) if bundle.len() > MAX_BUNDLE => {
                bail!("component.ref sha256:{hex}: its bundle in {topic} is larger than {MAX_BUNDLE} bytes; refused")
            }
            Some(bundle) => snow_runtime::files::write_atomically(&bundle_path, &bundle)?,
            None => {
                let _ = std::fs::remove_file(&bundle_path);
            }
        }
        snow_runtime::files::write_atomically(&path, &bytes)?;
        tracing::info!(component = %path.display(), size = bytes.len(), "component sha256:{hex} resolved from {topic}");
        Ok(path)
    }
}

/// A manifest's `(size, chunks)`, if the bytes are one that could describe a component this store
/// wrote; else why not.
pub fn check_manifest(bytes: &[u8]) -> Result<(usize, usize), String> {
    let manifest: Manifest = serde_json::from_slice(bytes).map_err(|e| format!("not a manifest: {e}"))?;
    manifest.check()?;
    Ok((manifest.size, manifest.chunks))
}

impl Manifest {
    /// Why the manifest cannot describe a component this store wrote, if it cannot.
    fn check(&self) -> Result<(), String> {
        if self.size == 0 || self.size > MAX_COMPONENT {
            return Err(format!("size {} is not between 1 and {MAX_COMPONENT} bytes", self.size));
        }
        if self.chunks != self.size.div_ceil(CHUNK) {
            return Err(format!("{} chunks cannot hold {} bytes in chunks of {CHUNK}", self.chunks, self.size));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_must_be_bounded_and_agree_with_its_chunks() {
        let ok = Manifest { size: CHUNK + 1, chunks: 2 };
        assert!(ok.check().is_ok());
        assert!(Manifest { size: 1 << 62, chunks: 1 }.check().unwrap_err().contains("is not between 1 and"));
        assert!(Manifest { size: 10, chunks: 1 << 40 }.check().unwrap_err().contains("chunks cannot hold"));
        assert!(Manifest { size: 0, chunks: 0 }.check().is_err());
    }
}
