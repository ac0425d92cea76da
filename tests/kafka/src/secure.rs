//! A broker with a `SASL_SSL` listener and ACLs, as a secured production cluster has: a
//! certificate authority and the broker's certificate made with `openssl` (the broker reads PEM),
//! SCRAM-SHA-512 and SCRAM-SHA-256 users created with Kafka's own storage tool, PLAIN users in
//! the listener's JAAS, the StandardAuthorizer with `allow.everyone.if.no.acl.found=false`, and
//! ACLs added with Kafka's own `AclCommand`, and on request OAUTHBEARER tokens validated as a
//! production broker validates them: signatures checked against an identity provider's JWKS
//! endpoint, audience and issuer required (`OAuthBearerValidatorCallbackHandler`, the endpoint in
//! Kafka's `org.apache.kafka.sasl.oauthbearer.allowed.urls`). A `PLAINTEXT` listener beside it serves the harness's
//! own administration (its principal, `ANONYMOUS`, is a super user): what a test checks goes through
//! the `SASL_SSL` listener only. Two more listeners serve the other ways a production cluster is
//! secured: `SSL` requiring a client certificate the test CA signed (mutual TLS; the principal is
//! the certificate's subject, `User:CN=snow-test-client`), and `SASL_PLAINTEXT` with the same SCRAM
//! and PLAIN users.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{KafkaBroker, free_port, process};

/// What to set up.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// SCRAM users (both SHA-512 and SHA-256 credentials): `(name, password)`.
    pub scram_users: Vec<(String, String)>,
    /// PLAIN users: `(name, password)`.
    pub plain_users: Vec<(String, String)>,
    /// OAUTHBEARER on the same listener, with tokens of this identity provider.
    pub oidc: Option<Oidc>,
}

/// An identity provider whose signed tokens (JWT, RS256) the broker accepts.
#[derive(Debug, Clone)]
pub struct Oidc {
    /// Where the broker reads the provider's signing keys (a JWKS document).
    pub jwks_url: String,
    /// The `iss` every token must carry.
    pub issuer: String,
    /// The `aud` every token must carry.
    pub audience: String,
}

/// The pieces [`prepare`] made for the broker.
pub(crate) struct Prepared {
    sasl_port: u16,
    ssl_port: u16,
    sasl_plaintext_port: u16,
    extra: String,
    /// Arguments to the storage tool (the SCRAM users).
    pub(crate) format_args: Vec<String>,
}

impl Prepared {
    /// `properties` with the secured listener added.
    pub(crate) fn apply(&self, properties: &str) -> String {
        let mut out = String::new();
        for line in properties.lines() {
            let line = match line.split_once('=') {
                Some((key @ ("listeners" | "advertised.listeners"), v)) => format!(
                    "{key}={v},SASL_SSL://127.0.0.1:{},SSL://127.0.0.1:{},SASL_PLAINTEXT://127.0.0.1:{}",
                    self.sasl_port, self.ssl_port, self.sasl_plaintext_port
                ),
                Some(("listener.security.protocol.map", v)) => {
                    format!("listener.security.protocol.map={v},SASL_SSL:SASL_SSL,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT")
                }
                _ => line.to_string(),
            };
            out.push_str(&line);
            out.push('\n');
        }
        out.push_str(&self.extra);
        out
    }
}

/// Makes the certificates in `dir` and the broker's security settings.
pub(crate) fn prepare(dir: &Path, request: &Request) -> io::Result<Prepared> {
    make_certificates(dir)?;
    let (sasl_port, ssl_port, sasl_plaintext_port) = (free_port()?, free_port()?, free_port()?);
    let plain: String = request.plain_users.iter().map(|(u, p)| format!(" user_{u}=\"{p}\"")).collect();
    let (mechanisms, oauth) = match &request.oidc {
        None => ("SCRAM-SHA-512,SCRAM-SHA-256,PLAIN", String::new()),
        Some(oidc) => {
            // Kafka 4.1's default validator (DefaultJwtValidator, built without a key resolver by
            // OAuthBearerValidatorCallbackHandler) checks neither signature nor audience: a token
            // for another service, or a forged one, is accepted. BrokerJwtValidator, named
            // explicitly, builds its resolver from the JWKS URL and checks both (docs/security.md).
            // The broker fetches keys only from URLs a system property allows (Kafka 4.0+).
            fs::write(
                dir.join(super::process::JVM_OPTIONS),
                format!("-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={}\n", oidc.jwks_url),
            )?;
            let oauth = format!(
                "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n\
                 listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler\n\
                 sasl.oauthbearer.jwt.validator.class=org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator\n\
                 sasl.oauthbearer.jwks.endpoint.url={}\n\
                 sasl.oauthbearer.expected.issuer={}\n\
                 sasl.oauthbearer.expected.audience={}\n\
                 connections.max.reauth.ms=10000\n",
                oidc.jwks_url, oidc.issuer, oidc.audience
            );
            ("SCRAM-SHA-512,SCRAM-SHA-256,PLAIN,OAUTHBEARER", oauth)
        }
    };
    let extra = format!(
        "sasl.enabled.mechanisms={mechanisms}\n\
         listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n\
         listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n\
         listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required{plain};\n\
         ssl.keystore.type=PEM\n\
         ssl.keystore.location={}\n\
         authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n\
         allow.everyone.if.no.acl.found=false\n\
         super.users=User:ANONYMOUS\n\
         listener.name.ssl.ssl.client.auth=required\n\
         listener.name.ssl.ssl.truststore.type=PEM\n\
         listener.name.ssl.ssl.truststore.location={}\n\
         listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN\n\
         listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n\
         listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n\
         listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required{plain};\n\
         {oauth}",
        dir.join("broker-keystore.pem").display(),
        dir.join("ca.pem").display()
    );
    let mut format_args = Vec::new();
    for (user, password) in &request.scram_users {
        for mechanism in ["SCRAM-SHA-512", "SCRAM-SHA-256"] {
            format_args.push("--add-scram".to_string());
            format_args.push(format!("{mechanism}=[name={user},password={password}]"));
        }
    }
    Ok(Prepared { sasl_port, ssl_port, sasl_plaintext_port, extra, format_args })
}

/// A CA (`ca.pem`), the broker's key and certificate (for 127.0.0.1, localhost and
/// `instance.snow.test`, a name only the tests' forward proxy resolves) signed by it
/// (`broker.pem`, `broker.pkcs8.key`, both with the chain in `broker-keystore.pem`), and a client's
/// (`client.pem`, `client.pkcs8.key`, both in `client-keystore.pem`), all in `dir`. Other servers
/// of the tests (a TLS registry) use them too.
pub fn make_certificates(dir: &Path) -> io::Result<()> {
    let openssl = |args: &[&str]| -> io::Result<()> {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .map_err(|e| io::Error::other(format!("running openssl (is it installed?): {e}")))?;
        if !out.status.success() {
            return Err(io::Error::other(format!("openssl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr))));
        }
        Ok(())
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=snow-test-ca",
    ])?;
    // A key (PKCS#8 too) and a certificate the CA signs for `name`, with `extension` (which also
    // makes it X.509 v3: rustls refuses v1).
    let signed = |name: &str, subject: &str, extension: &str| -> io::Result<()> {
        let (key, csr, ext, pem) = (format!("{name}.key"), format!("{name}.csr"), format!("{name}.ext"), format!("{name}.pem"));
        openssl(&["req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj", subject])?;
        fs::write(dir.join(&ext), format!("{extension}\n"))?;
        openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &pem,
            "-days",
            "2",
            "-extfile",
            &ext,
        ])?;
        openssl(&["pkcs8", "-topk8", "-nocrypt", "-in", &key, "-out", &format!("{name}.pkcs8.key")])
    };
    signed("broker", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:instance.snow.test")?;
    // The broker's PEM key store: its key (PKCS#8) then its certificate chain.
    let keystore = format!(
        "{}{}{}",
        fs::read_to_string(dir.join("broker.pkcs8.key"))?,
        fs::read_to_string(dir.join("broker.pem"))?,
        fs::read_to_string(dir.join("ca.pem"))?
    );
    fs::write(dir.join("broker-keystore.pem"), keystore)?;
    signed("client", "/CN=snow-test-client", "extendedKeyUsage=clientAuth")?;
    let client = format!("{}{}", fs::read_to_string(dir.join("client.pkcs8.key"))?, fs::read_to_string(dir.join("client.pem"))?);
    fs::write(dir.join("client-keystore.pem"), client)
}

/// A running broker with a `SASL_SSL` listener.
#[derive(Debug)]
pub struct SecureBroker {
    broker: KafkaBroker,
    sasl_ssl: String,
    ssl: String,
    sasl_plaintext: String,
}

impl SecureBroker {
    /// Starts one with `request`'s users, killed when this process exits; no ACL is set yet
    /// ([`SecureBroker::acl`]).
    pub fn start(request: &Request) -> io::Result<Self> {
        let broker = super::tied(Some(request.clone()))?;
        let text = fs::read_to_string(broker.dir.join("server.properties"))?;
        let listener = |protocol: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix("advertised.listeners="))
                .and_then(|v| v.split(',').find_map(|l| l.strip_prefix(&format!("{protocol}://"))))
                .map(str::to_string)
                .ok_or_else(|| io::Error::other(format!("the {protocol} listener is missing from server.properties")))
        };
        let (sasl_ssl, ssl, sasl_plaintext) = (listener("SASL_SSL")?, listener("SSL")?, listener("SASL_PLAINTEXT")?);
        Ok(Self { broker, sasl_ssl, ssl, sasl_plaintext })
    }

    /// `127.0.0.1:PORT` of the `SASL_SSL` listener.
    pub fn bootstrap(&self) -> &str {
        &self.sasl_ssl
    }

    /// `127.0.0.1:PORT` of the `SSL` listener (a client certificate the test CA signed required).
    pub fn ssl_bootstrap(&self) -> &str {
        &self.ssl
    }

    /// `127.0.0.1:PORT` of the `SASL_PLAINTEXT` listener.
    pub fn sasl_plaintext_bootstrap(&self) -> &str {
        &self.sasl_plaintext
    }

    /// The directory holding the test CA's certificates ([`make_certificates`]): `client.pem`,
    /// `client.pkcs8.key` and the rest.
    pub fn certificates_dir(&self) -> PathBuf {
        self.broker.dir.clone()
    }

    /// `127.0.0.1:PORT` of the harness's own `PLAINTEXT` listener (a super user's).
    pub fn admin_bootstrap(&self) -> &str {
        self.broker.bootstrap()
    }

    /// The CA certificate (PEM) clients trust.
    pub fn ca_file(&self) -> PathBuf {
        self.broker.dir.join("ca.pem")
    }

    /// Runs Kafka's `AclCommand --add` with `args` (`--allow-principal User:x --operation All
    /// --topic '*'` …) against the broker.
    pub fn acl(&self, args: &[&str]) -> io::Result<()> {
        let libs = super::ensure_jars()?;
        let out = Command::new("java")
            .arg("-cp")
            .arg(process::classpath(&libs))
            .arg(format!("-Dlog4j2.configurationFile={}", self.broker.dir.join("log4j2.properties").display()))
            .args(["org.apache.kafka.tools.AclCommand", "--bootstrap-server", self.admin_bootstrap(), "--add", "--force"])
            .args(args)
            .output()
            .map_err(|e| io::Error::other(format!("running java: {e}")))?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "AclCommand {}: {}{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(())
    }

    /// The broker's log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.broker.dir.join("broker.log")).unwrap_or_default()
    }
}
