//! A schema registry's TLS settings, by Confluent's keys under a converter's prefix
//! (`schema.registry.ssl.*`): the certificates to trust instead of the Mozilla roots (PEM, in a
//! file or inline) and the client certificate to present (PEM chain and unencrypted key, in one
//! file or inline). Java's JKS and PKCS12 stores cannot be read here: the error says how to convert
//! them. Hostname verification cannot be switched off.

use snow_core::error::ConfigError;
use std::collections::BTreeMap;
use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::transport::pool::TlsProfile;

/// The TLS keys read here (after `schema.registry.ssl.`).
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

/// The keys among [`KEYS`] that name a file of the worker (a caller of a fleet may not set them).
pub const FILE_KEYS: [&str; 2] = ["truststore.location", "keystore.location"];

/// Largest PEM file read.
const MAX_FILE: u64 = 1 << 20;

/// The TLS profile the `schema.registry.ssl.*` keys of `sub` (a converter's own keys) ask for,
/// or `None` for the defaults; problems go to `errors`, naming `prefix.schema.registry.ssl.<key>`.
pub fn read(sub: &BTreeMap<&str, &str>, prefix: &str, errors: &mut Vec<ConfigError>) -> Option<TlsProfile> {
    let get = |k: &str| sub.get(format!("schema.registry.ssl.{k}").as_str()).copied().filter(|v| !v.is_empty());
    let key = |k: &str| format!("{prefix}.schema.registry.ssl.{k}");
    let before = errors.len();
    if sub.get("schema.registry.ssl.endpoint.identification.algorithm").is_some_and(|a| !a.eq_ignore_ascii_case("https")) {
        errors.push(ConfigError::new(
            key("endpoint.identification.algorithm"),
            "only https (the default) is supported: the registry's name is always checked",
        ));
    }
    if get("key.password").is_some() {
        errors.push(ConfigError::new(
            key("key.password"),
            "encrypted private keys are not supported; give the key unencrypted (openssl pkcs8 -topk8 -nocrypt)",
        ));
    }
    let mut roots = None;
    let inline_roots = get("truststore.certificates");
    match (get("truststore.location"), inline_roots) {
        (Some(_), Some(_)) => {
            for which in ["truststore.location", "truststore.certificates"] {
                errors.push(ConfigError::new(key(which), "set one, not both"));
            }
        }
        (Some(path), None) => {
            if let Some(text) = store_text(path, get("truststore.type"), &key("truststore"), errors) {
                roots = certificates(&text, &key("truststore.location"), errors);
            }
        }
        (None, Some(pem)) => roots = certificates(pem, &key("truststore.certificates"), errors),
        (None, None) => {}
    }
    let mut client = None;
    match (get("keystore.location"), get("keystore.certificate.chain"), get("keystore.key")) {
        (Some(path), None, None) => {
            if let Some(text) = store_text(path, get("keystore.type"), &key("keystore"), errors) {
                let chain = certificates(&text, &key("keystore.location"), errors);
                let private = private_key(&text, &key("keystore.location"), errors);
                client = chain.zip(private);
            }
        }
        (None, Some(chain), Some(private)) => {
            client =
                certificates(chain, &key("keystore.certificate.chain"), errors).zip(private_key(private, &key("keystore.key"), errors));
        }
        (None, None, None) => {}
        _ => errors.push(ConfigError::new(
            key("keystore"),
            format!(
                "give the client certificate either as a PEM file ({}) or inline as {} with {}",
                key("keystore.location"),
                key("keystore.certificate.chain"),
                key("keystore.key")
            ),
        )),
    }
    if errors.len() > before || (roots.is_none() && client.is_none()) {
        return None;
    }
    let store = match roots {
        Some(certs) => {
            let mut store = rustls::RootCertStore::empty();
            for cert in certs {
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
        Some((chain, private)) => match builder.with_client_auth_cert(chain, private) {
            Ok(config) => config,
            Err(e) => {
                errors.push(ConfigError::new(key("keystore"), format!("the certificate and key do not go together: {e}")));
                return None;
            }
        },
        None => builder.with_no_client_auth(),
    };
    Some(TlsProfile::new(config))
}

/// The PEM text of the store at `path`, checked to be PEM (the type, when given, must say so).
fn store_text(path: &str, kind: Option<&str>, key: &str, errors: &mut Vec<ConfigError>) -> Option<String> {
    if let Some(kind) = kind.filter(|k| !k.eq_ignore_ascii_case("PEM")) {
        errors.push(ConfigError::new(
            format!("{key}.type"),
            format!(
                "{kind} stores cannot be read here; convert it to PEM (keytool -exportcert -rfc for certificates; \
             openssl pkcs12 -nodes for a key store) and set {key}.type=PEM"
            ),
        ));
        return None;
    }
    let file = Path::new(path);
    let text = std::fs::metadata(file).ok().filter(|m| m.is_file() && m.len() <= MAX_FILE).and_then(|_| std::fs::read_to_string(file).ok());
    match text {
        Some(text) if text.contains("-----BEGIN ") => Some(text),
        Some(_) => {
            errors.push(ConfigError::new(
                format!("{key}.location"),
                format!("{path} is not PEM (a JKS or PKCS12 store must be converted to PEM first)"),
            ));
            None
        }
        None => {
            errors.push(ConfigError::new(format!("{key}.location"), format!("{path} cannot be read as a file of at most 1 MiB")));
            None
        }
    }
}

fn certificates(pem: &str, key: &str, errors: &mut Vec<ConfigError>) -> Option<Vec<CertificateDer<'static>>> {
    match CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<Vec<_>, _>>() {
        Ok(certs) if !certs.is_empty() => Some(certs),
        _ => {
            errors.push(ConfigError::new(key, "holds no PEM certificate"));
            None
        }
    }
}

fn private_key(pem: &str, key: &str, errors: &mut Vec<ConfigError>) -> Option<PrivateKeyDer<'static>> {
    match PrivateKeyDer::from_pem_slice(pem.as_bytes()) {
        Ok(private) => Some(private),
        Err(_) => {
            errors.push(ConfigError::new(key, "holds no unencrypted PEM private key"));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed test certificate (P-256) and its key, made for these tests only.
    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIBfzCCASWgAwIBAgIUSnU+wRcDbfiDo57PB3mw9K3oKQMwCgYIKoZIzj0EAwIw\nFDESMBAGA1UEAwwJc25vdy10ZXN0MCAXDTI2MTIwNDAzMDkyMFoYDzIxMjYxMTEw\nMDMwOTIwWjAUMRIwEAYDVQQDDAlzbm93LXRlc3QwWTATBgcqhkjOPQIBBggqhkjO\nPQMBBwNCAAReYiXclHVstI/KaYggmuznhQIguCjTCqMRMWW09Yu+QwEU1GmN+AL0\nshW2dwp9tpx6opNXDr+sQll2kVTqyLjmo1MwUTAdBgNVHQ4EFgQUBLGzlWdgdniT\nPBjqTL17h/ONEC8wHwYDVR0jBBgwFoAUBLGzlWdgdniTPBjqTL17h/ONEC8wDwYD\nVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiBxKpg4SAcTVQ/3m8NLtNUa\n3vpoyp/g9YtfVliYU8P1IgIhAI4Iz4VDgC9npXPZNS8Ski/2LPoiNGi/IZKXUdAa\nKvWS\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgYVJIrciN6lGrjYLf\nDc90WhOYpAZL3prKObwuk/PBHu6hRANCAAReYiXclHVstI/KaYggmuznhQIguCjT\nCqMRMWW09Yu+QwEU1GmN+AL0shW2dwp9tpx6opNXDr+sQll2kVTqyLjm\n-----END PRIVATE KEY-----\n";

    fn read_keys(pairs: &[(&str, &str)]) -> (Option<TlsProfile>, Vec<String>) {
        let sub: BTreeMap<&str, &str> = pairs.iter().copied().collect();
        let mut errors = Vec::new();
        (read(&sub, "value.converter", &mut errors), snow_core::error::config_lines(&errors))
    }

    #[test]
    fn inline_pem_and_a_pem_file_make_a_profile() {
        let (profile, errors) = read_keys(&[
            ("schema.registry.ssl.truststore.certificates", CERT),
            ("schema.registry.ssl.keystore.certificate.chain", CERT),
            ("schema.registry.ssl.keystore.key", KEY),
        ]);
        assert!(errors.is_empty() && profile.is_some(), "{errors:?}");
        let dir = std::env::temp_dir().join(format!("registry-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = dir.join("client.pem");
        std::fs::write(&store, format!("{KEY}{CERT}")).unwrap();
        let path = store.display().to_string();
        let (profile, errors) =
            read_keys(&[("schema.registry.ssl.keystore.type", "PEM"), ("schema.registry.ssl.keystore.location", &path)]);
        assert!(errors.is_empty() && profile.is_some(), "{errors:?}");
        assert!(read_keys(&[]).0.is_none(), "no keys: the defaults");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn what_cannot_be_used_is_refused_by_key_without_showing_it() {
        let plain = std::env::temp_dir().join(format!("registry-tls-plain-{}.txt", std::process::id()));
        std::fs::write(&plain, "not a certificate").unwrap();
        let plain_path = plain.display().to_string();
        for (pairs, expected) in [
            (
                vec![("schema.registry.ssl.truststore.type", "JKS"), ("schema.registry.ssl.truststore.location", "/etc/ts.jks")],
                "truststore.type: JKS stores cannot be read here",
            ),
            (
                vec![("schema.registry.ssl.truststore.location", "/no/such/file.pem")],
                "truststore.location: /no/such/file.pem cannot be read",
            ),
            (vec![("schema.registry.ssl.truststore.location", plain_path.as_str())], "is not PEM"),
            (
                vec![("schema.registry.ssl.truststore.certificates", "not a certificate")],
                "truststore.certificates: holds no PEM certificate",
            ),
            (vec![("schema.registry.ssl.key.password", "secret")], "key.password: encrypted private keys are not supported"),
            (vec![("schema.registry.ssl.endpoint.identification.algorithm", "")], "endpoint.identification.algorithm: only https"),
            (vec![("schema.registry.ssl.keystore.certificate.chain", CERT)], "keystore: give the client certificate either as a PEM file"),
            (
                vec![("schema.registry.ssl.keystore.certificate.chain", CERT), ("schema.registry.ssl.keystore.key", "garbage")],
                "keystore.key: holds no unencrypted PEM private key",
            ),
        ] {
            let (profile, errors) = read_keys(&pairs);
            let all = errors.join("\n");
            assert!(profile.is_none() && all.contains(expected), "{expected:?} not in {all}");
            assert!(all.starts_with("value.converter.schema.registry.ssl."), "{all}");
            assert!(!all.contains("secret") && !all.contains("garbage") && !all.contains("BEGIN"), "{all}");
        }
        std::fs::remove_file(&plain).unwrap();
    }
}
