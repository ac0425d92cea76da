//! Signing keys and trusted keys.
//!
//! A signing key is an ECDSA P-256 private key in PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`, what
//! `openssl genpkey` writes and `cosign import-key-pair` reads); its public half is the
//! SubjectPublicKeyInfo PEM (`-----BEGIN PUBLIC KEY-----`) that `cosign verify-blob --key` and
//! `cosign generate-key-pair`'s `cosign.pub` use. A key's hint is base64(SHA-256(SPKI DER)), as
//! cosign writes it into bundles: a lookup aid, never a proof.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine as _;
use sigstore_verify::crypto::KeyPair;
use sigstore_verify::types::DerPublicKey;

/// A private key that signs components.
pub struct SigningKey {
    pair: KeyPair,
    public: DerPublicKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey(hint {})", hint(&self.public))
    }
}

impl SigningKey {
    /// Reads a PKCS#8 PEM private key (ECDSA P-256).
    pub fn from_pem_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading the signing key {}", path.display()))?;
        Self::from_pem(&text).with_context(|| format!("signing key {}", path.display()))
    }

    /// Parses a PKCS#8 PEM private key (ECDSA P-256).
    pub fn from_pem(text: &str) -> Result<Self> {
        let block = pem::parse(text).map_err(|e| anyhow!("not a PEM file: {e}"))?;
        match block.tag() {
            "PRIVATE KEY" => {}
            "ENCRYPTED SIGSTORE PRIVATE KEY" => {
                bail!("this is a cosign-encrypted key; export it as PKCS#8 (or sign with cosign itself: its bundles verify here too)")
            }
            other => bail!("expected a PKCS#8 PEM block (BEGIN PRIVATE KEY), found BEGIN {other}"),
        }
        let pair = KeyPair::from_pkcs8_der(block.contents()).map_err(|e| anyhow!("not an ECDSA P-256 PKCS#8 key: {e}"))?;
        let public = pair.public_key_der().map_err(|e| anyhow!("encoding its public key: {e}"))?;
        Ok(Self { pair, public })
    }

    /// The key pair, for signing.
    pub(super) fn pair(&self) -> &KeyPair {
        &self.pair
    }

    /// The public key (SubjectPublicKeyInfo DER).
    pub fn public_key(&self) -> &DerPublicKey {
        &self.public
    }
}

/// A public key whose signatures the host accepts, and where it came from.
#[derive(Debug, Clone)]
pub struct TrustedKey {
    /// The file it was read from, named in every verdict.
    pub source: PathBuf,
    /// SubjectPublicKeyInfo DER.
    pub der: DerPublicKey,
    /// Its bundle hint.
    pub hint: String,
}

impl TrustedKey {
    /// Reads a PEM public key (`BEGIN PUBLIC KEY`, e.g. `cosign.pub`).
    pub fn from_pem_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading the trusted key {}", path.display()))?;
        let der = DerPublicKey::from_pem(&text).map_err(|e| anyhow!("trusted key {}: {e}", path.display()))?;
        sigstore_verify::crypto::VerificationKey::from_spki(&der)
            .map_err(|e| anyhow!("trusted key {}: not a usable public key: {e}", path.display()))?;
        Ok(Self { source: path.to_path_buf(), hint: hint(&der), der })
    }
}

/// The bundle hint of a public key: base64(SHA-256(SubjectPublicKeyInfo DER)), as cosign writes it.
pub fn hint(key: &DerPublicKey) -> String {
    base64::engine::general_purpose::STANDARD.encode(sigstore_verify::crypto::sha256(key.as_bytes()).as_bytes())
}

/// Writes a new ECDSA P-256 key pair: `<prefix>.key` (PKCS#8 PEM, mode 0600) and `<prefix>.pub`.
/// Refuses to replace an existing file.
pub fn generate(prefix: &Path) -> Result<(PathBuf, PathBuf)> {
    let (key_path, pub_path) = (with_suffix(prefix, "key"), with_suffix(prefix, "pub"));
    for p in [&key_path, &pub_path] {
        if p.exists() {
            bail!("{} already exists; not replacing a key", p.display());
        }
    }
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let pkcs8 = aws_lc_rs::signature::EcdsaKeyPair::generate_pkcs8(&aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
        .map_err(|_| anyhow!("generating an ECDSA P-256 key failed"))?;
    let private_pem = pem::encode(&pem::Pem::new("PRIVATE KEY", pkcs8.as_ref().to_vec()));
    let key = SigningKey::from_pem(&private_pem)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&key_path)
        .with_context(|| format!("creating {}", key_path.display()))?;
    file.write_all(private_pem.as_bytes()).and_then(|()| file.sync_all()).with_context(|| format!("writing {}", key_path.display()))?;
    std::fs::write(&pub_path, key.public_key().to_pem()).with_context(|| format!("writing {}", pub_path.display()))?;
    Ok((key_path, pub_path))
}

fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut name = prefix.as_os_str().to_os_string();
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV_KEY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/keys/development-only.key");
    const DEV_PUB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/keys/development-only.pub");

    #[test]
    fn a_generated_pair_reads_back_and_its_hint_is_the_public_keys() {
        let dir = std::env::temp_dir().join(format!("snow-keygen-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (key_path, pub_path) = generate(&dir.join("release")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&key_path).unwrap().permissions().mode() & 0o777, 0o600);
        let key = SigningKey::from_pem_file(&key_path).unwrap();
        let trusted = TrustedKey::from_pem_file(&pub_path).unwrap();
        assert_eq!(trusted.der, *key.public_key());
        assert_eq!(trusted.hint, hint(key.public_key()));
        let again = generate(&dir.join("release")).unwrap_err();
        assert!(format!("{again:#}").contains("already exists"), "{again:#}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_development_key_pair_matches() {
        let key = SigningKey::from_pem_file(Path::new(DEV_KEY)).unwrap();
        assert_eq!(TrustedKey::from_pem_file(Path::new(DEV_PUB)).unwrap().der, *key.public_key());
    }

    #[test]
    fn a_public_key_is_not_a_signing_key_and_the_error_says_what_was_found() {
        let err = SigningKey::from_pem_file(Path::new(DEV_PUB)).unwrap_err();
        assert!(format!("{err:#}").contains("found BEGIN PUBLIC KEY"), "{err:#}");
        let err = TrustedKey::from_pem_file(Path::new(DEV_KEY)).unwrap_err();
        assert!(format!("{err:#}").contains("development-only.key"), "{err:#}");
    }
}
