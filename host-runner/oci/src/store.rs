//! The local store of fetched artefacts, under one private directory: manifests by digest
//! (`manifests/sha256-<hex>.json`), components by the digest of their bytes
//! (`components/sha256-<hex>.wasm`, the bundle that verified beside it as
//! `….wasm.sigstore.json`), and the digest each tag last resolved to (`pins.json`). Everything read
//! back is checked against its digest first, so a file changed on disk is fetched again, never
//! run. Writes go through [`snow_runtime::files`] (no planted link followed, atomic).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::reference::sha256_hex;

/// The store at one directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

/// What a tag last resolved to.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pin {
    /// The manifest's hex digest.
    pub digest: String,
    /// When (seconds since the epoch).
    pub at: i64,
}

impl Store {
    /// The store at `dir` (created private on first write).
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn ready(&self, sub: &str) -> Result<PathBuf> {
        snow_runtime::files::private_dir(&self.dir, "the OCI artefact cache")?;
        let dir = self.dir.join(sub);
        snow_runtime::files::private_dir(&dir, "the OCI artefact cache")?;
        Ok(dir)
    }

    /// The manifest `hex`, if kept and intact.
    pub fn manifest(&self, hex: &str) -> Option<Vec<u8>> {
        read_checked(&self.dir.join("manifests").join(format!("sha256-{hex}.json")), hex)
    }

    /// Keeps a manifest.
    pub fn keep_manifest(&self, bytes: &[u8]) -> Result<()> {
        let dir = self.ready("manifests")?;
        snow_runtime::files::write_atomically(&dir.join(format!("sha256-{}.json", sha256_hex(bytes))), bytes)
    }

    /// Where the component `hex` is kept.
    pub fn component_path(&self, hex: &str) -> PathBuf {
        self.dir.join("components").join(format!("sha256-{hex}.wasm"))
    }

    /// The component `hex`'s bytes, if kept and intact.
    pub fn component(&self, hex: &str) -> Option<Vec<u8>> {
        read_checked(&self.component_path(hex), hex)
    }

    /// Keeps a component; returns its path.
    pub fn keep_component(&self, bytes: &[u8]) -> Result<PathBuf> {
        self.ready("components")?;
        let path = self.component_path(&sha256_hex(bytes));
        snow_runtime::files::write_atomically(&path, bytes)?;
        Ok(path)
    }

    /// The pins of tags.
    pub fn pins(&self) -> BTreeMap<String, Pin> {
        std::fs::read(self.dir.join("pins.json")).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
    }

    /// Records that `tagged` (`registry/repository:tag`) resolved to the manifest `hex`.
    pub fn pin(&self, tagged: &str, hex: &str) -> Result<()> {
        snow_runtime::files::private_dir(&self.dir, "the OCI artefact cache")?;
        let mut pins = self.pins();
        let at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        pins.insert(tagged.to_string(), Pin { digest: hex.to_string(), at });
        snow_runtime::files::write_atomically(&self.dir.join("pins.json"), &serde_json::to_vec_pretty(&pins)?)
    }
}

fn read_checked(path: &Path, hex: &str) -> Option<Vec<u8>> {
    std::fs::read(path).ok().filter(|b| sha256_hex(b) == hex)
}
