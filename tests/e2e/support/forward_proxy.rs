//! An HTTP forward proxy of the tests' own, as an enterprise's egress proxy: it requires Basic
//! proxy authentication (407 otherwise), tunnels `CONNECT host:port` byte for byte, and forwards
//! requests in absolute form (`GET http://host:port/path`) on a connection of its own. It resolves
//! the names it is given itself (`names`), so a test can give the instance a host name only the
//! proxy knows: a request that went around the proxy cannot reach anything. It logs every request
//! it was asked for (method, target, whether its credentials were right).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

/// One request the proxy was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    /// `CONNECT`, `GET`, `POST`, ...
    pub method: String,
    /// `host:port` it was asked to reach.
    pub target: String,
    /// Whether it carried the right credentials (and was served).
    pub authorized: bool,
}

/// A running proxy; stopped when dropped.
pub struct ForwardProxy {
    /// Its port on 127.0.0.1.
    pub port: u16,
    log: Arc<Mutex<Vec<Asked>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

struct Settings {
    authorization: String,
    names: HashMap<String, String>,
    log: Arc<Mutex<Vec<Asked>>>,
}

type Body = BoxBody<Bytes, hyper::Error>;

impl ForwardProxy {
    /// A proxy taking `user`/`password`, resolving each name of `names` to its address (other
    /// names as the system does).
    pub fn start(user: &str, password: &str, names: &[(&str, &str)]) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let settings = Arc::new(Settings {
            authorization: format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))),
            names: names.iter().map(|(n, a)| (n.to_string(), a.to_string())).collect(),
            log: log.clone(),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((tcp, _)) = listener.accept().await else { continue };
                let settings = settings.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| serve(settings.clone(), request));
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), service).with_upgrades().await;
                });
            }
        });
        Self { port, log, runtime: Some(runtime) }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request asked for so far.
    pub fn asked(&self) -> Vec<Asked> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for ForwardProxy {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

fn empty(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Empty::<Bytes>::new().map_err(|never| match never {}).boxed());
    *response.status_mut() = status;
    response
}

/// `host:port` of a request's target, resolved through `names`.
fn address(settings: &Settings, target: &str) -> String {
    let (host, port) = target.rsplit_once(':').unwrap_or((target, "80"));
    format!("{}:{port}", settings.names.get(host).map(String::as_str).unwrap_or(host))
}

async fn serve(settings: Arc<Settings>, mut request: Request<Incoming>) -> Result<Response<Body>, hyper::Error> {
    let target = match request.uri().authority() {
        Some(a) => format!("{}:{}", a.host(), a.port_u16().unwrap_or(80)),
        None => return Ok(empty(StatusCode::BAD_REQUEST)),
    };
    let authorized =
        request.headers().get(hyper::header::PROXY_AUTHORIZATION).is_some_and(|v| v.as_bytes() == settings.authorization.as_bytes());
    settings.log.lock().unwrap().push(Asked { method: request.method().to_string(), target: target.clone(), authorized });
    if !authorized {
        let mut refused = empty(StatusCode::PROXY_AUTHENTICATION_REQUIRED);
        refused.headers_mut().insert(hyper::header::PROXY_AUTHENTICATE, "Basic realm=\"snow-test-proxy\"".parse().unwrap());
        return Ok(refused);
    }
    let upstream = address(&settings, &target);
    if request.method() == hyper::Method::CONNECT {
        tokio::spawn(async move {
            let Ok(upgraded) = hyper::upgrade::on(request).await else { return };
            if let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await {
                let _ = tokio::io::copy_bidirectional(&mut TokioIo::new(upgraded), &mut server).await;
            }
        });
        return Ok(empty(StatusCode::OK));
    }
    // Absolute form: forwarded in origin form, without the proxy's credentials.
    let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else { return Ok(empty(StatusCode::BAD_GATEWAY)) };
    let Ok((mut sender, connection)) = hyper::client::conn::http1::handshake(TokioIo::new(server)).await else {
        return Ok(empty(StatusCode::BAD_GATEWAY));
    };
    tokio::spawn(connection);
    request.headers_mut().remove(hyper::header::PROXY_AUTHORIZATION);
    *request.uri_mut() = request.uri().path_and_query().map_or("/", |p| p.as_str()).parse().unwrap();
    match sender.send_request(request).await {
        Ok(response) => Ok(response.map(BodyExt::boxed)),
        Err(_) => Ok(empty(StatusCode::BAD_GATEWAY)),
    }
}
