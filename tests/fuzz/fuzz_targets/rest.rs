//! The REST API's request handling: any method, path, query and body is answered (with an error
//! status at worst), never a panic; answers are JSON.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;

fn view() -> &'static (tokio::runtime::Runtime, snow_fleet::herder::Standalone) {
    static VIEW: OnceLock<(tokio::runtime::Runtime, snow_fleet::herder::Standalone)> = OnceLock::new();
    VIEW.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let runner = Arc::new(snow_runtime::runner::Runner::new(None).unwrap());
        (runtime, snow_fleet::herder::Standalone::new(runner, Vec::new()))
    })
}

fuzz_target!(|data: &[u8]| {
    // First line: method and path-and-query; the rest: the body.
    let (head, body) = match data.iter().position(|b| *b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let head = String::from_utf8_lossy(head);
    let (method, target) = head.split_once(' ').unwrap_or(("GET", &head));
    let (Ok(method), Ok(uri)) = (http::Method::from_bytes(method.as_bytes()), target.parse::<http::Uri>()) else { return };
    let (runtime, view) = view();
    let answer = runtime.block_on(snow_fleet::rest::api::answer(view, &method, &uri, &bytes::Bytes::copy_from_slice(body)));
    assert!(answer.status().as_u16() >= 200);
});
