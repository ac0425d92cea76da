//! Signing a component: the final bytes of the `.wasm` (composing components changes them, so
//! sign last) into a detached Sigstore bundle v0.3 with a managed key, as `cosign sign-blob --key
//! --bundle` writes one when no transparency log is used.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use sigstore_verify::types::bundle::{
    MessageDigest, MessageSignature, PublicKeyIdentifier, SignatureContent, VerificationMaterial, VerificationMaterialContent,
};
use sigstore_verify::types::{Bundle, DigestBytes, HashAlgorithm, MediaType};

use super::keys::{SigningKey, hint};

/// Where a component's bundle is looked for when no path is configured: `<file>.sigstore.json`.
pub fn default_bundle_path(component: &Path) -> PathBuf {
    let mut name = component.as_os_str().to_os_string();
    name.push(".sigstore.json");
    PathBuf::from(name)
}

/// The bundle of `artefact` signed with `key`.
pub fn bundle(artefact: &[u8], key: &SigningKey) -> Result<Bundle> {
    let digest = sigstore_verify::crypto::sha256(artefact);
    let signature = key.pair().sign(artefact).map_err(|e| anyhow!("signing: {e}"))?;
    let content = SignatureContent::MessageSignature(
        MessageSignature::new(signature)
            .with_message_digest(MessageDigest::new(HashAlgorithm::Sha2256, DigestBytes::new(digest.as_bytes().to_vec()))),
    );
    let material = VerificationMaterial::new(VerificationMaterialContent::PublicKey(PublicKeyIdentifier::new(hint(key.public_key()))));
    Ok(Bundle::new(MediaType::Bundle0_3, material, content))
}

/// Signs the file at `component` and writes its bundle to `out` (default
/// [`default_bundle_path`]), replacing any earlier one atomically. Returns the bundle's path.
pub fn sign_file(component: &Path, key: &SigningKey, out: Option<&Path>) -> Result<PathBuf> {
    let bytes = std::fs::read(component).with_context(|| format!("reading {}", component.display()))?;
    let json = bundle(&bytes, key)?.to_json_pretty().map_err(|e| anyhow!("encoding the bundle: {e}"))?;
    let out = out.map(Path::to_path_buf).unwrap_or_else(|| default_bundle_path(component));
    crate::files::write_atomically(&out, (json + "\n").as_bytes())?;
    Ok(out)
}
