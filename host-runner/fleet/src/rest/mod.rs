//! Kafka Connect's REST API on every worker of a fleet (`listeners`, default
//! `http://127.0.0.1:8083`): the same paths, payloads and status codes as Connect 4.x where they
//! apply ([`api`]), configuration checks in Connect's `ConfigInfos` shape ([`validate`]). Writes
//! go to the fleet's topics, so a request to any worker acts on the whole fleet.
//!
//! A fleet's listener also takes push notifications at `/snow/push/<connector>` ([`snow_runtime::push`]:
//! signed with the connector's secret, so outside the API's users). The listener can require HTTP
//! Basic (`rest.basic.auth.file`, a properties file of `user=password`, read at start) and speak TLS (`listeners=https://…` with
//! `rest.tls.certificate.file` and `rest.tls.key.file`, PEM). Answers never hold a secret's
//! value: configurations keep secrets as provider references, and every message is redacted.

pub mod api;
pub mod validate;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use tokio::net::TcpListener;

use crate::herder::Herder;
use snow_runtime::shutdown::Shutdown;

/// Largest request body read (a connector configuration is a few kilobytes).
const MAX_BODY: usize = 1 << 20;

/// Where and how the API listens.
#[derive(Debug, Clone, Default)]
pub struct Listener {
    /// `HOST:PORT`.
    pub address: String,
    /// PEM certificate and key: TLS only.
    pub tls: Option<snow_runtime::listener::TlsFiles>,
    /// A properties file of `user=password`: HTTP Basic required.
    pub basic_auth_file: Option<std::path::PathBuf>,
}

/// Time a client has to send a request's body once its headers arrived.
const BODY_READ: Duration = Duration::from_secs(30);

/// Serves the API over `herder` until `shutdown`; returns the bound address. Connections are
/// accepted within the listener's limits ([`snow_runtime::listener`]).
pub async fn serve(herder: Arc<dyn Herder>, listen: &Listener, shutdown: Shutdown) -> Result<SocketAddr> {
    let listener =
        TcpListener::bind(&listen.address).await.with_context(|| format!("the REST listener cannot listen on {}", listen.address))?;
    let bound = listener.local_addr()?;
    let users = match &listen.basic_auth_file {
        Some(file) => Some(Arc::new(read_users(file)?)),
        None => None,
    };
    let tls = match &listen.tls {
        Some(files) => Some(snow_runtime::listener::tls_acceptor(&files.certificate, &files.key, "rest.tls")?),
        None => None,
    };
    let handler: snow_runtime::listener::Handler = Arc::new(move |request| {
        let (herder, users) = (herder.clone(), users.clone());
        Box::pin(async move { handle(herder.as_ref(), users.as_deref(), request).await })
    });
    snow_runtime::listener::spawn("the REST listener", listener, tls, snow_runtime::listener::Limits::default(), handler, shutdown);
    Ok(bound)
}

/// A request, authenticated, read and answered.
async fn handle(herder: &dyn Herder, users: Option<&Users>, request: http::Request<Incoming>) -> Response<Full<Bytes>> {
    // A push notification authenticates itself (its HMAC), not with the API's users.
    if let Some(connector) = snow_runtime::push::endpoint::Endpoint::connector_of(request.uri().path()).map(str::to_string) {
        return match herder.push_endpoint() {
            Some(endpoint) => endpoint.answer(&connector, request).await,
            None => api::error(
                StatusCode::NOT_FOUND,
                "This listener takes no push notifications (a standalone run takes them on snow.push.listen)",
            ),
        };
    }
    if let Some(users) = users
        && !users.authorised(request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()))
    {
        let mut response =
            api::error(StatusCode::UNAUTHORIZED, "The request needs HTTP Basic credentials of a user in rest.basic.auth.file");
        response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Basic realm=\"snow-connect\""));
        return response;
    }
    let (parts, body) = request.into_parts();
    let body = match tokio::time::timeout(BODY_READ, Limited::new(body, MAX_BODY).collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(_)) => {
            return api::error(StatusCode::PAYLOAD_TOO_LARGE, &format!("The request body is larger than {MAX_BODY} bytes or was cut off"));
        }
        Err(_) => return api::error(StatusCode::REQUEST_TIMEOUT, &format!("The request body did not arrive within {BODY_READ:?}")),
    };
    let response = api::answer(herder, &parts.method, &parts.uri, &body).await;
    tracing::debug!(method = %parts.method, path = parts.uri.path(), status = response.status().as_u16(), "REST");
    response
}

/// The users of `rest.basic.auth.file`, kept as digests of `user:password`: a request's
/// credentials are compared with every one in constant time, so neither a password's prefix nor
/// whether a user exists shows in how long the answer takes.
struct Users {
    digests: Vec<[u8; 32]>,
}

impl Users {
    fn new(users: &BTreeMap<String, String>) -> Self {
        Self { digests: users.iter().map(|(user, password)| digest(&format!("{user}:{password}"))).collect() }
    }

    /// Whether `authorization` is HTTP Basic for one of the users.
    fn authorised(&self, authorization: Option<&str>) -> bool {
        let presented = authorization
            .and_then(|a| a.strip_prefix("Basic "))
            .and_then(|encoded| base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok())
            .map(|decoded| digest_bytes(&decoded));
        let Some(presented) = presented else { return false };
        // Every digest is compared, whatever matched before.
        self.digests
            .iter()
            .fold(false, |found, expected| found | (expected.iter().zip(&presented).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0))
    }
}

fn digest(text: &str) -> [u8; 32] {
    digest_bytes(text.as_bytes())
}

fn digest_bytes(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).into()
}

/// The users of `rest.basic.auth.file`; their passwords are registered as secrets (never shown).
fn read_users(file: &std::path::Path) -> Result<Users> {
    let text = std::fs::read_to_string(file).with_context(|| format!("rest.basic.auth.file: reading {}", file.display()))?;
    let users =
        snow_runtime::config::parse_properties(&text).map_err(|e| anyhow::anyhow!("rest.basic.auth.file: {}: {e}", file.display()))?;
    if users.is_empty() {
        bail!("rest.basic.auth.file: {} names no user (one user=password per line)", file.display());
    }
    for password in users.values() {
        snow_runtime::redact::register(password);
    }
    Ok(Users::new(&users))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_checked() {
        let users = Users::new(&[("admin".to_string(), "s3cret".to_string()), ("ops".to_string(), "0ther:pw".to_string())].into());
        let basic = |s: &str| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(s));
        assert!(users.authorised(Some(&basic("admin:s3cret"))));
        assert!(users.authorised(Some(&basic("ops:0ther:pw"))), "a password may hold a colon");
        assert!(!users.authorised(Some(&basic("admin:s3cres"))));
        assert!(!users.authorised(Some(&basic("other:s3cret"))));
        assert!(!users.authorised(Some(&basic("admin:0ther:pw"))));
        assert!(!users.authorised(Some("Bearer x")));
        assert!(!users.authorised(None));
    }
}
