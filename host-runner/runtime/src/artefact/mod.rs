//! Signed artefacts: the keys ([`keys`]), signing a component into a detached Sigstore bundle
//! ([`sign`]), checking one before the component is compiled ([`verify`]), and naming a component
//! by its digest ([`reference`]).
//!
//! The format is the Sigstore bundle v0.3 (`application/vnd.dev.sigstore.bundle.v0.3+json`) that
//! `cosign sign-blob --bundle` writes for a managed key: a `messageSignature` (the SHA-256 of the
//! file and an ECDSA P-256 signature over its bytes) and a `publicKey` hint (base64 of the
//! SHA-256 of the key's SubjectPublicKeyInfo, as cosign computes it). Bundles sit next to their
//! component as `<file>.sigstore.json` unless a path is configured. See ADR 0020.
//!
//! What this module does not own: compiling and the compile cache ([`crate::component`]); the
//! bytes it checks are the bytes that are then compiled, read once by the caller.

pub mod checked;
pub mod keys;
pub mod reference;
pub mod sign;
pub mod verify;

pub use checked::Checked;
pub use keys::{SigningKey, TrustedKey};
pub use reference::parse_ref;
pub use sign::{default_bundle_path, sign_file};
pub use verify::{Refusal, Signature, TrustPolicy, verify};
