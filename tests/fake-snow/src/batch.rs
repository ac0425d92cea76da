//! The Batch API, `POST /api/now/v1/batch`: its items (base64 bodies, relative URLs) run one after
//! another in the batch's session, each through the same Table API handlers as a direct call, each
//! with its own status and `execution_time`. A failed item does not stop later ones. Items the
//! quota leaves no time for (`batch_quota_ms`, 30 s like an instance's rule) are listed in
//! `unserviced_requests`. With the latency model on, each executed write costs `write_ms`. Each
//! item is journalled like a request of its own (`batch_item` = its position), so a test sees the
//! writes a batch made in the order they ran. Turned off (`batch_api: false`), the endpoint
//! answers 400 as an instance without it does.

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::journal::JournalEntry;
use crate::oauth::Principal;
use crate::server::{Answer, Shared, form_decode, route};
use crate::table_api::envelope;

#[derive(Deserialize)]
struct BatchRequest {
    batch_request_id: Option<Value>,
    #[serde(default)]
    rest_requests: Vec<RestRequest>,
}

#[derive(Deserialize)]
struct RestRequest {
    id: Value,
    method: String,
    url: String,
    body: Option<String>,
}

/// Serves one batch request for `principal`; `entry` is the batch's own journal entry.
pub async fn serve(shared: &Shared, principal: &Principal, body: &[u8], entry: &mut JournalEntry) -> Answer {
    if !shared.batch_api() {
        return envelope(400, "Requested URI does not represent any resource", "/api/now/v1/batch");
    }
    let request: BatchRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return envelope(400, "Invalid batch request", &e.to_string()),
    };
    let latency = shared.latency();
    let quota = Duration::from_millis(latency.batch_quota_ms.unwrap_or(30_000));
    let started = Instant::now();
    let mut due = tokio::time::Instant::now();
    let mut serviced = Vec::new();
    let mut unserviced = Vec::new();
    for (i, item) in request.rest_requests.iter().enumerate() {
        if started.elapsed() >= quota {
            unserviced.push(item.id.clone());
            continue;
        }
        let item_started = Instant::now();
        let (path, query) = item.url.split_once('?').unwrap_or((item.url.as_str(), ""));
        let params = form_decode(query);
        let method = item.method.to_ascii_uppercase();
        let item_body = match item.body.as_deref().map(|b| STANDARD.decode(b)) {
            Some(Ok(bytes)) => bytes,
            Some(Err(e)) => {
                serviced.push(item_answer(&item.id, &envelope(400, "Invalid base64 body", &e.to_string()), 0));
                continue;
            }
            None => Vec::new(),
        };
        let is_write = matches!(method.as_str(), "POST" | "PATCH" | "PUT" | "DELETE");
        if is_write && latency.write_ms > 0 {
            // Items end at fixed steps from the batch's start: timer overshoot does not add up.
            due += Duration::from_millis(latency.write_ms);
            tokio::time::sleep_until(due).await;
        }
        let mut item_entry = JournalEntry {
            method: method.clone(),
            path: path.to_string(),
            query: params.get("sysparm_query").cloned(),
            body: matches!(method.as_str(), "POST" | "PATCH" | "PUT")
                .then(|| String::from_utf8_lossy(&item_body[..item_body.len().min(512)]).into_owned()),
            batch_item: Some(i as u32),
            unserviced: None,
            ..entry.clone()
        };
        let answer = route(shared, &method, path, &params, principal, &item_body, &mut item_entry);
        item_entry.status = answer.status;
        shared.journal.record(item_entry);
        serviced.push(item_answer(&item.id, &answer, item_started.elapsed().as_millis() as u64));
    }
    entry.unserviced = Some(unserviced.len());
    Answer::json(
        200,
        &json!({
            "batch_request_id": request.batch_request_id,
            "serviced_requests": serviced,
            "unserviced_requests": unserviced,
        }),
    )
}

/// One item's entry in `serviced_requests`.
fn item_answer(id: &Value, answer: &Answer, execution_ms: u64) -> Value {
    let ok = (200..300).contains(&answer.status);
    json!({
        "id": id,
        "status_code": answer.status,
        "status_text": if ok { "OK" } else { "Error" },
        "body": STANDARD.encode(&answer.body),
        "headers": answer.headers.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
        "execution_time": execution_ms,
        "error_message": if ok { Value::Null } else { Value::String(String::from_utf8_lossy(&answer.body).into_owned()) },
    })
}
