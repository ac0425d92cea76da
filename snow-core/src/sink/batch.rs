//! The Batch API's wire format and the batch size: `POST /api/now/v1/batch` carries Table API
//! requests as items (relative URL, method, base64 body) that the instance runs one after another in
//! one session; the answer lists each serviced item with its status, base64 body and
//! `execution_time`, and the items a quota left unserviced.
//!
//! [`BatchSizer`] keeps a batch well under the instance's 30 s batch quota: it estimates a write's
//! execution time from the answers (a moving average of `execution_time` per item) and sizes the
//! next batch to take about `snow.sink.batch.target.ms`; a batch with unserviced items halves it.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::SnowError;
use crate::http::transport::Method;

/// One item of a batch request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The item's id (unique in its batch).
    pub id: u32,
    /// The Table API method.
    pub method: Method,
    /// The URL relative to the instance (`/api/now/table/incident/…`).
    pub url: String,
    /// The JSON body (empty for a delete).
    pub body: Vec<u8>,
}

/// The answer to one item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemAnswer {
    /// The item's status.
    pub status: u16,
    /// Its body, decoded.
    pub body: Vec<u8>,
    /// Milliseconds the instance spent on it.
    pub execution_ms: u64,
}

/// A batch answer: item id → answer, and the ids left unserviced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchAnswer {
    /// Serviced items.
    pub serviced: Vec<(u32, ItemAnswer)>,
    /// Items the instance did not run.
    pub unserviced: Vec<u32>,
}

fn method_name(method: Method) -> &'static str {
    match method {
        Method::Get => "GET",
        Method::Post => "POST",
        Method::Patch => "PATCH",
        Method::Put => "PUT",
        Method::Delete => "DELETE",
    }
}

/// The request body of batch `batch_id` holding `items`.
pub fn encode(batch_id: u64, items: &[Item]) -> Vec<u8> {
    #[derive(Serialize)]
    struct NameValue {
        name: &'static str,
        value: &'static str,
    }
    #[derive(Serialize)]
    struct RestRequest<'a> {
        id: String,
        method: &'static str,
        url: &'a str,
        headers: [NameValue; 2],
        #[serde(skip_serializing_if = "Option::is_none")]
        body: Option<String>,
        exclude_response_headers: bool,
    }
    #[derive(Serialize)]
    struct Request<'a> {
        batch_request_id: String,
        rest_requests: Vec<RestRequest<'a>>,
    }
    let request = Request {
        batch_request_id: batch_id.to_string(),
        rest_requests: items
            .iter()
            .map(|i| RestRequest {
                id: i.id.to_string(),
                method: method_name(i.method),
                url: &i.url,
                headers: [
                    NameValue { name: "Content-Type", value: "application/json" },
                    NameValue { name: "Accept", value: "application/json" },
                ],
                body: (!i.body.is_empty()).then(|| STANDARD.encode(&i.body)),
                exclude_response_headers: true,
            })
            .collect(),
    };
    serde_json::to_vec(&request).unwrap_or_default()
}

/// Reads a batch answer; an answer that is not one is a transport-class failure (the writes may
/// have run: the caller treats every item as unknown).
pub fn decode(body: &[u8]) -> Result<BatchAnswer, String> {
    #[derive(Deserialize)]
    struct Serviced {
        id: Value,
        status_code: u16,
        body: Option<String>,
        execution_time: Option<Value>,
    }
    #[derive(Deserialize)]
    struct Answer {
        #[serde(default)]
        serviced_requests: Vec<Serviced>,
        #[serde(default)]
        unserviced_requests: Vec<Value>,
    }
    let answer: Answer = serde_json::from_slice(body).map_err(|e| format!("the batch answer is not one: {e}"))?;
    let id = |v: &Value| -> Result<u32, String> {
        match v {
            Value::String(s) => s.parse().map_err(|_| format!("the batch answer names an unknown item {s:?}")),
            Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| format!("bad item id {n}")),
            other => Err(format!("bad item id {other}")),
        }
    };
    let mut out = BatchAnswer::default();
    for s in answer.serviced_requests {
        let body = match s.body.as_deref().filter(|b| !b.is_empty()) {
            Some(b) => STANDARD.decode(b).map_err(|e| format!("item {}: the body is not base64: {e}", s.id))?,
            None => Vec::new(),
        };
        let execution_ms = match s.execution_time {
            Some(Value::Number(n)) => n.as_f64().unwrap_or(0.0).max(0.0) as u64,
            Some(Value::String(t)) => t.parse::<f64>().unwrap_or(0.0).max(0.0) as u64,
            _ => 0,
        };
        out.serviced.push((id(&s.id)?, ItemAnswer { status: s.status_code, body, execution_ms }));
    }
    for u in &answer.unserviced_requests {
        out.unserviced.push(id(u)?);
    }
    Ok(out)
}

/// Sizes batches from the execution times the instance reports.
#[derive(Debug, Clone)]
pub struct BatchSizer {
    max: usize,
    target_ms: u64,
    /// Moving average of one item's execution time, in ms (none before the first answer).
    per_item_ms: Option<f64>,
    /// Cap after unserviced items (halved each time, grown back by one item per clean batch).
    ceiling: usize,
}

impl BatchSizer {
    /// At most `max` items, aiming at `target_ms` of execution per batch.
    pub fn new(max: usize, target_ms: u64) -> Self {
        Self { max: max.max(1), target_ms: target_ms.max(1), per_item_ms: None, ceiling: max.max(1) }
    }

    /// How many items the next batch may hold.
    pub fn size(&self) -> usize {
        let by_time = match self.per_item_ms {
            Some(ms) if ms > 0.0 => (self.target_ms as f64 / ms).floor() as usize,
            _ => self.max,
        };
        by_time.clamp(1, self.max).min(self.ceiling)
    }

    /// Learns from a batch whose `items` serviced items took `execution_ms` in all, with
    /// `unserviced` items left over.
    pub fn observe(&mut self, items: usize, execution_ms: u64, unserviced: usize) {
        if items > 0 {
            let sample = execution_ms as f64 / items as f64;
            self.per_item_ms = Some(match self.per_item_ms {
                Some(avg) => avg * 0.7 + sample * 0.3,
                None => sample,
            });
        }
        if unserviced > 0 {
            self.ceiling = (self.size() / 2).max(1);
        } else if self.ceiling < self.max {
            self.ceiling += 1;
        }
    }
}

/// A failed item's answer as the error a direct call would have given.
pub fn item_error(answer: &ItemAnswer, method: Method, table: &str, batch_id: u64) -> SnowError {
    let response = crate::http::transport::Response { status: answer.status, headers: Vec::new(), body: answer.body.clone() };
    crate::table::client::http_failure(&response, method, table, &format!("batch {batch_id}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_carries_items_as_the_batch_api_reads_them() {
        let items = [
            Item { id: 0, method: Method::Patch, url: "/api/now/table/incident/abc".into(), body: br#"{"a":"1"}"#.to_vec() },
            Item { id: 1, method: Method::Delete, url: "/api/now/table/incident/def".into(), body: Vec::new() },
        ];
        let v: Value = serde_json::from_slice(&encode(7, &items)).unwrap();
        assert_eq!(v["batch_request_id"], "7");
        assert_eq!(v["rest_requests"][0]["method"], "PATCH");
        assert_eq!(v["rest_requests"][0]["body"], STANDARD.encode(br#"{"a":"1"}"#));
        assert_eq!(v["rest_requests"][1]["url"], "/api/now/table/incident/def");
        assert!(v["rest_requests"][1].get("body").is_none());
    }

    #[test]
    fn an_answer_maps_items_by_id() {
        let body = format!(
            r#"{{"batch_request_id":"7","serviced_requests":[{{"id":"1","status_code":404,"body":"{}","execution_time":12}}],
               "unserviced_requests":["0"]}}"#,
            STANDARD.encode(br#"{"error":{"message":"No Record found"}}"#)
        );
        let answer = decode(body.as_bytes()).unwrap();
        assert_eq!(answer.unserviced, [0]);
        assert_eq!(answer.serviced[0].0, 1);
        assert_eq!((answer.serviced[0].1.status, answer.serviced[0].1.execution_ms), (404, 12));
        let err = item_error(&answer.serviced[0].1, Method::Patch, "incident", 7);
        assert!(err.to_string().contains("No Record found"), "{err}");
        assert!(decode(b"<html>").is_err());
    }

    #[test]
    fn the_size_follows_execution_times_and_halves_after_unserviced_items() {
        let mut sizer = BatchSizer::new(100, 10_000);
        assert_eq!(sizer.size(), 100, "no answer yet: the configured size");
        sizer.observe(100, 50_000, 0);
        assert_eq!(sizer.size(), 20, "500 ms a write: 20 fit in 10 s");
        let mut sizer = BatchSizer::new(100, 10_000);
        sizer.observe(40, 400, 60);
        assert_eq!(sizer.size(), 50, "unserviced items halve the batch");
        for _ in 0..10 {
            sizer.observe(50, 500, 0);
        }
        assert_eq!(sizer.size(), 60, "and it grows back one item per clean batch");
    }
}
