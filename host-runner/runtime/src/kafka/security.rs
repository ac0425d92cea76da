//! The Kafka connection's security, read from Kafka's own keys or librdkafka's, into librdkafka
//! settings that every client of a worker or connector gets.
//!
//! A Connect user's `worker.properties` works as written: `security.protocol`, `sasl.mechanism`,
//! `sasl.jaas.config` (PLAIN and SCRAM login modules: user and password; OAUTHBEARER: an OIDC
//! client's id, secret and scope, with `sasl.oauthbearer.token.endpoint.url`), PEM trust stores and
//! PKCS#12 key stores (`ssl.truststore.*`, `ssl.keystore.*`), and the same keys repeated under
//! `producer.` / `consumer.` / `admin.` (they must agree: every client of one worker connects the
//! same way). librdkafka's own names ([`super::keys::SECURITY`]) are accepted too. JKS stores,
//! which librdkafka cannot read, are refused with what to use instead.

use snow_core::error::ConfigError;
use std::collections::BTreeMap;

use super::keys::{SECURITY, SECURITY_SECRETS};

/// Kafka's Java keys read here besides librdkafka's.
const JAVA: &[&str] = &[
    "sasl.jaas.config",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.password",
    "ssl.keystore.type",
    "ssl.protocol",
    "ssl.enabled.protocols",
    "sasl.login.callback.handler.class",
];

/// Java client prefixes whose security keys repeat the worker's.
const CLIENT_PREFIXES: [&str; 3] = ["producer.", "consumer.", "admin."];

/// Whether `key` (without a `kafka.` prefix) is a security key read here.
pub fn is_security_key(key: &str) -> bool {
    SECURITY.contains(&key) || JAVA.contains(&key)
}

/// Whether `key` holds a secret (a password, a client secret, a JAAS line with a password).
pub fn is_secret_key(key: &str) -> bool {
    SECURITY_SECRETS.contains(&key) || matches!(key, "sasl.jaas.config" | "ssl.truststore.password")
}

/// The security settings among `entries` whose keys start with `prefix` (`""` in
/// `worker.properties`, `"kafka."` in a connector file), as librdkafka settings; each problem is
/// pushed to `errors` naming the key as written.
pub fn read(entries: &BTreeMap<String, String>, prefix: &str, errors: &mut Vec<ConfigError>) -> BTreeMap<String, String> {
    let get = |k: &str| entries.get(&format!("{prefix}{k}")).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let mut out: BTreeMap<String, String> =
        SECURITY.iter().filter_map(|k| entries.get(&format!("{prefix}{k}")).map(|v| (k.to_string(), v.clone()))).collect();
    if let Some(jaas) = entries.get(&format!("{prefix}sasl.jaas.config")) {
        match parse_jaas(jaas) {
            Ok(login) => {
                for (k, v) in login {
                    out.entry(k).or_insert(v);
                }
            }
            Err(why) => errors.push(ConfigError::new(format!("{prefix}sasl.jaas.config"), why)),
        }
    }
    match get("ssl.truststore.type").as_deref().map(str::to_ascii_uppercase).as_deref() {
        None | Some("PEM") => {
            if let Some(location) = get("ssl.truststore.location") {
                out.entry("ssl.ca.location".into()).or_insert(location);
            }
        }
        Some(other) => errors.push(ConfigError::new(
            format!("{prefix}ssl.truststore.type"),
            format!(
                "{other} stores cannot be read by librdkafka; convert the CA certificates to PEM \
             (keytool -exportcert -rfc) and set ssl.truststore.type=PEM or ssl.ca.location"
            ),
        )),
    }
    match get("ssl.keystore.type").as_deref().map(str::to_ascii_uppercase).as_deref() {
        None | Some("PKCS12") => {}
        Some("PEM") if get("ssl.keystore.location").is_some() => errors.push(ConfigError::new(
            format!("{prefix}ssl.keystore.type"),
            "a PEM key store is given as ssl.certificate.location and ssl.key.location",
        )),
        Some("PEM") => {}
        Some(other) => errors.push(ConfigError::new(
            format!("{prefix}ssl.keystore.type"),
            format!(
                "{other} stores cannot be read by librdkafka; convert it to PKCS12 (keytool \
             -importkeystore -deststoretype PKCS12)"
            ),
        )),
    }
    if let Some(class) = get("sasl.login.callback.handler.class")
        && !class.ends_with("OAuthBearerLoginCallbackHandler")
    {
        errors.push(ConfigError::new(
            format!("{prefix}sasl.login.callback.handler.class"),
            format!("{class} is a Java class; only OIDC client credentials are supported (sasl.oauthbearer.method=oidc)"),
        ));
    }
    if out.get("sasl.mechanism").or(out.get("sasl.mechanisms")).is_some_and(|m| m == "OAUTHBEARER") {
        out.entry("sasl.oauthbearer.method".into()).or_insert_with(|| "oidc".into());
    }
    if out.get("sasl.oauthbearer.method").is_some_and(|m| m.eq_ignore_ascii_case("oidc")) {
        // The token endpoint's CA certificates: librdkafka asks the linked OpenSSL's default
        // paths, which a static build's OpenSSL does not share with the system; `probe` looks in
        // the systems' usual bundle locations (Debian's, Red Hat's, Alpine's, ...) in every build.
        out.entry("https.ca.location".into()).or_insert_with(|| "probe".into());
    }
    out
}

/// In `worker.properties`: the same security keys under `producer.` / `consumer.` / `admin.` must
/// agree with the worker's own (one connection for every client).
pub fn check_client_prefixes(entries: &BTreeMap<String, String>, errors: &mut Vec<ConfigError>) {
    for (key, value) in entries {
        let Some((prefix, rest)) = CLIENT_PREFIXES.iter().find_map(|p| key.strip_prefix(p).map(|rest| (*p, rest))) else { continue };
        if !is_security_key(rest) {
            continue;
        }
        if entries.get(rest).map(|v| v.trim()) != Some(value.trim()) {
            errors.push(ConfigError::new(
                key,
                format!("every client of a worker connects the same way: set {rest} (it applies to the {prefix}* clients too)"),
            ));
        }
    }
}

/// Whether `key` in `worker.properties` is a client-prefixed copy of a security key.
pub fn is_client_prefixed_security_key(key: &str) -> bool {
    CLIENT_PREFIXES.iter().any(|p| key.strip_prefix(p).is_some_and(is_security_key))
}

/// librdkafka settings from a JAAS line: PLAIN/SCRAM `username`/`password`; OAUTHBEARER
/// `clientId`/`clientSecret`/`scope`.
fn parse_jaas(text: &str) -> Result<Vec<(String, String)>, String> {
    let text = text.trim().trim_end_matches(';').trim();
    let (module, rest) = text.split_once(char::is_whitespace).ok_or("expected `<LoginModule> required key=\"value\" …;`")?;
    let rest = rest.trim_start();
    let options = rest.strip_prefix("required").ok_or("expected the flag `required` after the login module")?;
    let mut pairs = BTreeMap::new();
    let mut chars = options.trim().chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            break;
        }
        let key: String = std::iter::from_fn(|| chars.next_if(|c| *c != '=' && !c.is_whitespace())).collect();
        if chars.next() != Some('=') {
            return Err(format!("option {key} has no value (key=\"value\")"));
        }
        let value = if chars.next_if_eq(&'"').is_some() {
            let mut value = String::new();
            loop {
                match chars.next() {
                    Some('\\') => value.extend(chars.next()),
                    Some('"') => break,
                    Some(c) => value.push(c),
                    None => return Err(format!("option {key}: the quoted value is not closed")),
                }
            }
            value
        } else {
            std::iter::from_fn(|| chars.next_if(|c| !c.is_whitespace())).collect()
        };
        pairs.insert(key, value);
    }
    let take = |k: &str| pairs.get(k).cloned();
    let short = module.rsplit('.').next().unwrap_or(module);
    match short {
        "PlainLoginModule" | "ScramLoginModule" => {
            let (Some(user), Some(password)) = (take("username"), take("password")) else {
                return Err(format!("{short} needs username=\"…\" and password=\"…\""));
            };
            Ok(vec![("sasl.username".into(), user), ("sasl.password".into(), password)])
        }
        "OAuthBearerLoginModule" => {
            let mut out = Vec::new();
            for (java, native) in [
                ("clientId", "sasl.oauthbearer.client.id"),
                ("clientSecret", "sasl.oauthbearer.client.secret"),
                ("scope", "sasl.oauthbearer.scope"),
            ] {
                if let Some(v) = take(java) {
                    out.push((native.to_string(), v));
                }
            }
            Ok(out)
        }
        other => Err(format!("login module {other} is not supported (PlainLoginModule, ScramLoginModule, OAuthBearerLoginModule)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_connect_worker_file_reads_as_librdkafka_settings() {
        let mut errors = Vec::new();
        let out = read(
            &map(&[
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "SCRAM-SHA-512"),
                (
                    "sasl.jaas.config",
                    r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="connect" password="p\"w d";"#,
                ),
                ("ssl.truststore.location", "/etc/kafka/ca.pem"),
                ("ssl.truststore.type", "PEM"),
            ]),
            "",
            &mut errors,
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(out["sasl.username"], "connect");
        assert_eq!(out["sasl.password"], "p\"w d");
        assert_eq!(out["ssl.ca.location"], "/etc/kafka/ca.pem");
        assert_eq!(out["security.protocol"], "SASL_SSL");
    }

    #[test]
    fn what_librdkafka_cannot_read_is_named() {
        let mut errors = Vec::new();
        read(
            &map(&[
                ("kafka.ssl.truststore.type", "JKS"),
                ("kafka.ssl.keystore.type", "JKS"),
                ("kafka.sasl.jaas.config", "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;"),
            ]),
            "kafka.",
            &mut errors,
        );
        assert!(errors.iter().any(|e| e.to_string().starts_with("kafka.ssl.truststore.type: JKS")), "{errors:?}");
        assert!(errors.iter().any(|e| e.to_string().starts_with("kafka.ssl.keystore.type: JKS")), "{errors:?}");
        assert!(errors.iter().any(|e| e.to_string().starts_with("kafka.sasl.jaas.config: login module Krb5LoginModule")), "{errors:?}");
        let mut errors = Vec::new();
        check_client_prefixes(&map(&[("security.protocol", "SASL_SSL"), ("producer.security.protocol", "PLAINTEXT")]), &mut errors);
        assert!(errors[0].to_string().starts_with("producer.security.protocol: every client"), "{errors:?}");
    }

    #[test]
    fn oauthbearer_jaas_is_oidc_client_credentials() {
        let mut errors = Vec::new();
        let out = read(
            &map(&[
                ("sasl.mechanism", "OAUTHBEARER"),
                ("sasl.oauthbearer.token.endpoint.url", "https://idp/token"),
                (
                    "sasl.jaas.config",
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId=\"c\" clientSecret=\"s\" scope=\"kafka\";",
                ),
            ]),
            "",
            &mut errors,
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            (out["sasl.oauthbearer.method"].as_str(), out["sasl.oauthbearer.client.id"].as_str(), out["sasl.oauthbearer.scope"].as_str()),
            ("oidc", "c", "kafka")
        );
        assert_eq!(out["https.ca.location"], "probe", "the token endpoint's CAs are found in a static build too");
        // ... and the librdkafka this host links takes them: it was built with libcurl (without
        // it, configure quietly leaves OIDC out and a client is refused only at start).
        let mut config = rdkafka::ClientConfig::new();
        config.set("bootstrap.servers", "127.0.0.1:9").set("security.protocol", "SASL_SSL");
        for (k, v) in &out {
            config.set(k, v);
        }
        let client: Result<rdkafka::producer::BaseProducer, _> = config.create();
        assert!(client.is_ok(), "librdkafka refuses OIDC settings: {:?}", client.err());
    }
}
