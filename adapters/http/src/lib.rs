//! The connectors over HTTP, for hosts that serve `wasi:http` components (`wasmtime serve`, Spin,
//! wasmCloud, `jco serve`): this component exports `wasi:http/incoming-handler` and imports the
//! connectors' `source-api` and `sink-api`; `wac plug` composes it with `guest_source.wasm`,
//! `guest_sink.wasm` and `host_shim.wasm` into one component (docs/hosts.md).
//!
//! Every request is stateless, as such hosts instantiate per request; the caller keeps the
//! offsets, as snow-connect does:
//! * `POST /validate` `{"config":{..}}` → 200 `{"valid":true}` or 422 `{"valid":false,"errors":[{key,message}]}`
//! * `POST /plan` `{"config":{..},"max_tasks":N}` → `{"tasks":[{"units":[{partition,name,config}]}]}`
//! * `POST /poll` `{"config":{..},"unit":NAME?,"offsets":[{partition,position}]}` → opens the unit
//!   (the first planned one unless named) at the offsets and polls until a batch has records or
//!   asks to wait: `{"unit","topic",
//!   "records":[{key,value,headers:[[name,value]],timestamp_ms}],"offset","next_poll_ms","notice","value_schema"}`
//! * `POST /put` `{"config":{..},"records":[{topic,partition,offset,key,value,headers,timestamp_ms}]}`
//!   → `{"outcomes":[..]}`, one per record.
//!
//! Keys, values and header values are base64 (the connectors' bytes, unchanged). A connector's
//! error is 502 `{"error":{..}}`; a malformed request 400, naming what is wrong.
//!
//! Credentials: the connectors never hold them. Such a host must attach `Authorization` to the
//! connectors' outgoing requests itself, or the instance must accept the requests without it.
#![cfg(all(target_arch = "wasm32", target_os = "wasi"))]

#[allow(unsafe_code, missing_docs, clippy::all)] // generated code
mod bindings {
    wit_bindgen::generate!({
        world: "http-adapter",
        path: "../../wit",
        with: {
            "wasi:http/types@0.2.12": wasip2::http::types,
            "wasi:io/error@0.2.12": wasip2::io::error,
            "wasi:io/poll@0.2.12": wasip2::io::poll,
            "wasi:io/streams@0.2.12": wasip2::io::streams,
            "wasi:clocks/monotonic-clock@0.2.12": wasip2::clocks::monotonic_clock,
        },
    });
    use crate::Adapter;
    export!(Adapter with_types_in self);
}
mod json;

use bindings::exports::wasi::http::incoming_handler::Guest;
use bindings::snow::connector::{sink_api, source_api, types as wit};
use serde_json::{Value, json};
use wasip2::http::types::{Fields, IncomingRequest, Method, OutgoingBody, OutgoingResponse, ResponseOutparam};

pub(crate) struct Adapter;

impl Guest for Adapter {
    fn handle(request: IncomingRequest, response_out: ResponseOutparam) {
        let path = request.path_with_query().unwrap_or_default();
        let (status, body) = match (request.method(), path.split('?').next().unwrap_or("")) {
            (Method::Post, route @ ("/validate" | "/plan" | "/poll" | "/put")) => match read_body(request).and_then(|b| parse(&b)) {
                Ok(body) => route_to(route, &body),
                Err(message) => (400, json!({ "error": message })),
            },
            (_, route) => (404, json!({ "error": format!("no route {route}: POST /validate, /plan, /poll or /put") })),
        };
        respond(response_out, status, &body);
    }
}

fn route_to(route: &str, body: &Value) -> (u16, Value) {
    let config = match json::config(body) {
        Ok(config) => config,
        Err(message) => return (400, json!({ "error": message })),
    };
    match route {
        "/validate" => {
            let source = source_api::validate(&config);
            let sink = sink_api::validate(&config);
            // A configuration is for one of the two connectors: valid if either accepts it.
            match (source, sink) {
                (Ok(()), _) | (_, Ok(())) => (200, json!({ "valid": true })),
                (Err(errors), _) => (422, json!({ "valid": false, "errors": json::config_errors(&errors) })),
            }
        }
        "/plan" => {
            let max_tasks = body["max_tasks"].as_u64().unwrap_or(1).clamp(1, 1024) as u32;
            match source_api::plan(&config, max_tasks) {
                Ok(tasks) => (200, json!({ "tasks": tasks.iter().map(json::task).collect::<Vec<_>>() })),
                Err(e) => (502, json!({ "error": json::snow_error(&e) })),
            }
        }
        "/poll" => poll(&config, body),
        _ => put(&config, body),
    }
}

fn poll(config: &wit::Config, body: &Value) -> (u16, Value) {
    let units: Vec<wit::WorkUnit> = match source_api::plan(config, 1) {
        Ok(tasks) => tasks.into_iter().flat_map(|t| t.units).collect(),
        Err(e) => return (502, json!({ "error": json::snow_error(&e) })),
    };
    let named = body["unit"].as_str();
    let Some(unit) = units.iter().find(|u| named.is_none_or(|n| u.name == n)) else {
        let names: Vec<&str> = units.iter().map(|u| u.name.as_str()).collect();
        return (400, json!({ "error": format!("unit: no unit {:?} (planned: {})", named.unwrap_or(""), names.join(", ")) }));
    };
    let offsets = match json::offsets(&body["offsets"]) {
        Ok(offsets) => offsets,
        Err(message) => return (400, json!({ "error": message })),
    };
    let task = match source_api::SourceTask::open(&unit.config, &offsets) {
        Ok(task) => task,
        Err(e) => return (502, json!({ "error": json::snow_error(&e) })),
    };
    // A fresh task's first polls may carry no records (its startup probe, a drain that finds the
    // second done): poll on until records come, the task asks to wait, or POLLS are spent.
    const POLLS: usize = 16;
    let mut last: Option<wit::PollBatch> = None;
    for _ in 0..POLLS {
        match task.poll() {
            Ok(mut batch) => {
                let done = !batch.records.is_empty() || batch.next_poll_ms > 0;
                // A schema sent by an earlier poll holds for these records: keep it in the answer.
                if batch.value_schema.is_none() {
                    batch.value_schema = last.and_then(|l| l.value_schema);
                }
                last = Some(batch);
                if done {
                    break;
                }
            }
            Err(e) => return (502, json!({ "error": json::snow_error(&e) })),
        }
    }
    match last {
        Some(batch) => (200, json::batch(&unit.name, &batch)),
        None => (502, json!({ "error": "no poll" })),
    }
}

fn put(config: &wit::Config, body: &Value) -> (u16, Value) {
    let records = match json::sink_records(&body["records"]) {
        Ok(records) => records,
        Err(message) => return (400, json!({ "error": message })),
    };
    match sink_api::SinkTask::open(config) {
        Ok(task) => (200, json!({ "outcomes": task.put(&records).iter().map(json::outcome).collect::<Vec<_>>() })),
        Err(e) => (502, json!({ "error": json::snow_error(&e) })),
    }
}

/// The request body, whole (at most 64 MiB).
fn read_body(request: IncomingRequest) -> Result<Vec<u8>, String> {
    const MAX: usize = 64 << 20;
    let body = request.consume().map_err(|()| "the request body cannot be read".to_string())?;
    let stream = body.stream().map_err(|()| "the request body cannot be read".to_string())?;
    let mut bytes = Vec::new();
    loop {
        match stream.blocking_read(64 << 10) {
            Ok(chunk) => {
                bytes.extend_from_slice(&chunk);
                if bytes.len() > MAX {
                    return Err(format!("the request body is larger than {MAX} bytes"));
                }
            }
            Err(wasip2::io::streams::StreamError::Closed) => break,
            Err(e) => return Err(format!("reading the request body: {e:?}")),
        }
    }
    drop(stream);
    Ok(bytes)
}

fn parse(bytes: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("the body is not JSON: {e}"))
}

fn respond(out: ResponseOutparam, status: u16, body: &Value) {
    let headers = Fields::new();
    let _ = headers.set("content-type", &[b"application/json".to_vec()]);
    let response = OutgoingResponse::new(headers);
    let _ = response.set_status_code(status);
    let Ok(outgoing) = response.body() else { return };
    ResponseOutparam::set(out, Ok(response));
    let bytes = body.to_string().into_bytes();
    if let Ok(stream) = outgoing.write() {
        for chunk in bytes.chunks(4096) {
            if stream.blocking_write_and_flush(chunk).is_err() {
                break;
            }
        }
        drop(stream);
    }
    let _ = OutgoingBody::finish(outgoing, None);
}
