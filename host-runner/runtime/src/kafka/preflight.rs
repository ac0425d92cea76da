//! Before a worker or a connector starts using a cluster: does it answer, and does it accept the
//! credentials? librdkafka retries a refused login or a failed TLS handshake forever in the
//! background and reports it only through its error callback, so a wrong password would look like
//! a slow broker. [`check`] asks for the cluster's metadata with a client that records those
//! errors and answers either that the cluster is there, that it is unavailable for now (the caller
//! waits and asks again), or that it refused the client for good — a message naming the listener
//! (brokers, security protocol, mechanism, user) and the cause.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

/// Why a cluster could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The brokers could not be reached or did not answer yet (retry).
    #[error("{0}")]
    Unavailable(String),
    /// The brokers refused the client: credentials, TLS, or a setting (do not retry).
    #[error("{0}")]
    Fatal(String),
}

impl Refused {
    /// Whether asking again later can help.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Refused::Unavailable(_))
    }
}

/// The listener a client connects to, as messages name it:
/// `SASL_SSL://b1:9093 as user "connect" (SCRAM-SHA-512)`.
pub fn listener(bootstrap: &str, security: &BTreeMap<String, String>) -> String {
    let protocol = security.get("security.protocol").map(|p| p.to_ascii_uppercase()).unwrap_or_else(|| "PLAINTEXT".into());
    let mut out = format!("{protocol}://{bootstrap}");
    if protocol.starts_with("SASL") {
        let mechanism = security.get("sasl.mechanism").or(security.get("sasl.mechanisms")).cloned().unwrap_or_else(|| "GSSAPI".into());
        match (mechanism.as_str(), security.get("sasl.username"), security.get("sasl.oauthbearer.client.id")) {
            ("OAUTHBEARER", _, Some(client)) => out.push_str(&format!(" as OIDC client {client:?} (OAUTHBEARER)")),
            (_, Some(user), _) => out.push_str(&format!(" as user {user:?} ({mechanism})")),
            _ => out.push_str(&format!(" ({mechanism})")),
        }
    }
    out
}

#[derive(Default)]
struct Recorder {
    errors: Mutex<Vec<(Option<RDKafkaErrorCode>, String)>>,
}

impl ClientContext for Recorder {
    fn error(&self, error: KafkaError, reason: &str) {
        let code = error.rdkafka_error_code();
        self.errors.lock().unwrap_or_else(|e| e.into_inner()).push((code, reason.to_string()));
    }
}

impl ConsumerContext for Recorder {}

/// Whether a recorded error means the brokers refused the client for good.
fn is_fatal((code, reason): &(Option<RDKafkaErrorCode>, String)) -> bool {
    matches!(code, Some(RDKafkaErrorCode::Authentication | RDKafkaErrorCode::SSL | RDKafkaErrorCode::SaslAuthenticationFailed))
        || reason.contains("SASL authentication error")
        || reason.contains("SSL handshake failed")
        || refuses_certificate(reason)
}

/// Whether a broker's TLS alert says it refused the client's certificate (or its absence): a
/// listener requiring mutual TLS answers a client without one with `bad certificate` (Java) or
/// `certificate required` (TLS 1.3), one it does not trust with `unknown ca`.
fn refuses_certificate(reason: &str) -> bool {
    ["alert bad certificate", "alert certificate required", "alert unknown ca", "alert certificate unknown"]
        .iter()
        .any(|alert| reason.contains(alert))
}

/// Asks the cluster at `bootstrap` for its metadata with `security`, within `timeout`.
/// Blocking: call it off the async threads.
pub fn check(bootstrap: &str, security: &BTreeMap<String, String>, timeout: Duration) -> Result<(), Refused> {
    let named = listener(bootstrap, security);
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap).set("reconnect.backoff.max.ms", "1000");
    for (k, v) in security {
        config.set(k, v);
    }
    let client: BaseConsumer<Recorder> = config
        .create_with_context(Recorder::default())
        .map_err(|e| Refused::Fatal(crate::redact::clean(&format!("Kafka at {named}: the client settings are refused: {e}"))))?;
    // Errors reach the context only while the client is polled: ask in short rounds, serving
    // its events between them, until it answers, refuses, or the time is up.
    let deadline = std::time::Instant::now() + timeout;
    let (answered, errors) = loop {
        let answered = client.fetch_metadata(None, Duration::from_millis(500).min(timeout));
        let _ = client.poll(Duration::ZERO);
        let errors = client.context().errors.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if answered.is_ok() || errors.iter().any(is_fatal) || std::time::Instant::now() >= deadline {
            break (answered, errors);
        }
    };
    let fatal = errors.iter().find(|e| is_fatal(e));
    if let Some((code, reason)) = fatal {
        let oauthbearer = security.get("sasl.mechanism").or(security.get("sasl.mechanisms")).is_some_and(|m| m == "OAUTHBEARER");
        let what = match code {
            _ if refuses_certificate(reason) => {
                "the brokers refused the client certificate (a listener requiring mutual TLS: set ssl.keystore.location, or \
                 ssl.certificate.location with ssl.key.location, to a certificate signed by a CA the brokers trust)"
            }
            Some(RDKafkaErrorCode::SSL) => "the TLS handshake failed (check ssl.ca.location and the brokers' certificates)",
            _ if reason.contains("SSL") => "the TLS handshake failed (check ssl.ca.location and the brokers' certificates)",
            _ if reason.contains("OAUTHBEARER token") => {
                "the identity provider refused the client (check sasl.oauthbearer.client.id, its secret, the token endpoint and the scope)"
            }
            _ if oauthbearer => "the brokers refused the token (check the audience, issuer and subject the identity provider puts in it)",
            _ => "the brokers refused the credentials (check the user, password and SASL mechanism)",
        };
        return Err(Refused::Fatal(crate::redact::clean(&format!("Kafka at {named}: {what}: {reason}"))));
    }
    match answered {
        Ok(_) => Ok(()),
        Err(e) => {
            let last = errors.last().map(|(_, reason)| format!(" ({reason})")).unwrap_or_default();
            Err(Refused::Unavailable(crate::redact::clean(&format!("Kafka at {named} did not answer within {timeout:?}: {e}{last}"))))
        }
    }
}

/// [`check`] until the cluster answers: an unavailable cluster is waited for (logged, with a
/// growing pause up to 10 s) until `stop` fires; a refusal is returned at once.
pub async fn wait_until_answered(
    bootstrap: &str,
    security: &BTreeMap<String, String>,
    stop: &crate::shutdown::Shutdown,
) -> Result<(), Refused> {
    let mut pause = Duration::from_millis(500);
    loop {
        let (b, s) = (bootstrap.to_string(), security.clone());
        let checked = tokio::task::spawn_blocking(move || check(&b, &s, Duration::from_secs(10)))
            .await
            .unwrap_or_else(|e| Err(Refused::Unavailable(format!("the Kafka check stopped: {e}"))));
        match checked {
            Ok(()) => return Ok(()),
            Err(e) if e.is_retryable() && !stop.is_stopping() => {
                tracing::warn!("{e}; waiting for it (asking again in {pause:?})");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(10));
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listener_is_named_with_its_protocol_mechanism_and_user() {
        let security: BTreeMap<String, String> =
            [("security.protocol", "sasl_ssl"), ("sasl.mechanism", "SCRAM-SHA-512"), ("sasl.username", "connect")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        assert_eq!(listener("b:9093", &security), "SASL_SSL://b:9093 as user \"connect\" (SCRAM-SHA-512)");
        assert_eq!(listener("b:9092", &BTreeMap::new()), "PLAINTEXT://b:9092");
    }

    #[test]
    fn a_refused_client_certificate_is_fatal() {
        let alert = "ssl://b:9094/bootstrap: Receive failed: ssl3_read_bytes error:0A000412:SSL routines::sslv3 alert bad certificate";
        assert!(is_fatal(&(None, alert.to_string())));
        assert!(!is_fatal(&(None, "Connect to ipv4#127.0.0.1:9 failed: Connection refused".to_string())));
    }

    #[test]
    fn a_cluster_that_is_not_there_is_unavailable_not_fatal() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let err = check(&format!("127.0.0.1:{port}"), &BTreeMap::new(), Duration::from_secs(2)).unwrap_err();
        assert!(err.is_retryable(), "{err}");
        assert!(err.to_string().contains(&format!("Kafka at PLAINTEXT://127.0.0.1:{port} did not answer")), "{err}");
    }
}
