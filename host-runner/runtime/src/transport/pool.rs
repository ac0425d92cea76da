//! Keep-alive connections to instances, shared by every guest request of the process: a request
//! reuses an idle HTTP/1.1 connection to its host when there is one, and a connection goes back
//! to the pool only once its response body was read to the end (a body dropped early closes it).
//! How a destination is reached is the request's [`Route`]: directly or through a forward proxy,
//! with rustls and the Mozilla roots (as wasmtime's default sender) or a [`TlsProfile`] of its own;
//! connections are pooled apart per route.

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

use super::Route;
use super::tls::TlsProfile;

/// Idle connections kept per host.
const MAX_IDLE_PER_HOST: usize = 32;

/// A connection to one instance.
type Sender = SendRequest<WasiBody>;

/// Which connections are interchangeable: same scheme, same `host:port`, same TLS profile, same
/// proxy.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct HostKey {
    tls: bool,
    authority: String,
    /// The [`TlsProfile`]'s id (0: the Mozilla roots, no client certificate).
    profile: u64,
    /// The proxy's id (0: direct).
    proxy: u64,
}

/// Idle connections by host.
#[derive(Default)]
pub struct ConnectionPool {
    idle: Mutex<HashMap<HostKey, Vec<Sender>>>,
}

fn tls(profile: Option<&TlsProfile>) -> tokio_rustls::TlsConnector {
    tokio_rustls::TlsConnector::from(profile.map_or_else(super::tls::default_config, TlsProfile::config))
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

    async fn connect(key: &HostKey, route: &Route, timeout: Duration) -> Result<Sender, HttpError> {
        let authority = &key.authority;
        let host = authority.rsplit_once(':').map_or(authority.as_str(), |(h, _)| h).trim_start_matches('[').trim_end_matches(']');
        let proxy = route.proxy.as_ref().filter(|_| key.proxy != 0);
        let tcp = match proxy {
            Some(proxy) if key.tls => proxy.tunnel(authority, timeout).await?,
            Some(proxy) => proxy.connect(timeout).await?,
            None => {
                let tcp = match tokio::time::timeout(timeout, TcpStream::connect(authority)).await {
                    Ok(stream) => stream.map_err(HttpError::Connect)?,
                    Err(_) => return Err(HttpError::ConnectionTimeout),
                };
                let _ = tcp.set_nodelay(true);
                tcp
            }
        };
        if !key.tls {
            return Self::handshake(TokioIo::new(tcp), timeout).await;
        }
        let name = rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|_| HttpError::HttpRequestUriInvalid)?;
        let stream = tokio::time::timeout(timeout, tls(route.tls.as_ref()).connect(name, tcp))
            .await
            .map_err(|_| HttpError::ConnectionTimeout)?
            .map_err(|e| route.tls_failed(authority, &e))?;
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

    /// Sends `request` on a pooled or new connection the way `route` says: through its proxy
    /// unless the host is on its no-proxy list, with its TLS settings.
    pub async fn send_with(
        self: &Arc<Self>,
        mut request: http::Request<WasiBody>,
        options: RequestOptions,
        route: &Route,
    ) -> Result<http::Response<WasiBody>, HttpError> {
        let uri = request.uri().clone();
        let tls_wanted = uri.scheme_str() == Some("https");
        let authority = uri.authority().ok_or(HttpError::HttpRequestUriInvalid)?;
        let port = authority.port_u16().unwrap_or(if tls_wanted { 443 } else { 80 });
        let proxy = route.proxy.as_ref().filter(|p| p.applies_to(authority.host(), port));
        let key = HostKey {
            tls: tls_wanted,
            authority: format!("{}:{port}", authority.host()),
            profile: route.tls.as_ref().map_or(0, TlsProfile::id),
            proxy: proxy.map_or(0, |p| p.id()),
        };
        let connect_timeout = options.connect_timeout.unwrap_or(Duration::from_secs(60));
        let mut sender = match self.take(&key) {
            Some(sender) => sender,
            None => Self::connect(&key, route, connect_timeout).await?,
        };
        if sender.ready().await.is_err() {
            sender = Self::connect(&key, route, connect_timeout).await?;
        }
        match proxy.filter(|_| !tls_wanted) {
            // Plain HTTP through a proxy: the request line carries the whole URL, and the proxy
            // its credentials.
            Some(proxy) => {
                if let Some(authorization) = proxy.authorization() {
                    request.headers_mut().insert(http::header::PROXY_AUTHORIZATION, authorization.clone());
                }
            }
            // The request line carries only path and query (the host is in the Host header).
            None => {
                *request.uri_mut() = http::Uri::builder()
                    .path_and_query(uri.path_and_query().map_or("/", |p| p.as_str()))
                    .build()
                    .map_err(|_| HttpError::HttpRequestUriInvalid)?;
            }
        }
        let first_byte = options.first_byte_timeout.unwrap_or(Duration::from_secs(600));
        let response = tokio::time::timeout(first_byte, sender.send_request(request))
            .await
            .map_err(|_| HttpError::ConnectionReadTimeout)?
            .map_err(|e| route.refused_mid_handshake(&key.authority, e))?;
        if let Some(proxy) = proxy.filter(|_| !tls_wanted && response.status() == http::StatusCode::PROXY_AUTHENTICATION_REQUIRED) {
            return Err(proxy.refused_credentials());
        }
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
