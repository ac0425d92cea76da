//! The guests' transport: `wasi:http/outgoing-handler`, used synchronously, with requests that
//! may be started ahead ([`Transport::start`]): the host sends them and receives their answers
//! while the guest builds the previous page's records and the host produces them. A parallel
//! backfill keeps one started request per slice and takes whichever is answered first
//! ([`Transport::first_ready`]).
//!
//! Each request is handed to the host first and its body written afterwards, so a body larger
//! than the host's buffer never blocks. A GET's body is finished without any write: writing even
//! an empty slice after hyper dropped the body of a GET fails as "closed" (wasm-recipe.md §10).
//! The response body is read against a deadline (`Timeouts::body_ms` for the whole body), by
//! polling the stream and a monotonic timer together.

use wasip2::clocks::monotonic_clock;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, FutureIncomingResponse, IncomingResponse, Method as WasiMethod, OutgoingBody, OutgoingRequest, RequestOptions,
    Scheme,
};
use wasip2::io::streams::StreamError;

use super::transport::{MAX_STARTED, Method, Request, Response, Transport, TransportError, TransportErrorKind};

/// Sends requests through `wasi:http/outgoing-handler`; holds up to [`MAX_STARTED`] started
/// requests (read-ahead) whose answers the host receives while the guest does other work.
#[derive(Default)]
pub struct WasiTransport {
    ahead: Vec<InFlight>,
}

/// A request handed to the host whose answer was not taken yet.
struct InFlight {
    /// The request, when it was started ahead (compared with the next one sent).
    request: Option<Request>,
    future: FutureIncomingResponse,
    write_result: Result<(), String>,
}

/// Largest chunk `blocking-write-and-flush` accepts.
const WRITE_CHUNK: usize = 4096;
/// Bytes asked for per body read (a read returns what has arrived, up to this; snow-connect's
/// host hands a whole page over at once, so a page is usually one read).
const READ_CHUNK: u64 = 16 * 1024 * 1024;

impl Transport for WasiTransport {
    fn send(&mut self, request: &Request) -> Result<Response, TransportError> {
        let target = Target::parse(&request.url)?;
        let in_flight = match self.ahead.iter().position(|a| a.request.as_ref() == Some(request)) {
            Some(i) => self.ahead.remove(i),
            None => begin(request, &target)?,
        };
        finish(in_flight, request, &target)
    }

    fn start(&mut self, request: &Request) {
        self.abandon(request);
        if self.ahead.len() >= MAX_STARTED {
            // Dropping a started request tells the host to abandon it.
            self.ahead.remove(0);
        }
        let Ok(target) = Target::parse(&request.url) else { return };
        if let Ok(mut in_flight) = begin(request, &target) {
            in_flight.request = Some(request.clone());
            self.ahead.push(in_flight);
        }
    }

    fn abandon(&mut self, request: &Request) {
        self.ahead.retain(|a| a.request.as_ref() != Some(request));
    }

    fn first_ready(&mut self, requests: &[&Request]) -> Option<usize> {
        let started: Vec<(usize, &InFlight)> = requests
            .iter()
            .enumerate()
            .filter_map(|(i, r)| self.ahead.iter().find(|a| a.request.as_ref() == Some(*r)).map(|a| (i, a)))
            .collect();
        if started.is_empty() {
            return None;
        }
        let pollables: Vec<_> = started.iter().map(|(_, a)| a.future.subscribe()).collect();
        let refs: Vec<_> = pollables.iter().collect();
        let ready = wasip2::io::poll::poll(&refs);
        ready.first().map(|&p| started[p as usize].0)
    }
}

/// Hands `request` to the host and writes its body.
fn begin(request: &Request, target: &Target<'_>) -> Result<InFlight, TransportError> {
    let outgoing = build_request(request, target)?;
    let body = outgoing.body().map_err(|()| invalid("request body taken twice"))?;
    let options = RequestOptions::new();
    let ms = |v: u32| u64::from(v) * 1_000_000;
    // A host may refuse to set a timeout; the request still goes out with its defaults.
    let _ = options.set_connect_timeout(Some(ms(request.timeouts.connect_ms)));
    let _ = options.set_first_byte_timeout(Some(ms(request.timeouts.first_byte_ms)));
    // snow-connect's host reads bodies whole and takes this as their deadline; a host that
    // streams applies it between bytes, and the deadline in `finish` covers the whole body.
    let _ = options.set_between_bytes_timeout(Some(ms(request.timeouts.body_ms)));
    let what = || format!("{} {}", request.method, target.path_only());
    let future = outgoing_handler::handle(outgoing, Some(options)).map_err(|e| from_error_code(&e, false, &what(), target))?;
    let write_result = write_body(body, &request.body);
    Ok(InFlight { request: None, future, write_result })
}

/// Waits for the answer of `in_flight` and reads its body.
fn finish(in_flight: InFlight, request: &Request, target: &Target<'_>) -> Result<Response, TransportError> {
    let what = || format!("{} {}", request.method, target.path_only());
    let InFlight { future, write_result, .. } = in_flight;
    future.subscribe().block();
    let response = match future.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(code))) => return Err(from_error_code(&code, true, &what(), target)),
        Some(Err(())) | None => return Err(invalid("response future polled twice")),
    };
    write_result
        .map_err(|m| TransportError::new(TransportErrorKind::AfterSend, format!("{}: writing the request body failed: {m}", what())))?;
    let deadline = monotonic_clock::now().saturating_add(u64::from(request.timeouts.body_ms) * 1_000_000);
    read_response(response, request.max_response_bytes, deadline, request.timeouts.body_ms).map_err(|mut e| {
        e.message = format!("{}: {}", what(), e.message);
        e
    })
}

/// The parts of an absolute URL that `wasi:http` wants separately.
struct Target<'a> {
    scheme: Scheme,
    authority: &'a str,
    path_with_query: &'a str,
}

impl<'a> Target<'a> {
    fn parse(url: &'a str) -> Result<Self, TransportError> {
        let (scheme, rest) = url.split_once("://").ok_or_else(|| invalid(format!("not an absolute URL: {url}")))?;
        let scheme = match scheme {
            "https" => Scheme::Https,
            "http" => Scheme::Http,
            other => return Err(invalid(format!("unsupported scheme {other}"))),
        };
        let split = rest.find('/').unwrap_or(rest.len());
        let (authority, path) = rest.split_at(split);
        Ok(Self { scheme, authority, path_with_query: if path.is_empty() { "/" } else { path } })
    }

    fn path_only(&self) -> &str {
        self.path_with_query.split('?').next().unwrap_or(self.path_with_query)
    }
}

fn invalid(message: impl Into<String>) -> TransportError {
    TransportError::new(TransportErrorKind::Invalid, message)
}

fn build_request(request: &Request, target: &Target<'_>) -> Result<OutgoingRequest, TransportError> {
    let headers = Fields::new();
    for (name, value) in &request.headers {
        headers.append(name, value.as_bytes()).map_err(|e| invalid(format!("header {name}: {e:?}")))?;
    }
    if !request.body.is_empty() {
        let len = request.body.len().to_string();
        headers.append("content-length", len.as_bytes()).map_err(|e| invalid(format!("content-length: {e:?}")))?;
    }
    let outgoing = OutgoingRequest::new(headers);
    let method = match request.method {
        Method::Get => WasiMethod::Get,
        Method::Post => WasiMethod::Post,
        Method::Patch => WasiMethod::Patch,
        Method::Put => WasiMethod::Put,
        Method::Delete => WasiMethod::Delete,
    };
    outgoing.set_method(&method).map_err(|()| invalid("method refused"))?;
    outgoing.set_scheme(Some(&target.scheme)).map_err(|()| invalid("scheme refused"))?;
    outgoing.set_authority(Some(target.authority)).map_err(|()| invalid(format!("authority {} refused", target.authority)))?;
    outgoing.set_path_with_query(Some(target.path_with_query)).map_err(|()| invalid("path refused"))?;
    Ok(outgoing)
}

fn write_body(body: OutgoingBody, bytes: &[u8]) -> Result<(), String> {
    if !bytes.is_empty() {
        let stream = body.write().map_err(|()| "body stream taken twice".to_string())?;
        for chunk in bytes.chunks(WRITE_CHUNK) {
            stream.blocking_write_and_flush(chunk).map_err(|e| stream_error(&e))?;
        }
        drop(stream);
    }
    OutgoingBody::finish(body, None).map_err(|e| format!("{e:?}"))
}

fn read_response(response: IncomingResponse, max_bytes: usize, deadline: u64, body_ms: u32) -> Result<Response, TransportError> {
    let status = response.status();
    let headers = {
        let fields = response.headers();
        fields.entries().into_iter().map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned())).collect()
    };
    let incoming = response.consume().map_err(|()| invalid("response body consumed twice"))?;
    let stream = incoming.stream().map_err(|()| invalid("response body stream taken twice"))?;
    let mut body = Vec::new();
    // One pollable for the stream and one for the deadline, polled together before each read.
    let readable = stream.subscribe();
    let timer = monotonic_clock::subscribe_instant(deadline);
    loop {
        if !wasip2::io::poll::poll(&[&readable, &timer]).contains(&0) {
            return Err(TransportError::new(
                TransportErrorKind::AfterSend,
                format!("the response body was not complete after {body_ms} ms (snow.http.body.timeout.ms)"),
            ));
        }
        match stream.read(READ_CHUNK) {
            Ok(chunk) => {
                if body.len() + chunk.len() > max_bytes {
                    return Err(TransportError::new(TransportErrorKind::TooLarge, format!("response body exceeds {max_bytes} bytes")));
                }
                if body.is_empty() {
                    // Usually the whole page: keep the buffer the read returned.
                    body = chunk;
                } else {
                    body.extend_from_slice(&chunk);
                }
            }
            Err(StreamError::Closed) => break,
            Err(e) => {
                return Err(TransportError::new(
                    TransportErrorKind::AfterSend,
                    format!("reading the response body failed: {}", stream_error(&e)),
                ));
            }
        }
    }
    drop((readable, timer));
    drop(stream);
    drop(incoming);
    Ok(Response { status, headers, body })
}

fn stream_error(e: &StreamError) -> String {
    match e {
        StreamError::Closed => "stream closed".into(),
        StreamError::LastOperationFailed(err) => match wasip2::http::types::http_error_code(err) {
            Some(code) => format!("{code:?}"),
            None => err.to_debug_string(),
        },
    }
}

fn from_error_code(code: &ErrorCode, maybe_sent: bool, what: &str, target: &Target<'_>) -> TransportError {
    use TransportErrorKind::{AfterSend, Connect, Denied};
    let (kind, text) = match code {
        ErrorCode::HttpRequestDenied => {
            (Denied, format!("the host refused a request to {}: only the configured ServiceNow instance may be called", target.authority))
        }
        ErrorCode::DnsTimeout | ErrorCode::DnsError(_) | ErrorCode::DestinationNotFound => {
            (Connect, format!("cannot resolve {}", target.authority))
        }
        ErrorCode::ConnectionRefused
        | ErrorCode::DestinationUnavailable
        | ErrorCode::DestinationIpUnroutable
        | ErrorCode::DestinationIpProhibited => (Connect, format!("cannot connect to {} ({code:?})", target.authority)),
        ErrorCode::ConnectionTimeout => (Connect, format!("connecting to {} timed out", target.authority)),
        ErrorCode::ConnectionLimitReached => (Connect, "the host's connection limit was reached".into()),
        ErrorCode::TlsProtocolError | ErrorCode::TlsCertificateError | ErrorCode::TlsAlertReceived(_) => {
            (Connect, format!("TLS with {} failed ({code:?})", target.authority))
        }
        ErrorCode::InternalError(Some(message)) => match message.strip_prefix(super::transport::NOT_SENT) {
            Some(message) => (Connect, message.to_string()),
            None => (if maybe_sent { AfterSend } else { Connect }, message.clone()),
        },
        other => (if maybe_sent { AfterSend } else { Connect }, format!("{other:?}")),
    };
    TransportError::new(kind, format!("{what}: {text}"))
}
