//! The Table API client: list, get, create, patch, put and delete with the exact parameters
//! ServiceNow documents, and error answers parsed from its envelope into [`SnowError`]s.
//!
//! The client makes exactly one request per call; retrying is the caller's decision.

use serde::Deserialize;

use crate::config::InstanceConfig;
use crate::error::{ErrorClass, HttpFailure, SnowError};
use crate::http::transport::{Method, Request, Response, Timeouts, Transport, TransportErrorKind};
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
    /// Page size (`sysparm_limit`).
    pub limit: u32,
    /// `sysparm_display_value`.
    pub display_value: DisplayValue,
    /// `sysparm_exclude_reference_link`.
    pub exclude_reference_link: bool,
}

/// A list answer: the body as received and the server clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListResponse {
    /// `{"result":[...]}` (an empty result when ServiceNow v1 answered 404 for no match).
    pub body: Vec<u8>,
    /// The `Date` header: ServiceNow's clock when it answered.
    pub server_time: Option<Timestamp>,
}

/// A write answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteResponse {
    /// HTTP status (201 create, 200 patch/put, 204 delete).
    pub status: u16,
    /// `result.sys_id` of the answer, when there is one.
    pub sys_id: Option<String>,
}

/// The largest list answer accepted: 10,000 rows of wide records with display values.
const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

/// One Table API endpoint set on one instance.
pub struct TableClient<T> {
    transport: T,
    base_url: String,
    timeouts: Timeouts,
}

impl<T: Transport> TableClient<T> {
    /// A client for `instance` sending through `transport`.
    pub fn new(instance: &InstanceConfig, transport: T) -> Self {
        Self {
            transport,
            base_url: instance.base_url.clone(),
            timeouts: Timeouts {
                connect_ms: instance.connect_timeout_ms,
                first_byte_ms: instance.first_byte_timeout_ms,
                between_bytes_ms: instance.between_bytes_timeout_ms,
            },
        }
    }

    /// `GET /api/now/table/{table}` with cursor-friendly parameters (`sysparm_no_count=true`,
    /// never `sysparm_offset`). A v1 `404` for an empty match is returned as an empty result.
    pub fn list(&mut self, table: &str, params: &ListParams<'_>) -> Result<ListResponse, SnowError> {
        let limit = params.limit.to_string();
        let fields = params.fields.map(|f| f.join(","));
        let mut pairs = vec![
            ("sysparm_query", params.query),
            ("sysparm_limit", limit.as_str()),
            ("sysparm_display_value", params.display_value.as_param()),
            ("sysparm_exclude_reference_link", if params.exclude_reference_link { "true" } else { "false" }),
            ("sysparm_no_count", "true"),
            ("sysparm_suppress_pagination_header", "true"),
        ];
        if let Some(fields) = fields.as_deref() {
            pairs.push(("sysparm_fields", fields));
        }
        let url = format!("{}/api/now/table/{}{}", self.base_url, encode(table), query_string(pairs));
        let response = self.send(Method::Get, url, Vec::new(), table)?;
        let server_time = response.header("date").and_then(|d| Timestamp::parse_http_date(d).ok());
        match response.status {
            200 => Ok(ListResponse { body: response.body, server_time }),
            404 => Ok(ListResponse { body: br#"{"result":[]}"#.to_vec(), server_time }),
            _ => Err(http_failure(&response, Method::Get, table)),
        }
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
        let response = self.send(method, url, body, table)?;
        if !ok.contains(&response.status) {
            return Err(http_failure(&response, method, table));
        }
        #[derive(Deserialize)]
        struct Answer {
            result: Option<AnswerRow>,
        }
        #[derive(Deserialize)]
        struct AnswerRow {
            sys_id: Option<String>,
        }
        let sys_id = serde_json::from_slice::<Answer>(&response.body).ok().and_then(|a| a.result).and_then(|r| r.sys_id);
        Ok(WriteResponse { status: response.status, sys_id })
    }

    fn send(&mut self, method: Method, url: String, body: Vec<u8>, table: &str) -> Result<Response, SnowError> {
        let mut headers = vec![("accept".to_string(), "application/json".to_string())];
        if !body.is_empty() {
            headers.push(("content-type".into(), "application/json".into()));
        }
        let request = Request { method, url, headers, body, timeouts: self.timeouts, max_response_bytes: MAX_RESPONSE_BYTES };
        self.transport.send(&request).map_err(|e| {
            let class = match e.kind {
                TransportErrorKind::Denied => return SnowError::Denied(e.message),
                TransportErrorKind::Connect => ErrorClass::Transient,
                TransportErrorKind::AfterSend if method.is_idempotent() => ErrorClass::Transient,
                TransportErrorKind::AfterSend => ErrorClass::Ambiguous,
                TransportErrorKind::TooLarge | TransportErrorKind::Invalid => ErrorClass::Fatal,
            };
            SnowError::transport(format!("table {table}: {}", e.message), class)
        })
    }
}

/// The classification of an error status for a request of `method`.
pub fn classify_status(status: u16, method: Method) -> ErrorClass {
    match status {
        429 | 503 => ErrorClass::Transient,
        408 | 500 | 502 | 504 if method.is_idempotent() => ErrorClass::Transient,
        408 | 500 | 502 | 504 => ErrorClass::Ambiguous,
        _ => ErrorClass::Fatal,
    }
}

fn http_failure(response: &Response, method: Method, table: &str) -> SnowError {
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
        None => (format!("unexpected answer: {}", body_excerpt(&response.body)), None),
    };
    SnowError::Http(HttpFailure {
        status: response.status,
        message: format!("{method} table {table}: {message}"),
        detail,
        request_id: response.header("x-request-id").map(String::from),
        class: classify_status(response.status, method),
    })
}

fn body_excerpt(body: &[u8]) -> String {
    const MAX: usize = 200;
    let text = String::from_utf8_lossy(&body[..body.len().min(MAX)]).replace(['\n', '\r'], " ");
    if body.is_empty() {
        "(empty body)".into()
    } else if body.len() > MAX {
        format!("{text}…")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::transport::TransportError;

    /// Answers each request with the next scripted response and remembers what was sent.
    pub(crate) struct Scripted {
        pub answers: Vec<Result<Response, TransportError>>,
        pub sent: Vec<Request>,
    }

    impl Transport for Scripted {
        fn send(&mut self, request: &Request) -> Result<Response, TransportError> {
            self.sent.push(request.clone());
            self.answers.remove(0)
        }
    }

    fn instance() -> InstanceConfig {
        InstanceConfig {
            base_url: "https://acme.service-now.com".into(),
            scheme: "https".into(),
            authority: "acme.service-now.com".into(),
            connect_timeout_ms: 1,
            first_byte_timeout_ms: 2,
            between_bytes_timeout_ms: 3,
        }
    }

    fn answer(status: u16, body: &str) -> Result<Response, TransportError> {
        Ok(Response {
            status,
            headers: vec![("Date".into(), "Mon, 01 Jan 2024 00:00:10 GMT".into()), ("X-Request-Id".into(), "rid".into())],
            body: body.as_bytes().to_vec(),
        })
    }

    #[test]
    fn list_sends_exact_parameters_and_reads_the_clock() {
        let mut client = TableClient::new(&instance(), Scripted { answers: vec![answer(200, r#"{"result":[]}"#)], sent: vec![] });
        let fields = vec!["sys_id".to_string(), "number".to_string()];
        let params = ListParams {
            query: "a=b^ORDERBYsys_id",
            fields: Some(&fields),
            limit: 100,
            display_value: DisplayValue::Raw,
            exclude_reference_link: true,
        };
        let out = client.list("incident", &params).unwrap();
        assert_eq!(out.server_time.unwrap().to_string(), "2024-01-01 00:00:10");
        assert_eq!(
            client.transport.sent[0].url,
            "https://acme.service-now.com/api/now/table/incident?sysparm_query=a%3Db%5EORDERBYsys_id&sysparm_limit=100\
             &sysparm_display_value=false&sysparm_exclude_reference_link=true&sysparm_no_count=true\
             &sysparm_suppress_pagination_header=true&sysparm_fields=sys_id%2Cnumber"
        );
    }

    #[test]
    fn v1_404_is_an_empty_page_and_errors_use_the_envelope() {
        let mut client = TableClient::new(
            &instance(),
            Scripted {
                answers: vec![
                    answer(404, r#"{"error":{"message":"No Record found","detail":"Records not found"},"status":"failure"}"#),
                    answer(403, r#"{"error":{"message":"User Not Authorized","detail":"ACL"},"status":"failure"}"#),
                    answer(502, "<html>bad gateway</html>"),
                ],
                sent: vec![],
            },
        );
        let params = ListParams { query: "", fields: None, limit: 1, display_value: DisplayValue::Raw, exclude_reference_link: false };
        assert_eq!(client.list("incident", &params).unwrap().body, br#"{"result":[]}"#);
        let err = client.list("incident", &params).unwrap_err();
        assert_eq!(err.class(), ErrorClass::Fatal);
        assert_eq!(err.to_string(), "ServiceNow answered 403: GET table incident: User Not Authorized (ACL) [request id rid]");
        let err = client.create("incident", b"{}".to_vec()).unwrap_err();
        assert_eq!(err.class(), ErrorClass::Ambiguous);
        assert!(err.to_string().contains("unexpected answer: <html>bad gateway</html>"), "{err}");
    }

    #[test]
    fn transport_failures_are_classified_by_idempotency() {
        let after_send = || Err(TransportError::new(TransportErrorKind::AfterSend, "reset"));
        let mut client = TableClient::new(
            &instance(),
            Scripted {
                answers: vec![after_send(), after_send(), Err(TransportError::new(TransportErrorKind::Denied, "no"))],
                sent: vec![],
            },
        );
        assert_eq!(client.create("t", b"{}".to_vec()).unwrap_err().class(), ErrorClass::Ambiguous);
        assert_eq!(client.patch("t", "x", b"{}".to_vec()).unwrap_err().class(), ErrorClass::Transient);
        assert!(matches!(client.delete("t", "x").unwrap_err(), SnowError::Denied(_)));
    }

    #[test]
    fn create_reads_the_new_sys_id() {
        let mut client = TableClient::new(
            &instance(),
            Scripted { answers: vec![answer(201, r#"{"result":{"sys_id":"abc","number":"INC1"}}"#)], sent: vec![] },
        );
        let out = client.create("incident", br#"{"short_description":"x"}"#.to_vec()).unwrap();
        assert_eq!(out, WriteResponse { status: 201, sys_id: Some("abc".into()) });
        let sent = &client.transport.sent[0];
        assert_eq!(sent.method, Method::Post);
        assert!(sent.headers.contains(&("content-type".into(), "application/json".into())));
    }
}
