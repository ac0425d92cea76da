//! The host's own HTTP requests (OAuth tokens, the schema registry): a snow-core [`Request`]
//! sent on the process's connection pool the way its [`Route`] says, the whole answer read into a
//! [`Response`].

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use snow_core::http::{Request, Response, TransportError, TransportErrorKind};
use std::time::Duration;
use wasmtime_wasi_http::RequestOptions;

use super::Route;

/// Sends `request` the way `route` says and reads the whole answer (up to its size cap).
pub async fn send(request: &Request, route: &Route) -> Result<Response, TransportError> {
    let mut builder = http::Request::builder().method(request.method.as_str()).uri(&request.url);
    // The pool sends the request line with the path only: HTTP/1.1 needs the Host header (a
    // strict server, such as the Quarkus one a schema registry runs on, answers 400 without it).
    let uri: http::Uri = request.url.parse().map_err(|e| TransportError::new(TransportErrorKind::Invalid, format!("the URL: {e}")))?;
    if let Some(authority) = uri.authority().filter(|_| !request.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host"))) {
        builder = builder.header(http::header::HOST, authority.as_str());
    }
    for (k, v) in &request.headers {
        builder = builder.header(k, v);
    }
    let body = Full::new(Bytes::from(request.body.clone())).map_err(|never| match never {}).boxed_unsync();
    let http_request =
        builder.body(body).map_err(|e| TransportError::new(TransportErrorKind::Invalid, format!("building the request: {e}")))?;
    let ms = |v: u32| Some(Duration::from_millis(u64::from(v)));
    let options = RequestOptions {
        connect_timeout: ms(request.timeouts.connect_ms),
        first_byte_timeout: ms(request.timeouts.first_byte_ms),
        between_bytes_timeout: ms(request.timeouts.body_ms),
    };
    // Only idempotent requests come through here (asking for a token, registering the same schema,
    // reading a schema by id): every failure counts as "nothing sent" so that it is retried.
    let response = super::pool::ConnectionPool::shared().send_with(http_request, options, route).await.map_err(|e| {
        let text = match &e {
            wasmtime_wasi_http::Error::InternalError(Some(m)) => m.strip_prefix(snow_core::http::NOT_SENT).unwrap_or(m).to_string(),
            other => other.to_string(),
        };
        TransportError::new(TransportErrorKind::Connect, text)
    })?;
    let (parts, body) = response.into_parts();
    // Read at most the cap: a larger answer is refused as soon as it passes it, never held whole.
    let capped = http_body_util::Limited::new(body, request.max_response_bytes).collect();
    let body = tokio::time::timeout(Duration::from_millis(u64::from(request.timeouts.body_ms)), capped)
        .await
        .map_err(|_| TransportError::new(TransportErrorKind::AfterSend, "the answer body did not arrive in time"))?
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                TransportError::new(TransportErrorKind::TooLarge, format!("the answer exceeds {} bytes", request.max_response_bytes))
            } else {
                TransportError::new(TransportErrorKind::AfterSend, format!("reading the answer: {e}"))
            }
        })?
        .to_bytes();
    let headers = parts.headers.iter().map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect();
    Ok(Response { status: parts.status.as_u16(), headers, body: body.to_vec() })
}
