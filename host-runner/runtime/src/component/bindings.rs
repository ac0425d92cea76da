//! Host bindings of the `source`, `source-push`, `sink` and `transform` worlds. The sink and transform worlds
//! reuse the source world's `types` and `host` interfaces, so one `HostState` implements `host`
//! once for all three.
#![allow(missing_docs, clippy::all)] // generated code

/// World `source`.
pub mod source {
    wasmtime::component::bindgen!({
        world: "source",
        path: "../../wit",
        exports: { default: async },
        with: {
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
        },
    });
}

/// World `source-push`: only its optional `source-wake` export is used (looked up on a component
/// instantiated as a `source`, ADR 0032), so components without it still load.
pub mod source_push {
    wasmtime::component::bindgen!({
        world: "source-push",
        path: "../../wit",
        exports: { default: async },
        with: {
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
            "snow:connector/types": super::source::snow::connector::types,
            "snow:connector/host": super::source::snow::connector::host,
        },
    });
}

/// World `sink`.
pub mod sink {
    wasmtime::component::bindgen!({
        world: "sink",
        path: "../../wit",
        exports: { default: async },
        with: {
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
            "snow:connector/types": super::source::snow::connector::types,
            "snow:connector/host": super::source::snow::connector::host,
        },
    });
}

/// World `transform`.
pub mod transform {
    wasmtime::component::bindgen!({
        world: "transform",
        path: "../../wit",
        exports: { default: async },
        with: {
            "snow:connector/types": super::source::snow::connector::types,
            "snow:connector/host": super::source::snow::connector::host,
        },
    });
}

pub use source::snow::connector::types;

/// A guest's configuration errors as the host's typed ones, their keys under `prefix` (a
/// transform's `transforms.<alias>.`). WIT's `config-error` carries no class: each is `Invalid`.
pub fn config_errors(errors: &[types::ConfigError], prefix: &str) -> Vec<snow_core::error::ConfigError> {
    errors.iter().map(|e| snow_core::error::ConfigError::new(format!("{prefix}{}", e.key), e.message.clone())).collect()
}
