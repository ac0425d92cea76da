//! The host's HTTP listeners — the REST API ([`crate::rest`]), the operator's status endpoint
//! ([`crate::admin`]) and a standalone run's push endpoint ([`crate::push::listen`]) — accept and serve connections here, with the limits a listener reachable
//! by others needs: at most [`Limits::max_connections`] at once (a connection past the cap is
//! closed at once, so idle sockets cannot exhaust the worker's descriptors or memory), a deadline
//! for the TLS handshake and for each request's headers (an idle or slow client is dropped), and
//! an accept loop that backs off when accepting fails (out of descriptors) instead of spinning.
//! What a request means is the caller's handler.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Response;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::shutdown::Shutdown;

/// A listener's certificate and key files (PEM): `rest.tls.certificate.file` and
/// `rest.tls.key.file`, or a push listener's.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The certificate chain.
    pub certificate: PathBuf,
    /// The private key.
    pub key: PathBuf,
}

/// A request's answer, built by the caller's handler.
pub type Answer = Pin<Box<dyn Future<Output = Response<Full<Bytes>>> + Send>>;

/// What answers a request.
pub type Handler = Arc<dyn Fn(http::Request<Incoming>) -> Answer + Send + Sync>;

/// A listener's limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once; more are closed as they arrive.
    pub max_connections: usize,
    /// Time a client has to send a request's headers (also how long an idle connection is kept).
    pub header_read: Duration,
    /// Time a client has to complete the TLS handshake.
    pub tls_handshake: Duration,
}

impl Default for Limits {
    /// Operators and their tools open a handful of connections; 256 leaves room for a dashboard
    /// polling every worker, and 10 s is far beyond what any client needs to send its headers.
    fn default() -> Self {
        Self { max_connections: 256, header_read: Duration::from_secs(10), tls_handshake: Duration::from_secs(10) }
    }
}

/// Serves `listener` until `shutdown` with `handler` (over TLS when `tls` is given), within
/// `limits`. `what` names the listener in logs.
pub fn spawn(
    what: &'static str,
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limits: Limits,
    handler: Handler,
    mut shutdown: Shutdown,
) {
    tokio::spawn(async move {
        let permits = Arc::new(Semaphore::new(limits.max_connections));
        let mut backoff = Duration::from_millis(10);
        let mut last_warning: Option<Instant> = None;
        let mut warn = |message: String| {
            if last_warning.is_none_or(|at| at.elapsed() > Duration::from_secs(10)) {
                last_warning = Some(Instant::now());
                tracing::warn!("{what}: {message}");
            }
        };
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                () = shutdown.wait() => break,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => {
                    backoff = Duration::from_millis(10);
                    accepted
                }
                Err(e) => {
                    // Out of descriptors, most likely: wait for some to be freed rather than spin.
                    warn(format!("accepting a connection failed ({e}); trying again in {backoff:?}"));
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    continue;
                }
            };
            let Ok(permit) = permits.clone().try_acquire_owned() else {
                warn(format!("{} connections are open, the most it serves; closing new ones (last from {peer})", limits.max_connections));
                drop(stream);
                continue;
            };
            let (handler, tls) = (handler.clone(), tls.clone());
            tokio::spawn(async move {
                let _permit = permit;
                serve_connection(stream, peer, tls, limits, handler).await;
            });
        }
    });
}

async fn serve_connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limits: Limits,
    handler: Handler,
) {
    let service = service_fn(move |request: http::Request<Incoming>| {
        let answer = handler(request);
        async move { Ok::<_, Infallible>(answer.await) }
    });
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_read);
    match tls {
        Some(acceptor) => match tokio::time::timeout(limits.tls_handshake, acceptor.accept(stream)).await {
            Ok(Ok(stream)) => {
                let _ = builder.serve_connection(TokioIo::new(stream), service).await;
            }
            Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
            Err(_) => tracing::debug!(%peer, "TLS handshake not completed within {:?}; closed", limits.tls_handshake),
        },
        None => {
            let _ = builder.serve_connection(TokioIo::new(stream), service).await;
        }
    }
}

/// A TLS acceptor for the PEM certificate chain and key, named in errors by their keys
/// (`<keys>.certificate.file`, `<keys>.key.file`).
pub fn tls_acceptor(certificate: &std::path::Path, key: &std::path::Path, keys: &str) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    use anyhow::Context as _;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(certificate)
        .with_context(|| format!("{keys}.certificate.file: reading {}", certificate.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("{keys}.certificate.file: {} is not a PEM certificate chain", certificate.display()))?;
    let key = PrivateKeyDer::from_pem_file(key).with_context(|| format!("{keys}.key.file: {} is not a PEM private key", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .with_context(|| format!("{keys}.certificate.file and {keys}.key.file do not make a usable pair"))?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn ok_handler() -> Handler {
        Arc::new(|_| Box::pin(async { Response::new(Full::new(Bytes::from_static(b"ok"))) }))
    }

    #[tokio::test]
    async fn idle_connections_past_the_cap_are_closed_and_a_silent_one_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (_trigger, shutdown) = crate::shutdown::channel();
        let limits = Limits { max_connections: 4, header_read: Duration::from_millis(500), ..Limits::default() };
        spawn("test listener", listener, None, limits, ok_handler(), shutdown);
        let mut idle = Vec::new();
        for _ in 0..4 {
            idle.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        // The fifth is closed at once: its read ends without an answer.
        let mut extra = tokio::net::TcpStream::connect(addr).await.unwrap();
        let _ = extra.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await;
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), extra.read_to_end(&mut buf)).await;
        assert!(read.is_ok() && buf.is_empty(), "past the cap a connection is closed unanswered");
        // The silent ones are dropped after the header deadline, and a request is answered again.
        let mut first = idle.remove(0);
        let mut buf = Vec::new();
        let closed = tokio::time::timeout(Duration::from_secs(5), first.read_to_end(&mut buf)).await;
        assert!(closed.is_ok(), "a silent connection is closed after the header deadline");
        let answered = async {
            loop {
                let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
                client.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
                let mut buf = Vec::new();
                let _ = client.read_to_end(&mut buf).await;
                if buf.starts_with(b"HTTP/1.1 200") {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), answered).await.expect("answered once the idle ones were dropped");
    }
}
