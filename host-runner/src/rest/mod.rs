//! Kafka Connect's REST API on every worker of a fleet (`listeners`, default
//! `http://127.0.0.1:8083`): the same paths, payloads and status codes as Connect 4.x where they
//! apply ([`api`]), configuration checks in Connect's `ConfigInfos` shape ([`validate`]). Writes
//! go to the fleet's topics, so a request to any worker acts on the whole fleet.
//!
//! The listener can require HTTP Basic (`rest.basic.auth.file`, a properties file of
//! `user=password`, read at start) and speak TLS (`listeners=https://…` with
//! `rest.tls.certificate.file` and `rest.tls.key.file`, PEM). Answers never hold a secret's
//! value: configurations keep secrets as provider references, and every message is redacted.

pub mod api;
pub mod validate;
pub mod view;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::shutdown::Shutdown;
use view::View;

/// Largest request body read (a connector configuration is a few kilobytes).
const MAX_BODY: usize = 1 << 20;

/// Where and how the API listens.
#[derive(Debug, Clone, Default)]
pub struct Listener {
    /// `HOST:PORT`.
    pub address: String,
    /// PEM certificate and key: TLS only.
    pub tls: Option<crate::worker::config::TlsFiles>,
    /// A properties file of `user=password`: HTTP Basic required.
    pub basic_auth_file: Option<std::path::PathBuf>,
}

impl Listener {
    /// A fleet worker's listener, from its configuration.
    pub fn of(config: &crate::worker::WorkerConfig) -> Self {
        Self { address: config.listen.clone(), tls: config.tls.clone(), basic_auth_file: config.basic_auth_file.clone() }
    }
}

/// Serves the API over `view` until `shutdown`; returns the bound address.
pub async fn serve(view: Arc<dyn View>, listen: &Listener, mut shutdown: Shutdown) -> Result<SocketAddr> {
    let listener =
        TcpListener::bind(&listen.address).await.with_context(|| format!("the REST listener cannot listen on {}", listen.address))?;
    let bound = listener.local_addr()?;
    let users = match &listen.basic_auth_file {
        Some(file) => Some(Arc::new(read_users(file)?)),
        None => None,
    };
    let tls = match &listen.tls {
        Some(files) => Some(tls_acceptor(&files.certificate, &files.key)?),
        None => None,
    };
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                () = shutdown.wait() => break,
            };
            let Ok((stream, _)) = accepted else { continue };
            let (view, users, tls) = (view.clone(), users.clone(), tls.clone());
            tokio::spawn(async move {
                let service = service_fn(move |request: http::Request<Incoming>| {
                    let (view, users) = (view.clone(), users.clone());
                    async move { Ok::<_, Infallible>(handle(view.as_ref(), users.as_deref(), request).await) }
                });
                match tls {
                    Some(acceptor) => {
                        if let Ok(stream) = acceptor.accept(stream).await {
                            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                        }
                    }
                    None => {
                        let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                    }
                }
            });
        }
    });
    Ok(bound)
}

/// A request, authenticated, read and answered.
async fn handle(view: &dyn View, users: Option<&BTreeMap<String, String>>, request: http::Request<Incoming>) -> Response<Full<Bytes>> {
    if let Some(users) = users
        && !authorised(users, request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()))
    {
        let mut response =
            api::error(StatusCode::UNAUTHORIZED, "The request needs HTTP Basic credentials of a user in rest.basic.auth.file");
        response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Basic realm=\"snow-connect\""));
        return response;
    }
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return api::error(StatusCode::PAYLOAD_TOO_LARGE, &format!("The request body is larger than {MAX_BODY} bytes or was cut off"));
        }
    };
    let response = api::answer(view, &parts.method, &parts.uri, &body).await;
    tracing::debug!(method = %parts.method, path = parts.uri.path(), status = response.status().as_u16(), "REST");
    response
}

/// Whether `authorization` is HTTP Basic for one of `users` (compared without early exit).
fn authorised(users: &BTreeMap<String, String>, authorization: Option<&str>) -> bool {
    let Some(encoded) = authorization.and_then(|a| a.strip_prefix("Basic ")) else { return false };
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else { return false };
    let Ok(text) = String::from_utf8(decoded) else { return false };
    let Some((user, password)) = text.split_once(':') else { return false };
    users.get(user).is_some_and(|expected| {
        let (a, b) = (expected.as_bytes(), password.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    })
}

/// The users of `rest.basic.auth.file`; their passwords are registered as secrets (never shown).
fn read_users(file: &std::path::Path) -> Result<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(file).with_context(|| format!("rest.basic.auth.file: reading {}", file.display()))?;
    let users = crate::config::parse_properties(&text).map_err(|e| anyhow::anyhow!("rest.basic.auth.file: {}: {e}", file.display()))?;
    if users.is_empty() {
        bail!("rest.basic.auth.file: {} names no user (one user=password per line)", file.display());
    }
    for password in users.values() {
        crate::redact::register(password);
    }
    Ok(users)
}

/// A TLS acceptor for the PEM certificate chain and key.
fn tls_acceptor(certificate: &std::path::Path, key: &std::path::Path) -> Result<tokio_rustls::TlsAcceptor> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(certificate)
        .with_context(|| format!("rest.tls.certificate.file: reading {}", certificate.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("rest.tls.certificate.file: {} is not a PEM certificate chain", certificate.display()))?;
    let key =
        PrivateKeyDer::from_pem_file(key).with_context(|| format!("rest.tls.key.file: {} is not a PEM private key", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("rest.tls.certificate.file and rest.tls.key.file do not make a usable pair")?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_checked() {
        let users: BTreeMap<String, String> = [("admin".to_string(), "s3cret".to_string())].into();
        let basic = |s: &str| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(s));
        assert!(authorised(&users, Some(&basic("admin:s3cret"))));
        assert!(!authorised(&users, Some(&basic("admin:s3cres"))));
        assert!(!authorised(&users, Some(&basic("other:s3cret"))));
        assert!(!authorised(&users, Some("Bearer x")));
        assert!(!authorised(&users, None));
    }
}
