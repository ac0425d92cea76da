//! A Connect sink task inside the executor: each `PUT` carries the records Connect's consumer
//! handed the task (already through the user's converters and transforms, values as JSON); they
//! are written partition by partition, each partition in offset order through its own guest
//! instance (a lane, as in [`snow_runtime::sink`]), up to `snow.sink.max.in.flight` partitions at once,
//! and every record gets an outcome judged under the connector's policies ([`snow_runtime::sink::verdict`]).
//!
//! A put answers only once each record is final, held or stopped: Connect commits the consumer's
//! offsets after `put` returns, so what it commits was written. When a retryable failure holds a
//! partition, the plugin throws Connect's `RetriableException` and Connect hands the same records
//! again: a lane remembers the last offset it finished and skips those below it, so nothing is
//! written twice. A worker crash redelivers what Connect had not committed; the lane opens telling
//! the component that every record may have been written by an earlier owner (the
//! `correlation-lookup` policy then looks each create up first).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tokio::sync::{Mutex, Semaphore};

use super::frame::{Reader, Writer};
use snow_runtime::component::HostState;
use snow_runtime::component::bindings::sink::SinkPre;
use snow_runtime::component::bindings::types::{Header, SinkRecord};
use snow_runtime::component::trap::{TrapBudget, one_line};
use snow_runtime::connector::SharedContext;
use snow_runtime::sink::instance::{Instance, LaneFacts};
use snow_runtime::sink::verdict::{Final, Verdict, judge};

/// A record's outcome as the plugin reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    /// Final: written, or nothing needed writing (or finished by an earlier put).
    Done = 0,
    /// Final: it failed and the policy lets the partition go on; the plugin reports it to
    /// Connect's errant record reporter (the dead letter queue).
    Failed = 1,
    /// A retryable failure holds its partition here (this record and the partition's later ones).
    Held = 2,
    /// A failure the policy does not tolerate: the task stops.
    Stopped = 3,
}

/// One partition's lane.
struct Lane {
    instance: Option<Instance>,
    /// The last offset finished (final); records at or below it are not written again.
    done_through: Option<i64>,
    /// The last offset of a put that ended without outcomes (a trap).
    unknown_through: Option<i64>,
    traps: TrapBudget,
}

/// The open sink task.
pub struct SinkRun {
    ctx: SharedContext,
    pre: SinkPre<HostState>,
    lanes: HashMap<(String, i32), Arc<Mutex<Lane>>>,
    writers: Arc<Semaphore>,
}

impl SinkRun {
    /// A sink task of `ctx` running `pre`.
    pub fn new(ctx: SharedContext, pre: SinkPre<HostState>) -> Self {
        let writers = Arc::new(Semaphore::new(ctx.spec.sink.max_in_flight.max(1)));
        Self { ctx, pre, lanes: HashMap::new(), writers }
    }

    /// Writes a `PUT`'s records; the answer holds one status and message per record, in order.
    pub async fn put(&mut self, body: &[u8]) -> Result<Vec<u8>, String> {
        let records = read_records(body)?;
        let total = records.len();
        // Each partition's records, moved out in the order they came (offset order), with their places.
        let mut by_partition: BTreeMap<(String, i32), (Vec<usize>, Vec<SinkRecord>)> = BTreeMap::new();
        for (i, r) in records.into_iter().enumerate() {
            let (places, records) = by_partition.entry((r.topic.clone(), r.partition)).or_default();
            places.push(i);
            records.push(r);
        }
        let mut writes = tokio::task::JoinSet::new();
        for (key, (places, records)) in by_partition {
            let lane = self.lanes.entry(key.clone()).or_insert_with(|| {
                Arc::new(Mutex::new(Lane {
                    instance: None,
                    done_through: None,
                    unknown_through: None,
                    traps: TrapBudget::new(self.ctx.spec.trap_budget),
                }))
            });
            let (lane, ctx, pre, writers) = (lane.clone(), self.ctx.clone(), self.pre.clone(), self.writers.clone());
            writes.spawn(async move {
                let mut lane = lane.lock().await;
                let statuses = write_partition(&ctx, &pre, &writers, &mut lane, &key, &records).await;
                places.into_iter().zip(statuses).collect::<Vec<_>>()
            });
        }
        let mut statuses = vec![(Status::Held, String::new()); total];
        while let Some(done) = writes.join_next().await {
            for (i, status) in done.map_err(|e| format!("a partition's writer failed: {e}"))? {
                statuses[i] = status;
            }
        }
        let mut w = Writer::default();
        w.u32(statuses.len() as u32);
        for (status, message) in statuses {
            w.bytes.push(status as u8);
            w.str(&message);
        }
        Ok(w.bytes)
    }
}

/// Writes one partition's `records` (in offset order) and judges them; their statuses in order.
async fn write_partition(
    ctx: &SharedContext,
    pre: &SinkPre<HostState>,
    writers: &Semaphore,
    lane: &mut Lane,
    key: &(String, i32),
    records: &[SinkRecord],
) -> Vec<(Status, String)> {
    // What an earlier put finished (Connect hands it again after a retryable failure) is done.
    let finished = records.iter().take_while(|r| lane.done_through.is_some_and(|done| r.offset <= done)).count();
    let mut out = vec![(Status::Done, String::new()); finished];
    let unit = format!("{}-{}", key.0, key.1);
    for chunk in records[finished..].chunks(snow_runtime::sink::MAX_BATCH) {
        if lane.instance.is_none() {
            let facts = LaneFacts {
                takeover_below: Some(i64::MAX),
                unknown_through: lane.unknown_through,
                put_limit: snow_runtime::sink::rebalance_put_limit(),
            };
            match Instance::open(ctx, pre, &key.0, key.1, &facts).await {
                Ok(instance) => lane.instance = Some(instance),
                Err(e) => {
                    let why = format!("opening the lane of {unit} failed: {e:#}");
                    tracing::warn!(connector = ctx.name(), "{why}");
                    return hold_rest(out, records.len(), &why);
                }
            }
        }
        let permit = writers.acquire().await;
        let result = lane.instance.as_mut().expect("opened above").put(chunk, snow_runtime::sink::rebalance_put_limit()).await;
        drop(permit);
        let outcomes = match result {
            Ok(outcomes) => {
                lane.traps.succeeded();
                outcomes
            }
            Err(trap) => {
                lane.instance = None;
                lane.unknown_through = chunk.last().map(|r| r.offset);
                let line = one_line(&trap);
                tracing::error!(connector = ctx.name(), "the component trapped in put for {unit}: {line}");
                return match lane.traps.trapped(&line) {
                    Some(why) => stop_rest(out, records.len(), &why),
                    None => hold_rest(out, records.len(), &format!("the component trapped in put: {line}")),
                };
            }
        };
        for (record, outcome) in chunk.iter().zip(&outcomes) {
            match judge(&ctx.spec.sink, outcome) {
                Verdict::Final(Final::Failed { message, log, .. }) => {
                    if log {
                        tracing::warn!(connector = ctx.name(), "record {unit}@{} failed: {message}", record.offset);
                    }
                    out.push((Status::Failed, message));
                }
                Verdict::Final(_) => out.push((Status::Done, String::new())),
                Verdict::Hold(why) => {
                    let why = format!("a retryable failure holds {unit} at offset {}: {why}", record.offset);
                    return hold_rest(out, records.len(), &why);
                }
                Verdict::Stop(why) => return stop_rest(out, records.len(), &format!("record {unit}@{} failed: {why}", record.offset)),
            }
            lane.done_through = Some(record.offset);
        }
        if outcomes.len() < chunk.len() {
            // The put's time budget ran out: the rest is handed again.
            return hold_rest(out, records.len(), "the put's time budget ran out");
        }
    }
    out
}

fn hold_rest(mut out: Vec<(Status, String)>, total: usize, why: &str) -> Vec<(Status, String)> {
    out.resize(total, (Status::Held, why.to_string()));
    out
}

fn stop_rest(mut out: Vec<(Status, String)>, total: usize, why: &str) -> Vec<(Status, String)> {
    out.resize(total, (Status::Stopped, why.to_string()));
    out
}

/// A `PUT` body: a count, then per record its topic, partition, offset, key and value (nullable),
/// timestamp (`i64::MIN`: none) and headers (count, then name and nullable value each).
pub fn read_records(body: &[u8]) -> Result<Vec<SinkRecord>, String> {
    let mut r = Reader::new(body);
    let count = r.u32("the record count")? as usize;
    let mut records = Vec::with_capacity(count.min(100_000));
    for _ in 0..count {
        let topic = r.str("a record's topic")?.to_string();
        let partition = r.u32("a record's partition")? as i32;
        let offset = r.i64("a record's offset")?;
        let key = r.opt("a record's key")?.map(<[u8]>::to_vec);
        let value = r.opt("a record's value")?.map(<[u8]>::to_vec);
        let ts = r.i64("a record's timestamp")?;
        let n = r.u16("a record's header count")?;
        let mut headers = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let key = r.str("a header's name")?.to_string();
            let value = r.opt("a header's value")?.map(<[u8]>::to_vec).unwrap_or_default();
            headers.push(Header { key, value });
        }
        records.push(SinkRecord { topic, partition, offset, key, value, headers, timestamp_ms: (ts != i64::MIN).then_some(ts) });
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_put_body_is_read_record_by_record_and_a_cut_one_is_named() {
        let mut w = Writer::default();
        w.u32(2);
        for (offset, key, value, ts) in [(41i64, Some(&b"a1"[..]), Some(&br#"{"u_seq":"1"}"#[..]), 7i64), (42, None, None, i64::MIN)] {
            w.str("updates");
            w.u32(3);
            w.i64(offset);
            w.opt(key);
            w.opt(value);
            w.i64(ts);
            w.u16(1);
            w.str("snow.operation");
            w.opt(Some(b"patch"));
        }
        let records = read_records(&w.bytes).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!((records[0].topic.as_str(), records[0].partition, records[0].offset), ("updates", 3, 41));
        assert_eq!((records[0].key.as_deref(), records[0].timestamp_ms), (Some(&b"a1"[..]), Some(7)));
        assert_eq!((records[1].value.as_deref(), records[1].timestamp_ms), (None, None), "a tombstone without a timestamp");
        assert_eq!(records[1].headers[0].value, b"patch");
        let cut = read_records(&w.bytes[..w.bytes.len() - 3]).unwrap_err();
        assert!(cut.contains("a header's value"), "{cut}");
    }
}
