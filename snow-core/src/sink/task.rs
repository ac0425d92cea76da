//! One sink lane: writes the records of one partition in order and reports one outcome each.
//!
//! Each record is [resolved](super::resolve) to a table, a row and an operation, then performed
//! through the Table API. A patch, put or delete of a row that does not exist follows
//! `snow.sink.not.found` (an upsert creates it; a delete of a missing row is a success). After a
//! retryable failure the rest of the records are not attempted, so the host holds the partition
//! at the first one.

use super::resolve::{Plan, Write, resolve, with_sys_id};
use crate::clock::Clock;
use crate::config::sink::{NotFound, UpdateMethod};
use crate::config::{Entries, SinkConfig};
use crate::error::{Failure, SnowError};
use crate::http::Transport;
use crate::record::{Operation, Outcome, SinkRecord, SkipReason, Skipped, Written};
use crate::table::{TableClient, WriteResponse};

/// Writes records to ServiceNow tables.
pub struct SinkTask<T, C> {
    client: TableClient<T, C>,
    config: SinkConfig,
}

impl<T: Transport, C: Clock> SinkTask<T, C> {
    /// Opens a lane for the sink configured by `entries`; retries sleep on `clock`.
    pub fn open(entries: &Entries, transport: T, clock: C) -> Result<Self, SnowError> {
        let config = SinkConfig::parse(entries)?;
        Ok(Self { client: TableClient::new(&config.instance, transport, clock), config })
    }

    /// The `X-RateLimit-*` headers of the latest answer that carried them.
    pub fn rate_limit(&self) -> Option<&crate::http::retry::RateLimit> {
        self.client.rate_limit()
    }

    /// A label for the lane's metrics: the fixed table, or `routed` when records choose theirs.
    pub fn label(&self) -> &str {
        self.config
            .routing
            .table
            .as_deref()
            .filter(|_| self.config.routing.by_topic.is_empty() && self.config.routing.header.is_none())
            .unwrap_or("routed")
    }

    /// Writes `records` in order. After a retryable failure the rest are not attempted and get a
    /// retryable failure too, so the host holds the partition at the first one.
    pub fn put(&mut self, records: &[SinkRecord]) -> Vec<Outcome> {
        let mut held: Option<String> = None;
        records
            .iter()
            .map(|record| {
                if let Some(first) = &held {
                    return Outcome::Failed(SnowError::transport(
                        format!("record {} not attempted: {first} failed with a retryable error", record.coordinates()),
                        crate::ErrorClass::Transient,
                    ));
                }
                let outcome = match resolve(record, &self.config) {
                    Ok(plan) => self.perform(plan).unwrap_or_else(|e| Outcome::Failed(name_record(e, record))),
                    Err(e) => Outcome::Failed(e),
                };
                if outcome.is_retryable() {
                    held = Some(record.coordinates());
                }
                outcome
            })
            .collect()
    }

    fn perform(&mut self, plan: Plan) -> Result<Outcome, SnowError> {
        let Plan { table, write } = plan;
        let written = |operation: Operation, response: WriteResponse, sys_id: Option<String>| {
            Outcome::Written(Written {
                operation,
                table: table.clone(),
                sys_id: response.sys_id.or(sys_id).unwrap_or_default(),
                status: response.status,
            })
        };
        Ok(match write {
            Write::Create { sys_id, body } => written(Operation::Create, self.client.create(&table, body)?, sys_id),
            Write::Delete { sys_id } => match self.client.delete(&table, &sys_id) {
                Ok(response) => written(Operation::Delete, response, Some(sys_id)),
                // Already gone: what the delete asked for is true.
                Err(e) if is_not_found(&e) => Outcome::Written(Written { operation: Operation::Delete, table, sys_id, status: 404 }),
                Err(e) => return Err(e),
            },
            Write::Update { sys_id, method, body, upsert } => {
                let (operation, result) = match method {
                    UpdateMethod::Patch => (Operation::Patch, self.client.patch(&table, &sys_id, body.clone())),
                    UpdateMethod::Put => (Operation::Put, self.client.put(&table, &sys_id, body.clone())),
                };
                match result {
                    Ok(response) => written(operation, response, Some(sys_id)),
                    Err(e) if is_not_found(&e) => {
                        let policy = if upsert { NotFound::Create } else { self.config.not_found };
                        match policy {
                            NotFound::Fail => return Err(e),
                            NotFound::Ignore => Outcome::Skipped(Skipped { table, sys_id, reason: SkipReason::NotFound }),
                            NotFound::Create => {
                                // Created under the sys_id the record named, so it is the same row next time.
                                let body = with_sys_id(&body, &sys_id).map_err(SnowError::data)?;
                                let response = self.client.create(&table, body)?;
                                written(Operation::Create, response, Some(sys_id))
                            }
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
        })
    }
}

/// ServiceNow's answer to a write of a row that does not exist (or that the user may not see).
fn is_not_found(error: &SnowError) -> bool {
    matches!(error, SnowError::Http(h) if h.status == 404)
}

/// Prefixes the record's coordinates to an error's message.
fn name_record(error: SnowError, record: &SinkRecord) -> SnowError {
    let at = record.coordinates();
    match error {
        SnowError::Http(mut h) => {
            h.message = format!("record {at}: {}", h.message);
            SnowError::Http(h)
        }
        SnowError::Transport(f) => SnowError::Transport(Failure { message: format!("record {at}: {}", f.message), class: f.class }),
        SnowError::Data(f) => SnowError::Data(Failure { message: format!("record {at}: {}", f.message), class: f.class }),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::config::reader::entries_from_pairs;
    use crate::http::transport::{Method, Request, Response, TransportError};
    use crate::record::Header;

    /// Answers each request with the next scripted (status, body) and keeps what was sent.
    struct Script {
        answers: Vec<(u16, &'static str)>,
        sent: Vec<(Method, String, String)>,
    }

    impl Transport for &mut Script {
        fn send(&mut self, request: &Request) -> Result<Response, TransportError> {
            self.sent.push((request.method, request.url.clone(), String::from_utf8_lossy(&request.body).into_owned()));
            let (status, body) = self.answers.remove(0);
            Ok(Response { status, headers: vec![], body: body.as_bytes().to_vec() })
        }
    }

    const ID: &str = "0123456789abcdef0123456789abcdef";
    const MISSING: &str = r#"{"error":{"message":"No Record found","detail":"Record doesn't exist or ACL restricts the record retrieval"},"status":"failure"}"#;

    fn record(value: Option<&str>, operation: Option<&str>) -> SinkRecord {
        SinkRecord {
            topic: "t".into(),
            partition: 0,
            offset: 3,
            key: Some(ID.as_bytes().to_vec()),
            value: value.map(|v| v.as_bytes().to_vec()),
            headers: operation.map(|o| Header { key: "snow.operation".into(), value: o.as_bytes().to_vec() }).into_iter().collect(),
            timestamp_ms: None,
        }
    }

    fn put(not_found: &str, answers: Vec<(u16, &'static str)>, records: &[SinkRecord]) -> (Vec<Outcome>, Vec<(Method, String, String)>) {
        let entries = entries_from_pairs([
            ("snow.instance.url", "https://acme.service-now.com"),
            ("snow.sink.table", "incident"),
            ("snow.sink.not.found", not_found),
            ("snow.retry.max.attempts", "1"),
        ])
        .unwrap();
        let mut script = Script { answers, sent: vec![] };
        let outcomes = SinkTask::open(&entries, &mut script, ManualClock::default()).unwrap().put(records);
        (outcomes, script.sent)
    }

    #[test]
    fn a_missing_row_fails_is_skipped_or_is_created_under_its_sys_id() {
        let patch = record(Some(r#"{"a":"1"}"#), None);
        let (outcomes, _) = put("fail", vec![(404, MISSING)], std::slice::from_ref(&patch));
        assert!(matches!(&outcomes[0], Outcome::Failed(e) if !e.is_retryable() && e.to_string().contains("record t-0@3")), "{outcomes:?}");
        let (outcomes, _) = put("ignore", vec![(404, MISSING)], std::slice::from_ref(&patch));
        assert_eq!(outcomes[0], Outcome::Skipped(Skipped { table: "incident".into(), sys_id: ID.into(), reason: SkipReason::NotFound }));
        let created = r#"{"result":{"sys_id":"0123456789abcdef0123456789abcdef"}}"#;
        let (outcomes, sent) = put("create", vec![(404, MISSING), (201, created)], std::slice::from_ref(&patch));
        assert!(matches!(&outcomes[0], Outcome::Written(w) if w.operation == Operation::Create && w.sys_id == ID), "{outcomes:?}");
        assert_eq!(sent[1].0, Method::Post);
        assert_eq!(sent[1].2, format!(r#"{{"a":"1","sys_id":"{ID}"}}"#), "created under the sys_id the record named");
    }

    #[test]
    fn an_upsert_creates_a_missing_row_and_a_delete_of_one_succeeds() {
        let created = r#"{"result":{"sys_id":"0123456789abcdef0123456789abcdef"}}"#;
        let (outcomes, sent) = put("fail", vec![(404, MISSING), (201, created)], &[record(Some(r#"{"a":"1"}"#), Some("upsert"))]);
        assert!(matches!(&outcomes[0], Outcome::Written(w) if w.operation == Operation::Create), "{outcomes:?}");
        assert_eq!((sent[0].0, sent[1].0), (Method::Patch, Method::Post));
        let (outcomes, sent) = put("fail", vec![(404, MISSING)], &[record(None, None)]);
        assert!(matches!(&outcomes[0], Outcome::Written(w) if w.operation == Operation::Delete && w.status == 404), "{outcomes:?}");
        assert!(sent[0].1.ends_with(&format!("/api/now/table/incident/{ID}")));
    }

    #[test]
    fn after_a_retryable_failure_the_rest_is_held() {
        let records = [record(Some(r#"{"a":"1"}"#), None), record(Some(r#"{"a":"2"}"#), None)];
        let (outcomes, sent) = put("fail", vec![(503, "")], &records);
        assert!(outcomes.iter().all(Outcome::is_retryable), "{outcomes:?}");
        assert_eq!(sent.len(), 1, "the second record was not attempted");
    }
}
