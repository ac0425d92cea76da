//! The Table API client: list, get, create, patch, put and delete with the exact parameters
//! ServiceNow documents; error answers parsed from its envelope into [`SnowError`]s; retries of
//! transient failures with the instance's [`RetryPolicy`], honouring `Retry-After`, with one
//! `X-Request-Id` per logical request kept across its retries.
//!
//! A write whose outcome is unknown (a POST answered 500, or cut off after sending) is not retried
//! here: it comes back [`ErrorClass::Ambiguous`] for the caller's policy.
//!
//! Longer than our 600-line mark with its unit tests (the code is ~480 lines): one client, its
//! six calls and their retries, tested against scripted answers next to it.

use serde::Deserialize;

use crate::clock::Clock;
use crate::config::InstanceConfig;
use crate::error::{ErrorClass, Failure, HttpFailure, SnowError};
use crate::http::request_id::RequestIds;
use crate::http::retry::{RateLimit, RetryPolicy, RetrySchedule, classify_status, classify_transport, retry_after};
use crate::http::transport::{Method, Request, Response, Timeouts, Transport};
use crate::http::url::{encode, query_string};
use crate::time::Timestamp;

/// `sysparm_display_value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisplayValue {
    /// Raw values only (`false`).
    Raw,
    /// Display values only (`true`).
    Display,
    /// Both, as `{"display_value":..,"value":..}` per field (`all`).
    All,
}

impl DisplayValue {
    fn as_param(self) -> &'static str {
        match self {
            Self::Raw => "false",
            Self::Display => "true",
            Self::All => "all",
        }
    }
}

/// Parameters of one list request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListParams<'a> {
    /// The full encoded query (`sysparm_query`).
    pub query: &'a str,
    /// Columns (`sysparm_fields`); `None` for all.
    pub fields: Option<&'a [String]>,
    /// Page size (`sysparm_limit`): the window ServiceNow reads *before* it drops the rows ACLs
    /// hide, so an answer can hold fewer rows than this while more follow.
    pub limit: u32,
    /// Rows of the window to skip (`sysparm_offset`, sent when not 0). Only for crossing rows
    /// hidden by ACLs inside a sweep's frozen upper bound (ADR 0012); never to page a table.
    pub offset: u32,
    /// Ask for `X-Total-Count` and the `Link` header (the count before ACLs and whether rows
    /// follow the window). Off, the request says `sysparm_no_count=true`, which spares the
    /// instance a count query over the rest of the range.
    pub count: bool,
    /// `sysparm_display_value`.
    pub display_value: DisplayValue,
    /// `sysparm_exclude_reference_link`.
    pub exclude_reference_link: bool,
    /// `sysparm_query_no_domain=true` when set.
    pub no_domain: bool,
    /// `sysparm_query_category`, when set.
    pub category: Option<&'a str>,
}

impl<'a> ListParams<'a> {
    /// A plain look-up: rows matching `query`, only `fields`, at most `limit`, raw values, no count.
    pub fn lookup(query: &'a str, fields: &'a [String], limit: u32) -> Self {
        Self {
            query,
            fields: Some(fields),
            limit,
            offset: 0,
            count: false,
            display_value: DisplayValue::Raw,
            exclude_reference_link: true,
            no_domain: false,
            category: None,
        }
    }
}

/// A list answer: the body as received, the server clock and what the instance said about the
/// rows matching the query before ACLs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListResponse {
    /// `{"result":[...]}` (an empty result when ServiceNow v1 answered 404 for no match).
    pub body: Vec<u8>,
    /// The `Date` header: ServiceNow's clock when it answered.
    pub server_time: Option<Timestamp>,
    /// `X-Total-Count`: rows matching the query, counted before ACLs drop any.
    pub total: Option<u64>,
    /// From the `Link` header: whether it offers a `rel="next"` page (rows follow the window).
    /// `None` when the answer has no `Link` header.
    pub has_next: Option<bool>,
}

/// A write (or get) answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteResponse {
    /// HTTP status (201 create, 200 get/patch/put, 204 delete).
    pub status: u16,
    /// `result.sys_id` of the answer, when there is one.
    pub sys_id: Option<String>,
    /// The answer's body (the record, for get and writes).
    pub body: Vec<u8>,
}

/// An attachment's content as downloaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Download {
    /// The whole content, and the `Content-Type` it came with.
    Content(Vec<u8>, Option<String>),
    /// The content ran past the limit: its reading stopped there (nothing more was held).
    TooLarge,
}

/// One Table API endpoint set on one instance.
pub struct TableClient<T, C> {
    transport: T,
    clock: C,
    base_url: String,
    timeouts: Timeouts,
    max_response_bytes: usize,
    retry: RetryPolicy,
    ids: RequestIds,
    rate_limit: Option<RateLimit>,
    /// The list requests started ahead, with their request ids, oldest first.
    ahead: Vec<(Request, String)>,
    /// Set while a download is sent: the largest answer it takes (instead of
    /// `max_response_bytes`); it accepts any content type.
    download_limit: Option<usize>,
    /// Whether the last call failed on an answer larger than it took.
    too_large: bool,
    /// No retry waits past this (clock time): a sink put's limit.
    deadline: Option<std::time::Duration>,
}

impl<T: Transport, C: Clock> TableClient<T, C> {
    /// A client for `instance` sending through `transport`, sleeping on `clock` between retries.
    pub fn new(instance: &InstanceConfig, transport: T, clock: C) -> Self {
        let ids = RequestIds::new(clock.seed());
        Self {
            transport,
            clock,
            base_url: instance.base_url.clone(),
            timeouts: Timeouts {
                connect_ms: instance.connect_timeout_ms,
                first_byte_ms: instance.first_byte_timeout_ms,
                body_ms: instance.body_timeout_ms,
            },
            max_response_bytes: instance.max_response_bytes,
            retry: instance.retry,
            ids,
            rate_limit: None,
            ahead: Vec::new(),
            download_limit: None,
            too_large: false,
            deadline: None,
        }
    }

    /// The clock the client sleeps on.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// From now on no retry waits past `at` (the clock's time; `None`: retries as the policy
    /// says): a call whose next attempt would come later returns its last error instead.
    pub fn set_deadline(&mut self, at: Option<std::time::Duration>) {
        self.deadline = at;
    }

    /// The `X-RateLimit-*` headers of the latest answer that carried them.
    pub fn rate_limit(&self) -> Option<&RateLimit> {
        self.rate_limit.as_ref()
    }

    /// `GET /api/now/table/{table}` with cursor-friendly parameters (the count only when asked
    /// for). A v1 `404` for an empty match is returned as an empty result. When the same list was
    /// [started](Self::start_list), its answer is taken.
    pub fn list(&mut self, table: &str, params: &ListParams<'_>) -> Result<ListResponse, SnowError> {
        let url = self.list_url(table, params);
        let response =
            self.call(Method::Get, &url, Vec::new(), table, &|r: &Response| r.status == 200 || (r.status == 404 && is_no_record(&r.body)))?;
        let server_time = response.header("date").and_then(|d| Timestamp::parse_http_date(d).ok());
        let total = response.header("x-total-count").and_then(|t| t.trim().parse().ok());
        let has_next = response.header("link").map(has_next_link);
        let body = if response.status == 404 { br#"{"result":[]}"#.to_vec() } else { response.body };
        Ok(ListResponse { body, server_time, total, has_next })
    }

    /// Starts the request `list(table, params)` makes and returns at once, so that ServiceNow
    /// answers it while the caller works on the previous page (read-ahead). Only the first attempt
    /// is started; `list` takes its answer and retries as usual.
    pub fn start_list(&mut self, table: &str, params: &ListParams<'_>) {
        let url = self.list_url(table, params);
        if self.ahead.iter().any(|(r, _)| r.method == Method::Get && r.url == url) {
            return;
        }
        if self.ahead.len() >= crate::http::transport::MAX_STARTED {
            let (oldest, _) = self.ahead.remove(0);
            self.transport.abandon(&oldest);
        }
        let (request, id) = self.request(Method::Get, &url, Vec::new());
        self.transport.start(&request);
        self.ahead.push((request, id));
    }

    /// Drops the started request `list(table, params)` would take: its answer is not wanted.
    pub fn abandon_list(&mut self, table: &str, params: &ListParams<'_>) {
        let url = self.list_url(table, params);
        if let Some(i) = self.ahead.iter().position(|(r, _)| r.method == Method::Get && r.url == url) {
            let (request, _) = self.ahead.remove(i);
            self.transport.abandon(&request);
        }
    }

    /// Of the lists `(table, params)`, the index of a started one whose answer has arrived,
    /// waiting until one has; `None` when none is started or the transport cannot tell.
    pub fn first_ready_list(&mut self, lists: &[(&str, &ListParams<'_>)]) -> Option<usize> {
        let urls: Vec<String> = lists.iter().map(|(table, params)| self.list_url(table, params)).collect();
        let requests: Vec<&Request> = urls
            .iter()
            .filter_map(|url| self.ahead.iter().find(|(r, _)| r.method == Method::Get && r.url == *url).map(|(r, _)| r))
            .collect();
        if requests.len() != urls.len() {
            // Not every one is started: the first not started goes first (it is sent now).
            return urls.iter().position(|url| !self.ahead.iter().any(|(r, _)| r.method == Method::Get && r.url == *url));
        }
        self.transport.first_ready(&requests)
    }

    fn list_url(&self, table: &str, params: &ListParams<'_>) -> String {
        let limit = params.limit.to_string();
        let offset = params.offset.to_string();
        let fields = params.fields.map(|f| f.join(","));
        let mut pairs = vec![
            ("sysparm_query", params.query),
            ("sysparm_limit", limit.as_str()),
            ("sysparm_display_value", params.display_value.as_param()),
            ("sysparm_exclude_reference_link", if params.exclude_reference_link { "true" } else { "false" }),
        ];
        if params.offset > 0 {
            pairs.push(("sysparm_offset", offset.as_str()));
        }
        if !params.count {
            pairs.push(("sysparm_no_count", "true"));
            pairs.push(("sysparm_suppress_pagination_header", "true"));
        }
        if let Some(fields) = fields.as_deref() {
            pairs.push(("sysparm_fields", fields));
        }
        if params.no_domain {
            pairs.push(("sysparm_query_no_domain", "true"));
        }
        if let Some(category) = params.category {
            pairs.push(("sysparm_query_category", category));
        }
        format!("{}/api/now/table/{}{}", self.base_url, encode(table), query_string(pairs))
    }

    /// `GET /api/now/table/{table}/{sys_id}`; expects 200.
    pub fn get(&mut self, table: &str, sys_id: &str) -> Result<WriteResponse, SnowError> {
        let url = format!("{}/api/now/table/{}/{}", self.base_url, encode(table), encode(sys_id));
        self.write(Method::Get, url, Vec::new(), table, &[200])
    }

    /// `GET /api/now/table/{table}/{sys_id}?sysparm_fields=...`: only `fields` of the row; expects 200.
    pub fn get_fields(&mut self, table: &str, sys_id: &str, fields: &[&str]) -> Result<WriteResponse, SnowError> {
        let fields = fields.join(",");
        let url = format!(
            "{}/api/now/table/{}/{}{}",
            self.base_url,
            encode(table),
            encode(sys_id),
            query_string(vec![("sysparm_fields", fields.as_str()), ("sysparm_exclude_reference_link", "true")])
        );
        self.write(Method::Get, url, Vec::new(), table, &[200])
    }

    /// `GET /api/now/attachment/{sys_id}/file`: the attachment's content, read no further than
    /// `max_bytes` (the transport stops reading there, so memory stays bounded); expects 200.
    pub fn download(&mut self, sys_id: &str, max_bytes: usize) -> Result<Download, SnowError> {
        let url = format!("{}/api/now/attachment/{}/file", self.base_url, encode(sys_id));
        self.download_limit = Some(max_bytes);
        let answer = self.call(Method::Get, &url, Vec::new(), "sys_attachment", &|r: &Response| r.status == 200);
        self.download_limit = None;
        match answer {
            Ok(response) => {
                let content_type = response.header("content-type").map(str::to_string);
                Ok(Download::Content(response.body, content_type))
            }
            Err(_) if self.too_large => Ok(Download::TooLarge),
            Err(e) => Err(e),
        }
    }

    /// `POST /api/now/v1/batch` with a batch request body; expects 200 (each item has its own
    /// status). Not retried after it was sent: its writes may have run (ambiguous).
    pub fn batch(&mut self, body: Vec<u8>) -> Result<WriteResponse, SnowError> {
        let url = format!("{}/api/now/v1/batch", self.base_url);
        self.write(Method::Post, url, body, "batch", &[200])
    }

    /// `POST /api/now/table/{table}` with a JSON object body; expects 201.
    pub fn create(&mut self, table: &str, body: Vec<u8>) -> Result<WriteResponse, SnowError> {
        let url = format!("{}/api/now/table/{}", self.base_url, encode(table));
        self.write(Method::Post, url, body, table, &[200, 201])
    }

    /// `PATCH /api/now/table/{table}/{sys_id}`; expects 200.
    pub fn patch(&mut self, table: &str, sys_id: &str, body: Vec<u8>) -> Result<WriteResponse, SnowError> {
        let url = format!("{}/api/now/table/{}/{}", self.base_url, encode(table), encode(sys_id));
        self.write(Method::Patch, url, body, table, &[200])
    }

    /// `PUT /api/now/table/{table}/{sys_id}`; expects 200.
    pub fn put(&mut self, table: &str, sys_id: &str, body: Vec<u8>) -> Result<WriteResponse, SnowError> {
        let url = format!("{}/api/now/table/{}/{}", self.base_url, encode(table), encode(sys_id));
        self.write(Method::Put, url, body, table, &[200])
    }

    /// `DELETE /api/now/table/{table}/{sys_id}`; expects 204.
    pub fn delete(&mut self, table: &str, sys_id: &str) -> Result<WriteResponse, SnowError> {
        let url = format!("{}/api/now/table/{}/{}", self.base_url, encode(table), encode(sys_id));
        let mut out = self.write(Method::Delete, url, Vec::new(), table, &[200, 204])?;
        out.sys_id = Some(sys_id.to_string());
        Ok(out)
    }

    fn write(&mut self, method: Method, url: String, body: Vec<u8>, table: &str, ok: &[u16]) -> Result<WriteResponse, SnowError> {
        let response = self.call(method, &url, body, table, &|r: &Response| ok.contains(&r.status))?;
        #[derive(Deserialize)]
        struct Answer {
            result: Option<AnswerRow>,
        }
        #[derive(Deserialize)]
        struct AnswerRow {
            sys_id: Option<String>,
        }
        let sys_id = serde_json::from_slice::<Answer>(&response.body).ok().and_then(|a| a.result).and_then(|r| r.sys_id);
        Ok(WriteResponse { status: response.status, sys_id, body: response.body })
    }

    /// A request with a new `X-Request-Id` (kept across its retries), and that id.
    fn request(&mut self, method: Method, url: &str, body: Vec<u8>) -> (Request, String) {
        let request_id = self.ids.next_id();
        let accept = if self.download_limit.is_some() { "*/*" } else { "application/json" };
        let mut headers = vec![("accept".to_string(), accept.to_string()), ("x-request-id".to_string(), request_id.clone())];
        if !body.is_empty() {
            headers.push(("content-type".into(), "application/json".into()));
        }
        let max_response_bytes = self.download_limit.unwrap_or(self.max_response_bytes);
        let request = Request { method, url: url.to_string(), headers, body, timeouts: self.timeouts, max_response_bytes };
        (request, request_id)
    }

    /// Sends one logical request, retrying transient failures within the policy's bounds.
    fn call(
        &mut self,
        method: Method,
        url: &str,
        body: Vec<u8>,
        table: &str,
        ok: &dyn Fn(&Response) -> bool,
    ) -> Result<Response, SnowError> {
        let started = self.ahead.iter().position(|(ahead, _)| ahead.method == method && ahead.url == url && ahead.body == body);
        let (request, request_id) = match started {
            Some(i) => self.ahead.remove(i),
            None => self.request(method, url, body),
        };
        let mut schedule = RetrySchedule::new(self.retry, self.clock.now(), self.clock.seed());
        self.too_large = false;
        loop {
            let (error, wait) = match self.transport.send(&request) {
                Ok(response) => {
                    if let Some(limit) = RateLimit::from_headers(|h| response.header(h)) {
                        self.rate_limit = Some(limit);
                    }
                    if ok(&response) {
                        return Ok(response);
                    }
                    let server_now = response.header("date").and_then(|d| Timestamp::parse_http_date(d).ok());
                    let wait = response.header("retry-after").and_then(|v| retry_after(v, server_now));
                    (http_failure(&response, method, table, &request_id), wait)
                }
                Err(e) => {
                    self.too_large = e.kind == crate::http::TransportErrorKind::TooLarge;
                    let verdict = classify_transport(e.kind, method);
                    let message = format!("{method} table {table}: {} ({}) [request id {request_id}]", e.message, verdict.reason);
                    let error = if verdict.class == ErrorClass::Fatal && e.kind == crate::http::TransportErrorKind::Denied {
                        SnowError::Denied(e.message)
                    } else {
                        SnowError::Transport(Failure { message, class: verdict.class })
                    };
                    (error, None)
                }
            };
            if error.class() != ErrorClass::Transient {
                return Err(error);
            }
            match schedule.next_delay(self.clock.now(), wait) {
                // A retry that would wait past the deadline is not made: the error is returned
                // (retryable) for the caller to try again later.
                Ok(delay) if self.deadline.is_some_and(|at| self.clock.now().saturating_add(delay) > at) => return Err(error),
                Ok(delay) => self.clock.sleep(delay),
                Err(bound) => return Err(gave_up(error, &bound.describe())),
            }
        }
    }
}

/// True when a `Link` header offers a next page: one of its comma-separated links carries
/// `rel="next"` (or `rel=next`). Its URL is never followed: the cursor makes its own queries.
fn has_next_link(link: &str) -> bool {
    link.split(',').any(|part| {
        part.split(';').skip(1).any(|param| {
            let param = param.trim();
            param.strip_prefix("rel=").is_some_and(|rel| rel.trim_matches('"').split_whitespace().any(|r| r.eq_ignore_ascii_case("next")))
        })
    })
}

/// True for v1's answer to a valid query that matched nothing (`404 No Record found`).
fn is_no_record(body: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Envelope {
        error: Option<Message>,
    }
    #[derive(Deserialize)]
    struct Message {
        message: Option<String>,
    }
    serde_json::from_slice::<Envelope>(body)
        .ok()
        .and_then(|e| e.error)
        .and_then(|m| m.message)
        .is_some_and(|m| m.eq_ignore_ascii_case("No Record found"))
}

/// The last error of a retried request, prefixed with the bound that ended the retries. It stays
/// transient: the caller may try again later.
fn gave_up(error: SnowError, bound: &str) -> SnowError {
    match error {
        SnowError::Http(mut h) => {
            h.message = format!("{bound}: {}", h.message);
            SnowError::Http(h)
        }
        SnowError::Transport(f) => SnowError::Transport(Failure { message: format!("{bound}: {}", f.message), class: f.class }),
        other => other,
    }
}

pub(crate) fn http_failure(response: &Response, method: Method, table: &str, request_id: &str) -> SnowError {
    #[derive(Deserialize)]
    struct Envelope {
        error: Option<EnvelopeError>,
    }
    #[derive(Deserialize)]
    struct EnvelopeError {
        message: Option<String>,
        detail: Option<String>,
    }
    let parsed = serde_json::from_slice::<Envelope>(&response.body).ok().and_then(|e| e.error);
    let (message, detail) = match parsed {
        Some(e) => (e.message.unwrap_or_else(|| "no message".into()), e.detail),
        None => (format!("unexpected answer: {}", body_shape(response)), None),
    };
    let verdict = classify_status(response.status, method);
    SnowError::Http(HttpFailure {
        status: response.status,
        message: crate::redact::redact(&format!("{method} table {table}: {message} ({})", verdict.reason)),
        detail: detail.map(|d| crate::redact::redact(&d)),
        request_id: Some(request_id.to_string()),
        class: verdict.class,
    })
}

/// What an answer that is not ServiceNow's held, without any of its text: a host that is not the
/// instance (an internal service behind a proxy, a misdirected URL) must not have its answers
/// read back through a connector's status.
fn body_shape(response: &Response) -> String {
    if response.body.is_empty() {
        return "an empty body".into();
    }
    let kind: String = response.header("content-type").unwrap_or("no content type").chars().filter(|c| !c.is_control()).take(60).collect();
    format!("{} bytes of {kind}, not ServiceNow's JSON", response.body.len())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::ManualClock;
    use crate::http::transport::{TransportError, TransportErrorKind};

    /// Answers each request with the next scripted response and remembers what was sent.
    struct Scripted {
        answers: Vec<Result<Response, TransportError>>,
        sent: Vec<Request>,
    }

    impl Transport for &mut Scripted {
        fn send(&mut self, request: &Request) -> Result<Response, TransportError> {
            self.sent.push(request.clone());
            self.answers.remove(0)
        }
    }

    fn instance(max_attempts: u32) -> InstanceConfig {
        InstanceConfig {
            base_url: "https://acme.service-now.com".into(),
            scheme: "https".into(),
            authority: "acme.service-now.com".into(),
            connect_timeout_ms: 1,
            first_byte_timeout_ms: 2,
            body_timeout_ms: 3,
            max_response_bytes: 1 << 20,
            retry: RetryPolicy {
                max_attempts,
                max_elapsed: Duration::from_secs(600),
                initial: Duration::from_millis(100),
                max_backoff: Duration::from_secs(5),
            },
        }
    }

    fn answer(status: u16, body: &str, extra: &[(&str, &str)]) -> Result<Response, TransportError> {
        let mut headers = vec![("Date".to_string(), "Mon, 01 Jan 2024 00:00:10 GMT".to_string())];
        headers.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Ok(Response { status, headers, body: body.as_bytes().to_vec() })
    }

    fn list_params() -> ListParams<'static> {
        ListParams {
            query: "",
            fields: None,
            limit: 1,
            offset: 0,
            count: false,
            display_value: DisplayValue::Raw,
            exclude_reference_link: false,
            no_domain: false,
            category: None,
        }
    }

    #[test]
    fn list_sends_exact_parameters_and_reads_the_clock() {
        let mut script = Scripted { answers: vec![answer(200, r#"{"result":[]}"#, &[])], sent: vec![] };
        let clock = ManualClock::default();
        let mut client = TableClient::new(&instance(3), &mut script, &clock);
        let fields = vec!["sys_id".to_string(), "number".to_string()];
        let params = ListParams {
            query: "a=b^ORDERBYsys_id",
            fields: Some(&fields),
            limit: 100,
            offset: 0,
            count: false,
            display_value: DisplayValue::Raw,
            exclude_reference_link: true,
            no_domain: true,
            category: Some("cmdb"),
        };
        let out = client.list("incident", &params).unwrap();
        assert_eq!(out.server_time.unwrap().to_string(), "2024-01-01 00:00:10");
        assert_eq!(
            script.sent[0].url,
            "https://acme.service-now.com/api/now/table/incident?sysparm_query=a%3Db%5EORDERBYsys_id&sysparm_limit=100\
             &sysparm_display_value=false&sysparm_exclude_reference_link=true&sysparm_no_count=true\
             &sysparm_suppress_pagination_header=true&sysparm_fields=sys_id%2Cnumber&sysparm_query_no_domain=true\
             &sysparm_query_category=cmdb"
        );
        assert!(script.sent[0].headers.iter().any(|(k, v)| k == "x-request-id" && v.starts_with("snow-")));
    }

    #[test]
    fn a_counted_list_asks_for_the_headers_and_reads_them() {
        let link = r#"<https://acme.service-now.com/api/now/table/incident?sysparm_offset=-100>;rel="prev",<https://acme.service-now.com/api/now/table/incident?sysparm_offset=200>;rel="next""#;
        let mut script = Scripted {
            answers: vec![
                answer(200, r#"{"result":[]}"#, &[("X-Total-Count", "1234"), ("Link", link)]),
                answer(200, r#"{"result":[]}"#, &[("Link", r#"<https://a/x?sysparm_offset=0>;rel="first""#)]),
            ],
            sent: vec![],
        };
        let clock = ManualClock::default();
        let mut client = TableClient::new(&instance(3), &mut script, &clock);
        let params = ListParams { limit: 100, offset: 100, count: true, ..list_params() };
        let out = client.list("incident", &params).unwrap();
        assert_eq!((out.total, out.has_next), (Some(1234), Some(true)));
        let out = client.list("incident", &params).unwrap();
        assert_eq!((out.total, out.has_next), (None, Some(false)), "a Link without next: no rows follow");
        drop(client);
        let url = &script.sent[0].url;
        assert!(url.contains("sysparm_limit=100&sysparm_display_value=false&sysparm_exclude_reference_link=false&sysparm_offset=100"));
        assert!(!url.contains("sysparm_no_count") && !url.contains("suppress_pagination"), "a counted list leaves the count on: {url}");
        assert!(!has_next_link(r#"<https://a/next?x=1>;rel="last""#), "a URL containing 'next' is not rel=next");
        assert!(has_next_link("<u>; rel=next"));
    }

    #[test]
    fn v1_404_is_an_empty_page_and_errors_use_the_envelope() {
        let mut script = Scripted {
            answers: vec![
                answer(404, r#"{"error":{"message":"No Record found","detail":"Records not found"},"status":"failure"}"#, &[]),
                answer(404, r#"{"error":{"message":"Requested URI does not represent any resource"},"status":"failure"}"#, &[]),
                answer(403, r#"{"error":{"message":"User Not Authorized","detail":"ACL"},"status":"failure"}"#, &[]),
                answer(502, "<html>bad gateway</html>", &[]),
            ],
            sent: vec![],
        };
        let clock = ManualClock::default();
        let mut client = TableClient::new(&instance(3), &mut script, &clock);
        assert_eq!(client.list("incident", &list_params()).unwrap().body, br#"{"result":[]}"#);
        assert_eq!(
            client.list("incident", &list_params()).unwrap_err().class(),
            ErrorClass::Fatal,
            "only 'No Record found' means an empty page"
        );
        let err = client.list("incident", &list_params()).unwrap_err();
        assert_eq!(err.class(), ErrorClass::Fatal);
        let SnowError::Http(h) = &err else { panic!("{err:?}") };
        assert_eq!((h.status, h.detail.as_deref()), (403, Some("ACL")));
        assert!(h.message.starts_with("GET table incident: User Not Authorized (forbidden by an ACL"), "{}", h.message);
        let err = client.create("incident", b"{}".to_vec()).unwrap_err();
        assert_eq!(err.class(), ErrorClass::Ambiguous, "a POST answered 502 is not retried");
        assert!(err.to_string().contains("unexpected answer: 24 bytes of no content type, not ServiceNow's JSON"), "{err}");
        assert!(!err.to_string().contains("<html>"), "no text of a foreign answer: {err}");
        assert!(clock.sleeps().is_empty());
    }

    #[test]
    fn transient_failures_are_retried_with_the_same_request_id_honouring_retry_after() {
        let reset = || Err(TransportError::new(TransportErrorKind::Connect, "refused"));
        let mut script = Scripted {
            answers: vec![
                answer(
                    429,
                    r#"{"error":{"message":"Too many"}}"#,
                    &[("Retry-After", "7"), ("X-RateLimit-Limit", "100"), ("X-RateLimit-Rule", "r1")],
                ),
                reset(),
                answer(503, "", &[("Retry-After", "Mon, 01 Jan 2024 00:00:13 GMT")]),
                answer(200, r#"{"result":[]}"#, &[]),
            ],
            sent: vec![],
        };
        let clock = ManualClock::default();
        let mut client = TableClient::new(&instance(5), &mut script, &clock);
        client.list("incident", &list_params()).unwrap();
        assert_eq!(client.rate_limit().and_then(|r| r.limit), Some(100));
        let sleeps = clock.sleeps();
        assert_eq!(sleeps.len(), 3);
        assert_eq!(sleeps[0], Duration::from_secs(7), "delta-seconds Retry-After");
        assert!(sleeps[1] <= Duration::from_millis(200), "jittered backoff after a refused connection: {:?}", sleeps[1]);
        assert_eq!(sleeps[2], Duration::from_secs(3), "HTTP-date Retry-After against the answer's Date");
        let ids: Vec<&str> = script.sent.iter().map(|r| r.headers.iter().find(|(k, _)| k == "x-request-id").unwrap().1.as_str()).collect();
        assert!(ids.windows(2).all(|w| w[0] == w[1]), "one request id across retries: {ids:?}");
    }

    #[test]
    fn a_burst_longer_than_the_bound_surfaces_as_a_retryable_error_naming_the_bound() {
        let mut script = Scripted { answers: (0..4).map(|_| answer(503, r#"{"error":{"message":"down"}}"#, &[])).collect(), sent: vec![] };
        let clock = ManualClock::default();
        let mut client = TableClient::new(&instance(4), &mut script, &clock);
        let err = client.patch("incident", "abc", b"{}".to_vec()).unwrap_err();
        assert!(err.is_retryable());
        assert!(err.to_string().contains("gave up after 4 attempts (snow.retry.max.attempts): PATCH table incident: down"), "{err}");
        assert_eq!(script.sent.len(), 4);
    }

    #[test]
    fn writes_cut_off_after_sending_are_ambiguous_and_not_retried() {
        let after = || Err(TransportError::new(TransportErrorKind::AfterSend, "reset"));
        let mut script = Scripted {
            answers: vec![after(), after(), answer(200, "{}", &[]), Err(TransportError::new(TransportErrorKind::Denied, "no"))],
            sent: vec![],
        };
        let clock = ManualClock::default();
        let mut client = TableClient::new(&instance(3), &mut script, &clock);
        assert_eq!(client.create("t", b"{}".to_vec()).unwrap_err().class(), ErrorClass::Ambiguous);
        assert!(client.patch("t", "x", b"{}".to_vec()).is_ok(), "an idempotent PATCH is retried");
        assert!(matches!(client.delete("t", "x").unwrap_err(), SnowError::Denied(_)));
    }

    #[test]
    fn create_reads_the_new_sys_id_and_get_reads_a_record() {
        let mut script = Scripted {
            answers: vec![
                answer(201, r#"{"result":{"sys_id":"abc","number":"INC1"}}"#, &[]),
                answer(200, r#"{"result":{"sys_id":"abc"}}"#, &[]),
            ],
            sent: vec![],
        };
        let clock = ManualClock::default();
        let mut client = TableClient::new(&instance(3), &mut script, &clock);
        let out = client.create("incident", br#"{"short_description":"x"}"#.to_vec()).unwrap();
        assert_eq!((out.status, out.sys_id.as_deref()), (201, Some("abc")));
        assert_eq!(client.get("incident", "abc").unwrap().sys_id.as_deref(), Some("abc"));
        assert_eq!(script.sent[0].method, Method::Post);
        assert!(script.sent[0].headers.contains(&("content-type".into(), "application/json".into())));
        assert_eq!(script.sent[1].url, "https://acme.service-now.com/api/now/table/incident/abc");
    }
}
