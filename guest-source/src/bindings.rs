//! Generated bindings of world `source`; the rest of the crate never touches raw WIT handles.
//! WASI interfaces reuse the `wasip2` crate's bindings (the ones snow-core's transport uses).
#![allow(unsafe_code, missing_docs, clippy::all)] // generated code

wit_bindgen::generate!({
    world: "source-push",
    path: "../wit",
    with: {
        "wasi:http/types@0.2.12": wasip2::http::types,
        "wasi:http/outgoing-handler@0.2.12": wasip2::http::outgoing_handler,
        "wasi:io/error@0.2.12": wasip2::io::error,
        "wasi:io/poll@0.2.12": wasip2::io::poll,
        "wasi:io/streams@0.2.12": wasip2::io::streams,
        "wasi:clocks/monotonic-clock@0.2.12": wasip2::clocks::monotonic_clock,
    },
});

use crate::Component;
export!(Component with_types_in self);
