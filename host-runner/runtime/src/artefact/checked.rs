//! A component's bytes as read once and checked: what the compiler gets is exactly what the
//! signature was checked against (no second read of the file between check and compile).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::verify::{Refusal, Signature, TrustPolicy, verify};

/// The bytes of a component and what its signature check found.
pub struct Checked {
    path: PathBuf,
    bytes: Vec<u8>,
    digest: String,
    signature: Result<Signature, Refusal>,
}

impl Checked {
    /// Reads the component at `path` and checks it against `policy`; a refusal is an error of one
    /// line naming the file and the reason. An unverified component allowed by the policy is
    /// logged as a warning here, at every start.
    pub fn read(path: &Path, policy: &TrustPolicy) -> Result<Self> {
        Self::read_bundled(path, policy, &policy.bundle_for(path))
    }

    /// [`Checked::read`] with the signature bundle at `bundle` (a transform component's).
    pub fn read_bundled(path: &Path, policy: &TrustPolicy, bundle: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).with_context(|| format!("reading component {}", path.display()))?;
        let digest = sigstore_verify::crypto::sha256(&bytes).to_hex();
        let signature = super::verify::verify_bundled(&bytes, policy, bundle.to_path_buf());
        let checked = Self { path: path.to_path_buf(), bytes, digest, signature };
        match &checked.signature {
            Ok(Signature::Verified { .. }) => {
                tracing::info!(component = %path.display(), sha256 = checked.digest, "component signature {}", checked.signature_text())
            }
            Ok(Signature::Unverified(_)) => tracing::warn!(component = %path.display(), "component {}", checked.signature_text()),
            Err(refusal) => anyhow::bail!("component {} refused: {refusal}", path.display()),
        }
        Ok(checked)
    }

    /// Reads and checks the component without refusing it: for `inspect`, which reports what it
    /// finds. Only [`Checked::read`]'s results are run.
    pub fn inspect(path: &Path, policy: &TrustPolicy) -> Result<Self> {
        let bytes = std::fs::read(path).with_context(|| format!("reading component {}", path.display()))?;
        let digest = sigstore_verify::crypto::sha256(&bytes).to_hex();
        let signature = verify(path, &bytes, policy);
        Ok(Self { path: path.to_path_buf(), bytes, digest, signature })
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bytes as read and checked.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// SHA-256 of the bytes (hex).
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// What the signature check found.
    pub fn signature(&self) -> &Result<Signature, Refusal> {
        &self.signature
    }

    /// One line saying what the signature check found.
    pub fn signature_text(&self) -> String {
        match &self.signature {
            Ok(signature) => signature.to_string(),
            Err(refusal) => format!("REFUSED: {refusal}"),
        }
    }
}
