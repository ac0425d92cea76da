//! One sink lane: writes the records of one partition in order and reports one outcome each.
//!
//! Each record is [resolved](super::resolve) to a table, a row and an operation, then performed
//! through the Table API. A patch, put or delete of a row that does not exist follows
//! `snow.sink.not.found` (an upsert creates it; a delete of a missing row is a success). After a
//! retryable failure the rest of the records are not attempted, so the host holds the partition
//! at the first one.
//!
//! A create whose outcome is unknown (answered 5xx, or cut off after it was sent) is resolved
//! before anything is sent again: a create that names its row (a sys_id, or one derived from the
//! natural key) looks it up by that sys_id; one that does not follows `snow.sink.unknown.outcome`
//! — fail (reported ambiguous), look the row up by the correlation field, or send again (a
//! possible duplicate, counted). Re-sends are bounded by `snow.retry.max.attempts`. A create that
//! names its row and is refused in any way (the Table API does not document how it answers an
//! insert under an existing sys_id) looks the row up before it is judged: found, it is written.
//!
//! Before it is sent, a write is checked ([`checks`]: unknown fields, the stale-write guard);
//! with `snow.sink.write.mode=batch` writes go through the Batch API ([`batched`]).
//!
//! Longer than our 600-line mark with its unit tests (the code is ~415 lines): the tests drive one
//! lane through every outcome and belong next to it.

mod batched;
mod checks;

use serde_json::Value;

use super::dictionary::Dictionary;
use super::guard::StaleGuard;
use super::resolve::{Plan, Write, resolve, with_sys_id};
use crate::clock::Clock;
use crate::config::sink::{NotFound, UnknownOutcome, UpdateMethod, WriteMode};
use crate::config::{Entries, SinkConfig};
use crate::error::{Failure, SnowError};
use crate::http::Transport;
use crate::record::{Operation, Outcome, SinkRecord, SkipReason, Skipped, Written};
use crate::table::query::{Op, Term};
use crate::table::{ListParams, TableClient, WriteResponse};
use checks::Prepared;

/// Counters of one lane.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SinkCounters {
    /// Creates whose outcome was unknown.
    pub unknown_outcomes: u64,
    /// ... found to have landed (by sys_id or correlation field): nothing sent again.
    pub found_after_unknown: u64,
    /// Creates sent again with no way to know whether the first landed (possible duplicates).
    pub resent_blind: u64,
    /// Creates that named their row, were refused, and found the row already there (a replay).
    pub found_after_refusal: u64,
    /// Creates of records an earlier owner may have written, found already there by the
    /// correlation field (not sent again).
    pub found_on_takeover: u64,
    /// Batch API requests sent.
    pub batches: u64,
    /// Times the instance refused the Batch API (the lane then uses the Table API).
    pub batch_refused: u64,
    /// Fields left out of writes because the table does not have them (`drop`).
    pub unknown_fields_dropped: u64,
    /// Fields written although the table does not have them (`report`; ServiceNow ignores them).
    pub unknown_fields_reported: u64,
}

/// Writes records to ServiceNow tables.
pub struct SinkTask<T, C> {
    client: TableClient<T, C>,
    config: SinkConfig,
    counters: SinkCounters,
    guard: Option<StaleGuard>,
    batch: batched::BatchLane,
    dictionary: Dictionary,
    /// Unknown fields already told about (`table.field`), so each is logged once.
    told: std::collections::BTreeSet<String>,
    notices: Vec<String>,
}

impl<T: Transport, C: Clock> SinkTask<T, C> {
    /// Opens a lane for the sink configured by `entries`; retries sleep on `clock`.
    pub fn open(entries: &Entries, transport: T, clock: C) -> Result<Self, SnowError> {
        let config = SinkConfig::parse(entries)?;
        let guard = config.guard.clone().map(StaleGuard::new);
        let batch = batched::BatchLane::new(config.batch_size, config.batch_target_ms);
        let dictionary = Dictionary::new(config.dictionary_ttl);
        Ok(Self {
            client: TableClient::new(&config.instance, transport, clock),
            config,
            counters: SinkCounters::default(),
            guard,
            batch,
            dictionary,
            told: Default::default(),
            notices: Vec::new(),
        })
    }

    /// What the lane has to tell the operator since the last call (an unknown field written or
    /// dropped, once per table and field).
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    /// Counters since the lane was opened.
    pub fn counters(&self) -> SinkCounters {
        self.counters
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

    /// Writes `records` in order. After a retryable failure, or a failure `snow.sink.halt.on`
    /// names, the rest are not attempted and get a retryable failure, so the host holds (or stops)
    /// the partition at the first one.
    pub fn put(&mut self, records: &[SinkRecord]) -> Vec<Outcome> {
        // Even one record's retries end with the put's budget (a rebalance waits no longer for
        // the put): a retry that would come later is not made, and the record stays retryable.
        let started = self.client.clock().now();
        self.client.set_deadline(self.config.lane.put_budget.map(|b| started.saturating_add(b)));
        let outcomes = self.put_within(records);
        self.client.set_deadline(None);
        outcomes
    }

    fn put_within(&mut self, records: &[SinkRecord]) -> Vec<Outcome> {
        // Records that may have been written before this lane opened are resolved one by one (with
        // `correlation_lookup`, a taken-over backlog goes through the Table API).
        let fresh = records.iter().all(|r| self.earlier(r) == Earlier::Nothing);
        if self.config.write_mode == WriteMode::Batch && fresh {
            match self.batch_usable(records) {
                Ok(true) => return self.put_batched(records),
                Ok(false) => {}
                Err(e) => return records.iter().map(|r| Outcome::Failed(name_record(e.clone(), r))).collect(),
            }
        }
        let mut held: Option<String> = None;
        let started = self.client.clock().now();
        let mut outcomes = Vec::with_capacity(records.len());
        for (i, record) in records.iter().enumerate() {
            // Out of time: the outcomes so far are returned, and the host hands the rest again.
            if i > 0 && self.config.lane.put_budget.is_some_and(|b| self.client.clock().now().saturating_sub(started) >= b) {
                break;
            }
            if let Some(why) = &held {
                outcomes.push(Outcome::Failed(SnowError::transport(
                    format!("record {} not attempted: {why}", record.coordinates()),
                    crate::ErrorClass::Transient,
                )));
                continue;
            }
            let outcome = match resolve(record, &self.config) {
                Ok(plan) => self.guarded(record, plan).unwrap_or_else(|e| Outcome::Failed(name_record(e, record))),
                Err(e) => Outcome::Failed(e),
            };
            match &outcome {
                Outcome::Failed(e) if e.is_retryable() => {
                    held = Some(format!("{} failed with a retryable error", record.coordinates()));
                }
                Outcome::Failed(e) if self.config.halt_on.halts(e) => {
                    held = Some(format!("{} failed and stops the partition (snow.sink.halt.on)", record.coordinates()));
                }
                _ => {}
            }
            outcomes.push(outcome);
        }
        outcomes
    }

    /// Performs `plan` under the stale-write guard, when one is configured: a write of a named row
    /// older than the version the row holds is skipped; every write carries its version.
    fn guarded(&mut self, record: &SinkRecord, plan: Plan) -> Result<Outcome, SnowError> {
        let (plan, version) = match self.prepare(record, plan)? {
            Prepared::Done(outcome) => return Ok(outcome),
            Prepared::Write(plan, version) => (plan, version),
        };
        let outcome = self.perform(plan, self.earlier(record))?;
        if let (Outcome::Written(w), Some(version), Some(guard)) = (&outcome, version, self.guard.as_mut())
            && !w.sys_id.is_empty()
        {
            guard.remember(&w.table, &w.sys_id, version);
        }
        Ok(outcome)
    }

    /// What may have happened to `record` before this lane opened ([`crate::config::sink::LaneFacts`]).
    fn earlier(&self, record: &SinkRecord) -> Earlier {
        let lane = self.config.lane;
        if lane.unknown_through.is_some_and(|through| record.offset <= through) {
            Earlier::Unknown
        } else if lane.takeover_below.is_some_and(|below| record.offset < below)
            && self.config.unknown_outcome == UnknownOutcome::CorrelationLookup
        {
            // Only a correlation look-up can tell whether an earlier owner wrote a create that
            // names no row; under the other policies such a record is written as any other.
            Earlier::MaybeWritten
        } else {
            Earlier::Nothing
        }
    }

    fn perform(&mut self, plan: Plan, earlier: Earlier) -> Result<Outcome, SnowError> {
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
            Write::Create { sys_id, body } => {
                let (response, sys_id) = match earlier {
                    Earlier::Nothing => self.create(&table, sys_id, body)?,
                    // A put that ended without outcomes may have sent it: resolved as any
                    // unknown outcome before anything is sent.
                    Earlier::Unknown => {
                        let unknown = SnowError::transport(
                            "the put that carried this create ended without outcomes (the component trapped or ran out of time)",
                            crate::ErrorClass::Ambiguous,
                        );
                        self.create_after(&table, sys_id, body, Some(unknown))?
                    }
                    // An earlier owner may have written it: with a correlation field, look first.
                    Earlier::MaybeWritten => match self.takeover_lookup(&table, sys_id.as_deref(), &body)? {
                        Some(id) => (WriteResponse { status: 200, sys_id: Some(id.clone()), body: Vec::new() }, Some(id)),
                        None => self.create(&table, sys_id, body)?,
                    },
                };
                written(Operation::Create, response, sys_id)
            }
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
                                let (response, sys_id) = self.create(&table, Some(sys_id), body)?;
                                written(Operation::Create, response, sys_id)
                            }
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
        })
    }
}

impl<T: Transport, C: Clock> SinkTask<T, C> {
    /// Creates a row of `table` (under `sys_id`, when the record named one), resolving an unknown
    /// outcome before sending again. Returns the answer and the row's sys_id.
    fn create(&mut self, table: &str, sys_id: Option<String>, body: Vec<u8>) -> Result<(WriteResponse, Option<String>), SnowError> {
        self.create_after(table, sys_id, body, None)
    }

    /// [`Self::create`], when the first attempt was already made and its outcome is `unknown`
    /// (none: nothing was sent yet).
    fn create_after(
        &mut self,
        table: &str,
        sys_id: Option<String>,
        body: Vec<u8>,
        mut unknown: Option<SnowError>,
    ) -> Result<(WriteResponse, Option<String>), SnowError> {
        let max = self.config.instance.retry.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            let error = match unknown.take() {
                Some(e) => e,
                None => match self.client.create(table, body.clone()) {
                    Ok(response) => return Ok((response, sys_id)),
                    Err(e) if e.is_ambiguous() => e,
                    // A create that names its row and is refused may be a replay of one that
                    // landed (after a crash, the same derived sys_id is sent again): how an instance
                    // refuses an insert under an existing sys_id is not documented, so any refusal
                    // is judged by looking the row up.
                    Err(e) if matches!(e, SnowError::Http(_)) && sys_id.as_deref().is_some_and(|id| !id.is_empty()) => {
                        let id = sys_id.clone().unwrap_or_default();
                        if self.exists(table, &id).unwrap_or(false) {
                            self.counters.found_after_refusal += 1;
                            return Ok((WriteResponse { status: 200, sys_id: Some(id.clone()), body: Vec::new() }, Some(id)));
                        }
                        return Err(e);
                    }
                    Err(e) => return Err(e),
                },
            };
            self.counters.unknown_outcomes += 1;
            // Did it land?
            let found = match (&sys_id, self.config.unknown_outcome) {
                (Some(id), _) => self.exists(table, id)?.then(|| id.clone()),
                (None, UnknownOutcome::CorrelationLookup) => self.correlate(table, &body, &error)?,
                (None, UnknownOutcome::Fail) => return Err(error),
                (None, UnknownOutcome::Retry) => {
                    self.counters.resent_blind += 1;
                    None
                }
            };
            if let Some(id) = found {
                self.counters.found_after_unknown += 1;
                // The status of the look-up that found it: the create's own answer never arrived.
                return Ok((WriteResponse { status: 200, sys_id: Some(id.clone()), body: Vec::new() }, Some(id)));
            }
            if attempt >= max {
                return Err(error);
            }
            attempt += 1;
        }
    }

    /// For a create an earlier owner of the partition may have sent: the row, if it is there. A
    /// create that names its row needs no look-up (a refusal is looked up, [`Self::create_after`]);
    /// one that names none is looked up by the correlation field under `correlation_lookup` (one
    /// read), and sent as it is under the other policies.
    fn takeover_lookup(&mut self, table: &str, sys_id: Option<&str>, body: &[u8]) -> Result<Option<String>, SnowError> {
        if sys_id.is_some() || self.config.unknown_outcome != UnknownOutcome::CorrelationLookup {
            return Ok(None);
        }
        let none = SnowError::data("no correlation value");
        match self.correlate(table, body, &none) {
            Ok(Some(id)) => {
                self.counters.found_on_takeover += 1;
                Ok(Some(id))
            }
            Ok(None) => Ok(None),
            // No value to look the row up by: nothing to find it with, so it is sent.
            Err(e) if !e.is_retryable() && e.to_string().contains("no correlation value") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// True when row `sys_id` of `table` exists (readable by the integration user).
    fn exists(&mut self, table: &str, sys_id: &str) -> Result<bool, SnowError> {
        match self.client.get(table, sys_id) {
            Ok(_) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The row of `table` whose correlation field holds the value `body` gives it, if one exists.
    /// A record without that field, or with a value the encoded query cannot carry, keeps the
    /// unknown outcome (`unknown`, reported ambiguous).
    fn correlate(&mut self, table: &str, body: &[u8], unknown: &SnowError) -> Result<Option<String>, SnowError> {
        let field = self.config.correlation_field.clone().unwrap_or_default();
        let fields: serde_json::Map<String, Value> = serde_json::from_slice(body).unwrap_or_default();
        let Some(value) = fields.get(&field).and_then(Value::as_str).filter(|v| !v.is_empty()) else {
            return Err(with_reason(unknown.clone(), &format!("no {field} value to look the row up by (snow.sink.correlation.field)")));
        };
        let term = Term::new(&field, Op::Eq, value).map_err(|e| with_reason(unknown.clone(), &e))?;
        let query = term.as_str().to_string();
        let keys = ["sys_id".to_string()];
        let params = ListParams::lookup(&query, &keys, 1);
        let page = self.client.list(table, &params)?;
        let found: Value = serde_json::from_slice(&page.body).unwrap_or(Value::Null);
        Ok(found["result"].get(0).and_then(|row| row["sys_id"].as_str()).map(str::to_string))
    }
}

/// What may have happened to a record before this lane opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Earlier {
    /// Nothing: it is new to this partition's writers.
    Nothing,
    /// An earlier owner of the partition may have written it.
    MaybeWritten,
    /// A put of this lane's that ended without outcomes carried it.
    Unknown,
}

/// `error` with `reason` added to its message.
fn with_reason(error: SnowError, reason: &str) -> SnowError {
    match error {
        SnowError::Http(mut h) => {
            h.message = format!("{}; {reason}", h.message);
            SnowError::Http(h)
        }
        SnowError::Transport(f) => SnowError::Transport(Failure { message: format!("{}; {reason}", f.message), class: f.class }),
        other => other,
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

    /// A record keyed by `ID`, with an operation header when given.
    fn record(value: Option<&str>, operation: Option<&str>) -> SinkRecord {
        let headers: Vec<(&str, &str)> = operation.map(|o| ("snow.operation", o)).into_iter().collect();
        crate::sink::value::tests::record(Some(ID), value, &headers)
    }

    type Sent = Vec<(Method, String, String)>;

    fn put(not_found: &str, answers: Vec<(u16, &'static str)>, records: &[SinkRecord]) -> (Vec<Outcome>, Sent) {
        let (outcomes, sent, _) = put_with(&[("snow.sink.not.found", not_found)], answers, records);
        (outcomes, sent)
    }

    fn put_with(extra: &[(&str, &str)], answers: Vec<(u16, &'static str)>, records: &[SinkRecord]) -> (Vec<Outcome>, Sent, SinkCounters) {
        let mut pairs =
            vec![("snow.instance.url", "https://acme.service-now.com"), ("snow.sink.table", "incident"), ("snow.retry.max.attempts", "3")];
        pairs.extend_from_slice(extra);
        let entries = entries_from_pairs(pairs).unwrap();
        let mut script = Script { answers, sent: vec![] };
        let mut task = SinkTask::open(&entries, &mut script, ManualClock::default()).unwrap();
        let outcomes = task.put(records);
        let counters = task.counters();
        drop(task);
        (outcomes, script.sent, counters)
    }

    fn create_record(key: Option<&str>, value: &str) -> SinkRecord {
        crate::sink::value::tests::record(key, Some(value), &[])
    }

    const CREATED: &str = r#"{"result":{"sys_id":"fedcba9876543210fedcba9876543210"}}"#;

    #[test]
    fn one_records_retries_end_with_the_puts_budget() {
        // Answered 503 every time: without a budget it is tried 3 times (with backoff between);
        // with a put budget the backoff alone (0.5 s doubling) soon passes it: the put returns the
        // retryable failure instead of waiting past what a rebalance waits for.
        let patch = record(Some(r#"{"a":"1"}"#), None);
        let busy = vec![(503, ""), (503, ""), (503, "")];
        let (outcomes, sent, _) = put_with(&[("snow.retry.backoff.initial.ms", "60000")], busy.clone(), std::slice::from_ref(&patch));
        assert!(matches!(&outcomes[0], Outcome::Failed(e) if e.is_retryable()) && sent.len() == 3, "{outcomes:?}");
        let limited =
            [("snow.retry.backoff.initial.ms", "60000"), ("snow.retry.backoff.max.ms", "60000"), ("snow.sink.put.budget.ms", "100")];
        let (outcomes, sent, _) = put_with(&limited, busy, std::slice::from_ref(&patch));
        assert!(matches!(&outcomes[0], Outcome::Failed(e) if e.is_retryable()), "{outcomes:?}");
        assert!(sent.len() < 3, "retries that would wait past the put's budget are not made ({} sent)", sent.len());
    }

    #[test]
    fn an_unknown_create_outcome_follows_the_policy() {
        let new = create_record(None, r#"{"u_ref":"R-1","a":"1"}"#);
        let (outcomes, sent, _) = put_with(&[], vec![(502, "")], std::slice::from_ref(&new));
        assert!(matches!(&outcomes[0], Outcome::Failed(e) if e.is_ambiguous()), "fail: reported ambiguous: {outcomes:?}");
        assert_eq!(sent.len(), 1, "nothing sent again");
        let (outcomes, sent, counters) =
            put_with(&[("snow.sink.unknown.outcome", "retry")], vec![(502, ""), (201, CREATED)], std::slice::from_ref(&new));
        assert!(matches!(&outcomes[0], Outcome::Written(w) if w.operation == Operation::Create));
        assert_eq!((sent.len(), counters.resent_blind), (2, 1), "retry: sent again, a possible duplicate counted");
        let lookup = [("snow.sink.unknown.outcome", "correlation_lookup"), ("snow.sink.correlation.field", "u_ref")];
        let found = r#"{"result":[{"sys_id":"0123456789abcdef0123456789abcdef"}]}"#;
        let (outcomes, sent, counters) = put_with(&lookup, vec![(502, ""), (200, found)], std::slice::from_ref(&new));
        assert!(matches!(&outcomes[0], Outcome::Written(w) if w.sys_id == ID), "found by the correlation field: {outcomes:?}");
        assert_eq!((sent.len(), sent[1].0, counters.found_after_unknown), (2, Method::Get, 1));
        assert!(sent[1].1.contains("sysparm_query=u_ref%3DR-1"), "{}", sent[1].1);
        let (outcomes, sent, _) = put_with(&lookup, vec![(502, ""), (200, r#"{"result":[]}"#), (201, CREATED)], std::slice::from_ref(&new));
        assert!(matches!(&outcomes[0], Outcome::Written(_)));
        assert_eq!(sent.iter().map(|s| s.0).collect::<Vec<_>>(), [Method::Post, Method::Get, Method::Post], "not found: sent again");
        let no_ref = create_record(None, r#"{"a":"1"}"#);
        let (outcomes, _, _) = put_with(&lookup, vec![(502, "")], &[no_ref]);
        assert!(matches!(&outcomes[0], Outcome::Failed(e) if e.is_ambiguous() && e.to_string().contains("no u_ref value")), "{outcomes:?}");
    }

    #[test]
    fn a_create_that_names_its_row_is_looked_up_by_it() {
        let named = record(Some(r#"{"a":"1"}"#), Some("create"));
        let (outcomes, sent, counters) =
            put_with(&[], vec![(502, ""), (200, r#"{"result":{"sys_id":"0123456789abcdef0123456789abcdef"}}"#)], &[named]);
        assert!(matches!(&outcomes[0], Outcome::Written(w) if w.sys_id == ID && w.operation == Operation::Create), "{outcomes:?}");
        assert_eq!((sent.len(), sent[1].0, counters.found_after_unknown), (2, Method::Get, 1), "looked up, not sent again");
    }

    #[test]
    fn a_refused_create_that_names_its_row_is_written_if_the_row_is_there() {
        let named = record(Some(r#"{"a":"1"}"#), Some("create"));
        let row = r#"{"result":{"sys_id":"0123456789abcdef0123456789abcdef"}}"#;
        for refusal in [403, 409, 400, 500] {
            let (outcomes, sent, counters) = put_with(&[], vec![(refusal, ""), (200, row)], std::slice::from_ref(&named));
            assert!(
                matches!(&outcomes[0], Outcome::Written(w) if w.sys_id == ID && w.operation == Operation::Create),
                "{refusal}: {outcomes:?}"
            );
            assert_eq!((sent.len(), sent[1].0), (2, Method::Get), "{refusal}: looked up, not sent again");
            assert_eq!(counters.found_after_refusal + counters.found_after_unknown, 1, "{refusal}");
        }
        let (outcomes, sent, _) = put_with(&[], vec![(403, ""), (404, MISSING)], std::slice::from_ref(&named));
        assert!(
            matches!(&outcomes[0], Outcome::Failed(SnowError::Http(h)) if h.status == 403),
            "not there: the refusal stands: {outcomes:?}"
        );
        assert_eq!(sent.len(), 2);
    }

    #[test]
    fn creates_an_earlier_owner_or_a_trapped_put_may_have_sent_are_resolved_before_sending() {
        let new = create_record(None, r#"{"u_ref":"R-1","a":"1"}"#);
        let found = r#"{"result":[{"sys_id":"0123456789abcdef0123456789abcdef"}]}"#;
        let lookup = [("snow.sink.unknown.outcome", "correlation_lookup"), ("snow.sink.correlation.field", "u_ref")];
        // Taken over: looked up by the correlation field first; found, nothing is sent.
        let taken_over = [lookup[0], lookup[1], ("snow.sink.takeover.below", "1000")];
        let (outcomes, sent, counters) = put_with(&taken_over, vec![(200, found)], std::slice::from_ref(&new));
        assert!(matches!(&outcomes[0], Outcome::Written(w) if w.sys_id == ID), "{outcomes:?}");
        assert_eq!((sent.len(), sent[0].0, counters.found_on_takeover), (1, Method::Get, 1), "one read, no create");
        let (_, sent, _) = put_with(&taken_over, vec![(200, r#"{"result":[]}"#), (201, CREATED)], std::slice::from_ref(&new));
        assert_eq!(sent.iter().map(|s| s.0).collect::<Vec<_>>(), [Method::Get, Method::Post], "not there: created");
        // Past the takeover point: sent at once.
        let (_, sent, _) =
            put_with(&[lookup[0], lookup[1], ("snow.sink.takeover.below", "1")], vec![(201, CREATED)], std::slice::from_ref(&new));
        assert_eq!(sent.iter().map(|s| s.0).collect::<Vec<_>>(), [Method::Post]);
        // In a put that trapped: the outcome is unknown; under `fail` it is reported ambiguous and
        // never sent blind.
        let (outcomes, sent, _) = put_with(&[("snow.sink.unknown.through", "1000")], vec![], std::slice::from_ref(&new));
        assert!(matches!(&outcomes[0], Outcome::Failed(e) if e.is_ambiguous()), "{outcomes:?}");
        assert!(sent.is_empty(), "nothing sent");
        let (outcomes, sent, _) =
            put_with(&[lookup[0], lookup[1], ("snow.sink.unknown.through", "1000")], vec![(200, found)], std::slice::from_ref(&new));
        assert!(matches!(&outcomes[0], Outcome::Written(_)) && sent.len() == 1, "{outcomes:?}");
    }

    #[test]
    fn a_missing_row_fails_is_skipped_or_is_created_under_its_sys_id() {
        let patch = record(Some(r#"{"a":"1"}"#), None);
        let (outcomes, _) = put("fail", vec![(404, MISSING)], std::slice::from_ref(&patch));
        assert!(matches!(&outcomes[0], Outcome::Failed(e) if !e.is_retryable() && e.to_string().contains("record t-0@7")), "{outcomes:?}");
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
        let (outcomes, sent) = put("fail", vec![(503, ""); 3], &records);
        assert!(outcomes.iter().all(Outcome::is_retryable), "{outcomes:?}");
        assert_eq!(sent.len(), 3, "the first record's attempts (snow.retry.max.attempts=3)");
        assert!(sent.iter().all(|(_, _, body)| body == r#"{"a":"1"}"#), "the second record was not attempted");
    }

    #[test]
    fn a_failure_halt_on_names_stops_the_rest_of_the_batch() {
        let records = [record(Some("{not json"), None), record(Some(r#"{"a":"2"}"#), None)];
        let ok = r#"{"result":{"sys_id":"0123456789abcdef0123456789abcdef"}}"#;
        let (outcomes, sent, _) = put_with(&[("snow.sink.halt.on", "record")], vec![(200, ok)], &records);
        assert!(matches!(&outcomes[0], Outcome::Failed(e) if e.is_record_error() && !e.is_retryable()), "{outcomes:?}");
        assert!(outcomes[1].is_retryable() && sent.is_empty(), "the second record was not attempted: {outcomes:?}");
        let (outcomes, sent, _) = put_with(&[("snow.sink.halt.on", "api")], vec![(200, ok)], &records);
        assert!(matches!(&outcomes[1], Outcome::Written(_)) && sent.len() == 1, "only API failures halt: {outcomes:?}");
    }

    #[test]
    fn the_guard_skips_writes_older_than_the_row_and_remembers_what_it_wrote() {
        let records = [
            record(Some(r#"{"v":5,"a":"old"}"#), None),
            record(Some(r#"{"v":9,"a":"new"}"#), None),
            record(Some(r#"{"v":8,"a":"late"}"#), None),
        ];
        let row = r#"{"result":{"u_version":"7"}}"#;
        let patched = r#"{"result":{"sys_id":"0123456789abcdef0123456789abcdef"}}"#;
        let extra = [("snow.sink.version.field", "v"), ("snow.sink.version.row.field", "u_version")];
        let (outcomes, sent, _) = put_with(&extra, vec![(200, row), (200, patched)], &records);
        let stale = |o: &Outcome| matches!(o, Outcome::Skipped(s) if s.reason == SkipReason::Stale);
        assert!(stale(&outcomes[0]), "5 < 7 held by the row: {outcomes:?}");
        assert!(matches!(&outcomes[1], Outcome::Written(w) if w.operation == Operation::Patch), "{outcomes:?}");
        assert!(stale(&outcomes[2]), "8 < 9 written by this lane, known without asking: {outcomes:?}");
        assert_eq!(sent.len(), 2, "one read of the row, one write: {sent:?}");
        assert!(sent[0].1.contains("sysparm_fields=u_version"), "{}", sent[0].1);
        assert_eq!(sent[1].2, r#"{"a":"new","u_version":"9","v":9}"#, "the write carries its version");
    }

    /// A Batch API answer: (status, body) per serviced item, and the unserviced ids.
    fn batch_answer(items: &[(u32, u16, &str)], unserviced: &[u32]) -> &'static str {
        use base64::Engine;
        let serviced: Vec<serde_json::Value> = items
            .iter()
            .map(|(id, status, body)| {
                serde_json::json!({"id": id.to_string(), "status_code": status, "execution_time": 20,
                    "body": base64::engine::general_purpose::STANDARD.encode(body)})
            })
            .collect();
        let unserviced: Vec<String> = unserviced.iter().map(u32::to_string).collect();
        let text = serde_json::json!({"batch_request_id":"1","serviced_requests":serviced,"unserviced_requests":unserviced}).to_string();
        Box::leak(text.into_boxed_str())
    }

    fn keyed(id: &str, value: &str, offset: i64) -> SinkRecord {
        let mut r = crate::sink::value::tests::record(Some(id), Some(value), &[]);
        r.offset = offset;
        r
    }

    #[test]
    fn batches_merge_consecutive_patches_of_a_row_and_resend_what_was_not_serviced() {
        const OTHER: &str = "fedcba9876543210fedcba9876543210";
        let records = [keyed(ID, r#"{"a":"1"}"#, 10), keyed(ID, r#"{"b":"2"}"#, 11), keyed(OTHER, r#"{"c":"3"}"#, 12)];
        let ok = r#"{"result":{"sys_id":"x"}}"#;
        let answers = vec![
            (200, batch_answer(&[(0, 200, "{}")], &[])), // the probe
            (200, batch_answer(&[(0, 200, ok)], &[1])),  // the merged patch; OTHER's left unserviced
            (200, batch_answer(&[(0, 200, ok)], &[])),   // OTHER again
        ];
        let (outcomes, sent, counters) = put_with(&[("snow.sink.write.mode", "batch")], answers, &records);
        assert!(outcomes.iter().all(|o| matches!(o, Outcome::Written(w) if w.operation == Operation::Patch)), "{outcomes:?}");
        assert_eq!(sent.len(), 3);
        assert!(sent.iter().all(|(m, url, _)| *m == Method::Post && url.ends_with("/api/now/v1/batch")));
        let batch: serde_json::Value = serde_json::from_str(&sent[1].2).unwrap();
        let items = batch["rest_requests"].as_array().unwrap();
        assert_eq!(items.len(), 2, "two patches of one row merged into one item: {batch}");
        use base64::Engine;
        let merged = base64::engine::general_purpose::STANDARD.decode(items[0]["body"].as_str().unwrap()).unwrap();
        assert_eq!(merged, br#"{"a":"1","b":"2"}"#);
        let again: serde_json::Value = serde_json::from_str(&sent[2].2).unwrap();
        assert!(again["rest_requests"][0]["url"].as_str().unwrap().contains(OTHER), "the unserviced item was sent again");
        assert_eq!(counters.batches, 2);
    }

    #[test]
    fn a_refused_batch_api_falls_back_to_the_table_api() {
        let refused = r#"{"error":{"message":"Requested URI does not represent any resource"},"status":"failure"}"#;
        let records = [keyed(ID, r#"{"a":"1"}"#, 1)];
        let (outcomes, sent, counters) =
            put_with(&[("snow.sink.write.mode", "batch")], vec![(400, refused), (200, r#"{"result":{"sys_id":"x"}}"#)], &records);
        assert!(matches!(&outcomes[0], Outcome::Written(_)), "{outcomes:?}");
        assert_eq!((sent[1].0, counters.batch_refused), (Method::Patch, 1), "the write went by the Table API");
    }

    #[test]
    fn a_lost_batch_answer_resends_patches_and_resolves_creates_by_policy() {
        let records = [keyed(ID, r#"{"a":"1"}"#, 1), crate::sink::value::tests::record(None, Some(r#"{"n":"new"}"#), &[])];
        let ok = r#"{"result":{"sys_id":"x"}}"#;
        let answers = vec![
            (200, batch_answer(&[(0, 200, "{}")], &[])),
            (500, "upstream cut"),                     // lost: both unknown
            (200, batch_answer(&[(0, 200, ok)], &[])), // the patch, sent again
        ];
        let (outcomes, sent, counters) = put_with(&[("snow.sink.write.mode", "batch")], answers, &records);
        assert!(matches!(&outcomes[0], Outcome::Written(_)), "{outcomes:?}");
        assert!(matches!(&outcomes[1], Outcome::Failed(e) if e.is_ambiguous()), "fail: the create is reported ambiguous: {outcomes:?}");
        assert_eq!((sent.len(), counters.unknown_outcomes), (3, 1));
    }

    #[test]
    fn unknown_fields_fail_or_are_dropped_against_the_tables_dictionary_and_its_parents() {
        let records = [record(Some(r#"{"short_description":"x","u_typo":"y"}"#), None)];
        let answers = || {
            vec![
                (200, r#"{"result":[{"super_class":"p1"}]}"#),            // incident extends ...
                (200, r#"{"result":[{"name":"task"}]}"#),                 // ... task,
                (200, r#"{"result":[{"super_class":""}]}"#),              // which extends nothing
                (200, r#"{"result":[{"element":"caller_id"}]}"#),         // incident's own fields
                (200, r#"{"result":[{"element":"short_description"}]}"#), // task's
                (200, r#"{"result":{"sys_id":"0123456789abcdef0123456789abcdef"}}"#),
            ]
        };
        let (outcomes, sent, _) = put_with(&[("snow.sink.unknown.fields", "fail")], answers(), &records);
        assert!(
            matches!(&outcomes[0], Outcome::Failed(e) if e.is_record_error() && e.to_string().contains("table incident has no field u_typo")),
            "{outcomes:?}"
        );
        assert!(sent[3].1.contains("sys_dictionary") && sent[4].1.contains("task"), "{sent:?}");
        let (outcomes, sent, counters) = put_with(&[("snow.sink.unknown.fields", "drop")], answers(), &records);
        assert!(matches!(&outcomes[0], Outcome::Written(_)), "{outcomes:?}");
        assert_eq!((sent[5].2.as_str(), counters.unknown_fields_dropped), (r#"{"short_description":"x"}"#, 1));
    }
}
