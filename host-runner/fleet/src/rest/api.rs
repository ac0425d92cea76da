//! The routes of Kafka Connect's REST API, answered by a [`Herder`]: a fleet's (its topics) or,
//! read-only, a standalone run's.
//! Tasks are the connector's units: a source's tables in plan order (task id = index), a sink's
//! partition lanes in name order. Errors are Connect's `{"error_code":…,"message":…}`.
//!
//! Longer than our 600-line mark: one route table of Kafka Connect's REST API, each handler a few
//! lines over the [`Herder`]; validation's rendering and the listener live beside it.
// A handler's `Err` is the HTTP answer itself, built once per request: boxing it buys nothing.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Response, StatusCode, Uri, header};
use http_body_util::Full;
use serde_json::{Value, json};

use super::validate;
use crate::herder::Herder;
use crate::herder::{Published, TargetState};
use snow_runtime::config::ConfigError;
use snow_runtime::connector::{SINK_CLASS, SOURCE_CLASS};

/// The plugins' version, as Connect 4.x reports it in statuses (KIP-891).
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A JSON answer.
pub fn reply(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(format!("{body}"))));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    response
}

/// An answer without a body.
fn empty(status: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = status;
    response
}

/// Connect's error answer.
pub fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    reply(status, &json!({ "error_code": status.as_u16(), "message": snow_runtime::redact::clean(message) }))
}

/// Connect's answer to a refused configuration: each reason is redacted already
/// ([`validate::by_key`]), so the whole message is scrubbed of known secrets by value only.
fn refused(errors: &[snow_runtime::config::ConfigError]) -> Response<Full<Bytes>> {
    let message = validate::refusal_message(errors);
    reply(StatusCode::BAD_REQUEST, &json!({ "error_code": 400, "message": snow_runtime::redact::scrub(&message) }))
}

/// A standalone run's answer to a write.
fn read_only() -> Response<Full<Bytes>> {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        "This is a standalone run: its connectors come from the files given to `snow-connect run`; edit a file and send SIGHUP, \
         or run a fleet (`snow-connect worker`) to manage connectors over this API",
    )
}

fn not_found(name: &str) -> Response<Full<Bytes>> {
    error(StatusCode::NOT_FOUND, &format!("Connector {name} not found"))
}

/// Answers `method uri` with `body`.
pub async fn answer(herder: &dyn Herder, method: &Method, uri: &Uri, body: &Bytes) -> Response<Full<Bytes>> {
    let path: Vec<String> = uri.path().trim_matches('/').split('/').filter(|s| !s.is_empty()).map(decode).collect();
    let pairs: Vec<(String, String)> = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| {
            kv.split_once('=').map(|(k, v)| (decode(k), decode(v))).or_else(|| (!kv.is_empty()).then(|| (decode(kv), String::new())))
        })
        .collect();
    // `expand` may be repeated (`?expand=status&expand=info`).
    let expand: Vec<&str> = pairs.iter().filter(|(k, _)| k == "expand").map(|(_, v)| v.as_str()).collect();
    let query: BTreeMap<String, String> = pairs.iter().cloned().collect();
    let segments: Vec<&str> = path.iter().map(String::as_str).collect();
    match (method, segments.as_slice()) {
        (&Method::GET, []) => reply(
            StatusCode::OK,
            &json!({ "version": env!("CARGO_PKG_VERSION"), "commit": env!("SNOW_COMMIT"), "kafka_cluster_id": herder.cluster_id() }),
        ),
        // KIP-1017: the worker answers once it has completed its start (its topics are read).
        (&Method::GET, ["health"]) => reply(
            StatusCode::OK,
            &json!({ "status": "healthy", "message": "Worker has completed startup and is ready to handle requests." }),
        ),
        (&Method::GET, ["connectors"]) => list(herder, (!expand.is_empty()).then(|| expand.join(",")).as_deref()),
        (&Method::POST, ["connectors"]) => create(herder, body).await,
        (&Method::GET, ["connectors", name]) => match info(herder, name) {
            Some(info) => reply(StatusCode::OK, &info),
            None => not_found(name),
        },
        (&Method::DELETE, ["connectors", name]) => delete(herder, name).await,
        (&Method::GET, ["connectors", name, "config"]) => match herder.connector(name) {
            Some(record) => reply(StatusCode::OK, &json!(shown(&record.properties, name))),
            None => not_found(name),
        },
        (&Method::PUT, ["connectors", name, "config"]) => put_config(herder, name, body).await,
        (&Method::PATCH, ["connectors", name, "config"]) => patch_config(herder, name, body).await,
        (&Method::GET, ["connectors", name, "status"]) => match status(herder, name) {
            Some(status) => reply(StatusCode::OK, &status),
            None => not_found(name),
        },
        (&Method::GET, ["connectors", name, "tasks"]) => match herder.connector(name) {
            Some(_) => reply(StatusCode::OK, &Value::Array(tasks(herder, name))),
            None => not_found(name),
        },
        (&Method::GET, ["connectors", name, "tasks", id, "status"]) => task_status(herder, name, id),
        (&Method::POST, ["connectors", name, "tasks", id, "restart"]) => restart_task(herder, name, id).await,
        (&Method::PUT, ["connectors", name, "pause"]) => target(herder, name, TargetState::Paused, StatusCode::ACCEPTED).await,
        (&Method::PUT, ["connectors", name, "resume"]) => target(herder, name, TargetState::Started, StatusCode::ACCEPTED).await,
        (&Method::PUT, ["connectors", name, "stop"]) => target(herder, name, TargetState::Stopped, StatusCode::NO_CONTENT).await,
        (&Method::POST, ["connectors", name, "restart"]) => restart(herder, name, &query).await,
        (&Method::GET, ["connectors", name, "offsets"]) => offsets(herder, name),
        (&Method::GET, ["connectors", name, "topics"]) => match herder.connector(name) {
            Some(_) => reply(StatusCode::OK, &json!({ *name: { "topics": herder.topics(name) } })),
            None => not_found(name),
        },
        (&Method::PUT, ["connectors", name, "topics", "reset"]) => reset_topics(herder, name).await,
        (&Method::PATCH, ["connectors", name, "offsets"]) => alter_offsets(herder, name, body).await,
        (&Method::DELETE, ["connectors", name, "offsets"]) => reset_offsets(herder, name).await,
        (&Method::GET, ["admin", "loggers"]) => {
            let levels: serde_json::Map<String, Value> =
                snow_runtime::logging::levels().into_iter().map(|(k, v)| (k, json!({ "level": v }))).collect();
            reply(StatusCode::OK, &Value::Object(levels))
        }
        (&Method::GET, ["admin", "loggers", logger]) => {
            let levels = snow_runtime::logging::levels();
            let level = levels.get(*logger).or(levels.get("root")).cloned().unwrap_or_else(|| "INFO".into());
            reply(StatusCode::OK, &json!({ "level": level }))
        }
        (&Method::PUT, ["admin", "loggers", logger]) => set_logger(herder, logger, query.get("scope").map(String::as_str), body).await,
        (&Method::GET, ["connector-plugins"]) => reply(
            StatusCode::OK,
            &json!([
                { "class": SINK_CLASS, "type": "sink", "version": env!("CARGO_PKG_VERSION") },
                { "class": SOURCE_CLASS, "type": "source", "version": env!("CARGO_PKG_VERSION") },
            ]),
        ),
        (&Method::PUT, ["connector-plugins", plugin, "config", "validate"]) => validate_plugin(herder, plugin, body).await,
        (_, ["connectors", ..] | ["connector-plugins", ..] | [] | ["health"] | ["admin", ..]) => {
            error(StatusCode::METHOD_NOT_ALLOWED, &format!("HTTP {method} is not supported on {}", uri.path()))
        }
        _ => error(StatusCode::NOT_FOUND, &format!("Unknown path {}", uri.path())),
    }
}

/// `%xx` and `+` decoded.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"), 16) {
                Ok(b) => {
                    out.push(b);
                    i += 3;
                    continue;
                }
                Err(_) => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A configuration as answered: with its name, secrets as stored (references).
fn shown(properties: &BTreeMap<String, String>, name: &str) -> BTreeMap<String, String> {
    let mut shown = properties.clone();
    shown.insert("name".into(), name.to_string());
    shown
}

/// The connector's type: from its plan here, else from `connector.class`.
fn kind(herder: &dyn Herder, name: &str, properties: &BTreeMap<String, String>) -> &'static str {
    if let Some(plan) = herder.plan(name) {
        return plan.kind;
    }
    match properties.get("connector.class").map(String::as_str) {
        Some(c) if c.ends_with("SinkConnector") => "sink",
        Some(c) if c.ends_with("SourceConnector") => "source",
        _ => "unknown",
    }
}

fn info(herder: &dyn Herder, name: &str) -> Option<Value> {
    let record = herder.connector(name)?;
    let tasks: Vec<Value> = tasks(herder, name).iter().map(|t| t["id"].clone()).collect();
    Some(json!({ "name": name, "config": shown(&record.properties, name), "tasks": tasks, "type": kind(herder, name, &record.properties) }))
}

/// The connector's units in task order: `(task id, unit name, its configuration)`.
/// A task: its id, its unit's name and the unit's configuration.
type Task = (usize, String, Vec<(String, String)>);

fn units(herder: &dyn Herder, name: &str) -> Vec<Task> {
    let plan = herder.plan(name);
    match plan {
        Some(plan) if plan.kind == "source" => plan.units.into_iter().enumerate().map(|(i, (unit, config))| (i, unit, config)).collect(),
        _ => {
            // A sink's lanes: the partitions whose status was published, in name order.
            let mut lanes: Vec<String> = herder.unit_statuses(name).into_iter().map(|(u, _)| u).filter(|u| u != "consumer").collect();
            lanes.sort();
            lanes.into_iter().enumerate().map(|(i, unit)| (i, unit, Vec::new())).collect()
        }
    }
}

fn tasks(herder: &dyn Herder, name: &str) -> Vec<Value> {
    units(herder, name)
        .into_iter()
        .map(|(id, unit, config)| {
            let mut config: BTreeMap<String, String> = config.into_iter().filter(|(k, _)| !k.starts_with("snow.auth.")).collect();
            config.insert("snow.unit".into(), unit);
            json!({ "id": { "connector": name, "task": id }, "config": config })
        })
        .collect()
}

fn unit_status(id: usize, unit: &str, published: Option<&Published>, target: TargetState) -> Value {
    let mut status = match published {
        Some(p) => json!({ "id": id, "state": p.state, "worker_id": p.worker_id, "version": VERSION, "unit": unit }),
        None => json!({ "id": id, "state": "UNASSIGNED", "worker_id": null, "version": VERSION, "unit": unit }),
    };
    if target == TargetState::Paused && status["state"] == "RUNNING" {
        status["state"] = json!("PAUSED");
    }
    if let Some(p) = published {
        if let Some(trace) = &p.trace {
            status["trace"] = json!(trace);
        }
        if let Some(detail) = &p.detail {
            status["detail"] = json!(detail);
        }
        if let Some(message) = p.message.as_ref().filter(|_| p.trace.is_none()) {
            status["message"] = json!(message);
        }
    }
    status
}

fn status(herder: &dyn Herder, name: &str) -> Option<Value> {
    let record = herder.connector(name)?;
    let published: BTreeMap<String, Published> = herder.unit_statuses(name).into_iter().collect();
    let tasks: Vec<Value> = if record.target == TargetState::Stopped {
        Vec::new()
    } else {
        units(herder, name).iter().map(|(id, unit, _)| unit_status(*id, unit, published.get(unit), record.target)).collect()
    };
    let connector = match herder.connector_status(name) {
        Some(p) => {
            let mut c = json!({ "state": p.state, "worker_id": p.worker_id, "version": VERSION });
            if let Some(trace) = p.trace {
                c["trace"] = json!(trace);
            }
            c
        }
        None => json!({ "state": "UNASSIGNED", "worker_id": null, "version": VERSION }),
    };
    Some(json!({ "name": name, "connector": connector, "tasks": tasks, "type": kind(herder, name, &record.properties) }))
}

fn list(herder: &dyn Herder, expand: Option<&str>) -> Response<Full<Bytes>> {
    let names: Vec<String> = herder.connectors().into_keys().collect();
    match expand {
        None => reply(StatusCode::OK, &json!(names)),
        Some(expand) => {
            let mut out = serde_json::Map::new();
            for name in names {
                let mut entry = serde_json::Map::new();
                for what in expand.split(',') {
                    match what {
                        "status" => {
                            entry.insert("status".into(), status(herder, &name).unwrap_or(Value::Null));
                        }
                        "info" => {
                            entry.insert("info".into(), info(herder, &name).unwrap_or(Value::Null));
                        }
                        _ => {}
                    }
                }
                out.insert(name, Value::Object(entry));
            }
            reply(StatusCode::OK, &Value::Object(out))
        }
    }
}

fn parse_json(body: &Bytes) -> Result<Value, Response<Full<Bytes>>> {
    serde_json::from_slice(body).map_err(|e| error(StatusCode::BAD_REQUEST, &format!("The request body is not valid JSON: {e}")))
}

/// Checks and stores a configuration; the answer for a refusal, or `None`.
async fn store(
    herder: &dyn Herder,
    name: &str,
    mut properties: BTreeMap<String, String>,
    initial: Option<TargetState>,
) -> Option<Response<Full<Bytes>>> {
    let Some(writer) = herder.writer() else { return Some(read_only()) };
    if name.is_empty() || name.contains('/') || name.chars().any(char::is_control) {
        return Some(error(StatusCode::BAD_REQUEST, "A connector name must be non-empty and hold no '/' or control characters"));
    }
    if let Some(other) = properties.get("name").filter(|n| n.as_str() != name) {
        return Some(error(
            StatusCode::BAD_REQUEST,
            &format!("Connector name configuration ({other}) doesn't match connector name in the URL ({name})"),
        ));
    }
    properties.remove("name");
    let properties = match writer.pin(properties).await {
        Ok(pinned) => pinned,
        Err(errors) => return Some(refused(&errors)),
    };
    let errors = herder.validate(name, &properties).await;
    if !errors.is_empty() {
        return Some(refused(&errors));
    }
    if let Err(e) = writer.put_config(name, &properties, initial).await {
        return Some(error(StatusCode::INTERNAL_SERVER_ERROR, &format!("Storing the configuration failed: {e:#}")));
    }
    None
}

/// How long a create or update waits for this worker to plan the connector it stored, so the
/// answer lists its tasks (a plan made later shows in later answers).
const PLANNED_WITHIN: Duration = Duration::from_secs(1);

async fn create(herder: &dyn Herder, body: &Bytes) -> Response<Full<Bytes>> {
    let request = match parse_json(body) {
        Ok(v) => v,
        Err(answer) => return answer,
    };
    let Some(name) = request.get("name").and_then(Value::as_str).map(str::to_string) else {
        return error(StatusCode::BAD_REQUEST, "The request must name the connector: {\"name\": …, \"config\": {…}}");
    };
    let properties = match request.get("config").map(|c| snow_runtime::config::string_entries(c, "config")) {
        Some(Ok(p)) => p,
        Some(Err(message)) => return error(StatusCode::BAD_REQUEST, &message),
        None => {
            return error(StatusCode::BAD_REQUEST, "The request must hold the connector's configuration: {\"name\": …, \"config\": {…}}");
        }
    };
    let initial = match request.get("initial_state").and_then(Value::as_str) {
        None | Some("RUNNING") => None,
        Some("PAUSED") => Some(TargetState::Paused),
        Some("STOPPED") => Some(TargetState::Stopped),
        Some(other) => return error(StatusCode::BAD_REQUEST, &format!("initial_state must be RUNNING, PAUSED or STOPPED, not {other}")),
    };
    if herder.connector(&name).is_some() {
        return error(StatusCode::CONFLICT, &format!("Connector {name} already exists"));
    }
    if let Some(refused) = store(herder, &name, properties, Some(initial.unwrap_or(TargetState::Started))).await {
        return refused;
    }
    herder.planned(&name, PLANNED_WITHIN).await;
    reply(StatusCode::CREATED, &info(herder, &name).unwrap_or(Value::Null))
}

async fn put_config(herder: &dyn Herder, name: &str, body: &Bytes) -> Response<Full<Bytes>> {
    let properties = match parse_json(body)
        .and_then(|v| snow_runtime::config::string_entries(&v, "the configuration").map_err(|m| error(StatusCode::BAD_REQUEST, &m)))
    {
        Ok(p) => p,
        Err(answer) => return answer,
    };
    let existed = herder.connector(name).is_some();
    if let Some(refused) = store(herder, name, properties, (!existed).then_some(TargetState::Started)).await {
        return refused;
    }
    herder.planned(name, PLANNED_WITHIN).await;
    reply(if existed { StatusCode::OK } else { StatusCode::CREATED }, &info(herder, name).unwrap_or(Value::Null))
}

async fn patch_config(herder: &dyn Herder, name: &str, body: &Bytes) -> Response<Full<Bytes>> {
    let Some(record) = herder.connector(name) else { return not_found(name) };
    let patch = match parse_json(body) {
        Ok(Value::Object(patch)) => patch,
        Ok(_) => return error(StatusCode::BAD_REQUEST, "The patch must be a JSON object"),
        Err(answer) => return answer,
    };
    let mut properties = record.properties.clone();
    for (k, v) in patch {
        match v {
            Value::Null => {
                properties.remove(&k);
            }
            Value::String(s) => {
                properties.insert(k, s);
            }
            other => {
                properties.insert(k, other.to_string());
            }
        }
    }
    if let Some(refused) = store(herder, name, properties, None).await {
        return refused;
    }
    reply(StatusCode::OK, &info(herder, name).unwrap_or(Value::Null))
}

async fn delete(herder: &dyn Herder, name: &str) -> Response<Full<Bytes>> {
    if herder.connector(name).is_none() {
        return not_found(name);
    }
    let Some(writer) = herder.writer() else { return read_only() };
    match writer.delete(name).await {
        Ok(()) => empty(StatusCode::NO_CONTENT),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &format!("Deleting the connector failed: {e:#}")),
    }
}

async fn target(herder: &dyn Herder, name: &str, state: TargetState, ok: StatusCode) -> Response<Full<Bytes>> {
    if herder.connector(name).is_none() {
        return not_found(name);
    }
    let Some(writer) = herder.writer() else { return read_only() };
    match writer.set_target(name, state).await {
        Ok(()) => empty(ok),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &format!("Changing the connector's state failed: {e:#}")),
    }
}

async fn restart(herder: &dyn Herder, name: &str, query: &BTreeMap<String, String>) -> Response<Full<Bytes>> {
    if herder.connector(name).is_none() {
        return not_found(name);
    }
    let flag = |k: &str| query.get(k).is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let (include_tasks, only_failed) = (flag("includeTasks"), flag("onlyFailed"));
    let Some(writer) = herder.writer() else { return read_only() };
    // The plan (which units restart) is the status before the request: a worker may act on the
    // request, and publish its restarted units as running, before this answer is written.
    let mut answer = status(herder, name).unwrap_or(Value::Null);
    if let Err(e) = writer.request_restart(name, include_tasks, only_failed, None).await {
        return error(StatusCode::INTERNAL_SERVER_ERROR, &format!("Asking for the restart failed: {e:#}"));
    }
    if !include_tasks && !only_failed {
        return empty(StatusCode::NO_CONTENT);
    }
    if let Some(tasks) = answer["tasks"].as_array_mut() {
        for task in tasks {
            if !only_failed || task["state"] == "FAILED" {
                task["state"] = json!("RESTARTING");
            }
        }
    }
    if !only_failed || answer["connector"]["state"] == "FAILED" {
        answer["connector"]["state"] = json!("RESTARTING");
    }
    reply(StatusCode::ACCEPTED, &answer)
}

fn task_of(herder: &dyn Herder, name: &str, id: &str) -> Result<(usize, String), Response<Full<Bytes>>> {
    if herder.connector(name).is_none() {
        return Err(not_found(name));
    }
    let units = units(herder, name);
    id.parse::<usize>()
        .ok()
        .and_then(|id| units.into_iter().find(|(i, _, _)| *i == id).map(|(i, u, _)| (i, u)))
        .ok_or_else(|| error(StatusCode::NOT_FOUND, &format!("Task {name}-{id} not found")))
}

fn task_status(herder: &dyn Herder, name: &str, id: &str) -> Response<Full<Bytes>> {
    match task_of(herder, name, id) {
        Ok((id, unit)) => {
            let published: BTreeMap<String, Published> = herder.unit_statuses(name).into_iter().collect();
            let target = herder.connector(name).map(|c| c.target).unwrap_or(TargetState::Started);
            reply(StatusCode::OK, &unit_status(id, &unit, published.get(&unit), target))
        }
        Err(answer) => answer,
    }
}

async fn restart_task(herder: &dyn Herder, name: &str, id: &str) -> Response<Full<Bytes>> {
    let unit = match task_of(herder, name, id) {
        Ok((_, unit)) => unit,
        Err(answer) => return answer,
    };
    let Some(writer) = herder.writer() else { return read_only() };
    match writer.request_restart(name, true, false, Some(&unit)).await {
        Ok(_) => empty(StatusCode::NO_CONTENT),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &format!("Asking for the restart failed: {e:#}")),
    }
}

fn offsets(herder: &dyn Herder, name: &str) -> Response<Full<Bytes>> {
    if herder.connector(name).is_none() {
        return not_found(name);
    }
    let offsets: Vec<Value> = herder
        .offsets(name)
        .into_iter()
        .map(|(partition, position)| {
            let as_json = |t: &str| serde_json::from_str::<Value>(t).unwrap_or_else(|_| json!(t));
            json!({ "partition": as_json(&partition), "offset": as_json(&position) })
        })
        .collect();
    reply(StatusCode::OK, &json!({ "offsets": offsets }))
}

/// Offsets may change only while the connector is stopped and nothing of it runs (KIP-875).
fn stopped(herder: &dyn Herder, name: &str) -> Result<(), Response<Full<Bytes>>> {
    let Some(record) = herder.connector(name) else { return Err(not_found(name)) };
    let running = herder.unit_statuses(name).into_iter().any(|(_, p)| p.state == "RUNNING");
    if record.target != TargetState::Stopped || running {
        return Err(error(
            StatusCode::BAD_REQUEST,
            &format!(
                "Connectors must be in the STOPPED state before their offsets can be modified. This can be done for the specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' endpoint"
            ),
        ));
    }
    Ok(())
}

async fn alter_offsets(herder: &dyn Herder, name: &str, body: &Bytes) -> Response<Full<Bytes>> {
    if let Err(answer) = stopped(herder, name) {
        return answer;
    }
    let request = match parse_json(body) {
        Ok(v) => v,
        Err(answer) => return answer,
    };
    let Some(items) = request.get("offsets").and_then(Value::as_array) else {
        return error(StatusCode::BAD_REQUEST, "The request must be {\"offsets\": [{\"partition\": {…}, \"offset\": {…} or null}]}");
    };
    let mut writes = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(partition) = item.get("partition").and_then(|p| serde_json::from_value::<snow_core::cursor::Partition>(p.clone()).ok())
        else {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("offsets[{i}].partition is not a partition of this connector (instance, table, timestamp_field, fingerprint)"),
            );
        };
        let position = match item.get("offset") {
            None | Some(Value::Null) => None,
            Some(offset) => {
                let text = offset.to_string();
                if let Err(e) = snow_core::cursor::position::Position::parse(&text) {
                    return error(StatusCode::BAD_REQUEST, &format!("offsets[{i}].offset: {e}"));
                }
                Some(text)
            }
        };
        writes.push((partition.key(), position));
    }
    let Some(writer) = herder.writer() else { return read_only() };
    match writer.write_offsets(name, writes).await {
        Ok(()) => reply(StatusCode::OK, &json!({ "message": "The offsets for this connector have been altered successfully" })),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &format!("Altering the offsets failed: {e:#}")),
    }
}

async fn reset_offsets(herder: &dyn Herder, name: &str) -> Response<Full<Bytes>> {
    if let Err(answer) = stopped(herder, name) {
        return answer;
    }
    let Some(writer) = herder.writer() else { return read_only() };
    match writer.reset_offsets(name).await {
        Ok(()) => reply(StatusCode::OK, &json!({ "message": "The offsets for this connector have been reset successfully" })),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &format!("Resetting the offsets failed: {e:#}")),
    }
}

/// `PUT /admin/loggers/{logger}` (KIP-495): this worker's level, or with `scope=cluster` every
/// worker's (KIP-976).
async fn set_logger(herder: &dyn Herder, logger: &str, scope: Option<&str>, body: &Bytes) -> Response<Full<Bytes>> {
    // A standalone run's listener is read-only: its levels are set where it was started (SNOW_LOG).
    if herder.writer().is_none() {
        return read_only();
    }
    let level = match parse_json(body) {
        Ok(v) => match v.get("level").and_then(Value::as_str) {
            Some(level) => level.to_string(),
            None => return error(StatusCode::BAD_REQUEST, "The request must be {\"level\": \"DEBUG\"}"),
        },
        Err(answer) => return answer,
    };
    match scope.unwrap_or("worker") {
        "worker" => match snow_runtime::logging::set_level(logger, &level) {
            Ok(()) => reply(StatusCode::OK, &json!([logger])),
            Err(why) => error(StatusCode::BAD_REQUEST, &why),
        },
        "cluster" => {
            if let Err(why) = snow_runtime::logging::set_level(logger, &level) {
                return error(StatusCode::BAD_REQUEST, &why);
            }
            let Some(writer) = herder.writer() else { return read_only() };
            match writer.set_cluster_logger(logger, &level).await {
                Ok(()) => empty(StatusCode::NO_CONTENT),
                Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &format!("Setting the level on every worker failed: {e:#}")),
            }
        }
        other => error(StatusCode::BAD_REQUEST, &format!("scope must be worker or cluster, not {other}")),
    }
}

/// Empties the connector's active topics (KIP-558); its units record the topics again as they
/// start using them.
async fn reset_topics(herder: &dyn Herder, name: &str) -> Response<Full<Bytes>> {
    if herder.connector(name).is_none() {
        return not_found(name);
    }
    let Some(writer) = herder.writer() else { return read_only() };
    match writer.reset_topics(name).await {
        Ok(()) => empty(StatusCode::OK),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &format!("Resetting the active topics failed: {e:#}")),
    }
}

async fn validate_plugin(herder: &dyn Herder, plugin: &str, body: &Bytes) -> Response<Full<Bytes>> {
    let class = match plugin {
        SOURCE_CLASS | "ServiceNowSourceConnector" => SOURCE_CLASS,
        SINK_CLASS | "ServiceNowSinkConnector" => SINK_CLASS,
        other => return error(StatusCode::NOT_FOUND, &format!("Unknown plugin {other}; GET /connector-plugins lists them")),
    };
    let mut properties = match parse_json(body)
        .and_then(|v| snow_runtime::config::string_entries(&v, "the configuration").map_err(|m| error(StatusCode::BAD_REQUEST, &m)))
    {
        Ok(p) => p,
        Err(answer) => return answer,
    };
    properties.entry("connector.class".into()).or_insert_with(|| class.to_string());
    let name = properties.remove("name").unwrap_or_else(|| "validate".into());
    let mut errors = herder.validate(&name, &properties).await;
    let short = class.rsplit('.').next().unwrap_or(class);
    if let Some(named) = properties.get("connector.class").filter(|c| c.as_str() != class && c.as_str() != short) {
        errors.push(ConfigError::new("connector.class", format!("{named:?} is not the plugin validated here ({class})")));
    }
    properties.insert("name".into(), name);
    reply(StatusCode::OK, &validate::config_infos(class, &properties, &errors))
}
