//! Request and response values and the [`Transport`] trait.

use std::fmt;

/// HTTP methods the Table API uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Read.
    Get,
    /// Create.
    Post,
    /// Partial update.
    Patch,
    /// Full update.
    Put,
    /// Delete.
    Delete,
}

impl Method {
    /// The method name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
            Self::Patch => "PATCH",
            Self::Put => "PUT",
            Self::Delete => "DELETE",
        }
    }

    /// True when sending the request twice has the same effect as sending it once.
    /// POST creates a row each time; PATCH with the same body converges, as do PUT and DELETE.
    pub fn is_idempotent(self) -> bool {
        !matches!(self, Self::Post)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Timeouts for one request, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Establishing the connection.
    pub connect_ms: u32,
    /// From sending to the first response byte.
    pub first_byte_ms: u32,
    /// Longest time to receive the whole response body.
    pub body_ms: u32,
}

/// One HTTP request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Method.
    pub method: Method,
    /// Absolute URL, already percent-encoded (`https://host/path?query`).
    pub url: String,
    /// Headers (no `Authorization`: the host attaches credentials).
    pub headers: Vec<(String, String)>,
    /// Body bytes; empty for GET and DELETE.
    pub body: Vec<u8>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Largest response body accepted, in bytes.
    pub max_response_bytes: usize,
}

/// One HTTP response with its whole body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers as received.
    pub headers: Vec<(String, String)>,
    /// Body bytes.
    pub body: Vec<u8>,
}

impl Response {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// How a host tells a guest that a failed request never reached its destination: an
/// `internal-error` whose message starts with this (a proxy refusing its credentials, a TLS
/// handshake the server refused). `wasi:http` has no error code that both says "not sent" and
/// carries a message; the guest takes such an error as [`TransportErrorKind::Connect`] (safe to
/// send again, even a write) and shows the rest of the message. A host that does not know says
/// nothing, and the error counts as possibly sent.
pub const NOT_SENT: &str = "not sent: ";

/// Why a request got no usable answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportErrorKind {
    /// The host's outbound gate refused the request; nothing was sent.
    Denied,
    /// No connection could be made; nothing was sent.
    Connect,
    /// The request may have reached the server but no complete answer came back
    /// (timeout, reset, truncated body).
    AfterSend,
    /// The answer was larger than the request allowed.
    TooLarge,
    /// The request could not be built (bad header, bad URL): a bug, not a network problem.
    Invalid,
}

/// A failed exchange.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TransportError {
    /// What kind of failure.
    pub kind: TransportErrorKind,
    /// What happened, naming the method and URL path.
    pub message: String,
}

impl TransportError {
    /// A failure of `kind`.
    pub fn new(kind: TransportErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }
}

/// Most requests a transport holds started at once; starting one more drops the oldest.
pub const MAX_STARTED: usize = 64;

/// Sends one request and returns the whole response. Implementations do not retry.
///
/// A transport may hold several requests [started](Transport::start) ahead (a parallel backfill
/// keeps one per slice in flight): each is answered by the next `send` of an equal request, and
/// stays in flight until then or until it is [abandoned](Transport::abandon).
pub trait Transport {
    /// Sends `request`; any status counts as a response. When an equal request was
    /// [`start`](Transport::start)ed, its answer is awaited instead of sending it again. Other
    /// started requests stay in flight.
    fn send(&mut self, request: &Request) -> Result<Response, TransportError>;

    /// Starts `request` and returns at once (read-ahead): the server works on it while the caller
    /// does something else, and the next `send` of an equal request takes the answer. A transport
    /// that cannot do this (or cannot hold one more) ignores the call, and so does one that fails
    /// to start it: that `send` then makes the request as usual, so errors surface there,
    /// classified as always.
    fn start(&mut self, _request: &Request) {}

    /// Drops the started request equal to `request`, if any: its answer is not wanted.
    fn abandon(&mut self, _request: &Request) {}

    /// Of `requests`, the index of one whose answer has arrived, waiting until one has; `None`
    /// when none of them is started (or the transport cannot tell: the caller then takes them in
    /// its own order).
    fn first_ready(&mut self, _requests: &[&Request]) -> Option<usize> {
        None
    }
}

impl<T: Transport + ?Sized> Transport for &mut T {
    fn send(&mut self, request: &Request) -> Result<Response, TransportError> {
        (**self).send(request)
    }

    fn start(&mut self, request: &Request) {
        (**self).start(request);
    }

    fn abandon(&mut self, request: &Request) {
        (**self).abandon(request);
    }

    fn first_ready(&mut self, requests: &[&Request]) -> Option<usize> {
        (**self).first_ready(requests)
    }
}
