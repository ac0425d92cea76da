//! The `WasiHttpHooks` implementation every guest store uses.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::header::{AUTHORIZATION, COOKIE, HeaderValue};
use http_body_util::BodyExt;
use wasmtime_wasi_http::{DEFAULT_FORBIDDEN_HEADERS, Error as HttpError, ForbiddenHeaderFilter, RequestOptions, WasiBody, WasiHttpHooks};

use super::limiter::InstanceLimiter;
use crate::metrics::Metrics;

/// Longest connect wait a guest may ask for.
const MAX_CONNECT: Duration = Duration::from_secs(60);
/// Longest wait for the first byte: ServiceNow's own 60 s quota plus margin.
const MAX_FIRST_BYTE: Duration = Duration::from_secs(120);
/// Longest pause between body bytes.
const MAX_BETWEEN_BYTES: Duration = Duration::from_secs(60);
/// Used when the guest sets no timeout (wasmtime's own default is 600 s).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// What a connector's gate allows and adds.
#[derive(Clone)]
pub struct GateSettings {
    /// Connector name, for logs and metrics.
    pub connector: String,
    /// `https` or `http`.
    pub scheme: String,
    /// The only authority requests may go to (`host[:port]`, lower case).
    pub authority: String,
    /// The `Authorization` value the host attaches, if any. Never shown in logs.
    pub authorization: Option<HeaderValue>,
}

/// The outbound gate of one guest store; cheap to clone.
#[derive(Clone)]
pub struct Gate {
    settings: Arc<GateSettings>,
    limiter: Arc<InstanceLimiter>,
    metrics: Metrics,
}

impl Gate {
    /// A gate enforcing `settings`, sharing `limiter` with every gate of the same instance.
    pub fn new(settings: GateSettings, limiter: Arc<InstanceLimiter>, metrics: Metrics) -> Self {
        Self { settings: Arc::new(settings), limiter, metrics }
    }

    fn allows(&self, uri: &http::Uri) -> bool {
        let scheme = uri.scheme_str().unwrap_or("https");
        let authority = uri.authority().map(|a| a.as_str().to_ascii_lowercase()).unwrap_or_default();
        scheme == self.settings.scheme && normalize(&authority, scheme) == normalize(&self.settings.authority, &self.settings.scheme)
    }
}

/// `host:443` for https and `host:80` for http are the same as `host`.
fn normalize<'a>(authority: &'a str, scheme: &str) -> &'a str {
    let default_port = if scheme == "https" { ":443" } else { ":80" };
    authority.strip_suffix(default_port).unwrap_or(authority)
}

fn clamp(requested: Option<Duration>, max: Duration) -> Option<Duration> {
    Some(requested.unwrap_or(DEFAULT_TIMEOUT).min(max))
}

type IoFuture = Box<dyn Future<Output = Result<(), HttpError>> + Send>;
type SendFuture = Box<dyn Future<Output = Result<(http::Response<WasiBody>, IoFuture), HttpError>> + Send>;

impl WasiHttpHooks for Gate {
    fn forbidden_header_filter(&mut self) -> ForbiddenHeaderFilter {
        Arc::new(|name| DEFAULT_FORBIDDEN_HEADERS.contains(name) || name == AUTHORIZATION || name == COOKIE)
    }

    fn send_request(&mut self, mut request: http::Request<WasiBody>, options: Option<RequestOptions>, _fut: IoFuture) -> SendFuture {
        let connector = self.settings.connector.clone();
        if !self.allows(request.uri()) {
            let uri = request.uri();
            tracing::warn!(
                connector = %connector,
                "refused a guest request to {}://{}{}: only {}://{} is allowed",
                uri.scheme_str().unwrap_or("?"),
                uri.authority().map(|a| a.as_str()).unwrap_or("?"),
                uri.path(),
                self.settings.scheme,
                self.settings.authority
            );
            self.metrics.counter_add("snow_outbound_refused_total", 1, &[("connector".into(), connector)]);
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        }
        if let Some(value) = &self.settings.authorization {
            request.headers_mut().insert(AUTHORIZATION, value.clone());
        }
        let options = options.unwrap_or_default();
        let options = RequestOptions {
            connect_timeout: clamp(options.connect_timeout, MAX_CONNECT),
            first_byte_timeout: clamp(options.first_byte_timeout, MAX_FIRST_BYTE),
            between_bytes_timeout: clamp(options.between_bytes_timeout, MAX_BETWEEN_BYTES),
        };
        let semaphore = self.limiter.semaphore();
        let metrics = self.metrics.clone();
        Box::new(async move {
            let permit =
                semaphore.acquire_owned().await.map_err(|_| HttpError::InternalError(Some("the outbound gate is closed".into())))?;
            metrics.counter_add("snow_outbound_requests_total", 1, &[("connector".into(), connector)]);
            let (response, io) = wasmtime_wasi_http::default_send_request(request, Some(options)).await?;
            // The permit is held until the guest has read or dropped the body.
            let response = response.map(move |body| {
                body.map_frame(move |frame| {
                    let _held = &permit;
                    frame
                })
                .boxed_unsync()
            });
            Ok((response, Box::new(io) as IoFuture))
        })
    }
}
