//! Keep-alive connections to instances, shared by every guest request of the process: a request
//! reuses an idle HTTP/1.1 connection to its host when there is one, and a connection goes back
//! to the pool only once its response body was read to the end (a body dropped early closes it).
//! TLS is rustls with the Mozilla roots, as wasmtime's default sender, unless a request names a
//! [`TlsProfile`] of its own (a schema registry's trust store and client certificate): its
//! connections are then pooled apart from every other profile's.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody};

/// Idle connections kept per host.
const MAX_IDLE_PER_HOST: usize = 32;

/// A connection to one instance.
type Sender = SendRequest<WasiBody>;

/// Which connections are interchangeable: same scheme, same `host:port`, same TLS profile.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct HostKey {
    tls: bool,
    authority: String,
    /// The [`TlsProfile`]'s id (0: the Mozilla roots, no client certificate).
    profile: u64,
}

/// TLS settings other than the default: whom to trust, and the certificate to present.
#[derive(Debug, Clone)]
pub struct TlsProfile {
    id: u64,
    config: Arc<rustls::ClientConfig>,
}

impl TlsProfile {
    /// A profile of `config`; each has its own connections.
    pub fn new(config: rustls::ClientConfig) -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self { id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed), config: Arc::new(config) }
    }
}

/// Idle connections by host.
#[derive(Default)]
pub struct ConnectionPool {
    idle: Mutex<HashMap<HostKey, Vec<Sender>>>,
}

fn tls(profile: Option<&TlsProfile>) -> tokio_rustls::TlsConnector {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.into() };
        Arc::new(rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth())
    });
    tokio_rustls::TlsConnector::from(profile.map_or_else(|| config.clone(), |p| p.config.clone()))
}

impl ConnectionPool {
    /// The pool of the process.
    pub fn shared() -> Arc<ConnectionPool> {
        static POOL: OnceLock<Arc<ConnectionPool>> = OnceLock::new();
        POOL.get_or_init(Arc::default).clone()
    }

    fn take(&self, key: &HostKey) -> Option<Sender> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.get_mut(key)?;
        while let Some(sender) = list.pop() {
            if !sender.is_closed() {
                return Some(sender);
            }
        }
        None
    }

    fn give_back(&self, key: HostKey, sender: Sender) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.entry(key).or_default();
        if list.len() < MAX_IDLE_PER_HOST {
            list.push(sender);
        }
    }

    async fn connect(key: &HostKey, profile: Option<&TlsProfile>, timeout: Duration) -> Result<Sender, HttpError> {
        let authority = &key.authority;
        let tcp = match tokio::time::timeout(timeout, TcpStream::connect(authority)).await {
            Ok(stream) => stream.map_err(HttpError::Connect)?,
            Err(_) => return Err(HttpError::ConnectionTimeout),
        };
        let _ = tcp.set_nodelay(true);
        if !key.tls {
            return Self::handshake(TokioIo::new(tcp), timeout).await;
        }
        let host = authority.rsplit_once(':').map_or(authority.as_str(), |(h, _)| h).trim_start_matches('[').trim_end_matches(']');
        let name = rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|_| HttpError::HttpRequestUriInvalid)?;
        let stream = tokio::time::timeout(timeout, tls(profile).connect(name, tcp))
            .await
            .map_err(|_| HttpError::ConnectionTimeout)?
            .map_err(HttpError::Tls)?;
        Self::handshake(TokioIo::new(stream), timeout).await
    }

    /// HTTP/1.1 over `io`; the connection is driven by its own task until it closes.
    async fn handshake<T>(io: TokioIo<T>, timeout: Duration) -> Result<Sender, HttpError>
    where
        T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let (sender, connection) = tokio::time::timeout(timeout, hyper::client::conn::http1::Builder::new().handshake(io))
            .await
            .map_err(|_| HttpError::ConnectionTimeout)??;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }

    /// Sends `request` on a pooled or new connection, with the request's timeouts.
    pub async fn send(
        self: &Arc<Self>,
        request: http::Request<WasiBody>,
        options: RequestOptions,
    ) -> Result<http::Response<WasiBody>, HttpError> {
        self.send_with(request, options, None).await
    }

    /// [`Self::send`] with TLS as `profile` sets it (default: the Mozilla roots).
    pub async fn send_with(
        self: &Arc<Self>,
        mut request: http::Request<WasiBody>,
        options: RequestOptions,
        profile: Option<&TlsProfile>,
    ) -> Result<http::Response<WasiBody>, HttpError> {
        let uri = request.uri().clone();
        let tls_wanted = uri.scheme_str() == Some("https");
        let authority = uri.authority().ok_or(HttpError::HttpRequestUriInvalid)?;
        let port = authority.port_u16().unwrap_or(if tls_wanted { 443 } else { 80 });
        let key = HostKey { tls: tls_wanted, authority: format!("{}:{port}", authority.host()), profile: profile.map_or(0, |p| p.id) };
        let connect_timeout = options.connect_timeout.unwrap_or(Duration::from_secs(60));
        let mut sender = match self.take(&key) {
            Some(sender) => sender,
            None => Self::connect(&key, profile, connect_timeout).await?,
        };
        if sender.ready().await.is_err() {
            sender = Self::connect(&key, profile, connect_timeout).await?;
        }
        // The request line carries only path and query (the host is in the Host header).
        *request.uri_mut() = http::Uri::builder()
            .path_and_query(uri.path_and_query().map_or("/", |p| p.as_str()))
            .build()
            .map_err(|_| HttpError::HttpRequestUriInvalid)?;
        let first_byte = options.first_byte_timeout.unwrap_or(Duration::from_secs(600));
        let response =
            tokio::time::timeout(first_byte, sender.send_request(request)).await.map_err(|_| HttpError::ConnectionReadTimeout)??;
        let between = options.between_bytes_timeout.unwrap_or(Duration::from_secs(600)).max(Duration::from_nanos(1));
        let pool = self.clone();
        Ok(response.map(|incoming| {
            use http_body_util::BodyExt;
            PooledBody { incoming, timeout: Box::pin(tokio::time::sleep(between)), between, back: Some((pool, key, sender)) }.boxed_unsync()
        }))
    }
}

/// A response body that returns its connection to the pool once read to the end, and fails when
/// no byte arrives for the between-bytes timeout.
struct PooledBody {
    incoming: Incoming,
    timeout: Pin<Box<tokio::time::Sleep>>,
    between: Duration,
    back: Option<(Arc<ConnectionPool>, HostKey, Sender)>,
}

impl Body for PooledBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(None) => {
                if let Some((pool, key, sender)) = self.back.take() {
                    pool.give_back(key, sender);
                }
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                Poll::Ready(Some(Err(if e.is_timeout() { HttpError::HttpResponseTimeout } else { HttpError::from(e) })))
            }
            Poll::Ready(Some(Ok(frame))) => {
                let deadline = tokio::time::Instant::now() + self.between;
                self.timeout.as_mut().reset(deadline);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                ready!(self.timeout.as_mut().poll(cx));
                Poll::Ready(Some(Err(HttpError::ConnectionReadTimeout)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}
