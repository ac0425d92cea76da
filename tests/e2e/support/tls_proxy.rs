//! A TLS front for a plain server of the tests, as a load balancer stands before a schema registry
//! in production: it terminates TLS with the test CA's server certificate
//! ([`kafka_harness::secure::make_certificates`]), requires a client certificate signed by that CA
//! when asked, and forwards the bytes to the server. It counts the handshakes it accepted and
//! refused, so that a test can tell which side of TLS a failure was.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A running front; stopped when dropped.
pub struct TlsProxy {
    /// Its port on 127.0.0.1.
    pub port: u16,
    accepted: Arc<AtomicUsize>,
    refused: Arc<AtomicUsize>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl TlsProxy {
    /// A front for `127.0.0.1:upstream` with the certificates in `dir`; with `require_client`, a
    /// client must present a certificate the test CA signed.
    pub fn start(dir: &Path, upstream: u16, require_client: bool) -> Self {
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_file_iter(dir.join("broker.pem")).unwrap().collect::<Result<_, _>>().unwrap();
        let key = PrivateKeyDer::from_pem_file(dir.join("broker.pkcs8.key")).unwrap();
        let builder = rustls::ServerConfig::builder();
        let builder = if require_client {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(dir.join("ca.pem")).unwrap() {
                roots.add(cert.unwrap()).unwrap();
            }
            builder.with_client_cert_verifier(rustls::server::WebPkiClientVerifier::builder(Arc::new(roots)).build().unwrap())
        } else {
            builder.with_no_client_auth()
        };
        let config = Arc::new(builder.with_single_cert(chain, key).unwrap());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let (accepted, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (ok, no) = (accepted.clone(), refused.clone());
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            loop {
                let Ok((tcp, _)) = listener.accept().await else { continue };
                let (acceptor, ok, no) = (acceptor.clone(), ok.clone(), no.clone());
                tokio::spawn(async move {
                    match acceptor.accept(tcp).await {
                        Ok(mut tls) => {
                            ok.fetch_add(1, Ordering::SeqCst);
                            if let Ok(mut server) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await {
                                let _ = tokio::io::copy_bidirectional(&mut tls, &mut server).await;
                            }
                        }
                        Err(_) => {
                            no.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                });
            }
        });
        Self { port, accepted, refused, runtime: Some(runtime) }
    }

    /// Handshakes completed so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Handshakes refused so far (no client certificate, an untrusted one, a client that gave up).
    pub fn refused(&self) -> usize {
        self.refused.load(Ordering::SeqCst)
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}
