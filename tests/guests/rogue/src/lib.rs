//! A hostile source component for tests: each `snow.rogue.*` key makes it try one thing the host
//! must not allow, and report what happened so a test can see the host stopped it.
//!
//! * `snow.rogue.url=URL` — `poll` GETs URL and reports the answer's status and header names (or
//!   the transport's error) as a `snow-error`; `snow.rogue.url=trap` traps on every `poll` instead.
//! * `snow.rogue.topic=NAME` — `poll` returns one record for topic NAME.
//! * `snow.rogue.post.bytes=N` (with `snow.rogue.url`) — `poll` streams an N-byte POST body to URL in
//!   64 KiB writes without holding it, and reports how many bytes the host took before it refused.
//! * `snow.rogue.say=TEXT` — `open` logs TEXT through the host, prints it to stderr and puts it in a
//!   metric label; `poll`'s error repeats it.
//! * `snow.rogue.series=N` — `open` creates N distinct metric series.
//!
//! A test makes a build that traps on every `poll` by rewriting [`MODE`] in a copy of the
//! component (`snow-rogue-mode:normal` to `snow-rogue-mode:trap!!`, the same length): a new version
//! that breaks, for the hot-swap rollback.
#![cfg(all(target_arch = "wasm32", target_os = "wasi"))]

mod bindings;

use std::collections::BTreeMap;

use bindings::exports::snow::connector::source_api::{self as api, Guest, GuestSourceTask};
use bindings::snow::connector::host::{self, Label, Level};
use bindings::snow::connector::types as wit;
use snow_core::http::transport::{Timeouts, TransportErrorKind};
use snow_core::http::wasi::WasiTransport;
use snow_core::http::{Method, Request, Transport};
use wasip2::http::outgoing_handler;
use wasip2::http::types::{Fields, Method as WasiMethod, OutgoingBody, OutgoingRequest, Scheme};

pub(crate) struct Component;

/// This build's mode, as bytes a test may rewrite in a copy of the component.
static MODE: [u8; 22] = *b"snow-rogue-mode:normal";

/// Whether this build traps on every `poll` (read through `black_box`, so the bytes in the
/// component decide, not a constant the compiler folded).
fn trap_build() -> bool {
    core::hint::black_box(&MODE)[16..].starts_with(b"trap")
}

impl Guest for Component {
    type SourceTask = Rogue;

    fn validate(_config: wit::Config) -> Result<(), Vec<wit::ConfigError>> {
        Ok(())
    }

    fn plan(config: wit::Config, _max_tasks: u32) -> Result<Vec<wit::TaskConfig>, wit::SnowError> {
        Ok(vec![wit::TaskConfig { units: vec![wit::WorkUnit { partition: "rogue".into(), name: "rogue".into(), config }] }])
    }
}

/// Its `snow.rogue.*` settings.
pub(crate) struct Rogue {
    keys: BTreeMap<String, String>,
}

impl Rogue {
    fn get(&self, key: &str) -> Option<&str> {
        self.keys.get(&format!("snow.rogue.{key}")).map(String::as_str)
    }
}

fn fail(message: String) -> wit::SnowError {
    wit::SnowError::Data(wit::Failure { message, class: wit::ErrorClass::Fatal })
}

impl GuestSourceTask for Rogue {
    fn open(config: wit::Config, _offsets: Vec<wit::SourceOffset>) -> Result<api::SourceTask, wit::SnowError> {
        let rogue = Rogue { keys: config.into_iter().map(|e| (e.key, e.value)).collect() };
        if let Some(text) = rogue.get("say") {
            host::log(Level::Warn, &format!("rogue says {text}"));
            eprintln!("rogue prints {text}");
            host::counter_add("rogue_said_total", 1, &[Label { name: "what".into(), value: text.to_string() }]);
        }
        if let Some(n) = rogue.get("series").and_then(|n| n.parse::<u32>().ok()) {
            for i in 0..n {
                host::counter_add("rogue_series_total", 1, &[Label { name: "n".into(), value: i.to_string() }]);
            }
        }
        Ok(api::SourceTask::new(rogue))
    }

    fn poll(&self) -> Result<wit::PollBatch, wit::SnowError> {
        let url = self.get("url").unwrap_or_default().to_string();
        if url == "trap" || trap_build() {
            core::arch::wasm32::unreachable();
        }
        if let Some(topic) = self.get("topic") {
            return Ok(record_for(topic));
        }
        if let Some(text) = self.get("say") {
            return Err(fail(format!("rogue fails with {text}")));
        }
        if let Some(bytes) = self.get("post.bytes").and_then(|n| n.parse::<u64>().ok()) {
            return Err(fail(post_streaming(&url, bytes)));
        }
        let request = Request {
            method: Method::Get,
            url,
            headers: vec![],
            body: vec![],
            timeouts: Timeouts { connect_ms: 2000, first_byte_ms: 2000, body_ms: 2000 },
            max_response_bytes: 1 << 20,
        };
        match WasiTransport::default().send(&request) {
            Ok(response) => {
                let names: Vec<&str> = response.headers.iter().map(|(k, _)| k.as_str()).collect();
                Err(fail(format!("reached it: status {}; headers: {}", response.status, names.join(","))))
            }
            Err(e) if e.kind == TransportErrorKind::Denied => Err(wit::SnowError::Denied(e.message)),
            Err(e) => Err(wit::SnowError::Transport(wit::Failure { message: e.message, class: wit::ErrorClass::Transient })),
        }
    }
}

/// One record for `topic`, with an offset.
fn record_for(topic: &str) -> wit::PollBatch {
    let data = b"rogue{}".to_vec();
    wit::PollBatch {
        topic: topic.to_string(),
        headers: vec![],
        data,
        extra: vec![],
        record_headers: vec![],
        records: vec![wit::SourceRecord {
            key: Some(wit::Span { start: 0, len: 5 }),
            value: Some(wit::Span { start: 5, len: 2 }),
            headers: wit::Span { start: 0, len: 0 },
            timestamp_ms: None,
        }],
        offset: Some(wit::SourceOffset { partition: "rogue".into(), position: "{}".into() }),
        next_poll_ms: 1000,
        notice: None,
        value_schema: None,
    }
}

/// POSTs `total` bytes to `url` in 64 KiB writes of one reused buffer; says how many the host took.
fn post_streaming(url: &str, total: u64) -> String {
    let Some((authority, path)) = url.strip_prefix("http://").and_then(|rest| rest.split_once('/')) else {
        return format!("not an http URL: {url}");
    };
    let request = OutgoingRequest::new(Fields::new());
    let _ = request.set_method(&WasiMethod::Post);
    let _ = request.set_scheme(Some(&Scheme::Http));
    let _ = request.set_authority(Some(authority));
    let _ = request.set_path_with_query(Some(&format!("/{path}")));
    let Ok(body) = request.body() else { return "no body".into() };
    let future = match outgoing_handler::handle(request, None) {
        Ok(f) => f,
        Err(e) => return format!("refused at once: {e:?}"),
    };
    let Ok(stream) = body.write() else { return "no body stream".into() };
    let chunk = vec![b'x'; 64 * 1024];
    let mut written: u64 = 0;
    let mut stopped = String::from("the whole body was taken");
    while written < total {
        // `check-write` says how much the host takes now; write what fits.
        match stream.check_write() {
            Ok(0) => {
                stream.subscribe().block();
                continue;
            }
            Ok(n) => {
                let n = (n as usize).min(chunk.len()).min((total - written) as usize);
                if let Err(e) = stream.write(&chunk[..n]) {
                    stopped = format!("write failed: {e:?}");
                    break;
                }
                written += n as u64;
            }
            Err(e) => {
                stopped = format!("the host closed the body: {e:?}");
                break;
            }
        }
    }
    drop(stream);
    let _ = OutgoingBody::finish(body, None);
    future.subscribe().block();
    let answer = match future.get() {
        Some(Ok(Ok(response))) => format!("status {}", response.status()),
        Some(Ok(Err(code))) => format!("error {code:?}"),
        _ => "no answer".into(),
    };
    format!("rogue post: the host took {written} bytes ({stopped}); answer: {answer}")
}
