//! The Batch API write path (`snow.sink.write.mode=batch`): a `put`'s writes are packed into
//! `POST /api/now/v1/batch` requests, sent one after another.
//!
//! * **Order**: records are planned in offset order and packed in that order; a batch holds at most
//!   one item per row, and consecutive patches of one row are merged into one item (later fields
//!   win). A record naming a row already in the batch otherwise closes the batch, so a row's
//!   writes run in offset order across batches.
//! * **Item outcomes** map to records (merged records share theirs): 2xx written; 404 follows
//!   `snow.sink.not.found` (a delete of a missing row is written); 429 and other retryable statuses,
//!   and items the quota left **unserviced**, are sent again at the front of the next batch
//!   (bounded by `snow.retry.max.attempts`); a create answered 5xx is an unknown outcome resolved
//!   as the Table API path resolves it (look-up by sys_id or correlation field, or the policy).
//! * **A lost batch answer** (cut off, 5xx, unreadable) makes every item's outcome unknown:
//!   patches, puts and deletes are sent again, creates resolved as above.
//! * **Probe and fallback**: a lane's first batch-mode `put` sends a one-item batch (a one-row read
//!   of the first record's table); an instance that refuses the Batch API (400, 403, 404, 405) is
//!   written through the Table API from then on. A probe that gets no verdict (429, 5xx, no
//!   answer) holds the `put`: the host tries again.
//! * **Records written before a hold**: when a record is held (a retryable failure that outlasted
//!   its attempts), records after it may already have been written by the same batch. Their
//!   outcomes are kept, and when the host hands them again (it resends from the held record) they
//!   are answered from memory, not written twice.

use std::collections::{HashMap, VecDeque};

use super::super::batch::{self, BatchAnswer, Item, ItemAnswer};
use super::super::resolve::{Plan, Write, resolve, with_sys_id};
use super::{Prepared, SinkTask, is_not_found, name_record};
use crate::clock::Clock;
use crate::config::sink::{NotFound, UpdateMethod};
use crate::error::SnowError;
use crate::http::Transport;
use crate::http::transport::Method;
use crate::record::{Operation, Outcome, SinkRecord, SkipReason, Skipped, Written};
use crate::sink::guard::Version;
use crate::table::WriteResponse;

/// Outcomes a lane keeps for records it wrote past a hold, at most.
const MAX_REMEMBERED_OUTCOMES: usize = 10_000;

/// Whether this lane may use the Batch API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BatchState {
    /// Not probed yet (or the probe failed transiently).
    #[default]
    Unknown,
    /// The instance answered a batch.
    Usable,
    /// The instance refused the Batch API: the Table API is used.
    Refused,
}

/// The batch path's state in a lane.
#[derive(Debug)]
pub struct BatchLane {
    pub(super) state: BatchState,
    sizer: batch::BatchSizer,
    next_id: u64,
    /// Outcomes of records written past a hold, by (topic, partition, offset).
    written_ahead: HashMap<(String, i32, i64), Outcome>,
}

impl BatchLane {
    /// A lane state for batches of at most `size` items sized for `target_ms`.
    pub fn new(size: usize, target_ms: u64) -> Self {
        Self { state: BatchState::Unknown, sizer: batch::BatchSizer::new(size, target_ms), next_id: 1, written_ahead: HashMap::new() }
    }
}

/// One write waiting for a batch: the records it settles (several when patches were merged).
struct Pending {
    records: Vec<usize>,
    table: String,
    write: Write,
    version: Option<Version>,
    attempts: u32,
}

impl Pending {
    fn row(&self) -> Option<&str> {
        match &self.write {
            Write::Update { sys_id, .. } | Write::Delete { sys_id } => Some(sys_id),
            Write::Create { sys_id, .. } => sys_id.as_deref(),
        }
    }

    fn method(&self) -> Method {
        match &self.write {
            Write::Create { .. } => Method::Post,
            Write::Update { method: UpdateMethod::Patch, .. } => Method::Patch,
            Write::Update { method: UpdateMethod::Put, .. } => Method::Put,
            Write::Delete { .. } => Method::Delete,
        }
    }

    fn is_plain_patch(&self) -> bool {
        matches!(self.write, Write::Update { method: UpdateMethod::Patch, upsert: false, .. })
    }

    fn item(&self, id: u32) -> Item {
        let path = |sys_id: Option<&str>| match sys_id {
            Some(s) => format!("/api/now/table/{}/{}", self.table, s),
            None => format!("/api/now/table/{}", self.table),
        };
        let (url, body) = match &self.write {
            Write::Create { body, .. } => (path(None), body.clone()),
            Write::Update { sys_id, body, .. } => (path(Some(sys_id)), body.clone()),
            Write::Delete { sys_id } => (path(Some(sys_id)), Vec::new()),
        };
        Item { id, method: self.method(), url: format!("{url}?sysparm_exclude_reference_link=true"), body }
    }

    /// Takes `next`'s fields on top of this patch's (both plain patches of one row); unchanged
    /// when either body is not a JSON object.
    fn merge(&mut self, next: &Pending) -> Result<(), String> {
        let (Write::Update { body, .. }, Write::Update { body: later, .. }) = (&mut self.write, &next.write) else {
            return Err("only patches merge".into());
        };
        let mut fields: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        let later: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(later).map_err(|e| e.to_string())?;
        fields.extend(later);
        *body = serde_json::to_vec(&fields).map_err(|e| e.to_string())?;
        self.records.extend(next.records.iter().copied());
        if next.version.is_some() {
            self.version = next.version.clone();
        }
        Ok(())
    }
}

/// The record a partition stops at (its index in the `put`, and its coordinates), if any.
type Stop = Option<(usize, String)>;

/// What became of one item.
enum ItemResult {
    Final(Outcome),
    /// Send again (not run, or a retryable refusal).
    Again(SnowError),
}

impl<T: Transport, C: Clock> SinkTask<T, C> {
    /// Whether this `put` goes through the Batch API: probes the instance once per lane. An
    /// error is a probe that failed without a verdict (the `put` is held and tried again).
    pub(super) fn batch_usable(&mut self, records: &[SinkRecord]) -> Result<bool, SnowError> {
        if self.batch.state == BatchState::Unknown {
            let table = records.iter().find_map(|r| resolve(r, &self.config).ok().map(|p| p.table));
            let Some(table) = table else { return Ok(false) };
            let probe = Item {
                id: 0,
                method: Method::Get,
                url: format!("/api/now/table/{table}?sysparm_limit=1&sysparm_fields=sys_id"),
                body: Vec::new(),
            };
            self.batch.state = match self.client.batch(batch::encode(0, &[probe])) {
                Ok(_) => BatchState::Usable,
                Err(SnowError::Http(h)) if matches!(h.status, 400 | 403 | 404 | 405) => {
                    self.counters.batch_refused += 1;
                    BatchState::Refused
                }
                Err(e) if e.is_retryable() || e.is_ambiguous() => {
                    return Err(SnowError::transport(format!("probing the Batch API: {e}"), crate::ErrorClass::Transient));
                }
                Err(e) => return Err(e),
            };
        }
        Ok(self.batch.state == BatchState::Usable)
    }

    /// Writes `records` through the Batch API; one outcome per record, as [`SinkTask::put`] says.
    pub(super) fn put_batched(&mut self, records: &[SinkRecord]) -> Vec<Outcome> {
        let mut outcomes: Vec<Option<Outcome>> = vec![None; records.len()];
        self.forget_written_before(records);
        let mut queue: VecDeque<Pending> = VecDeque::new();
        // Where the partition stops: a failure that holds or halts it; nothing after is sent.
        let mut stop: Stop = None;
        for (i, record) in records.iter().enumerate() {
            if let Some(outcome) = self.batch.written_ahead.remove(&key(record)) {
                outcomes[i] = Some(outcome);
                continue;
            }
            let prepared = resolve(record, &self.config).and_then(|plan| self.prepare(record, plan));
            match prepared {
                Ok(Prepared::Done(outcome)) => outcomes[i] = Some(outcome),
                Ok(Prepared::Write(Plan { table, write }, version)) => {
                    let pending = Pending { records: vec![i], table, write, version, attempts: 0 };
                    // Later records of this row are checked against this version, not the row's.
                    if let (Some(v), Some(row), Some(guard)) = (&pending.version, pending.row(), self.guard.as_mut()) {
                        guard.remember(&pending.table, row, v.clone());
                    }
                    queue.push_back(pending);
                }
                Err(e) => {
                    let e = name_record(e, record);
                    let stops = e.is_retryable() || self.config.halt_on.halts(&e);
                    outcomes[i] = Some(Outcome::Failed(e));
                    if stops {
                        stop = Some((i, record.coordinates()));
                        break;
                    }
                }
            }
        }
        let (sent_stop, sent_outcomes) = self.send_all(records, queue);
        for (i, outcome) in sent_outcomes {
            outcomes[i] = Some(outcome);
        }
        let stop = match (stop, sent_stop) {
            (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
            (a, b) => a.or(b),
        };
        self.finish(records, outcomes, stop)
    }

    /// Sends `queue` in batches; returns the first record the partition stops at (if any) and
    /// every outcome settled (including writes past the stop that ran in the same batch).
    fn send_all(&mut self, records: &[SinkRecord], mut queue: VecDeque<Pending>) -> (Stop, Vec<(usize, Outcome)>) {
        let max_attempts = self.config.instance.retry.max_attempts.max(1);
        let mut settled: Vec<(usize, Outcome)> = Vec::new();
        let mut stop: Option<usize> = None;
        loop {
            // Nothing at or after the stop is sent (its version was never written: forgotten).
            let stop_at = stop.unwrap_or(usize::MAX);
            let (keep, drop): (VecDeque<Pending>, VecDeque<Pending>) = queue.into_iter().partition(|p| p.records[0] < stop_at);
            queue = keep;
            for p in drop {
                self.forget_version(&p);
            }
            if queue.is_empty() {
                break;
            }
            if self.batch.state == BatchState::Refused {
                // The instance stopped taking batches: the next one by the Table API.
                if let Some(p) = queue.pop_front() {
                    let first = p.records[0];
                    let outcome = self.perform(Plan { table: p.table.clone(), write: p.write.clone() }, super::Earlier::Nothing);
                    let outcome = outcome.unwrap_or_else(|e| Outcome::Failed(name_record(e, &records[first])));
                    self.settle(&p, outcome, &mut settled, &mut stop);
                }
                continue;
            }
            let batch = self.take_batch(&mut queue);
            let batch_id = self.batch.next_id;
            self.batch.next_id += 1;
            let items: Vec<Item> = batch.iter().enumerate().map(|(k, p)| p.item(k as u32)).collect();
            self.counters.batches += 1;
            let answer = match self.client.batch(batch::encode(batch_id, &items)) {
                Ok(response) => batch::decode(&response.body).map_err(|m| SnowError::transport(m, crate::ErrorClass::Ambiguous)),
                Err(e) => Err(e),
            };
            let answer = match answer {
                Ok(a) => a,
                Err(SnowError::Http(h)) if matches!(h.status, 400 | 403 | 404 | 405) => {
                    // Refused although the probe passed (the plugin turned off): the Table API.
                    self.counters.batch_refused += 1;
                    self.batch.state = BatchState::Refused;
                    for p in batch.into_iter().rev() {
                        queue.push_front(p);
                    }
                    continue;
                }
                // Lost, cut off or unreadable: every item's outcome is unknown.
                Err(_) => lost_answer(batch.len()),
            };
            let executed: u64 = answer.serviced.iter().map(|(_, a)| a.execution_ms).sum();
            self.batch.sizer.observe(answer.serviced.len(), executed, answer.unserviced.len());
            let mut again: Vec<Pending> = Vec::new();
            for (k, mut p) in batch.into_iter().enumerate() {
                let result = match answer.serviced.iter().find(|(id, _)| *id == k as u32) {
                    Some((_, a)) if a.status == 0 => self.unknown(&p, a, batch_id),
                    Some((_, a)) => self.item_result(&p, a, batch_id),
                    None => ItemResult::Again(SnowError::transport(
                        format!("batch {batch_id}: item {k} was not serviced"),
                        crate::ErrorClass::Transient,
                    )),
                };
                match result {
                    ItemResult::Final(outcome) => {
                        let outcome = match outcome {
                            Outcome::Failed(e) => Outcome::Failed(name_record(e, &records[p.records[0]])),
                            other => other,
                        };
                        self.settle(&p, outcome, &mut settled, &mut stop);
                    }
                    ItemResult::Again(e) => {
                        p.attempts += 1;
                        if p.attempts >= max_attempts {
                            let outcome = Outcome::Failed(name_record(e, &records[p.records[0]]));
                            self.settle(&p, outcome, &mut settled, &mut stop);
                        } else {
                            again.push(p);
                        }
                    }
                }
            }
            for p in again.into_iter().rev() {
                queue.push_front(p);
            }
        }
        (stop.map(|i| (i, records[i].coordinates())), settled)
    }

    /// Records `outcome` for every record of `p`; a failure that holds or halts the partition
    /// moves the stop to its first record.
    fn settle(&mut self, p: &Pending, outcome: Outcome, settled: &mut Vec<(usize, Outcome)>, stop: &mut Option<usize>) {
        if let Outcome::Failed(e) = &outcome {
            self.forget_version(p);
            if e.is_retryable() || self.config.halt_on.halts(e) {
                let first = p.records[0];
                *stop = Some(stop.map_or(first, |s| s.min(first)));
            }
        }
        for &r in &p.records {
            settled.push((r, outcome.clone()));
        }
    }

    /// Forgets the version `p` would have written (it never reached the row).
    fn forget_version(&mut self, p: &Pending) {
        if let (Some(_), Some(row), Some(guard)) = (&p.version, p.row(), self.guard.as_mut()) {
            guard.forget(&p.table, row);
        }
    }

    /// The next batch from the front of `queue`: in order, one item per row (consecutive plain
    /// patches of a row merged), at most the sizer's size.
    fn take_batch(&mut self, queue: &mut VecDeque<Pending>) -> Vec<Pending> {
        let size = self.batch.sizer.size();
        let mut batch: Vec<Pending> = Vec::new();
        let mut rows: HashMap<String, usize> = HashMap::new();
        while let Some(next) = queue.front() {
            let row = next.row().map(|r| format!("{}/{}", next.table, r));
            if let Some(at) = row.as_ref().and_then(|r| rows.get(r)).copied() {
                let mergeable = at + 1 == batch.len() && batch[at].is_plain_patch() && next.is_plain_patch();
                if !mergeable {
                    break;
                }
                let merged = queue.front().map(|next| batch[at].merge(next));
                match merged {
                    Some(Ok(())) => {
                        queue.pop_front();
                    }
                    // Bodies that are not objects are never merged: the next batch takes it.
                    _ => break,
                }
                continue;
            }
            if batch.len() >= size {
                break;
            }
            if let Some(p) = queue.pop_front() {
                if let Some(r) = row {
                    rows.insert(r, batch.len());
                }
                batch.push(p);
            }
        }
        batch
    }

    /// The outcome of one serviced item.
    fn item_result(&mut self, p: &Pending, answer: &ItemAnswer, batch_id: u64) -> ItemResult {
        let method = p.method();
        if (200..300).contains(&answer.status) {
            return ItemResult::Final(self.written(p, answer.status, &answer.body));
        }
        let error = batch::item_error(answer, method, &p.table, batch_id);
        if is_not_found(&error) {
            return ItemResult::Final(match &p.write {
                Write::Delete { sys_id } => {
                    Outcome::Written(Written { operation: Operation::Delete, table: p.table.clone(), sys_id: sys_id.clone(), status: 404 })
                }
                Write::Update { sys_id, body, upsert, .. } => {
                    let policy = if *upsert { NotFound::Create } else { self.config.not_found };
                    match policy {
                        NotFound::Fail => Outcome::Failed(error),
                        NotFound::Ignore => {
                            Outcome::Skipped(Skipped { table: p.table.clone(), sys_id: sys_id.clone(), reason: SkipReason::NotFound })
                        }
                        NotFound::Create => created(
                            &p.table,
                            with_sys_id(body, sys_id)
                                .map_err(SnowError::data)
                                .and_then(|body| self.create(&p.table, Some(sys_id.clone()), body)),
                        ),
                    }
                }
                Write::Create { .. } => Outcome::Failed(error),
            });
        }
        match error.class() {
            crate::ErrorClass::Transient => ItemResult::Again(error),
            crate::ErrorClass::Ambiguous => self.unknown(p, answer, batch_id),
            crate::ErrorClass::Fatal => ItemResult::Final(Outcome::Failed(error)),
        }
    }

    /// An item whose outcome is unknown (its batch's answer was lost, or a create answered 5xx):
    /// a repeatable write is sent again; a create is resolved like the Table API path resolves it.
    fn unknown(&mut self, p: &Pending, answer: &ItemAnswer, batch_id: u64) -> ItemResult {
        let error = if answer.status == 0 {
            SnowError::transport(format!("batch {batch_id}: the answer was lost"), crate::ErrorClass::Ambiguous)
        } else {
            batch::item_error(answer, p.method(), &p.table, batch_id)
        };
        let Write::Create { sys_id, body } = &p.write else { return ItemResult::Again(error) };
        let unknown = SnowError::transport(error.to_string(), crate::ErrorClass::Ambiguous);
        ItemResult::Final(created(&p.table, self.create_after(&p.table, sys_id.clone(), body.clone(), Some(unknown))))
    }

    /// A 2xx item answer as a written outcome.
    fn written(&self, p: &Pending, status: u16, body: &[u8]) -> Outcome {
        let answered =
            serde_json::from_slice::<serde_json::Value>(body).ok().and_then(|v| v["result"]["sys_id"].as_str().map(str::to_string));
        let operation = match &p.write {
            Write::Create { .. } => Operation::Create,
            Write::Update { method: UpdateMethod::Patch, .. } => Operation::Patch,
            Write::Update { method: UpdateMethod::Put, .. } => Operation::Put,
            Write::Delete { .. } => Operation::Delete,
        };
        Outcome::Written(Written {
            operation,
            table: p.table.clone(),
            sys_id: answered.or(p.row().map(str::to_string)).unwrap_or_default(),
            status,
        })
    }

    /// The outcomes of a `put`: everything up to the stop as settled; after it, "not attempted"
    /// (what was written after it anyway is kept for when the host hands those records again).
    fn finish(&mut self, records: &[SinkRecord], outcomes: Vec<Option<Outcome>>, stop: Stop) -> Vec<Outcome> {
        let stop_at = stop.as_ref().map_or(usize::MAX, |(i, _)| *i);
        let why = stop.map(|(_, at)| at).unwrap_or_default();
        outcomes
            .into_iter()
            .enumerate()
            .map(|(i, outcome)| {
                if i <= stop_at {
                    return outcome.unwrap_or_else(|| not_attempted(&records[i], &why));
                }
                if let Some(done) = outcome.filter(|o| !matches!(o, Outcome::Failed(_)))
                    && self.batch.written_ahead.len() < MAX_REMEMBERED_OUTCOMES
                {
                    self.batch.written_ahead.insert(key(&records[i]), done);
                }
                not_attempted(&records[i], &why)
            })
            .collect()
    }

    /// Drops kept outcomes the host will not ask for again: those of offsets before this `put`'s
    /// first record of their partition.
    fn forget_written_before(&mut self, records: &[SinkRecord]) {
        if self.batch.written_ahead.is_empty() {
            return;
        }
        let mut first: HashMap<(&str, i32), i64> = HashMap::new();
        for r in records {
            first.entry((r.topic.as_str(), r.partition)).or_insert(r.offset);
        }
        self.batch.written_ahead.retain(|(t, p, o), _| first.get(&(t.as_str(), *p)).is_none_or(|f| o >= f));
    }
}

/// The answer of a batch of `items` whose real answer was lost: every item unknown (status 0).
fn lost_answer(items: usize) -> BatchAnswer {
    BatchAnswer {
        serviced: (0..items as u32).map(|id| (id, ItemAnswer { status: 0, body: Vec::new(), execution_ms: 0 })).collect(),
        unserviced: Vec::new(),
    }
}

/// A create's result (the answer and the row's sys_id) as an outcome.
fn created(table: &str, result: Result<(WriteResponse, Option<String>), SnowError>) -> Outcome {
    match result {
        Ok((response, id)) => Outcome::Written(Written {
            operation: Operation::Create,
            table: table.to_string(),
            sys_id: response.sys_id.or(id).unwrap_or_default(),
            status: response.status,
        }),
        Err(e) => Outcome::Failed(e),
    }
}

fn key(record: &SinkRecord) -> (String, i32, i64) {
    (record.topic.clone(), record.partition, record.offset)
}

fn not_attempted(record: &SinkRecord, why: &str) -> Outcome {
    Outcome::Failed(SnowError::transport(
        format!("record {} not attempted: {why} stops the partition first", record.coordinates()),
        crate::ErrorClass::Transient,
    ))
}
