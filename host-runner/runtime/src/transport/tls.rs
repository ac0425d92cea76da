//! TLS settings other than the defaults, by Kafka's key names under a prefix (`snow.instance.ssl.*`
//! for ServiceNow, `<converter>.schema.registry.ssl.*` for a schema registry): the certificates to
//! trust instead of the Mozilla roots (a PEM file, inline PEM, or a PKCS#12 store) and the client
//! certificate to present (a PEM file, inline PEM, or a PKCS#12 key store, as Confluent's
//! keystores are). A JKS store cannot be read here: the error gives the `keytool` command that
//! converts it. Hostname verification cannot be switched off.
//!
//! What is read becomes a [`TlsProfile`], identified by a digest of what it holds, so that two
//! connectors with the same settings share connections (and tokens) and two with different ones
//! never do.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};
use snow_core::error::ConfigError;

/// The keys read here (after the prefix).
pub const KEYS: [&str; 11] = [
    "truststore.location",
    "truststore.type",
    "truststore.certificates",
    "truststore.password",
    "keystore.location",
    "keystore.type",
    "keystore.certificate.chain",
    "keystore.key",
    "keystore.password",
    "key.password",
    "endpoint.identification.algorithm",
];

/// The keys among [`KEYS`] that name a file of the process (a caller of a fleet may not set them).
pub const FILE_KEYS: [&str; 2] = ["truststore.location", "keystore.location"];

/// The keys among [`KEYS`] that hold a secret: a store's password, an inline private key.
pub const SECRET_KEYS: [&str; 4] = ["truststore.password", "keystore.password", "key.password", "keystore.key"];

/// Largest store file read.
const MAX_FILE: u64 = 1 << 20;

/// TLS settings other than the default: whom to trust, and the certificate to present.
#[derive(Clone)]
pub struct TlsProfile {
    id: u64,
    config: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for TlsProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TlsProfile({:016x})", self.id)
    }
}

impl TlsProfile {
    /// The rustls configuration.
    pub(super) fn config(&self) -> Arc<rustls::ClientConfig> {
        self.config.clone()
    }

    /// What tells profiles apart (never 0: that is the defaults'); equal settings, equal ids.
    pub fn id(&self) -> u64 {
        self.id
    }
}

/// The store formats read here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Pem,
    Pkcs12,
}

/// What a store held: certificates, and a private key when it had one.
struct Store {
    certificates: Vec<CertificateDer<'static>>,
    key: Option<PrivateKeyDer<'static>>,
}

/// The profile the keys of `sub` (named after the prefix, e.g. `truststore.location`) ask for, or
/// `None` for the defaults; problems go to `errors`, each naming `<prefix>.<key>` and never a
/// password or a key.
pub fn read(sub: &BTreeMap<&str, &str>, prefix: &str, errors: &mut Vec<ConfigError>) -> Option<TlsProfile> {
    let get = |k: &str| sub.get(k).copied().filter(|v| !v.trim().is_empty());
    let key = |k: &str| format!("{prefix}.{k}");
    let before = errors.len();
    if sub.get("endpoint.identification.algorithm").is_some_and(|a| !a.eq_ignore_ascii_case("https")) {
        errors.push(ConfigError::new(
            key("endpoint.identification.algorithm"),
            "only https (the default) is supported: the server's name is always checked",
        ));
    }
    let mut roots = None;
    match (get("truststore.location"), get("truststore.certificates")) {
        (Some(_), Some(_)) => {
            for which in ["truststore.location", "truststore.certificates"] {
                errors.push(ConfigError::new(key(which), "set one, not both"));
            }
        }
        (Some(path), None) => {
            let password = get("truststore.password").unwrap_or("");
            roots = read_store(path, get("truststore.type"), password, prefix, "truststore", errors).map(|s| s.certificates);
        }
        (None, Some(pem)) => roots = pem_certificates(pem.as_bytes(), &key("truststore.certificates"), errors),
        (None, None) => {}
    }
    let mut client = None;
    match (get("keystore.location"), get("keystore.certificate.chain"), get("keystore.key")) {
        (Some(path), None, None) => {
            let password = get("keystore.password").unwrap_or("");
            if let Some(store) = read_store(path, get("keystore.type"), password, prefix, "keystore", errors) {
                match store.key {
                    Some(private) => client = Some((store.certificates, private)),
                    None => errors.push(ConfigError::new(key("keystore.location"), "holds no private key")),
                }
            }
            if let Some(key_password) = get("key.password")
                && key_password != password
            {
                errors.push(ConfigError::new(
                    key("key.password"),
                    "a key with a password other than the store's cannot be read: re-export the store with one password \
                     (keytool -importkeystore … -destkeypass equal to -deststorepass), or leave key.password out",
                ));
            }
        }
        (None, Some(chain), Some(private)) => {
            if get("key.password").is_some() {
                errors.push(ConfigError::new(
                    key("key.password"),
                    "encrypted PEM private keys are not supported; give the key unencrypted (openssl pkcs8 -topk8 -nocrypt)",
                ));
            }
            client = pem_certificates(chain.as_bytes(), &key("keystore.certificate.chain"), errors).zip(pem_private_key(
                private.as_bytes(),
                &key("keystore.key"),
                errors,
            ));
        }
        (None, None, None) => {
            if get("key.password").is_some() {
                errors.push(ConfigError::new(key("key.password"), format!("is set without a key store ({})", key("keystore.location"))));
            }
        }
        _ => errors.push(ConfigError::new(
            key("keystore"),
            format!(
                "give the client certificate either as a store ({}) or inline as {} with {}",
                key("keystore.location"),
                key("keystore.certificate.chain"),
                key("keystore.key")
            ),
        )),
    }
    if errors.len() > before || (roots.is_none() && client.is_none()) {
        return None;
    }
    let mut identity = Sha256::new();
    let store = match roots {
        Some(certs) => {
            let mut store = rustls::RootCertStore::empty();
            for cert in certs {
                identity.update(b"root");
                identity.update((cert.len() as u64).to_be_bytes());
                identity.update(&cert);
                if let Err(e) = store.add(cert) {
                    errors.push(ConfigError::new(key("truststore"), format!("a certificate cannot be trusted: {e}")));
                    return None;
                }
            }
            store
        }
        None => rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.into() },
    };
    let builder = rustls::ClientConfig::builder().with_root_certificates(store);
    let config = match client {
        Some((chain, private)) => {
            for cert in &chain {
                identity.update(b"chain");
                identity.update((cert.len() as u64).to_be_bytes());
                identity.update(cert);
            }
            identity.update(b"key");
            identity.update(private.secret_der());
            match builder.with_client_auth_cert(chain, private) {
                Ok(config) => config,
                Err(e) => {
                    errors.push(ConfigError::new(key("keystore"), format!("the certificate and key do not go together: {e}")));
                    return None;
                }
            }
        }
        None => builder.with_no_client_auth(),
    };
    let digest: [u8; 32] = identity.finalize().into();
    let id = u64::from_be_bytes(digest[..8].try_into().unwrap_or_default()).max(1);
    Some(TlsProfile { id, config: Arc::new(config) })
}

/// The store at `path` (`which`: `truststore` or `keystore`), as `declared` says or its bytes show.
fn read_store(
    path: &str,
    declared: Option<&str>,
    password: &str,
    prefix: &str,
    which: &str,
    errors: &mut Vec<ConfigError>,
) -> Option<Store> {
    let location = format!("{prefix}.{which}.location");
    let jks = || {
        let converted = Path::new(path).with_extension("p12");
        ConfigError::new(
            format!("{prefix}.{which}.type"),
            format!(
                "{path} is a Java key store (JKS), which cannot be read here; convert it to PKCS#12 with \
                 keytool -importkeystore -srckeystore {path} -srcstoretype JKS -destkeystore {} -deststoretype PKCS12, \
                 then set {location}={} and {prefix}.{which}.type=PKCS12",
                converted.display(),
                converted.display()
            ),
        )
    };
    // The declared type first: a JKS store is refused before its file is read.
    let declared = match declared.map(str::trim) {
        None => None,
        Some(t) if t.eq_ignore_ascii_case("PEM") => Some(Format::Pem),
        Some(t) if ["PKCS12", "P12", "PFX"].iter().any(|k| t.eq_ignore_ascii_case(k)) => Some(Format::Pkcs12),
        Some(t) if t.eq_ignore_ascii_case("JKS") || t.eq_ignore_ascii_case("JCEKS") => {
            errors.push(jks());
            return None;
        }
        Some(other) => {
            errors.push(ConfigError::new(format!("{prefix}.{which}.type"), format!("must be PEM or PKCS12, got {other:?}")));
            return None;
        }
    };
    let file = Path::new(path);
    let bytes = std::fs::metadata(file).ok().filter(|m| m.is_file() && m.len() <= MAX_FILE).and_then(|_| std::fs::read(file).ok());
    let Some(bytes) = bytes else {
        errors.push(ConfigError::new(location, format!("{path} cannot be read as a file of at most 1 MiB")));
        return None;
    };
    let format = match declared {
        Some(format) => format,
        None if bytes.starts_with(&[0xfe, 0xed, 0xfe, 0xed]) || bytes.starts_with(&[0xce, 0xce, 0xce, 0xce]) => {
            errors.push(jks());
            return None;
        }
        None if contains(&bytes, b"-----BEGIN ") => Format::Pem,
        None => Format::Pkcs12,
    };
    match format {
        Format::Pem => {
            if !contains(&bytes, b"-----BEGIN ") {
                let what = if bytes.starts_with(&[0xfe, 0xed, 0xfe, 0xed]) { "a JKS store" } else { "not PEM" };
                errors.push(ConfigError::new(location, format!("{path} is {what} (set {prefix}.{which}.type to what it is)")));
                return None;
            }
            let certificates = pem_certificates(&bytes, &location, errors)?;
            let key = if which == "keystore" { pem_private_key(&bytes, &location, errors) } else { None };
            Some(Store { certificates, key })
        }
        Format::Pkcs12 => pkcs12(&bytes, password, &format!("{prefix}.{which}"), errors),
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The certificates and key of a PKCS#12 store, opened with `password`; errors name `store`'s keys.
fn pkcs12(bytes: &[u8], password: &str, store: &str, errors: &mut Vec<ConfigError>) -> Option<Store> {
    let refused = |errors: &mut Vec<ConfigError>| {
        errors.push(ConfigError::new(
            format!("{store}.location"),
            format!("is not a PKCS#12 store that {store}.password opens (a wrong password, or another format: set {store}.type)"),
        ));
    };
    let Ok(parsed) = openssl::pkcs12::Pkcs12::from_der(bytes) else {
        refused(errors);
        return None;
    };
    // Stores written by older Java and OpenSSL versions use RC2 or 3DES, which OpenSSL 3 keeps in
    // its legacy provider: loaded only when a store needs it.
    let opened = parsed.parse2(password).or_else(|first| if legacy_provider() { parsed.parse2(password) } else { Err(first) });
    let Ok(opened) = opened else {
        refused(errors);
        return None;
    };
    let mut certificates = Vec::new();
    let own = opened.cert.iter().map(|c| &**c);
    for cert in own.chain(opened.ca.iter().flatten()) {
        match cert.to_der() {
            Ok(der) => certificates.push(CertificateDer::from(der)),
            Err(_) => {
                errors.push(ConfigError::new(format!("{store}.location"), "holds a certificate that cannot be read"));
                return None;
            }
        }
    }
    if certificates.is_empty() {
        errors.push(ConfigError::new(format!("{store}.location"), "holds no certificate"));
        return None;
    }
    let key = match opened.pkey.map(|k| k.private_key_to_pkcs8()) {
        None => None,
        Some(Ok(der)) => Some(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der))),
        Some(Err(_)) => {
            errors.push(ConfigError::new(format!("{store}.location"), "holds a private key that cannot be read"));
            return None;
        }
    };
    Some(Store { certificates, key })
}

/// Loads OpenSSL's legacy provider once (keeping the default one); false when it is not installed.
fn legacy_provider() -> bool {
    static LEGACY: OnceLock<Option<openssl::provider::Provider>> = OnceLock::new();
    LEGACY.get_or_init(|| openssl::provider::Provider::try_load(None, "legacy", true).ok()).is_some()
}

fn pem_certificates(pem: &[u8], key: &str, errors: &mut Vec<ConfigError>) -> Option<Vec<CertificateDer<'static>>> {
    match CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>() {
        Ok(certs) if !certs.is_empty() => Some(certs),
        _ => {
            errors.push(ConfigError::new(key, "holds no PEM certificate"));
            None
        }
    }
}

fn pem_private_key(pem: &[u8], key: &str, errors: &mut Vec<ConfigError>) -> Option<PrivateKeyDer<'static>> {
    match PrivateKeyDer::from_pem_slice(pem) {
        Ok(private) => Some(private),
        Err(_) => {
            errors.push(ConfigError::new(key, "holds no unencrypted PEM private key"));
            None
        }
    }
}

/// The default profile's configuration: the Mozilla roots, no client certificate.
pub(super) fn default_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.into() };
            Arc::new(rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth())
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed test certificate (P-256) and its key, made for these tests only.
    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIBfzCCASWgAwIBAgIUSnU+wRcDbfiDo57PB3mw9K3oKQMwCgYIKoZIzj0EAwIw\nFDESMBAGA1UEAwwJc25vdy10ZXN0MCAXDTI2MTIwNDAzMDkyMFoYDzIxMjYxMTEw\nMDMwOTIwWjAUMRIwEAYDVQQDDAlzbm93LXRlc3QwWTATBgcqhkjOPQIBBggqhkjO\nPQMBBwNCAAReYiXclHVstI/KaYggmuznhQIguCjTCqMRMWW09Yu+QwEU1GmN+AL0\nshW2dwp9tpx6opNXDr+sQll2kVTqyLjmo1MwUTAdBgNVHQ4EFgQUBLGzlWdgdniT\nPBjqTL17h/ONEC8wHwYDVR0jBBgwFoAUBLGzlWdgdniTPBjqTL17h/ONEC8wDwYD\nVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiBxKpg4SAcTVQ/3m8NLtNUa\n3vpoyp/g9YtfVliYU8P1IgIhAI4Iz4VDgC9npXPZNS8Ski/2LPoiNGi/IZKXUdAa\nKvWS\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgYVJIrciN6lGrjYLf\nDc90WhOYpAZL3prKObwuk/PBHu6hRANCAAReYiXclHVstI/KaYggmuznhQIguCjT\nCqMRMWW09Yu+QwEU1GmN+AL0shW2dwp9tpx6opNXDr+sQll2kVTqyLjm\n-----END PRIVATE KEY-----\n";

    const PREFIX: &str = "value.converter.schema.registry.ssl";

    fn read_keys(pairs: &[(&str, &str)]) -> (Option<TlsProfile>, Vec<String>) {
        let sub: BTreeMap<&str, &str> = pairs.iter().copied().collect();
        let mut errors = Vec::new();
        (read(&sub, PREFIX, &mut errors), snow_core::error::config_lines(&errors))
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("snow-tls-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A PKCS#12 store of the test key and certificate, protected by `password`.
    fn p12(password: &str) -> Vec<u8> {
        let key = openssl::pkey::PKey::private_key_from_pem(KEY.as_bytes()).unwrap();
        let cert = openssl::x509::X509::from_pem(CERT.as_bytes()).unwrap();
        openssl::pkcs12::Pkcs12::builder().name("client").pkey(&key).cert(&cert).build2(password).unwrap().to_der().unwrap()
    }

    #[test]
    fn inline_pem_a_pem_file_and_a_pkcs12_store_make_profiles_identified_by_what_they_hold() {
        let inline = [("truststore.certificates", CERT), ("keystore.certificate.chain", CERT), ("keystore.key", KEY)];
        let (profile, errors) = read_keys(&inline);
        assert!(errors.is_empty(), "{errors:?}");
        let first = profile.unwrap();
        assert_eq!(read_keys(&inline).0.unwrap().id(), first.id(), "equal settings share an id (and connections)");
        assert_ne!(read_keys(&[("truststore.certificates", CERT)]).0.unwrap().id(), first.id());
        let dir = scratch("files");
        let store = dir.join("client.pem");
        std::fs::write(&store, format!("{KEY}{CERT}")).unwrap();
        let path = store.display().to_string();
        let (profile, errors) = read_keys(&[("keystore.type", "PEM"), ("keystore.location", &path)]);
        assert!(errors.is_empty() && profile.is_some(), "{errors:?}");
        let p12_path = dir.join("client.p12");
        std::fs::write(&p12_path, p12("store-pass")).unwrap();
        let p12_path = p12_path.display().to_string();
        for declared in [Some("PKCS12"), None] {
            let mut pairs = vec![("keystore.location", p12_path.as_str()), ("keystore.password", "store-pass")];
            pairs.extend(declared.map(|t| ("keystore.type", t)));
            let (profile, errors) = read_keys(&pairs);
            assert!(errors.is_empty() && profile.is_some(), "{declared:?}: {errors:?}");
        }
        // The PKCS#12 store as a trust store: its certificate is trusted.
        let (profile, errors) = read_keys(&[("truststore.location", &p12_path), ("truststore.password", "store-pass")]);
        assert!(errors.is_empty() && profile.is_some(), "{errors:?}");
        assert!(read_keys(&[]).0.is_none(), "no keys: the defaults");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn what_cannot_be_used_is_refused_by_key_without_showing_it() {
        let dir = scratch("refused");
        let plain = dir.join("plain.txt");
        std::fs::write(&plain, "not a certificate").unwrap();
        let plain_path = plain.display().to_string();
        let jks = dir.join("client.jks");
        std::fs::write(&jks, [0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2]).unwrap();
        let jks_path = jks.display().to_string();
        let p12_path = dir.join("client.p12");
        std::fs::write(&p12_path, p12("store-pass")).unwrap();
        let p12_path = p12_path.display().to_string();
        let keytool = format!(
            "keytool -importkeystore -srckeystore {jks_path} -srcstoretype JKS -destkeystore {} -deststoretype PKCS12",
            dir.join("client.p12").display()
        );
        for (pairs, expected) in [
            (vec![("truststore.type", "JKS"), ("truststore.location", "/etc/ts.jks")], "truststore.type: /etc/ts.jks is a Java key store"),
            (vec![("keystore.location", jks_path.as_str()), ("keystore.password", "secret")], keytool.as_str()),
            (vec![("truststore.location", "/no/such/file.pem")], "truststore.location: /no/such/file.pem cannot be read"),
            (vec![("truststore.location", plain_path.as_str()), ("truststore.type", "PEM")], "is not PEM"),
            (vec![("truststore.location", plain_path.as_str())], "truststore.location: is not a PKCS#12 store"),
            (
                vec![("keystore.location", p12_path.as_str()), ("keystore.password", "secret")],
                "keystore.location: is not a PKCS#12 store that",
            ),
            (vec![("keystore.type", "BKS"), ("keystore.location", p12_path.as_str())], "keystore.type: must be PEM or PKCS12"),
            (vec![("truststore.certificates", "not a certificate")], "truststore.certificates: holds no PEM certificate"),
            (vec![("keystore.certificate.chain", CERT), ("keystore.key", KEY), ("key.password", "secret")], "encrypted PEM private keys"),
            (
                vec![("keystore.location", p12_path.as_str()), ("keystore.password", "store-pass"), ("key.password", "secret")],
                "key.password: a key with a password other than the store's",
            ),
            (vec![("endpoint.identification.algorithm", "")], "endpoint.identification.algorithm: only https"),
            (vec![("keystore.certificate.chain", CERT)], "keystore: give the client certificate either as a store"),
            (vec![("keystore.certificate.chain", CERT), ("keystore.key", "garbage")], "keystore.key: holds no unencrypted PEM private key"),
        ] {
            let (profile, errors) = read_keys(&pairs);
            let all = errors.join("\n");
            assert!(profile.is_none() && all.contains(expected), "{expected:?} not in {all}");
            assert!(all.starts_with(PREFIX), "{all}");
            assert!(!all.contains("secret") && !all.contains("garbage") && !all.contains("BEGIN"), "{all}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
