//! One table's unit: a guest instance opened at the stored offset, polled in a loop.
//!
//! Each poll's records are queued to the producer and handed to the unit's [`Pipeline`], which
//! stores the last record's offset once Kafka acknowledged all of them; meanwhile the next page is
//! already being read. On a trap or a Kafka failure the instance is dropped and a new one opens at
//! the stored offset (records after it are read again: at-least-once). A transient guest error is
//! retried with backoff on the same instance (its cursor did not move); a fatal one parks the unit.
//! A new component version published for the connector is taken right after the offset of
//! everything produced so far is stored: the new version opens at that offset at once, and a trap
//! in its first calls rolls the connector back ([`crate::component::swap`]).
//!
//! Longer than our 600-line mark: a unit's state machine (open at the stored position, poll, produce,
//! acknowledge, retry, reopen after a trap, hot-swap, exactly once) reads as one loop; each of its
//! parts that stands alone already lives beside it (`pipeline`, `produce`, `exactly_once`, `budget`).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::producer::FutureProducer;
use wasmtime::Store;
use wasmtime::component::ResourceAny;

use super::budget::RefusalBudget;
use super::exactly_once::table::{ExactlyOnce, Unavailable};
use super::pipeline::{Acks, Owner, Pending, Pipeline};
use super::produce::{Converted, Made, ProduceFailure, bytes, check, enqueue};
use crate::backoff::Backoff;
use crate::component::HostState;
use crate::component::bindings::source::{Source, SourcePre};
use crate::component::bindings::types::{ErrorClass, PollBatch, SnowError, SourceOffset, WorkUnit};
use crate::component::swap::VersionWatch;
use crate::component::trap::TrapBudget;
use crate::component::trap::one_line;
use crate::connector::{SharedContext, class_label, describe, to_entries};
use crate::convert::source::{RowProblem, SourceConverters};
use crate::metrics::labels;
use crate::offsets::OffsetStore;
use crate::shutdown::Shutdown;
use crate::source::exactly_once::transactions::{OffsetRecord, Records, Transactions};
use crate::status::UnitState;
use snow_data::transform::{Chain, Header, Record};
use snow_data::{Kind, Schema, Value};

/// Longest wait for outstanding acknowledgements when a unit stops or reopens.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs one unit until shutdown or a fatal error.
pub struct UnitRunner {
    pub ctx: SharedContext,
    pub version: VersionWatch<SourcePre<HostState>>,
    pub unit: WorkUnit,
    pub offsets: Arc<dyn OffsetStore>,
    pub producer: FutureProducer,
    /// The topics the connector's configuration names: the only ones this unit may produce to.
    pub topics: Arc<BTreeSet<String>>,
    pub shutdown: Shutdown,
    /// A swap in progress (set at the old version's last batch, measured at the new one's first poll).
    pub swapping: Option<Swapping>,
    /// The topics this unit has said it uses (once each, [`crate::status::StatusBoard::topic_used`]).
    pub announced: BTreeSet<String>,
    /// The user's key and value converters, with the table schema they last registered.
    pub converters: SourceConverters,
    /// The topics `topic.creation.*` has made sure of (created, or found existing).
    pub created: BTreeSet<String>,
    /// Exactly-once mode: where the table's transactions come from (`None`: at-least-once).
    pub exactly_once: Option<ExactlyOnce>,
    /// Push (ADR 0032): the table's registration for wake-ups, when the connector takes
    /// notifications; a wake-up ends the pause between sweeps early. Dropped with the unit.
    pub wake: Option<crate::push::wakes::Registration>,
    /// When the latest sweep started (after a pause): a woken sweep starts no sooner than
    /// `snow.push.min.interval.ms` after it.
    pub swept_at: Instant,
}

/// The component's optional `source-wake` export.
type Waker = crate::component::bindings::source_push::exports::snow::connector::source_wake::Guest;

/// An opened guest instance and its task handle.
struct Opened {
    store: Store<HostState>,
    instance: Source,
    task: ResourceAny,
    /// Exactly-once: the producer this instance's polls commit through.
    transactions: Option<Arc<Transactions>>,
    /// The component's `source-wake`, when it exports it.
    waker: Option<Waker>,
}

/// Why opening an instance failed.
pub enum OpenFailure {
    /// The component trapped (counted against the trap budget).
    Trapped(String),
    /// The component refused, with the class of its error.
    Refused(ErrorClass, String),
}

/// Why a record could not be made.
enum Failure {
    /// Its row (`snow.bad.row.behavior`) or the converters (stop).
    Row(RowProblem),
    /// A transform failed (`errors.tolerance`).
    Transform(String),
    /// Something that passes by itself (the broker refused to create a routed topic for now):
    /// reopen at the stored offset and try again.
    Retry(String),
}

/// Why a batch's records could not be converted.
enum Halt {
    /// Stop the table, with why.
    Park(String),
    /// Reopen at the stored offset after a pause, with why.
    Retry(String),
}

impl From<crate::convert::source::TableFailure> for Halt {
    fn from(f: crate::convert::source::TableFailure) -> Self {
        if f.retry { Halt::Retry(f.message) } else { Halt::Park(f.message) }
    }
}

/// Why the inner loop ended.
enum Restart {
    /// Open a fresh instance at the stored offset after a pause.
    Reopen,
    /// Stop this unit.
    Stop,
    /// Stop this unit and leave it parked (it said why).
    Parked,
    /// Open the connector's current version at the stored offset now (a swap or a rollback).
    Swap,
}

/// A swap in progress: when the old version's last records were handed to Kafka.
pub struct Swapping {
    since: Instant,
    from: String,
    /// When the old version's records were all acknowledged and its offset stored.
    stored: Option<Instant>,
    /// When the new version was open.
    opened: Option<Instant>,
}

impl UnitRunner {
    /// The unit loop.
    pub async fn run(mut self) {
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
        let mut traps = TrapBudget::new(self.ctx.spec.trap_budget);
        let mut refusals = RefusalBudget::new(self.ctx.spec.trap_budget);
        let name = self.unit.name.clone();
        while !self.shutdown.is_stopping() {
            self.state(UnitState::Starting, None);
            let opened = match self.open().await {
                Ok(opened) => {
                    if let Some(swap) = self.swapping.as_mut() {
                        swap.opened = Some(Instant::now());
                    }
                    opened
                }
                Err(OpenFailure::Trapped(trap)) => {
                    let message = format!("the component trapped in open: {trap}");
                    if self.rolled_back(&format!("trapped in open ({trap})")) {
                        continue;
                    }
                    if let Some(why) = traps.trapped(&message) {
                        self.park(&why);
                        return;
                    }
                    self.state(UnitState::Retrying, Some(&message));
                    if !self.shutdown.sleep(backoff.next_delay()).await {
                        break;
                    }
                    continue;
                }
                Err(OpenFailure::Refused(ErrorClass::Transient, message)) => {
                    tracing::warn!(connector = %self.ctx.name(), unit = %name, "opening failed, retrying: {message}");
                    self.state(UnitState::Retrying, Some(&format!("opening failed: {message}")));
                    if !self.shutdown.sleep(backoff.next_delay()).await {
                        break;
                    }
                    continue;
                }
                Err(OpenFailure::Refused(_, message)) => {
                    self.park(&message);
                    return;
                }
            };
            match self.poll_loop(opened, &mut backoff, &mut traps, &mut refusals).await {
                Restart::Stop => break,
                Restart::Parked => return,
                Restart::Swap => {
                    if let Some(swap) = self.swapping.as_mut() {
                        swap.stored = Some(Instant::now());
                    }
                }
                Restart::Reopen => {
                    if !self.shutdown.sleep(backoff.next_delay()).await {
                        break;
                    }
                }
            }
        }
        self.state(UnitState::Stopped, None);
        tracing::info!(connector = %self.ctx.name(), unit = %name, "unit stopped");
    }

    /// Records this unit's state on the status board.
    fn state(&self, state: UnitState, message: Option<&str>) {
        self.ctx.status.set(self.ctx.name(), &self.unit.name, state, message);
    }

    /// After a trap (`what`): whether it rejected a version on probation, so that the unit goes
    /// on at once with the one the connector runs now.
    fn rolled_back(&mut self, what: &str) -> bool {
        let rejected = self.version.current().clone();
        let Some(now) = self.version.trapped() else { return false };
        // Going back is not a swap to measure.
        self.swapping = None;
        self.ctx.rolled_back(&self.unit.name, &rejected, &now, what);
        true
    }

    async fn open(&mut self) -> Result<Opened, OpenFailure> {
        let transactions = self.fence().await?;
        let mut store = self.ctx.new_store(&self.unit.name);
        let pre = self.version.current().pre.instance_pre().clone();
        let instantiated = async {
            let raw = pre.instantiate_async(&mut store).await?;
            let instance = Source::new(&mut store, &raw)?;
            // Optional: a component built before `source-wake` has no such export.
            let indices = crate::component::bindings::source_push::exports::snow::connector::source_wake::GuestIndices::new(&pre);
            let waker = indices.ok().and_then(|i| i.load(&mut store, &raw).ok());
            Ok::<(Source, Option<Waker>), wasmtime::Error>((instance, waker))
        };
        let (instance, waker) = instantiated.await.map_err(|e| OpenFailure::Refused(ErrorClass::Fatal, format!("instantiating: {e:#}")))?;
        let mut offsets: Vec<SourceOffset> =
            self.offsets.load(self.ctx.name()).into_iter().map(|(partition, position)| SourceOffset { partition, position }).collect();
        if transactions.is_some() {
            offsets = self.rebuilt(offsets).await?;
        }
        offsets = self.snapshot_seeded(offsets).await?;
        let config = to_entries(self.unit.config.iter().map(|e| (&e.key, &e.value)));
        store.data_mut().begin_call();
        let task = instance
            .snow_connector_source_api()
            .source_task()
            .call_open(&mut store, &config, &offsets)
            .await
            .map_err(|trap| {
                tracing::error!(connector = %self.ctx.name(), unit = %self.unit.name, "the component trapped in open: {trap:#}");
                OpenFailure::Trapped(one_line(&trap))
            })?
            .map_err(|e| {
                let (class, message) = describe(&e);
                OpenFailure::Refused(class, message)
            })?;
        Ok(Opened { store, instance, task, transactions, waker })
    }

    /// The pause between sweeps, shorter when the table is woken: `None` when shutdown came, else
    /// the stamp of the wake-up that ended it (one came during the sweep: at once).
    async fn pause(&mut self, pause: Duration) -> Option<Option<snow_core::time::Timestamp>> {
        let Some(wake) = self.wake.as_ref().map(|r| r.wake().clone()) else {
            return self.shutdown.sleep(pause).await.then_some(None);
        };
        let mut shutdown = self.shutdown.clone();
        let mut woken = tokio::select! {
            woken = wake.wait(pause) => woken,
            () = shutdown.wait() => return None,
        };
        if woken.is_some() {
            // A burst is one sweep, at most one per min.interval: what comes meanwhile joins it.
            let min_interval = self.ctx.spec.push.as_ref().map_or(Duration::ZERO, |p| p.min_interval);
            let since = self.swept_at.elapsed();
            if since < min_interval && !self.shutdown.sleep(min_interval - since).await {
                return None;
            }
            woken = woken.max(wake.take());
        }
        self.swept_at = Instant::now();
        Some(woken)
    }

    /// Tells the component the table was woken at `stamp` (its next sweep may read up to it), when
    /// it exports `source-wake`; without it the sweep simply starts now, with the usual lag.
    async fn woken(&self, store: &mut Store<HostState>, task: ResourceAny, waker: Option<&Waker>, stamp: snow_core::time::Timestamp) {
        let Some(waker) = waker else { return };
        store.data_mut().begin_call();
        let outcome = waker.call_wake(&mut *store, task, &stamp.to_string()).await;
        let problem = match outcome {
            Ok(Ok(())) => return,
            Ok(Err(e)) => describe(&e).1,
            Err(trap) => one_line(&trap),
        };
        tracing::warn!(connector = %self.ctx.name(), unit = %self.unit.name, "a wake-up was not taken: {problem}; the sweep starts with the usual lag");
    }

    /// Exactly-once: the producer to commit through, earlier ones fenced. `requested` falls back
    /// to at-least-once (saying why) when the broker refuses transactions; `required` parks.
    async fn fence(&mut self) -> Result<Option<Arc<Transactions>>, OpenFailure> {
        let Some(eos) = self.exactly_once.as_mut() else { return Ok(None) };
        match eos.transactions().await {
            Ok(t) => Ok(Some(t)),
            Err(Unavailable::Transient(why)) => Err(OpenFailure::Refused(ErrorClass::Transient, format!("exactly-once: {why}"))),
            Err(Unavailable::Refused(why)) if self.ctx.spec.exactly_once == crate::config::exactly_once::ExactlyOnce::Required => Err(
                OpenFailure::Refused(ErrorClass::Fatal, format!("exactly.once.support=required, but Kafka refuses transactions: {why}")),
            ),
            Err(Unavailable::Refused(why)) => {
                let message = format!(
                    "exactly.once.support=requested, but Kafka refuses transactions ({why}): this table runs at-least-once (docs/delivery.md)"
                );
                tracing::warn!(connector = %self.ctx.name(), unit = %self.unit.name, "{message}");
                self.state(UnitState::Starting, Some(&message));
                self.exactly_once = None;
                Ok(None)
            }
        }
    }

    /// The stored offsets with this table's position carrying the versions its topic already
    /// holds over the overlap (ADR 0030).
    async fn rebuilt(&self, offsets: Vec<SourceOffset>) -> Result<Vec<SourceOffset>, OpenFailure> {
        match super::exactly_once::table::seeded(&self.ctx.spec, &self.unit, offsets).await {
            Ok((offsets, rebuilt)) => {
                if let Some(r) = rebuilt {
                    tracing::info!(
                        connector = %self.ctx.name(),
                        unit = %self.unit.name,
                        versions = r.versions,
                        records = r.records,
                        ms = r.took.as_millis() as u64,
                        "dedup window rebuilt from the topic: {} versions of {} records read back in {} ms",
                        r.versions,
                        r.records,
                        r.took.as_millis()
                    );
                }
                Ok(offsets)
            }
            Err(e) => Err(OpenFailure::Refused(ErrorClass::Transient, format!("exactly-once: rebuilding the dedup window: {e:#}"))),
        }
    }

    /// The stored offsets with what a snapshot table's topic holds (ADR 0035); unchanged for a
    /// table read along its cursor.
    async fn snapshot_seeded(&self, offsets: Vec<SourceOffset>) -> Result<Vec<SourceOffset>, OpenFailure> {
        match super::snapshot_seed::seeded(&self.ctx.spec, &self.unit, offsets).await {
            Ok((offsets, seeded)) => {
                if let Some(s) = seeded {
                    tracing::info!(
                        connector = %self.ctx.name(),
                        unit = %self.unit.name,
                        keys = s.keys,
                        records = s.records,
                        ms = s.took.as_millis() as u64,
                        "snapshot table: its topic holds {} keys ({} records read back in {} ms)",
                        s.keys,
                        s.records,
                        s.took.as_millis()
                    );
                    if s.unmarked > 0 {
                        tracing::warn!(
                            connector = %self.ctx.name(),
                            unit = %self.unit.name,
                            "{} records of the table on its topic carry no {} header (written in cursor mode, or a \
                             transform dropped it): the rows they hold are emitted again by the next snapshot, and a \
                             transform that drops the header makes every snapshot emit every row",
                            s.unmarked,
                            snow_core::source::snapshot::ID_HEADER
                        );
                    }
                }
                Ok(offsets)
            }
            Err(e) => Err(OpenFailure::Refused(ErrorClass::Transient, format!("snapshot mode: reading back the topic's keys: {e:#}"))),
        }
    }

    async fn poll_loop(
        &mut self,
        mut opened: Opened,
        backoff: &mut Backoff,
        traps: &mut TrapBudget,
        refusals: &mut RefusalBudget,
    ) -> Restart {
        let table = self.unit.name.clone();
        let connector = self.ctx.name().to_string();
        let api = opened.instance.snow_connector_source_api();
        let depth = if opened.transactions.is_some() { super::pipeline::TRANSACTION_DEPTH } else { super::pipeline::DEPTH };
        let owner = Owner {
            connector: connector.clone(),
            table: table.clone(),
            offsets: self.offsets.clone(),
            metrics: self.ctx.metrics.clone(),
            status: self.ctx.status.clone(),
        };
        let mut pipeline = Pipeline::start_with_depth(owner, depth);
        let mut last_enqueued: Option<Instant> = None;
        let outcome = loop {
            if self.shutdown.is_stopping() {
                break Restart::Stop;
            }
            if let Err(failure) = pipeline.failure() {
                break self.produce_failed(&failure, refusals);
            }
            // A batch boundary: take a newer version once what was produced is stored (below).
            if let Some(old) = self.take_newer() {
                self.swapping = Some(Swapping { since: last_enqueued.unwrap_or_else(Instant::now), from: old, stored: None, opened: None });
                break Restart::Swap;
            }
            opened.store.data_mut().begin_call();
            let polled = std::time::Instant::now();
            let batch: PollBatch = match api.source_task().call_poll(&mut opened.store, opened.task).await {
                Ok(Ok(batch)) => batch,
                Ok(Err(error)) => {
                    if !self.is_retryable(&error) {
                        self.park(&describe(&error).1);
                        break Restart::Parked;
                    }
                    self.state(UnitState::Retrying, Some(&describe(&error).1));
                    if !self.shutdown.sleep(backoff.next_delay()).await {
                        break Restart::Stop;
                    }
                    continue;
                }
                Err(trap) => {
                    tracing::error!(connector = %connector, unit = %table, "the component trapped in poll: {trap:#}");
                    let message = format!("the component trapped in poll: {}", one_line(&trap));
                    if self.rolled_back(&format!("trapped in poll ({})", one_line(&trap))) {
                        break Restart::Swap;
                    }
                    if let Some(why) = traps.trapped(&message) {
                        self.park(&why);
                        break Restart::Parked;
                    }
                    tracing::info!(connector = %connector, unit = %table, "reopening at the stored offset");
                    self.state(UnitState::Retrying, Some(&message));
                    self.ctx.metrics.counter_add("snow_source_traps_total", 1, &labels(&[("connector", &connector), ("table", &table)]));
                    break Restart::Reopen;
                }
            };
            let poll_time = polled.elapsed();
            traps.succeeded();
            self.version.succeeded();
            if let Some(swap) = self.swapping.take() {
                self.swapped(&swap);
            }
            // The guest may have started the next request (read-ahead): wasmtime spawned it from
            // this worker, into a slot no other worker takes from, so let it run (and send the
            // request) now rather than when the next poll waits for its answer.
            tokio::task::yield_now().await;
            let budget = budget_notice(opened.store.data(), poll_time);
            self.ctx.metrics.gauge_set(
                "snow_component_memory_bytes",
                opened.store.data().memory_bytes() as f64,
                &labels(&[("connector", &connector), ("table", &table)]),
            );
            let notice: Vec<&str> = [batch.notice.as_deref(), budget.as_deref()].into_iter().flatten().collect();
            self.state(UnitState::Running, (!notice.is_empty()).then(|| notice.join("; ")).as_deref());
            if let Err(broken) = check(&batch) {
                self.park(&format!("the component returned a broken batch: {broken}"));
                break Restart::Parked;
            }
            if !batch.records.is_empty() && !self.topics.contains(&batch.topic) {
                self.ctx.metrics.counter_add(
                    "snow_source_topic_refused_total",
                    1,
                    &labels(&[("connector", &connector), ("table", &table)]),
                );
                let named: Vec<&str> = self.topics.iter().map(String::as_str).collect();
                self.park(&format!(
                    "the component asked to produce {} records to topic {:?}, which the connector's configuration does not name \
                     (it names: {}); nothing of the batch was produced",
                    batch.records.len(),
                    batch.topic,
                    if named.is_empty() { "none".to_string() } else { named.join(", ") }
                ));
                break Restart::Parked;
            }
            if !batch.records.is_empty()
                && let Err(why) = self.create_topic(&batch.topic).await
            {
                tracing::warn!(connector = %self.ctx.name(), unit = %self.unit.name, "{why}; trying again");
                self.state(UnitState::Retrying, Some(&why));
                break Restart::Reopen;
            }
            if let Some(schema) = &batch.value_schema
                && let Err(failure) = self.converters.schema(&batch.topic, schema).await
            {
                if failure.retry {
                    tracing::warn!(connector = %self.ctx.name(), unit = %self.unit.name, "{}; trying again", failure.message);
                    self.state(UnitState::Retrying, Some(&failure.message));
                    break Restart::Reopen;
                }
                self.park(&failure.message);
                break Restart::Parked;
            }
            let converted = match self.convert(&batch).await {
                Ok(c) => c,
                Err(Halt::Park(why)) => {
                    self.park(&why);
                    break Restart::Parked;
                }
                Err(Halt::Retry(why)) => {
                    tracing::warn!(connector = %self.ctx.name(), unit = %self.unit.name, "{why}; trying again");
                    self.state(UnitState::Retrying, Some(&why));
                    break Restart::Reopen;
                }
            };
            let next_poll_ms = batch.next_poll_ms;
            if let Some(offset) = batch.offset.clone() {
                let enqueued = std::time::Instant::now();
                let (topic, records) = (batch.topic.clone(), batch.records.len());
                let acks = match &opened.transactions {
                    Some(t) => {
                        let (key, value) = crate::offsets::kafka::record(&connector, &offset.partition, &offset.position);
                        let job = Records { batch, converted };
                        // The queue is full while Kafka is away: a shutdown must still get through.
                        let mut shutdown = self.shutdown.clone();
                        tokio::select! {
                            answer = t.submit(Some(job), OffsetRecord { key, value: Some(value) }) => Acks::Committed(answer),
                            () = shutdown.wait() => break Restart::Stop,
                        }
                    }
                    None => match enqueue(&self.producer, &batch, converted.as_deref(), false).await {
                        Ok(d) => Acks::Deliveries(d),
                        Err(failure) => break self.produce_failed(&failure, refusals),
                    },
                };
                if !self.announced.contains(&topic) {
                    self.ctx.status.topic_used(self.ctx.name(), &self.unit.name, &topic);
                    self.announced.insert(topic);
                }
                let enqueue_time = enqueued.elapsed();
                last_enqueued = Some(Instant::now());
                let pending = Pending { acks, partition: offset.partition, position: offset.position };
                let submitted = std::time::Instant::now();
                // While Kafka is away the pipeline is full and this waits: a shutdown must still get through.
                let mut shutdown = self.shutdown.clone();
                let submitted_or_stopped = tokio::select! {
                    submitted = pipeline.submit(pending) => Some(submitted),
                    () = shutdown.wait() => None,
                };
                match submitted_or_stopped {
                    None => break Restart::Stop,
                    Some(Err(failure)) => break self.produce_failed(&failure, refusals),
                    Some(Ok(())) => {}
                }
                tracing::trace!(
                    connector = %connector,
                    unit = %table,
                    records,
                    poll_us = poll_time.as_micros() as u64,
                    enqueue_us = enqueue_time.as_micros() as u64,
                    wait_us = submitted.elapsed().as_micros() as u64,
                    "poll timings"
                );
            }
            backoff.reset();
            if next_poll_ms > 0 {
                match self.pause(Duration::from_millis(u64::from(next_poll_ms))).await {
                    None => break Restart::Stop,
                    Some(Some(stamp)) => self.woken(&mut opened.store, opened.task, opened.waker.as_ref(), stamp).await,
                    Some(None) => {}
                }
            }
        };
        // Store the offsets of everything already acknowledged; never hang on a dead broker.
        match tokio::time::timeout(SETTLE_TIMEOUT, pipeline.finish()).await {
            Ok(Ok(())) => outcome,
            Ok(Err(e)) => {
                tracing::error!(connector = %connector, unit = %table, "{e}; what follows the stored offset will be read again");
                outcome
            }
            Err(_) => {
                tracing::warn!(connector = %connector, unit = %table, "records still unacknowledged after {SETTLE_TIMEOUT:?}; they will be read again");
                outcome
            }
        }
    }

    /// The short digest of the version the unit ran, when a newer one was published since.
    fn take_newer(&mut self) -> Option<String> {
        let old = self.version.current().short().to_string();
        self.version.newer().map(|_| old)
    }

    /// The new version's first poll answered: logs the pause and counts the swap.
    fn swapped(&self, swap: &Swapping) {
        let now = Instant::now();
        let pause = now - swap.since;
        let (stored, opened) = (swap.stored.unwrap_or(swap.since), swap.opened.unwrap_or(now));
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let version = self.version.current();
        let labels = labels(&[("connector", self.ctx.name()), ("unit", &self.unit.name)]);
        self.ctx.metrics.counter_add("snow_component_swaps_total", 1, &labels);
        self.ctx.metrics.gauge_set("snow_component_swap_pause_seconds", pause.as_secs_f64(), &labels);
        tracing::info!(
            connector = %self.ctx.name(),
            unit = %self.unit.name,
            pause_us = pause.as_micros() as u64,
            "unit swapped from component version {} to {} ({}): {:.1} ms from the old version's last records to the new version's first poll \
             (acknowledged and stored {:.1} ms, opened {:.1} ms, first poll {:.1} ms)",
            swap.from,
            version.short(),
            version.path,
            ms(pause),
            ms(stored - swap.since),
            ms(opened - stored),
            ms(now - opened)
        );
    }

    /// After Kafka failed this unit's records: reopen at the stored offset, or park once the same
    /// record was refused for good `component.trap.budget` times in a row.
    /// The batch's records as the user's converters write them (`None`: no converter, the batch's
    /// bytes go out as they are). A row that does not fit its schema stops the unit, or is left
    /// out and counted under `snow.bad.row.behavior=skip`.
    /// Creates `topic` as `topic.creation.*` says, once, before its first record.
    async fn create_topic(&mut self, topic: &str) -> Result<(), String> {
        let Some(creation) = self.ctx.spec.topic_creation.clone() else { return Ok(()) };
        if self.created.contains(topic) {
            return Ok(());
        }
        let group = creation.group_of(topic);
        let outcome = super::create_topic::ensure(&self.ctx.spec.kafka, group, topic).await?;
        if outcome == super::create_topic::Outcome::Created {
            tracing::info!(
                connector = %self.ctx.name(),
                unit = %self.unit.name,
                "created topic {topic} (topic.creation group {}: {} partitions, replication factor {})",
                group.name,
                group.partitions,
                group.replication
            );
        }
        self.created.insert(topic.to_string());
        Ok(())
    }

    /// The batch's records as the user's converters and transforms make them; `None` when
    /// neither is configured (the component's bytes go out as they are).
    async fn convert(&mut self, batch: &PollBatch) -> Result<Option<Vec<Converted>>, Halt> {
        let chain = self.ctx.spec.transforms.clone();
        if (!self.converters.active() && chain.is_none()) || batch.records.is_empty() {
            return Ok(None);
        }
        if chain.is_none() {
            self.converters.key_schema(&batch.topic).await.map_err(Halt::from)?;
        }
        let skip = self.ctx.spec.guest_config.get("snow.bad.row.behavior").is_some_and(|b| b.trim() == "skip");
        let tolerate = self.ctx.spec.sink.tolerate_record_errors;
        let (connector, table) = (self.ctx.name().to_string(), self.unit.name.clone());
        let series = labels(&[("connector", &connector), ("table", &table)]);
        let mut out = Vec::with_capacity(batch.records.len());
        for r in &batch.records {
            let (key, value) = (r.key.and_then(|k| bytes(batch, k)), r.value.and_then(|v| bytes(batch, v)));
            let sys_id = key.map(String::from_utf8_lossy).unwrap_or_default().into_owned();
            let made = match &chain {
                None => self
                    .converters
                    .record(key, value)
                    .map(|(key, value, dropped)| (vec![Made { key, value, ..Made::default() }], dropped))
                    .map_err(Failure::Row),
                Some(chain) => self.transformed(chain, batch, r, key, value).await,
            };
            match made {
                Ok((made, dropped)) => {
                    for field in dropped {
                        tracing::warn!(connector = %connector, unit = %table, "field {field} of table {table} is not in its dictionary (or not a column): it is left out of typed records");
                        self.ctx.metrics.counter_add("snow_source_fields_dropped_total", 1, &series);
                    }
                    out.push(made);
                }
                Err(Failure::Row(RowProblem::Bad(why))) if skip => {
                    tracing::warn!(connector = %connector, unit = %table, "skipped row {sys_id}: {why}");
                    self.ctx.metrics.counter_add("snow_source_bad_rows_total", 1, &series);
                    out.push(Vec::new());
                }
                Err(Failure::Row(RowProblem::Bad(why))) => {
                    return Err(Halt::Park(format!(
                        "table {table}: row {sys_id} does not fit its schema: {why} (snow.bad.row.behavior=skip would skip it)"
                    )));
                }
                Err(Failure::Row(RowProblem::Stop(why))) => {
                    return Err(Halt::Park(format!("table {table}: converting row {sys_id} failed: {why}")));
                }
                Err(Failure::Row(RowProblem::Retry(why))) => return Err(Halt::Retry(format!("table {table}: row {sys_id}: {why}"))),
                Err(Failure::Retry(why)) => return Err(Halt::Retry(format!("table {table}: row {sys_id}: {why}"))),
                Err(Failure::Transform(why)) if tolerate => {
                    tracing::warn!(connector = %connector, unit = %table, "skipped row {sys_id} (errors.tolerance=all): {why}");
                    self.ctx.metrics.counter_add("snow_source_transform_failures_total", 1, &series);
                    out.push(Vec::new());
                }
                Err(Failure::Transform(why)) => {
                    return Err(Halt::Park(format!("table {table}: row {sys_id}: {why} (errors.tolerance=all would skip it)")));
                }
            }
        }
        Ok(Some(out))
    }

    /// One record through the connector's transforms (Connect's record: the sys_id as a string
    /// key, the row typed or schemaless, the batch's and the record's headers as strings), then
    /// its converters: none when a transform drops it, several when a transform component makes
    /// several. A routed topic is created as
    /// `topic.creation.*` says; the worker's offsets topic is refused as a destination.
    async fn transformed(
        &mut self,
        chain: &Chain,
        batch: &PollBatch,
        r: &crate::component::bindings::types::SourceRecord,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<(Vec<Made>, Vec<String>), Failure> {
        let (value_schema, value, dropped) = self.converters.connect_value(value).map_err(Failure::Row)?;
        let key = key.map(|k| String::from_utf8_lossy(k).into_owned());
        let text = |b: Option<&[u8]>| b.map_or(Value::Null, |b| Value::String(String::from_utf8_lossy(b).into_owned()));
        let string = || Some(Schema::new(Kind::String).optional());
        let mut headers: Vec<Header> =
            batch.headers.iter().map(|h| Header { key: h.key.clone(), schema: string(), value: text(Some(&h.value)) }).collect();
        for h in super::produce::record_headers(batch, r) {
            headers.push(Header { key: h.0, schema: string(), value: text(h.1) });
        }
        let record = Record {
            topic: batch.topic.clone(),
            partition: None,
            offset: None,
            key_schema: key.as_ref().map(|_| Schema::new(Kind::String)),
            key: key.map_or(Value::Null, Value::String),
            value_schema,
            value,
            timestamp: r.timestamp_ms,
            headers,
        };
        let outs = chain.apply(record).await.map_err(|e| Failure::Transform(e.to_string()))?;
        let mut made = Vec::with_capacity(outs.len());
        for out in outs {
            made.push(self.made(batch, out).await?);
        }
        Ok((made, dropped))
    }

    /// A transformed record as produced: its topic created (or refused), its key and value through
    /// the converters, its headers as bytes.
    async fn made(&mut self, batch: &PollBatch, out: Record) -> Result<Made, Failure> {
        let routed = (out.topic != batch.topic).then(|| out.topic.clone());
        if let Some(topic) = &routed {
            if self.ctx.spec.offsets_topic.as_ref().is_some_and(|t| &t.name == topic) {
                return Err(Failure::Row(RowProblem::Stop(format!(
                    "a transform routed the record to {topic}, the worker's offsets topic"
                ))));
            }
            self.create_topic(topic).await.map_err(Failure::Retry)?;
        }
        let (key, value) = self.converters.encode_record(&out).await.map_err(Failure::Row)?;
        let header_bytes = |v: &Value| match v {
            Value::Null => None,
            Value::String(s) => Some(s.clone().into_bytes()),
            other => Some(snow_data::snow_text::to_json(other).to_string().into_bytes()),
        };
        let headers = out.headers.iter().map(|h| (h.key.clone(), header_bytes(&h.value))).collect();
        Ok(Made { key, value, topic: routed, headers: Some(headers) })
    }

    fn produce_failed(&self, failure: &ProduceFailure, refusals: &mut RefusalBudget) -> Restart {
        let (connector, table) = (self.ctx.name(), self.unit.name.as_str());
        if let ProduceFailure::Fenced(why) = failure {
            // A fleet's slot stops its units itself; standalone, another process took the table.
            if self.shutdown.is_stopping() {
                return Restart::Stop;
            }
            self.park(&format!("table {table}: {why}"));
            return Restart::Parked;
        }
        if let ProduceFailure::Refused(refusal) = failure {
            self.ctx.metrics.counter_add("snow_source_kafka_refusals_total", 1, &labels(&[("connector", connector), ("table", table)]));
            if let Some(why) = refusals.refused(&refusal.sys_id, &format!("table {table}: {refusal}")) {
                self.park(&why);
                return Restart::Parked;
            }
        }
        tracing::error!(connector = %connector, unit = %table, "{failure}; reopening at the stored offset");
        self.state(UnitState::Retrying, Some(&failure.to_string()));
        Restart::Reopen
    }

    /// Counts a poll error and logs it if it is worth retrying.
    fn is_retryable(&self, error: &SnowError) -> bool {
        let (class, message) = describe(error);
        let connector = self.ctx.name();
        let table = self.unit.name.as_str();
        self.ctx.metrics.counter_add(
            "snow_source_poll_errors_total",
            1,
            &labels(&[("connector", connector), ("table", table), ("class", class_label(class))]),
        );
        if class == ErrorClass::Transient {
            tracing::warn!(connector = %connector, unit = %table, "poll failed, retrying: {message}");
            true
        } else {
            false
        }
    }

    fn park(&self, message: &str) {
        let connector = self.ctx.name();
        let table = self.unit.name.as_str();
        tracing::error!(connector = %connector, unit = %table, "unit parked: {message}");
        self.state(UnitState::Parked, Some(message));
        self.ctx.metrics.gauge_set("snow_source_unit_parked", 1.0, &labels(&[("connector", connector), ("table", table)]));
    }
}

/// What the status says when the instance's request budget (ADR 0034) slowed the poll that took
/// `poll_time`: how long its requests waited, or the pause a header-less 429 set.
pub fn budget_notice(state: &crate::component::state::HostState, poll_time: std::time::Duration) -> Option<String> {
    if let Some(pause) = state.instance_paused_for() {
        return Some(format!(
            "the instance answered 429 without Retry-After or X-RateLimit-Reset: every request to it waits {:.0} s more (the pause doubles \
             while 429s go on, up to an hour); nothing is lost",
            pause.as_secs_f64()
        ));
    }
    let waited = state.budget_waited_in_call();
    let workers = state.budget_workers();
    let share =
        if workers > 1 { format!(" (this worker's share: 1/{workers} of it, the fleet having {workers} workers)") } else { String::new() };
    (waited >= std::time::Duration::from_millis(100)).then(|| {
        format!(
            "slowed by the instance's request budget (snow.instance.requests.per.hour / .per.minute){share}: the last poll's requests \
             waited {:.1} s of its {:.1} s for it",
            waited.as_secs_f64(),
            poll_time.as_secs_f64()
        )
    })
}
