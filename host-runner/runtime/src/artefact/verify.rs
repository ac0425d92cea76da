//! Checking a component's bundle before the component is compiled.
//!
//! Every bundle goes through `sigstore-verify` first, with a managed-key policy per trusted key:
//! a bundle that carries transparency-log entries or RFC 3161 timestamps is verified there whole
//! (log inclusion too when `component.trusted.root` names a Sigstore trusted root). A bundle that
//! carries neither — what `cosign sign-blob --key` writes offline and what `snow-connect artefact
//! sign` writes — is refused by `sigstore-verify` as having no signing-time evidence, which a
//! managed key does not need (cosign accepts it with `--insecure-ignore-tlog`); for those the
//! host checks what sigstore-verify's managed-key path checks besides time, with its crypto
//! crate: the bundle's digest is the file's SHA-256 and the signature over the file's bytes
//! verifies with the trusted key (ADR 0020).
//!
//! Refusals are values ([`Refusal`]) with one line each naming the reason; the caller names the
//! file.

use std::path::{Path, PathBuf};

use sigstore_verify::crypto::VerificationKey;
use sigstore_verify::trust_root::TrustedRoot;
use sigstore_verify::types::bundle::{MessageSignature, SignatureContent, VerificationMaterialContent};
use sigstore_verify::types::{Bundle, HashAlgorithm};
use sigstore_verify::{PublicKeyVerificationPolicy, Verifier};

use super::keys::TrustedKey;
use super::sign::default_bundle_path;

/// What a connector requires of its component's signature.
pub struct TrustPolicy {
    /// `component.trusted.keys`.
    pub keys: Vec<TrustedKey>,
    /// `component.bundle.path` (default `<component>.sigstore.json`).
    pub bundle_path: Option<PathBuf>,
    /// `component.allow.unsigned=true`: run a component that is not verified, with a warning.
    pub allow_unsigned: bool,
    /// Whether `verifier` holds a configured trusted root (`component.trusted.root`), so that
    /// transparency-log entries are checked against its logs.
    pub has_trusted_root: bool,
    verifier: Verifier,
}

impl std::fmt::Debug for TrustPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustPolicy")
            .field("keys", &self.keys.iter().map(|k| k.source.display().to_string()).collect::<Vec<_>>())
            .field("bundle_path", &self.bundle_path)
            .field("allow_unsigned", &self.allow_unsigned)
            .field("has_trusted_root", &self.has_trusted_root)
            .finish()
    }
}

/// A trusted root with no logs and no authorities: managed keys only, no log inclusion checked.
const NO_TRUSTED_ROOT: &str = r#"{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}"#;

impl TrustPolicy {
    /// A policy; `trusted_root` is the JSON of a Sigstore trusted root, when one is configured.
    pub fn new(
        keys: Vec<TrustedKey>,
        trusted_root: Option<&str>,
        bundle_path: Option<PathBuf>,
        allow_unsigned: bool,
    ) -> anyhow::Result<Self> {
        let root = TrustedRoot::from_json(trusted_root.unwrap_or(NO_TRUSTED_ROOT))
            .map_err(|e| anyhow::anyhow!("not a Sigstore trusted root: {e}"))?;
        let verifier = Verifier::new(&root).map_err(|e| anyhow::anyhow!("the trusted root cannot be used: {e}"))?;
        Ok(Self { keys, bundle_path, allow_unsigned, has_trusted_root: trusted_root.is_some(), verifier })
    }

    /// No keys, unverified components allowed: for development and tests of other concerns.
    pub fn unsigned() -> Self {
        Self::new(Vec::new(), None, None, true).expect("the empty trusted root is valid")
    }

    /// Where the bundle of `component` is looked for.
    pub fn bundle_for(&self, component: &Path) -> PathBuf {
        self.bundle_path.clone().unwrap_or_else(|| default_bundle_path(component))
    }
}

/// What the check found, when the component may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signature {
    /// Signed by a trusted key.
    Verified {
        /// The trusted key's file.
        key: PathBuf,
        /// Its hint.
        hint: String,
        /// Whether a transparency-log entry was verified too.
        logged: bool,
    },
    /// Not verified, run because `component.allow.unsigned=true`; says why it is not verified.
    Unverified(String),
}

impl std::fmt::Display for Signature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Verified { key, hint, logged } => write!(
                f,
                "verified: signed by the trusted key {} (hint {hint}){}",
                key.display(),
                if *logged { ", transparency-log entry verified" } else { "" }
            ),
            Self::Unverified(why) => write!(f, "NOT VERIFIED ({why}); running it because component.allow.unsigned=true"),
        }
    }
}

/// Why a component is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No bundle where one is looked for.
    #[error(
        "it is unsigned: no bundle at {0} (sign it with `snow-connect artefact sign`, or set component.allow.unsigned=true for development)"
    )]
    Unsigned(PathBuf),
    /// No key to check a bundle with.
    #[error("no trusted keys are configured (component.trusted.keys) to verify it with, and component.allow.unsigned is not true")]
    NoTrustedKeys,
    /// The bundle could not be read or is not a bundle this host verifies.
    #[error("its bundle {bundle} {reason}")]
    BadBundle {
        /// The bundle's path.
        bundle: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A genuine bundle of other bytes.
    #[error(
        "its SHA-256 is {actual} but its bundle {bundle} signs {signed}: the file changed after it was signed, or the bundle is another artefact's"
    )]
    DigestMismatch {
        /// The bundle's path.
        bundle: PathBuf,
        /// The file's digest (hex).
        actual: String,
        /// The digest the bundle signs (hex).
        signed: String,
    },
    /// The signature does not verify with the key the bundle names.
    #[error("its signature does not verify with the trusted key {key}: the component or its bundle was altered")]
    BadSignature {
        /// The trusted key whose hint the bundle carries.
        key: PathBuf,
    },
    /// Signed by a key not in the trust list.
    #[error("it is signed by a key that is not trusted (key hint {hint}; trusted: {trusted})")]
    UntrustedKey {
        /// The bundle's key hint.
        hint: String,
        /// The trusted keys' files.
        trusted: String,
    },
    /// `sigstore-verify` refused it.
    #[error("its bundle {bundle} does not verify: {reason}")]
    Sigstore {
        /// The bundle's path.
        bundle: PathBuf,
        /// sigstore-verify's error.
        reason: String,
    },
}

/// Checks `bytes`, the content of the component at `path`, against `policy`.
pub fn verify(path: &Path, bytes: &[u8], policy: &TrustPolicy) -> Result<Signature, Refusal> {
    verify_bundled(bytes, policy, policy.bundle_for(path))
}

/// Checks `bytes` against `policy` with the bundle at `bundle_path` (a component other than the
/// connector's own, such as a transform component, has its own bundle).
pub fn verify_bundled(bytes: &[u8], policy: &TrustPolicy, bundle_path: PathBuf) -> Result<Signature, Refusal> {
    match check(bytes, policy, bundle_path) {
        Ok(signature) => Ok(signature),
        Err(refusal) if policy.allow_unsigned => Ok(Signature::Unverified(refusal.to_string())),
        Err(refusal) => Err(refusal),
    }
}

fn check(bytes: &[u8], policy: &TrustPolicy, bundle_path: PathBuf) -> Result<Signature, Refusal> {
    let bad = |reason: String| Refusal::BadBundle { bundle: bundle_path.clone(), reason };
    let text = match std::fs::read_to_string(&bundle_path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Refusal::Unsigned(bundle_path)),
        Err(e) => return Err(bad(format!("cannot be read: {e}"))),
    };
    if policy.keys.is_empty() {
        return Err(Refusal::NoTrustedKeys);
    }
    let bundle = Bundle::from_json(&text).map_err(|e| bad(format!("is not a Sigstore bundle: {e}")))?;
    let hint = match &bundle.verification_material.content {
        VerificationMaterialContent::PublicKey(id) => id.hint.clone(),
        _ => {
            return Err(bad(
                "is signed with a certificate (keyless); this host verifies managed-key bundles against component.trusted.keys".into(),
            ));
        }
    };
    let SignatureContent::MessageSignature(message) = &bundle.content else {
        return Err(bad("carries a DSSE attestation, not a signature of the file (cosign sign-blob --bundle)".into()));
    };
    // The key the bundle names first; the others too, since a hint is only a lookup aid.
    let mut keys: Vec<&TrustedKey> = policy.keys.iter().collect();
    keys.sort_by_key(|k| k.hint != hint);
    let named = keys.first().filter(|k| k.hint == hint).copied();
    let mut failure: Option<Refusal> = None;
    for key in keys {
        let mut key_policy = PublicKeyVerificationPolicy::new(key.der.clone());
        if !policy.has_trusted_root {
            key_policy = key_policy.skip_tlog_unsafe();
        }
        let outcome = match policy.verifier.verify(bytes, &bundle, &key_policy) {
            Ok(result) => Ok(result.tlog_verified()),
            Err(sigstore_verify::Error::Bundle(sigstore_verify::bundle::error::Error::MissingSigningTimeEvidence)) => {
                check_offline(bytes, message, key, &bundle_path).map(|()| false)
            }
            Err(e) => Err(classify(e, &bundle_path, key)),
        };
        match outcome {
            Ok(logged) => return Ok(Signature::Verified { key: key.source.clone(), hint: key.hint.clone(), logged }),
            // Only the key the bundle names explains the failure; another key simply did not sign it.
            Err(refusal) if named.is_some_and(|n| std::ptr::eq(n, key)) => failure = Some(refusal),
            Err(refusal @ Refusal::DigestMismatch { .. }) => failure = Some(refusal),
            Err(_) => {}
        }
    }
    Err(failure.unwrap_or_else(|| Refusal::UntrustedKey {
        hint,
        trusted: policy.keys.iter().map(|k| k.source.display().to_string()).collect::<Vec<_>>().join(", "),
    }))
}

/// A managed-key bundle without log entries or timestamps: the digest it signs is the file's, and
/// the signature over the file verifies with `key`. A signature that verifies over the digest the
/// bundle names, but that digest is not the file's, is a genuine bundle of other bytes.
fn check_offline(bytes: &[u8], message: &MessageSignature, key: &TrustedKey, bundle: &Path) -> Result<(), Refusal> {
    let verifying = VerificationKey::from_spki(&key.der).map_err(|e| Refusal::BadBundle {
        bundle: bundle.to_path_buf(),
        reason: format!("cannot be checked with {}: {e}", key.source.display()),
    })?;
    let actual = sigstore_verify::crypto::sha256(bytes);
    if let Some(signed) = &message.message_digest {
        if signed.algorithm != HashAlgorithm::Sha2256 {
            return Err(Refusal::BadBundle {
                bundle: bundle.to_path_buf(),
                reason: format!("signs a {:?} digest; only SHA2_256 is accepted", signed.algorithm),
            });
        }
        if signed.digest.as_bytes() != actual.as_bytes() {
            return match verifying.verify_prehashed(signed.digest.as_bytes(), &message.signature) {
                Ok(()) => Err(Refusal::DigestMismatch {
                    bundle: bundle.to_path_buf(),
                    actual: actual.to_hex(),
                    signed: hex(signed.digest.as_bytes()),
                }),
                Err(_) => Err(Refusal::BadSignature { key: key.source.clone() }),
            };
        }
    }
    verifying.verify(bytes, &message.signature).map_err(|_| Refusal::BadSignature { key: key.source.clone() })
}

fn classify(error: sigstore_verify::Error, bundle: &Path, key: &TrustedKey) -> Refusal {
    match error {
        sigstore_verify::Error::SignatureInvalid(_) => Refusal::BadSignature { key: key.source.clone() },
        other => Refusal::Sigstore { bundle: bundle.to_path_buf(), reason: other.to_string() },
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artefact::{SigningKey, sign};

    const DEV_KEY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/keys/development-only.key");
    const DEV_PUB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/keys/development-only.pub");

    struct Case {
        dir: PathBuf,
    }

    impl Case {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("snow-verify-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Self { dir }
        }

        /// A copy of the sink component, signed with the development key.
        fn signed(&self, name: &str) -> (PathBuf, Vec<u8>) {
            let path = self.dir.join(name);
            std::fs::copy(guest_artifacts::GUEST_SINK, &path).unwrap();
            sign::sign_file(&path, &SigningKey::from_pem_file(Path::new(DEV_KEY)).unwrap(), None).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        }

        fn key(&self, name: &str) -> TrustedKey {
            let (_, public) = crate::artefact::keys::generate(&self.dir.join(name)).unwrap();
            TrustedKey::from_pem_file(&public).unwrap()
        }
    }

    impl Drop for Case {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn dev() -> TrustedKey {
        TrustedKey::from_pem_file(Path::new(DEV_PUB)).unwrap()
    }

    fn policy(keys: Vec<TrustedKey>) -> TrustPolicy {
        TrustPolicy::new(keys, None, None, false).unwrap()
    }

    #[test]
    fn a_signed_component_verifies_with_its_key_among_others() {
        let case = Case::new("ok");
        let (path, bytes) = case.signed("c.wasm");
        let other = case.key("other");
        let verdict = verify(&path, &bytes, &policy(vec![other, dev()])).unwrap();
        assert!(matches!(&verdict, Signature::Verified { key, logged: false, .. } if key.ends_with("development-only.pub")), "{verdict}");
    }

    #[test]
    fn one_flipped_byte_is_refused_as_changed_after_signing() {
        let case = Case::new("flip");
        let (path, mut bytes) = case.signed("c.wasm");
        let at = bytes.len() / 2;
        bytes[at] ^= 0x01;
        let refusal = verify(&path, &bytes, &policy(vec![dev()])).unwrap_err();
        assert!(matches!(refusal, Refusal::DigestMismatch { .. }), "{refusal}");
        assert!(refusal.to_string().contains("changed after it was signed"), "{refusal}");
    }

    #[test]
    fn a_bundle_of_another_artefact_is_refused_naming_both_digests() {
        let case = Case::new("other");
        let (path, bytes) = case.signed("c.wasm");
        let (other, _) = case.signed("d.wasm");
        std::fs::write(&other, b"\0asm\x0d\x00\x01\x00 another component").unwrap();
        sign::sign_file(&other, &SigningKey::from_pem_file(Path::new(DEV_KEY)).unwrap(), None).unwrap();
        let policy = TrustPolicy::new(vec![dev()], None, Some(default_bundle_path(&other)), false).unwrap();
        let refusal = verify(&path, &bytes, &policy).unwrap_err();
        let Refusal::DigestMismatch { actual, signed, .. } = &refusal else { panic!("{refusal}") };
        assert_eq!(*actual, sigstore_verify::crypto::sha256(&bytes).to_hex());
        assert_ne!(actual, signed);
    }

    #[test]
    fn a_tampered_signature_is_refused_naming_the_key() {
        let case = Case::new("sig");
        let (path, bytes) = case.signed("c.wasm");
        let bundle_path = default_bundle_path(&path);
        let mut bundle: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&bundle_path).unwrap()).unwrap();
        let signature = bundle["messageSignature"]["signature"].as_str().unwrap().to_string();
        // Change one base64 character in the middle of the DER signature.
        let mut chars: Vec<char> = signature.chars().collect();
        let at = chars.len() / 2;
        chars[at] = if chars[at] == 'A' { 'B' } else { 'A' };
        bundle["messageSignature"]["signature"] = serde_json::Value::String(chars.into_iter().collect());
        std::fs::write(&bundle_path, bundle.to_string()).unwrap();
        let refusal = verify(&path, &bytes, &policy(vec![dev()])).unwrap_err();
        assert!(matches!(&refusal, Refusal::BadSignature { key } if key.ends_with("development-only.pub")), "{refusal}");
    }

    #[test]
    fn a_component_signed_by_another_key_is_refused_with_its_hint() {
        let case = Case::new("untrusted");
        let (path, bytes) = case.signed("c.wasm");
        let other = case.key("other");
        let refusal = verify(&path, &bytes, &policy(vec![other])).unwrap_err();
        let Refusal::UntrustedKey { hint, trusted } = &refusal else { panic!("{refusal}") };
        assert_eq!(*hint, dev().hint);
        assert!(trusted.ends_with("other.pub"), "{trusted}");
    }

    #[test]
    fn unsigned_is_refused_unless_allowed_and_then_it_says_why() {
        let case = Case::new("unsigned");
        let path = case.dir.join("u.wasm");
        std::fs::copy(guest_artifacts::GUEST_SINK, &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let refusal = verify(&path, &bytes, &policy(vec![dev()])).unwrap_err();
        assert!(matches!(&refusal, Refusal::Unsigned(p) if p.ends_with("u.wasm.sigstore.json")), "{refusal}");
        let allowed = TrustPolicy::new(vec![], None, None, true).unwrap();
        let verdict = verify(&path, &bytes, &allowed).unwrap();
        assert!(matches!(&verdict, Signature::Unverified(why) if why.contains("unsigned")), "{verdict}");
    }

    #[test]
    fn a_signed_component_without_trusted_keys_is_refused_saying_so() {
        let case = Case::new("nokeys");
        let (path, bytes) = case.signed("c.wasm");
        assert_eq!(verify(&path, &bytes, &policy(vec![])).unwrap_err(), Refusal::NoTrustedKeys);
    }

    #[test]
    fn a_bundle_that_is_not_json_is_refused_as_not_a_bundle() {
        let case = Case::new("garbage");
        let (path, bytes) = case.signed("c.wasm");
        std::fs::write(default_bundle_path(&path), "{\"mediaType\": 3}").unwrap();
        let refusal = verify(&path, &bytes, &policy(vec![dev()])).unwrap_err();
        assert!(refusal.to_string().contains("is not a Sigstore bundle"), "{refusal}");
    }
}
