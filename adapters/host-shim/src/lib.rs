//! `snow:connector/host` for a host that is not snow-connect: each log line goes to stderr as
//! `LEVEL message` (the host's own log collects it); metrics are dropped, since such a host has
//! no place for them. Composed under the connector components with `wac plug` (docs/hosts.md).
#![cfg(all(target_arch = "wasm32", target_os = "wasi"))]

#[allow(unsafe_code, missing_docs, clippy::all)] // generated code
mod bindings {
    wit_bindgen::generate!({ world: "host-shim", path: "../../wit" });
    use crate::Shim;
    export!(Shim with_types_in self);
}

use bindings::exports::snow::connector::host::{Guest, Label, Level};

pub(crate) struct Shim;

impl Guest for Shim {
    fn log(level: Level, message: String) {
        let level = match level {
            Level::Trace => "TRACE",
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        };
        eprintln!("{level} {message}");
    }

    fn counter_add(_name: String, _value: u64, _labels: Vec<Label>) {}

    fn gauge_set(_name: String, _value: f64, _labels: Vec<Label>) {}
}
