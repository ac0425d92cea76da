//! The `WasiHttpHooks` implementation every guest store uses.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, COOKIE};
use http_body_util::{BodyExt, Full};
use snow_core::error::ErrorClass;
use wasmtime_wasi_http::{DEFAULT_FORBIDDEN_HEADERS, Error as HttpError, ForbiddenHeaderFilter, RequestOptions, WasiBody, WasiHttpHooks};

use super::budget::{InstanceBudget, Waits};
use super::limiter::InstanceLimiter;
use super::session::SessionPool;
use crate::auth::Credentials;
use crate::metrics::{Metrics, labels};
use crate::transport::pool::ConnectionPool;

/// Longest connect wait a guest may ask for.
const MAX_CONNECT: Duration = Duration::from_secs(60);
/// Longest wait for the first byte: ServiceNow's own 60 s quota plus margin.
const MAX_FIRST_BYTE: Duration = Duration::from_secs(120);
/// Longest time for a whole response body (the gate reads bodies whole; a request's between-bytes
/// timeout is its whole-body deadline here).
const MAX_BODY: Duration = Duration::from_secs(600);
/// Used when the guest sets no timeout (wasmtime's own default is 600 s).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Request bodies are buffered so a request can be re-sent after a 401; Table API bodies are one
/// record, far below this. A larger body is refused as soon as it passes this, while the guest is
/// still writing it: the host never holds more.
pub const MAX_REQUEST_BODY: usize = 16 << 20;
/// Response bodies are read whole by the host and handed to the guest in one piece (a guest needs
/// the whole page anyway, and one read across the boundary is far cheaper than dozens); larger
/// answers are refused. The guests' own cap (`snow.http.max.response.bytes`) is at most this.
const MAX_RESPONSE_BODY: usize = 256 << 20;

/// What a connector's gate allows and adds.
#[derive(Clone)]
pub struct GateSettings {
    /// Connector name, for logs and metrics.
    pub connector: String,
    /// `https` or `http`.
    pub scheme: String,
    /// The only authority requests may go to (`host[:port]`, lower case).
    pub authority: String,
    /// The credentials the host attaches. Never shown in logs.
    pub credentials: Credentials,
    /// In a fleet, the worker's id, sent as `X-Snow-Worker` (the instance's logs then say which
    /// worker asked; the guest never sees it).
    pub worker: Option<String>,
    /// `snow.table.<t>.priority`: a unit's weight in the instance's request budget.
    pub priorities: std::collections::BTreeMap<String, u32>,
    /// How requests reach the instance (its proxy and TLS settings).
    pub route: crate::transport::Route,
}

/// The outbound gate of one guest store; cheap to clone.
#[derive(Clone)]
pub struct Gate {
    settings: Arc<GateSettings>,
    limiter: Arc<InstanceLimiter>,
    budget: Arc<InstanceBudget>,
    metrics: Metrics,
    sessions: SessionPool,
    /// The store's unit (a source's table), its budget group.
    unit: Arc<str>,
    /// Time the store's requests spent waiting for the budget (not counted against the call
    /// timeout).
    waits: Arc<Waits>,
    /// The latest a request of this store may wait for the budget or an in-flight place (a sink
    /// put's limit); past it the request is refused as not sent.
    deadline: Arc<std::sync::Mutex<Option<tokio::time::Instant>>>,
}

impl Gate {
    /// A gate enforcing `settings`, sharing `limiter` and `budget` with every gate of the same
    /// instance.
    pub fn new(settings: GateSettings, limiter: Arc<InstanceLimiter>, budget: Arc<InstanceBudget>, metrics: Metrics) -> Self {
        Self {
            settings: Arc::new(settings),
            limiter,
            budget,
            metrics,
            sessions: SessionPool::default(),
            unit: Arc::from(""),
            waits: Arc::default(),
            deadline: Arc::default(),
        }
    }

    /// The same gate for the store running `unit` (its budget group), with sessions of its own.
    pub fn for_unit(&self, unit: &str) -> Self {
        Self { unit: Arc::from(unit), waits: Arc::default(), ..self.for_store() }
    }

    /// The fleet's workers sharing the instance's request budget (1 alone).
    pub fn budget_workers(&self) -> u32 {
        self.budget.workers()
    }

    /// How long the instance stays paused after a 429 without `Retry-After` or `X-RateLimit-Reset`.
    pub fn paused_for(&self) -> Option<Duration> {
        self.budget.paused_for()
    }

    /// How long this store's requests have waited for the budget in all (overlapping waits once).
    pub fn budget_waited(&self) -> Duration {
        self.waits.total()
    }

    /// A gate that refuses every request: for stores that have no network (a transform
    /// component, an inspection).
    pub fn closed(connector: &str) -> Self {
        let settings = GateSettings {
            connector: connector.to_string(),
            scheme: "https".into(),
            authority: String::new(),
            credentials: Credentials::None,
            worker: None,
            priorities: Default::default(),
            route: Default::default(),
        };
        Self::new(
            settings,
            Arc::new(super::limiter::LimiterRegistry::default()).limiter("", 1),
            Arc::new(InstanceBudget::new(None, None)),
            Metrics::default(),
        )
    }

    /// The same gate with sessions of its own: every store gets one, so that no two stores (two
    /// sink lanes, two source units) ever share a ServiceNow session.
    pub fn for_store(&self) -> Self {
        Self { sessions: SessionPool::default(), deadline: Arc::default(), ..self.clone() }
    }

    /// Requests of this store wait for the budget and an in-flight place no later than `at`.
    pub fn set_deadline(&self, at: Option<tokio::time::Instant>) {
        *self.deadline.lock().unwrap_or_else(|e| e.into_inner()) = at;
    }

    fn deadline(&self) -> Option<tokio::time::Instant> {
        *self.deadline.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn allows(&self, uri: &http::Uri) -> bool {
        let scheme = uri.scheme_str().unwrap_or("https");
        let authority = uri.authority().map(|a| a.as_str().to_ascii_lowercase()).unwrap_or_default();
        scheme == self.settings.scheme && normalize(&authority, scheme) == normalize(&self.settings.authority, &self.settings.scheme)
    }

    fn refuse(&self, uri: &http::Uri) -> SendFuture {
        tracing::warn!(
            connector = %self.settings.connector,
            "refused a guest request to {}://{}{}: only {}://{} is allowed",
            uri.scheme_str().unwrap_or("?"),
            uri.authority().map(|a| a.as_str()).unwrap_or("?"),
            uri.path(),
            self.settings.scheme,
            self.settings.authority
        );
        self.metrics.counter_add("snow_outbound_refused_total", 1, &labels(&[("connector", &self.settings.connector)]));
        Box::new(async { Err(HttpError::HttpRequestDenied) })
    }

    /// Sends the buffered request, attaching credentials, within the in-flight cap; after a 401
    /// to a token it invalidates that token and sends once more with a fresh one.
    async fn send(
        self,
        parts: http::request::Parts,
        body: Bytes,
        options: RequestOptions,
    ) -> Result<(http::Response<WasiBody>, IoFuture), HttpError> {
        let connector = self.settings.connector.clone();
        let mut resent = false;
        loop {
            let authorization = match self.settings.credentials.authorization().await {
                Ok(a) => a,
                Err(e) => return Ok(credentials_failed(&connector, &e)),
            };
            let mut builder = http::Request::builder().method(parts.method.clone()).uri(parts.uri.clone()).version(parts.version);
            for (name, value) in &parts.headers {
                builder = builder.header(name, value);
            }
            if let Some(a) = &authorization {
                builder = builder.header(AUTHORIZATION, a.value.clone());
            }
            if let Some(worker) = &self.settings.worker {
                builder = builder.header("x-snow-worker", worker.as_str());
            }
            let mut session = self.sessions.check_out();
            if let Some(cookie) = session.header() {
                builder = builder.header(COOKIE, cookie);
            }
            let request = builder
                .body(Full::new(body.clone()).map_err(|never| match never {}).boxed_unsync())
                .map_err(|e| HttpError::InternalError(Some(format!("rebuilding the request: {e}"))))?;
            {
                let weight = self.settings.priorities.get(&*self.unit).copied().unwrap_or(super::DEFAULT_PRIORITY);
                let _waiting = self.waits.enter();
                let taken = self.budget.take(&connector, &self.unit, weight);
                let waited = match self.deadline() {
                    None => taken.await,
                    Some(at) => match tokio::time::timeout_at(at, taken).await {
                        Ok(waited) => waited,
                        Err(_) => return Err(past_deadline(&connector, "the instance's request budget")),
                    },
                };
                let table = labels(&[("connector", &connector), ("table", &self.unit)]);
                self.metrics.counter_add("snow_instance_requests_total", 1, &table);
                if !waited.is_zero() {
                    self.metrics.counter_add("snow_instance_budget_wait_ms_total", waited.as_millis() as u64, &table);
                }
            }
            // Admitted now: a 429 to a request admitted before a pause began is part of it.
            let sent = tokio::time::Instant::now();
            let permit = match self.deadline() {
                None => self.limiter.acquire(&connector).await,
                Some(at) => match tokio::time::timeout_at(at, self.limiter.acquire(&connector)).await {
                    Ok(permit) => permit,
                    Err(_) => return Err(past_deadline(&connector, "a place among the instance's requests in flight")),
                },
            };
            self.metrics.counter_add("snow_outbound_requests_total", 1, &labels(&[("connector", &connector)]));
            if permit.queued() {
                self.metrics.counter_add("snow_outbound_queued_total", 1, &labels(&[("connector", &connector)]));
            }
            let response = match ConnectionPool::shared().send_with(request, options, &self.settings.route).await {
                Ok(response) => response,
                Err(e) => {
                    // A proxy or TLS failure is a setting to fix: said here too, not only to the guest.
                    if let HttpError::InternalError(Some(message)) = &e
                        && let Some(message) = message.strip_prefix(snow_core::http::NOT_SENT)
                    {
                        tracing::warn!(connector = %connector, instance = %self.settings.authority, "{message}");
                    }
                    return Err(e);
                }
            };
            let io: IoFuture = Box::new(async { Ok(()) });
            let status = response.status().as_u16();
            self.limiter.record(status);
            let said_when = ["retry-after", "x-ratelimit-reset"].iter().any(|h| response.headers().contains_key(*h));
            if status == 429 && !said_when {
                if let Some(pause) = self.budget.rate_limited(sent) {
                    tracing::warn!(
                        connector = %connector,
                        instance = %self.settings.authority,
                        "429 without Retry-After or X-RateLimit-Reset: every request to the instance waits {} s (doubling while it lasts, up to an hour)",
                        pause.as_secs()
                    );
                }
            } else if status != 429 {
                self.budget.answered();
            }
            if status == 401
                && !resent
                && let Some(a) = &authorization
                && self.settings.credentials.rejected(a).await
            {
                tracing::info!(connector = %connector, "401 with an OAuth token: sending once more with a fresh token");
                resent = true;
                continue;
            }
            // Read the whole body (within the request's body deadline) while holding the place in
            // flight, then hand it over in one piece, without what could carry a credential.
            let (mut parts, body) = response.into_parts();
            session.absorb(&parts.headers);
            strip_credentials(&mut parts.headers);
            let limit = options.between_bytes_timeout.unwrap_or(DEFAULT_TIMEOUT);
            let body = match tokio::time::timeout(limit, http_body_util::Limited::new(body, MAX_RESPONSE_BODY).collect()).await {
                Ok(Ok(collected)) => collected.to_bytes(),
                Ok(Err(e)) => {
                    return Err(match e.downcast::<HttpError>() {
                        Ok(e) => *e,
                        Err(_) => HttpError::HttpResponseBodySize(Some(MAX_RESPONSE_BODY as u64)),
                    });
                }
                Err(_) => return Err(HttpError::ConnectionReadTimeout),
            };
            drop(permit);
            // Given back once the answer is in: the instance is done with the request. A 401 may
            // be the session's doing (expired, or opened for a token since replaced): dropped.
            if status != 401 {
                self.sessions.check_in(session);
            }
            let response = http::Response::from_parts(parts, Full::new(body).map_err(|never| match never {}).boxed_unsync());
            return Ok((response, io));
        }
    }
}

/// The error of a request that would have waited for `what` past its store's deadline: not sent,
/// so the guest may try it again later (a sink lane, after its partition's rebalance).
fn past_deadline(connector: &str, what: &str) -> HttpError {
    tracing::info!(connector, "a request would have waited for {what} past its put's limit; not sent");
    crate::transport::not_sent(format!(
        "waiting for {what} would keep this request past its put's limit (a rebalance waits no longer); it was not sent"
    ))
}

/// A ServiceNow-shaped answer telling the guest the host could not obtain credentials: 401 when
/// they were refused for good, 503 when trying again later may work.
fn credentials_failed(connector: &str, error: &snow_core::error::SnowError) -> (http::Response<WasiBody>, IoFuture) {
    let status = if error.class() == ErrorClass::Transient { 503 } else { 401 };
    tracing::error!(connector, "could not obtain credentials for the instance: {error}");
    let body = serde_json::json!({
        "error": { "message": format!("the host could not obtain credentials: {error}"), "detail": "snow-connect outbound gate" },
        "status": "failure",
    });
    let response = http::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())).map_err(|never| match never {}).boxed_unsync())
        .unwrap_or_else(|_| http::Response::new(Full::new(Bytes::new()).map_err(|never| match never {}).boxed_unsync()));
    (response, Box::new(async { Ok(()) }) as IoFuture)
}

/// Response headers a guest never sees: cookies (the instance's session), and anything whose name
/// says it carries a credential. The host sends credentials itself on every request; a session
/// cookie, when the host uses one, stays with the host.
fn is_credential_header(name: &str) -> bool {
    const EXACT: [&str; 5] = ["set-cookie", "set-cookie2", "authorization", "proxy-authorization", "proxy-authenticate"];
    const PARTS: [&str; 5] = ["cookie", "token", "secret", "password", "session"];
    let name = name.to_ascii_lowercase();
    EXACT.contains(&name.as_str()) || PARTS.iter().any(|p| name.contains(p))
}

/// Removes the headers [`is_credential_header`] names.
fn strip_credentials(headers: &mut http::HeaderMap) {
    let names: Vec<http::HeaderName> = headers.keys().filter(|n| is_credential_header(n.as_str())).cloned().collect();
    for name in names {
        headers.remove(name);
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

    fn send_request(&mut self, request: http::Request<WasiBody>, options: Option<RequestOptions>, _fut: IoFuture) -> SendFuture {
        if !self.allows(request.uri()) {
            return self.refuse(request.uri());
        }
        let options = options.unwrap_or_default();
        let options = RequestOptions {
            connect_timeout: clamp(options.connect_timeout, MAX_CONNECT),
            first_byte_timeout: clamp(options.first_byte_timeout, MAX_FIRST_BYTE),
            between_bytes_timeout: clamp(options.between_bytes_timeout, MAX_BODY),
        };
        let gate = self.clone();
        Box::new(async move {
            let (parts, body) = request.into_parts();
            // Refused as soon as it passes the cap, not after the guest wrote all of it.
            let body = match http_body_util::Limited::new(body, MAX_REQUEST_BODY).collect().await {
                Ok(collected) => collected.to_bytes(),
                Err(e) => {
                    return Err(match e.downcast::<HttpError>() {
                        Ok(e) => *e,
                        Err(_) => {
                            tracing::warn!(connector = %gate.settings.connector, "refused a guest request whose body passed {MAX_REQUEST_BODY} bytes");
                            HttpError::HttpRequestBodySize(Some(MAX_REQUEST_BODY as u64))
                        }
                    });
                }
            };
            gate.send(parts, body, options).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_that_would_wait_past_its_stores_deadline_is_not_sent() {
        let budget = Arc::new(InstanceBudget::new(Some(60), None));
        let settings = GateSettings {
            connector: "c".into(),
            scheme: "http".into(),
            authority: "127.0.0.1:9".into(),
            credentials: Credentials::None,
            worker: None,
            priorities: Default::default(),
            route: Default::default(),
        };
        let limiter = Arc::new(super::super::limiter::LimiterRegistry::default()).limiter("127.0.0.1:9", 4);
        let gate = Gate::new(settings, limiter, budget.clone(), Metrics::default()).for_store();
        // The budget's one token is spent by another store: the next waits about a minute.
        budget.take("c", "other", super::super::DEFAULT_PRIORITY).await;
        gate.set_deadline(Some(tokio::time::Instant::now() + Duration::from_millis(50)));
        let (parts, ()) = http::Request::get("http://127.0.0.1:9/api/now/table/incident").body(()).unwrap().into_parts();
        let started = std::time::Instant::now();
        let error = gate.send(parts, Bytes::new(), RequestOptions::default()).await.map(drop).unwrap_err();
        assert!(
            matches!(&error, HttpError::InternalError(Some(m)) if m.starts_with("not sent: waiting for the instance's request budget")),
            "{error:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(30), "refused at the deadline, not after the budget's wait");
    }

    #[test]
    fn credential_shaped_response_headers_are_removed() {
        let mut headers = http::HeaderMap::new();
        for (k, v) in [
            ("set-cookie", "JSESSIONID=abc; Path=/"),
            ("Set-Cookie", "glide_user_route=x"),
            ("x-usertoken", "t"),
            ("x-session-id", "s"),
            ("x-total-count", "10"),
            ("link", "<u>;rel=\"next\""),
            ("date", "Mon, 01 Jan 2024 00:00:00 GMT"),
            ("retry-after", "1"),
        ] {
            headers.append(http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        strip_credentials(&mut headers);
        let mut left: Vec<&str> = headers.keys().map(|k| k.as_str()).collect();
        left.sort_unstable();
        assert_eq!(left, ["date", "link", "retry-after", "x-total-count"]);
    }
}
