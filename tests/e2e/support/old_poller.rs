//! A stand-in for Confluent's ServiceNow source, behaving as its documentation and logs describe
//! (docs/research/confluent-servicenow-keys.md §1.4): each poll asks for
//! `sys_updated_on>=T^ORDERBYsys_updated_on` with `sysparm_limit=batch.max.rows`, pages through the
//! answer with `sysparm_offset`, writes every row it reads (the rows of second T again, each poll),
//! moves T to the newest timestamp it read, and commits `{"timestamp": T, …}` to a Connect offsets
//! topic under `["<connector>", {"table": …}]` every few polls (as Connect's offset flush does).
//! Records are Connect's `JsonConverter` envelopes, the key the sys_id.
//!
//! What this shape loses, and what a cutover must recover: a row changed while a poll pages
//! through the answer shifts every row after it by one (the row at the next page's start is never
//! read), and a row committed with a timestamp before T (a late row) is never asked for.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{Value, json};
use snow_core::http::{Method, Request, Timeouts};

/// The old connector's settings.
#[derive(Clone)]
pub struct OldPoller {
    pub fake_url: String,
    pub user: String,
    pub password: String,
    pub connector: String,
    pub table: String,
    pub topic: String,
    pub offsets_topic: String,
    /// `servicenow.since` as the connector starts from it (`YYYY-MM-DD 00:00:00`).
    pub since: String,
    /// `batch.max.rows`.
    pub batch: usize,
    /// `poll.interval.s`.
    pub poll: Duration,
    /// Polls between offset commits.
    pub commit_every: u64,
}

/// What the old connector did.
#[derive(Debug, Clone, Default)]
pub struct OldStats {
    pub polls: u64,
    pub pages: u64,
    pub records: u64,
    /// The last offset it committed (T), if any.
    pub committed: Option<String>,
    /// Its position in memory when it stopped (beyond the committed one).
    pub position: String,
}

/// A running stand-in.
pub struct OldRun {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<OldStats>,
}

impl OldRun {
    /// Stops it as a killed worker stops: no final offset commit.
    pub fn stop(self) -> OldStats {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("the old poller panicked")
    }
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

/// Connect's `JsonConverter` envelope of a row: a struct of optional strings (as Confluent's
/// source declares every field), the row as read.
fn envelope(row: &Value) -> Value {
    let fields: Vec<Value> =
        row.as_object().map(|m| m.keys().map(|k| json!({"type": "string", "optional": true, "field": k})).collect()).unwrap_or_default();
    json!({"schema": {"type": "struct", "fields": fields, "optional": false}, "payload": row})
}

impl OldPoller {
    /// Starts polling on its own thread; `between_pages` is called with each page that another
    /// page follows and how many rows of the poll came before it (a test changes rows there, as a
    /// writer would while the old connector pages).
    pub fn start(self, bootstrap: &str, mut between_pages: impl FnMut(&[Value], usize) + Send + 'static) -> OldRun {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let producer: FutureProducer =
            ClientConfig::new().set("bootstrap.servers", bootstrap).set("enable.idempotence", "true").create().unwrap();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let mut stats = OldStats { position: self.since.clone(), ..Default::default() };
                let auth = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, format!("{}:{}", self.user, self.password));
                while !stopping.load(Ordering::SeqCst) {
                    let t = stats.position.clone();
                    let query = encode(&format!("sys_updated_on>={t}^ORDERBYsys_updated_on"));
                    let mut offset = 0;
                    let mut newest = t.clone();
                    loop {
                        let request = Request {
                            method: Method::Get,
                            url: format!(
                                "{}/api/now/table/{}?sysparm_query={query}&sysparm_limit={}&sysparm_offset={offset}",
                                self.fake_url, self.table, self.batch
                            ),
                            headers: vec![("authorization".into(), format!("Basic {auth}")), ("accept".into(), "application/json".into())],
                            body: Vec::new(),
                            timeouts: Timeouts { connect_ms: 5_000, first_byte_ms: 30_000, body_ms: 30_000 },
                            max_response_bytes: 64 << 20,
                        };
                        let answer = snow_runtime::transport::plain::send(&request, &Default::default()).await.expect("the fake answers");
                        // The Table API answers 404 to a page past the last matching row (or no row).
                        assert!(matches!(answer.status, 200 | 404), "{}", String::from_utf8_lossy(&answer.body));
                        let body: Value = serde_json::from_slice(&answer.body).unwrap();
                        let rows = if answer.status == 404 { Vec::new() } else { body["result"].as_array().cloned().unwrap_or_default() };
                        stats.pages += 1;
                        let mut pending = Vec::new();
                        for row in &rows {
                            let id = row["sys_id"].as_str().unwrap_or_default().to_string();
                            let key = json!({"schema": {"type": "string", "optional": false}, "payload": id}).to_string();
                            let value = envelope(row).to_string();
                            pending.push(
                                producer.send_result(FutureRecord::to(&self.topic).key(&key).payload(&value)).map_err(|(e, _)| e).unwrap(),
                            );
                            if let Some(ts) = row["sys_updated_on"].as_str().filter(|ts| **ts > *newest) {
                                newest = ts.to_string();
                            }
                        }
                        for delivery in pending {
                            delivery.await.unwrap().map_err(|(e, _)| e).unwrap();
                        }
                        stats.records += rows.len() as u64;
                        let before = offset;
                        offset += rows.len();
                        if rows.len() < self.batch {
                            break;
                        }
                        between_pages(&rows, before);
                    }
                    stats.position = newest;
                    stats.polls += 1;
                    if stats.polls.is_multiple_of(self.commit_every) {
                        let key = json!([self.connector, {"table": self.table}]).to_string();
                        let value = json!({"timestamp": stats.position, "sysparm_offset": null, "schema": null}).to_string();
                        producer
                            .send(FutureRecord::to(&self.offsets_topic).key(&key).payload(&value), Duration::from_secs(30))
                            .await
                            .map_err(|(e, _)| e)
                            .unwrap();
                        stats.committed = Some(stats.position.clone());
                    }
                    let deadline = std::time::Instant::now() + self.poll;
                    while std::time::Instant::now() < deadline && !stopping.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
                stats
            })
        });
        OldRun { stop, thread }
    }
}
