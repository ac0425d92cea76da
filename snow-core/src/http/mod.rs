//! HTTP as `snow-core` sees it: plain request and response values and a [`Transport`] that sends
//! one request and returns the whole answer.
//!
//! Implementations: [`wasi::WasiTransport`] (guests; `wasi:http/outgoing-handler`, so every request
//! passes the host's outbound gate) and, in tests, scripted transports. Retry timing, auth and
//! redaction build on these types; none of them lives in a transport.

#[cfg(not(all(target_arch = "wasm32", target_os = "wasi")))]
pub mod native;
pub mod request_id;
pub mod retry;
pub mod transport;
pub mod url;
#[cfg(all(target_arch = "wasm32", target_os = "wasi"))]
pub mod wasi;

pub use transport::{Method, NOT_SENT, Request, Response, Timeouts, Transport, TransportError, TransportErrorKind};
