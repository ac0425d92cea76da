//! One partition lane: a task that writes one partition's records in offset order through its own
//! guest instance (so its own ServiceNow sessions), at most `snow.sink.max.in.flight` lanes writing
//! at once. A lane takes what its queue holds (up to [`MAX_BATCH`]) into one `put`, judges each
//! outcome ([`super::verdict`]), reports the final ones ([`super::report`]) and only then stores
//! the partition's offset past them. A retryable failure holds this partition only; a failure the
//! policy does not tolerate, or a component that keeps trapping (`component.trap.budget`), parks it.
//! A new component version published for the connector is taken right after a put's outcomes are
//! committed: the next put opens it, and a trap in its first calls rolls the connector back
//! ([`crate::component::swap`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rdkafka::consumer::{Consumer, StreamConsumer};
use tokio::sync::{Semaphore, mpsc};

use super::instance::{Instance, LaneFacts};
use super::rebalance::{LaneControl, SinkContext};
use super::report::Reporter;
use super::verdict::{Final, Stage, Verdict, judge};
use crate::backoff::Backoff;
use crate::component::HostState;
use crate::component::bindings::sink::SinkPre;
use crate::component::bindings::types::{ErrorClass, Failure, Outcome, SinkRecord, SnowError};
use crate::component::swap::{VersionWatch, Versions};
use crate::component::trap::{TrapBudget, one_line};
use crate::connector::SharedContext;
use crate::convert::sink::{SinkConverters, Unreadable};
use crate::metrics::labels;
use crate::shutdown::Shutdown;
use crate::status::UnitState;

/// Most records handed to one `put`. A put's outcomes are reported and committed together, so this
/// bounds how far a lane writes ahead of its committed offset (and what a crash writes again):
/// 200 writes are 10 s against an instance at 50 ms a write, two batches of 100 on the Batch API.
pub const MAX_BATCH: usize = 200;

/// What every lane of a connector shares.
pub struct LaneShared {
    /// The connector.
    pub ctx: SharedContext,
    /// The sink component's current version, pre-instantiated.
    pub versions: Arc<Versions<SinkPre<HostState>>>,
    /// The consumer whose offsets the lanes store.
    pub consumer: Arc<StreamConsumer<SinkContext>>,
    /// One permit per lane writing (`snow.sink.max.in.flight`).
    pub writers: Arc<Semaphore>,
    /// Reports and dead letters, when configured.
    pub reporter: Option<Reporter>,
    /// The converters that read typed records before a put, when the connector has any.
    pub converters: Option<Arc<SinkConverters>>,
}

/// A lane as the consumer loop sees it.
pub struct LaneIo {
    /// Records for the lane, in offset order.
    pub queue: mpsc::UnboundedSender<SinkRecord>,
    /// Records handed to the lane and not yet taken into a `put` (counted before they are sent).
    pub buffered: Arc<AtomicUsize>,
}

/// One lane's task state.
pub struct Lane {
    shared: Arc<LaneShared>,
    topic: String,
    partition: i32,
    unit: String,
    queue: mpsc::UnboundedReceiver<SinkRecord>,
    buffered: Arc<AtomicUsize>,
    stop: Shutdown,
    instance: Option<Instance>,
    /// The component version this lane runs.
    version: VersionWatch<SinkPre<HostState>>,
    /// A swap in progress: when the old version's last outcomes were committed, and its digest.
    swapping: Option<(Instant, String)>,
    traps: TrapBudget,
    backoff: Backoff,
    /// What a revocation uses to stop this lane between puts.
    control: Arc<LaneControl>,
    /// After a trap, records are put one at a time up to this offset (the last of the put that
    /// trapped), so the records before the one the component traps on still get their outcomes.
    singly_until: Option<i64>,
    /// The partition's end when this lane took it over (an earlier owner may have written below).
    takeover_below: Option<i64>,
}

impl Lane {
    /// A lane for `topic`-`partition` that ends when `stop` fires (shutdown, or the partition was
    /// revoked) or its queue closes; and the consumer loop's end of it.
    pub fn new(shared: Arc<LaneShared>, topic: &str, partition: i32, stop: Shutdown) -> (Self, LaneIo) {
        let (tx, rx) = mpsc::unbounded_channel();
        let buffered = Arc::new(AtomicUsize::new(0));
        let traps = TrapBudget::new(shared.ctx.spec.trap_budget);
        let control = Arc::new(LaneControl::default());
        shared.consumer.context().register(topic, partition, control.clone());
        let version = shared.versions.watch();
        let lane = Self {
            shared,
            version,
            swapping: None,
            topic: topic.to_string(),
            partition,
            unit: format!("{topic}-{partition}"),
            queue: rx,
            buffered: buffered.clone(),
            stop,
            instance: None,
            traps,
            backoff: Backoff::new(Duration::from_millis(500), Duration::from_secs(30)),
            singly_until: None,
            takeover_below: None,
            control,
        };
        (lane, LaneIo { queue: tx, buffered })
    }

    fn state(&self, state: UnitState, message: Option<&str>) {
        self.shared.ctx.status.set(self.shared.ctx.name(), &self.unit, state, message);
    }

    /// Writes until stopped.
    pub async fn run(mut self) {
        // Assigned and ready: its instance opens with the first records, knowing where the
        // partition ended when this lane took it over.
        self.takeover_below = self.partition_end().await;
        self.shared.ctx.status.topic_used(self.shared.ctx.name(), &self.unit, &self.topic);
        self.state(UnitState::Running, None);
        let mut pending: Vec<SinkRecord> = Vec::new();
        loop {
            if pending.is_empty() {
                let first = tokio::select! {
                    biased;
                    _ = self.stop.wait() => None,
                    r = self.queue.recv() => r,
                };
                match first {
                    Some(r) => {
                        pending.push(r);
                        self.buffered.fetch_sub(1, Ordering::Relaxed);
                    }
                    None => break,
                }
            }
            while pending.len() < MAX_BATCH {
                match self.queue.try_recv() {
                    Ok(r) => {
                        pending.push(r);
                        self.buffered.fetch_sub(1, Ordering::Relaxed);
                    }
                    Err(_) => break,
                }
            }
            let batch = match self.singly_until {
                Some(until) if pending[0].offset <= until => 1,
                _ => pending.len(),
            };
            let Some(step) = self.write(&pending[..batch]).await else { break };
            pending.drain(..step.done);
            match step.then {
                Then::GoOn => {
                    self.backoff.reset();
                    self.state(UnitState::Running, None);
                    // A batch boundary: the outcomes are committed; the next put opens a newer version.
                    let old = self.version.current().short().to_string();
                    if self.version.newer().is_some() {
                        self.instance = None;
                        self.swapping = Some((Instant::now(), old));
                    }
                }
                Then::Retry(why) => {
                    self.state(UnitState::Retrying, Some(&why));
                    if !self.stop.sleep(self.backoff.next_delay()).await {
                        break;
                    }
                }
                Then::Park(why) => {
                    tracing::error!(connector = self.shared.ctx.name(), "lane {} parked: {why}", self.unit);
                    self.state(UnitState::Parked, Some(&why));
                    // Nothing more is written or committed here until the connector restarts; the
                    // consumer loop pauses the partition once its queue fills.
                    self.stop.wait().await;
                    return;
                }
            }
        }
        let why = self.control.is_revoked().then_some("revoked by a rebalance: the partition is written by its new owner");
        self.state(UnitState::Stopped, why);
    }

    /// The partition's end offset now (what an earlier owner could have fetched); on failure,
    /// every offset counts as possibly written (a look-up too many costs a read, a duplicate more).
    async fn partition_end(&mut self) -> Option<i64> {
        let (consumer, topic, partition) = (self.shared.consumer.clone(), self.topic.clone(), self.partition);
        let end = tokio::task::spawn_blocking(move || consumer.fetch_watermarks(&topic, partition, Duration::from_secs(10))).await;
        match end {
            Ok(Ok((_, high))) => Some(high),
            Ok(Err(e)) => {
                tracing::warn!(connector = self.shared.ctx.name(), "lane {}: reading the partition's end: {e}", self.unit);
                Some(i64::MAX)
            }
            Err(_) => Some(i64::MAX),
        }
    }

    /// One `put` of `records` and what follows from it; none when stopped before writing.
    async fn write(&mut self, records: &[SinkRecord]) -> Option<Step> {
        // A stopped lane starts no put, even when a permit is free at once (select! alone would
        // pick between two ready branches at random: a deleted sink then went on writing for
        // another put budget or two).
        let permit = tokio::select! {
            biased;
            _ = self.stop.wait() => return None,
            p = self.shared.writers.clone().acquire_owned() => p.ok()?,
        };
        // From here to the offset stored, a revocation waits for this put.
        let _busy = self.control.enter()?;
        if self.instance.is_none() {
            self.state(UnitState::Starting, None);
            let facts = LaneFacts {
                takeover_below: self.takeover_below,
                unknown_through: self.singly_until,
                put_limit: super::rebalance_put_limit(),
            };
            match Instance::open(&self.shared.ctx, &self.version.current().pre, &self.topic, self.partition, &facts).await {
                Ok(instance) => self.instance = Some(instance),
                Err(e) if self.rolled_back(&format!("failed to open ({e:#})")) => {
                    return Some(Step { done: 0, then: Then::GoOn });
                }
                Err(e) => {
                    tracing::error!(connector = self.shared.ctx.name(), "opening the lane of {} failed, retrying: {e:#}", self.unit);
                    return Some(Step { done: 0, then: Then::Retry(format!("opening the lane failed: {e:#}")) });
                }
            }
        }
        if let Some((since, from)) = self.swapping.take() {
            self.swapped(since, &from);
        }
        // Typed records are read for the component first; a record that cannot be read is judged
        // alone, as a record error, when its turn comes (the records before it are put first).
        let (records, readable) = match readable(self.shared.converters.clone(), records).await {
            Readable::All(readable) => (records, readable),
            Readable::Before(n, readable) => (&records[..n], readable),
            Readable::Unreadable(Unreadable::Record { message, stage, class }) => {
                drop(permit);
                let outcome = Outcome::Failed(SnowError::Data(Failure { message, class: ErrorClass::Fatal }));
                return self.judged(&records[..1], &[outcome], Stage::Converter { stage, class }).await;
            }
            Readable::Filtered => {
                drop(permit);
                // Dropped by a transform (Filter): final, reported as skipped, committed past.
                let filtered = Final::Skipped { table: String::new(), sys_id: String::new(), reason: "filtered" };
                return match self.settle(&[(&records[0], filtered)]).await {
                    Settled::Done => Some(Step { done: 1, then: Then::GoOn }),
                    Settled::Stopped => None,
                    Settled::Parked(why) => Some(Step { done: 0, then: Then::Park(why) }),
                };
            }
            Readable::Unreadable(Unreadable::Retry(why)) => return Some(Step { done: 0, then: Then::Retry(why) }),
            Readable::Unreadable(Unreadable::Stop(why)) => return Some(Step { done: 0, then: Then::Park(why) }),
        };
        let instance = self.instance.as_mut()?;
        tracing::debug!(
            connector = self.shared.ctx.name(),
            "lane {}: put of {} record(s), offsets {}..={}",
            self.unit,
            records.len(),
            records.first().map_or(-1, |r| r.offset),
            records.last().map_or(-1, |r| r.offset)
        );
        let result = instance.put(readable.as_deref().unwrap_or(records), super::rebalance_put_limit()).await;
        drop(permit);
        let outcomes = match result {
            Ok(outcomes) => {
                self.traps.succeeded();
                self.version.succeeded();
                outcomes
            }
            Err(trap) => {
                tracing::error!(
                    connector = self.shared.ctx.name(),
                    "the component trapped in put for {}, reopening the lane: {trap:#}",
                    self.unit
                );
                self.instance = None;
                // Whichever version goes on, the records of the put that trapped may have been
                // written: they are put one at a time, as records whose outcome is unknown (a
                // create looked up before it is sent again, ADR 0015) — after a rollback too.
                if let Some(last) = records.last() {
                    self.singly_until = Some(self.singly_until.map_or(last.offset, |u| u.max(last.offset)));
                }
                if self.rolled_back(&format!("trapped in put ({})", one_line(&trap))) {
                    return Some(Step { done: 0, then: Then::GoOn });
                }
                let line = one_line(&trap);
                return Some(Step {
                    done: 0,
                    then: match self.traps.trapped(&line) {
                        Some(why) => Then::Park(why),
                        None => Then::Retry(format!("the component trapped in put: {line}")),
                    },
                });
            }
        };
        self.judged(records, &outcomes, Stage::Put).await
    }

    /// Judges the `outcomes` of `records` (in order; fewer when a put stopped early) at `stage`,
    /// settles the final ones and says what follows.
    async fn judged(&mut self, records: &[SinkRecord], outcomes: &[Outcome], stage: Stage) -> Option<Step> {
        let mut finals: Vec<(&SinkRecord, Final)> = Vec::new();
        let mut then = Then::GoOn;
        for (record, outcome) in records.iter().zip(outcomes) {
            match judge(&self.shared.ctx.spec.sink, outcome) {
                Verdict::Final(Final::Failed { kind, class, status, message, log, dead_letter, .. }) => {
                    finals.push((record, Final::Failed { kind, class, status, message, log, dead_letter, stage: stage.clone() }));
                }
                Verdict::Final(f) => finals.push((record, f)),
                Verdict::Hold(why) => {
                    tracing::warn!(connector = self.shared.ctx.name(), "holding {} at offset {}: {why}", self.unit, record.offset);
                    then = Then::Retry(format!("a retryable failure holds the partition at offset {}: {why}", record.offset));
                    break;
                }
                Verdict::Stop(why) => {
                    then = Then::Park(format!("record {}@{} failed: {why}", self.unit, record.offset));
                    break;
                }
            }
        }
        if matches!(then, Then::GoOn) && outcomes.is_empty() && !records.is_empty() {
            let why = format!("the component returned no outcome for {} records; holding them", records.len());
            tracing::error!(connector = self.shared.ctx.name(), "{why}");
            then = Then::Retry(why);
        } else if matches!(then, Then::GoOn) && outcomes.len() < records.len() {
            // The put ran out of its time budget: the rest is handed again at once.
            tracing::debug!(
                connector = self.shared.ctx.name(),
                "lane {}: the put stopped after {} of {} records (its time budget); the rest follows",
                self.unit,
                outcomes.len(),
                records.len()
            );
        }
        let done = finals.len();
        if done > 0 {
            match self.settle(&finals).await {
                Settled::Done => {}
                Settled::Stopped => return None,
                Settled::Parked(why) => return Some(Step { done: 0, then: Then::Park(why) }),
            }
        }
        tracing::debug!(
            connector = self.shared.ctx.name(),
            "lane {}: {done} of {} outcome(s) final and committed",
            self.unit,
            records.len()
        );
        Some(Step { done, then })
    }

    /// Reports `finals` (waiting for Kafka as long as it takes), counts and logs them, and stores
    /// the offset past them. Stopped before the reports were acknowledged, or parked because Kafka
    /// refuses one for good (`reporter.refused.behavior`), nothing is stored: the records are
    /// written again by whoever consumes the partition next.
    async fn settle(&mut self, finals: &[(&SinkRecord, Final)]) -> Settled {
        if let Some(reporter) = &self.shared.reporter {
            let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
            loop {
                match reporter.send(finals).await {
                    Ok(()) => break,
                    Err(e) if e.chain().any(|c| c.is::<super::report::Refused>()) => {
                        return Settled::Parked(format!("{e:#}"));
                    }
                    Err(e) => {
                        let why = format!("waiting for Kafka to take the reports: {e:#}");
                        tracing::warn!(connector = self.shared.ctx.name(), "lane {}: {why}", self.unit);
                        self.state(UnitState::Waiting, Some(&why));
                        if !self.stop.sleep(backoff.next_delay()).await {
                            return Settled::Stopped;
                        }
                    }
                }
            }
        }
        for (record, outcome) in finals {
            self.account(record, outcome);
        }
        if let Some((last, _)) = finals.last()
            && let Err(e) = self.shared.consumer.store_offset(&self.topic, self.partition, last.offset)
        {
            // The partition was revoked meanwhile: its next owner writes these records again.
            tracing::warn!(connector = self.shared.ctx.name(), "storing the offset of {}@{}: {e}", self.unit, last.offset);
        }
        Settled::Done
    }

    /// After a failure of the current version (`what`): whether it rejected a version on
    /// probation, so that the lane goes on at once with the one the connector runs now.
    fn rolled_back(&mut self, what: &str) -> bool {
        let rejected = self.version.current().clone();
        let Some(now) = self.version.trapped() else { return false };
        self.instance = None;
        // Going back is not a swap to measure.
        self.swapping = None;
        self.shared.ctx.rolled_back(&self.unit, &rejected, &now, what);
        true
    }

    /// The new version is open and starts its first put: logs the pause and counts the swap.
    fn swapped(&self, since: Instant, from: &str) {
        let pause = since.elapsed();
        let version = self.version.current();
        let connector = self.shared.ctx.name();
        let series = labels(&[("connector", connector), ("unit", &self.unit)]);
        self.shared.ctx.metrics.counter_add("snow_component_swaps_total", 1, &series);
        self.shared.ctx.metrics.gauge_set("snow_component_swap_pause_seconds", pause.as_secs_f64(), &series);
        tracing::info!(
            connector,
            unit = %self.unit,
            pause_us = pause.as_micros() as u64,
            "unit swapped from component version {from} to {} ({}): {:.1} ms from the old version's last committed outcomes to the new version's first put",
            version.short(),
            version.path,
            pause.as_secs_f64() * 1e3
        );
    }

    /// Counts one final outcome and logs it as the policy says.
    fn account(&self, record: &SinkRecord, outcome: &Final) {
        let connector = self.shared.ctx.name();
        let at = format!("{}-{}@{}", record.topic, record.partition, record.offset);
        let series = match outcome {
            Final::Written { operation, .. } => vec![("outcome", "written"), ("operation", *operation)],
            Final::Skipped { table, sys_id, reason } => {
                tracing::info!(connector, "record {at} skipped ({reason}): row {sys_id} of table {table}");
                vec![("outcome", "skipped"), ("reason", *reason)]
            }
            Final::Failed { kind, class, message, log, dead_letter, .. } => {
                if *log {
                    let dlq = if *dead_letter { "; sent to the dead letter queue" } else { "" };
                    tracing::error!(connector, "record {at} failed ({kind} error, {class}): {message}{dlq}");
                }
                vec![("outcome", "failed"), ("class", *class)]
            }
        };
        let mut all = vec![("connector", connector)];
        all.extend(series);
        self.shared.ctx.metrics.counter_add("snow_sink_records_total", 1, &labels(&all));
    }
}

/// `records` as the component reads them, after the connector's converters and transforms:
/// `None` when there are none (the records go as they are).
async fn readable(converters: Option<Arc<SinkConverters>>, records: &[SinkRecord]) -> Readable {
    let Some(converters) = converters else { return Readable::All(None) };
    let mut out = Vec::with_capacity(records.len());
    for record in records {
        match converters.record(record).await {
            Ok(Some(r)) => out.push(r),
            Ok(None) if out.is_empty() => return Readable::Filtered,
            Err(problem) if out.is_empty() => return Readable::Unreadable(problem),
            Ok(None) | Err(_) => return Readable::Before(out.len(), Some(out)),
        }
    }
    Readable::All(Some(out))
}

/// What the converters made of a put's records.
enum Readable {
    /// Every record (converted, or `None`: as they are).
    All(Option<Vec<SinkRecord>>),
    /// The first `n` records; the next one cannot be read or was dropped (it is judged alone
    /// next: a sink whose transforms drop many records writes in smaller puts).
    Before(usize, Option<Vec<SinkRecord>>),
    /// The first record cannot be read.
    Unreadable(Unreadable),
    /// A transform dropped the first record.
    Filtered,
}

/// How settling a put's outcomes ended.
enum Settled {
    /// Reported and stored.
    Done,
    /// Stopped first.
    Stopped,
    /// Kafka refuses a report for good: the lane stops here, with why.
    Parked(String),
}

/// What a `put` settled and what the lane does next.
struct Step {
    /// Leading records with a final outcome (reported, counted, committed past).
    done: usize,
    then: Then,
}

enum Then {
    /// Everything given was final.
    GoOn,
    /// Try the rest again after a pause.
    Retry(String),
    /// Stop writing this partition until the connector restarts.
    Park(String),
}
