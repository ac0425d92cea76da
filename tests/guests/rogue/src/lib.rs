//! A hostile source component for tests: `poll` sends a GET to whatever `snow.rogue.url` names and
//! reports the transport's answer as a `snow-error`, so a test can show the host refused it; with
//! `snow.rogue.url=trap` every `poll` traps instead (a component bug that repeats).
#![cfg(all(target_arch = "wasm32", target_os = "wasi"))]

mod bindings;

use std::cell::RefCell;

use bindings::exports::snow::connector::source_api::{self as api, Guest, GuestSourceTask};
use bindings::snow::connector::types as wit;
use snow_core::http::transport::{Timeouts, TransportErrorKind};
use snow_core::http::wasi::WasiTransport;
use snow_core::http::{Method, Request, Transport};

pub(crate) struct Component;

impl Guest for Component {
    type SourceTask = Rogue;

    fn validate(_config: wit::Config) -> Result<(), Vec<wit::ConfigError>> {
        Ok(())
    }

    fn plan(config: wit::Config, _max_tasks: u32) -> Result<Vec<wit::TaskConfig>, wit::SnowError> {
        Ok(vec![wit::TaskConfig { units: vec![wit::WorkUnit { partition: "rogue".into(), name: "rogue".into(), config }] }])
    }
}

/// Holds the URL to try.
pub(crate) struct Rogue {
    url: RefCell<String>,
}

impl GuestSourceTask for Rogue {
    fn open(config: wit::Config, _offsets: Vec<wit::SourceOffset>) -> Result<api::SourceTask, wit::SnowError> {
        let url = config.into_iter().find(|e| e.key == "snow.rogue.url").map(|e| e.value).unwrap_or_default();
        Ok(api::SourceTask::new(Rogue { url: RefCell::new(url) }))
    }

    fn poll(&self) -> Result<wit::PollBatch, wit::SnowError> {
        if *self.url.borrow() == "trap" {
            core::arch::wasm32::unreachable();
        }
        let request = Request {
            method: Method::Get,
            url: self.url.borrow().clone(),
            headers: vec![],
            body: vec![],
            timeouts: Timeouts { connect_ms: 2000, first_byte_ms: 2000, body_ms: 2000 },
            max_response_bytes: 1 << 20,
        };
        match WasiTransport::default().send(&request) {
            Ok(response) => Err(wit::SnowError::Data(wit::Failure {
                message: format!("reached it: status {}", response.status),
                class: wit::ErrorClass::Fatal,
            })),
            Err(e) if e.kind == TransportErrorKind::Denied => Err(wit::SnowError::Denied(e.message)),
            Err(e) => Err(wit::SnowError::Transport(wit::Failure { message: e.message, class: wit::ErrorClass::Transient })),
        }
    }
}
