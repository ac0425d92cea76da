//! The one source loop: a table's unit, its guest instance opened at a position and polled until
//! shutdown — run alike by a standalone run, a fleet worker and the Kafka Connect executor. Where
//! the positions come from and where the batches go is the front end's [`Outlet`]: Kafka with the
//! offset store ([`super::to_kafka`]), or the Connect plugin's queue (the executor).
//!
//! What every failure means lives here, once. A transient guest error is retried with backoff on
//! the same instance (its cursor did not move); a fatal one parks the unit. On a trap, or when the
//! outlet says so (Kafka failed), the instance is dropped and a new one opens at the stored
//! position (records after it are read again: at-least-once); traps in a row past
//! `component.trap.budget` park the unit. A batch is checked (well formed, only to the topics the
//! connector's configuration names) before the outlet sees it. A new component version published
//! for the connector is taken at a batch boundary, once the outlet settled what it was handed: the
//! new version opens at that position at once, and a trap in its first calls rolls the connector
//! back ([`crate::component::swap`]).

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::Store;
use wasmtime::component::ResourceAny;

use super::produce::check;
use crate::backoff::Backoff;
use crate::component::HostState;
use crate::component::bindings::source::{Source, SourcePre};
use crate::component::bindings::types::{ErrorClass, PollBatch, SnowError, SourceOffset, WorkUnit};
use crate::component::swap::VersionWatch;
use crate::component::trap::{TrapBudget, one_line};
use crate::connector::{SharedContext, class_label, describe, to_entries};
use crate::metrics::labels;
use crate::shutdown::Shutdown;
use crate::status::UnitState;

/// The table a unit runs, as its outlet sees it.
pub struct Table {
    /// The connector's shared context.
    pub ctx: SharedContext,
    /// The table's unit as planned.
    pub unit: WorkUnit,
    /// The unit's shutdown.
    pub shutdown: Shutdown,
}

impl Table {
    /// Records this unit's state on the status board.
    pub fn state(&self, state: UnitState, message: Option<&str>) {
        self.ctx.status.set(self.ctx.name(), &self.unit.name, state, message);
    }
}

/// What the loop does after the outlet took a batch, or checked on what it was handed.
pub enum Flow {
    /// Poll again.
    Next,
    /// Drop the instance; open a fresh one at the stored position after a pause.
    Reopen,
    /// Park the unit, with why.
    Park(String),
    /// Stop: shutdown came while the outlet waited.
    Stop,
}

/// How the latest poll went, for the outlet's notice and timings.
pub struct Polled {
    /// How long the poll took.
    pub took: Duration,
    /// The instance's request budget slowed it: what the status says ([`budget_notice`]).
    pub budget: Option<String>,
}

/// Where a unit's positions come from and where its batches go: a front end's half of the loop.
pub trait Outlet: Send {
    /// What became of a refused batch's records, for the message (`"produced"`).
    const HANDED: &'static str;

    /// Where the positions a fresh instance opens at are kept, for the log (`"the stored offset"`).
    const POSITIONS: &'static str;

    /// The positions a fresh instance opens at (whatever must be fenced or read back first).
    fn positions(&mut self, table: &Table) -> impl Future<Output = Result<Vec<SourceOffset>, OpenFailure>> + Send;

    /// A fresh instance is open and about to be polled.
    fn start(&mut self, table: &Table);

    /// Before each poll: what to do when something handed over earlier failed since.
    fn failed(&mut self, table: &Table) -> Option<Flow>;

    /// When the instance's latest records were handed over (`None`: none yet).
    fn last_handed(&self) -> Option<Instant>;

    /// Takes a checked batch (well formed, its records only to configured topics).
    fn deliver(&mut self, table: &Table, batch: PollBatch, polled: &Polled) -> impl Future<Output = Flow> + Send;

    /// The instance is being dropped: settles what it was handed (stores what can be stored).
    fn settle(&mut self, table: &Table) -> impl Future<Output = ()> + Send;

    /// The unit parked for good (already logged and on the status board).
    fn parked(&mut self, table: &Table, why: &str) -> impl Future<Output = ()> + Send;
}

/// Runs one unit until shutdown or it parks.
pub struct Unit<O> {
    table: Table,
    /// The component version the unit runs, following the connector's.
    version: VersionWatch<SourcePre<HostState>>,
    /// The only topics the unit may produce to: those the connector's configuration names.
    topics: Arc<BTreeSet<String>>,
    /// Push (ADR 0032): the table's registration for wake-ups, when the connector takes
    /// notifications; a wake-up ends the pause between sweeps early. Dropped with the unit.
    wake: Option<crate::push::wakes::Registration>,
    /// Where its positions come from and its batches go.
    outlet: O,
    /// A swap in progress (set at the old version's last batch, measured at the new one's first poll).
    swapping: Option<Swapping>,
    /// When the latest sweep started (after a pause): a woken sweep starts no sooner than
    /// `snow.push.min.interval.ms` after it.
    swept_at: Instant,
}

/// The component's optional `source-wake` export.
type Waker = crate::component::bindings::source_push::exports::snow::connector::source_wake::Guest;

/// An opened guest instance and its task handle.
struct Opened {
    store: Store<HostState>,
    instance: Source,
    task: ResourceAny,
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

/// A swap in progress: when the old version's last records were handed over.
struct Swapping {
    since: Instant,
    from: String,
    /// When the old version's records were all settled.
    stored: Option<Instant>,
    /// When the new version was open.
    opened: Option<Instant>,
}

impl<O: Outlet> Unit<O> {
    /// `table` running the connector's `version`, handing its batches to `outlet`.
    pub fn new(
        table: Table,
        version: VersionWatch<SourcePre<HostState>>,
        topics: Arc<BTreeSet<String>>,
        wake: Option<crate::push::wakes::Registration>,
        outlet: O,
    ) -> Self {
        Self { table, version, topics, wake, outlet, swapping: None, swept_at: Instant::now() }
    }

    /// The unit loop.
    pub async fn run(mut self) {
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
        let mut traps = TrapBudget::new(self.table.ctx.spec.trap_budget);
        let name = self.table.unit.name.clone();
        while !self.table.shutdown.is_stopping() {
            self.table.state(UnitState::Starting, None);
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
                        self.park(&why).await;
                        return;
                    }
                    self.table.state(UnitState::Retrying, Some(&message));
                    if !self.table.shutdown.sleep(backoff.next_delay()).await {
                        break;
                    }
                    continue;
                }
                Err(OpenFailure::Refused(ErrorClass::Transient, message)) => {
                    tracing::warn!(connector = %self.table.ctx.name(), unit = %name, "opening failed, retrying: {message}");
                    self.table.state(UnitState::Retrying, Some(&format!("opening failed: {message}")));
                    if !self.table.shutdown.sleep(backoff.next_delay()).await {
                        break;
                    }
                    continue;
                }
                Err(OpenFailure::Refused(_, message)) => {
                    self.park(&message).await;
                    return;
                }
            };
            match self.serve(opened, &mut backoff, &mut traps).await {
                Restart::Stop => break,
                Restart::Parked => return,
                Restart::Swap => {
                    if let Some(swap) = self.swapping.as_mut() {
                        swap.stored = Some(Instant::now());
                    }
                }
                Restart::Reopen => {
                    if !self.table.shutdown.sleep(backoff.next_delay()).await {
                        break;
                    }
                }
            }
        }
        self.table.state(UnitState::Stopped, None);
        tracing::info!(connector = %self.table.ctx.name(), unit = %name, "unit stopped");
    }

    /// After a trap (`what`): whether it rejected a version on probation, so that the unit goes
    /// on at once with the one the connector runs now.
    fn rolled_back(&mut self, what: &str) -> bool {
        let rejected = self.version.current().clone();
        let Some(now) = self.version.trapped() else { return false };
        // Going back is not a swap to measure.
        self.swapping = None;
        self.table.ctx.rolled_back(&self.table.unit.name, &rejected, &now, what);
        true
    }

    /// A fresh instance of the current version, its task open at the outlet's positions.
    async fn open(&mut self) -> Result<Opened, OpenFailure> {
        let offsets = self.outlet.positions(&self.table).await?;
        let t = &self.table;
        let mut store = t.ctx.new_store(&t.unit.name);
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
        let config = to_entries(t.unit.config.iter().map(|e| (&e.key, &e.value)));
        store.data_mut().begin_call();
        let task = instance
            .snow_connector_source_api()
            .source_task()
            .call_open(&mut store, &config, &offsets)
            .await
            .map_err(|trap| {
                tracing::error!(connector = %t.ctx.name(), unit = %t.unit.name, "the component trapped in open: {trap:#}");
                OpenFailure::Trapped(one_line(&trap))
            })?
            .map_err(|e| {
                let (class, message) = describe(&e);
                OpenFailure::Refused(class, message)
            })?;
        Ok(Opened { store, instance, task, waker })
    }

    /// Polls `opened` and hands its batches to the outlet until it must be dropped.
    async fn serve(&mut self, mut opened: Opened, backoff: &mut Backoff, traps: &mut TrapBudget) -> Restart {
        let table = self.table.unit.name.clone();
        let connector = self.table.ctx.name().to_string();
        let api = opened.instance.snow_connector_source_api();
        self.outlet.start(&self.table);
        let outcome = loop {
            if self.table.shutdown.is_stopping() {
                break Restart::Stop;
            }
            if let Some(flow) = self.outlet.failed(&self.table) {
                break self.follow(flow).await;
            }
            // A batch boundary: take a newer version once what was handed over is settled (below).
            if let Some(old) = self.take_newer() {
                let since = self.outlet.last_handed().unwrap_or_else(Instant::now);
                self.swapping = Some(Swapping { since, from: old, stored: None, opened: None });
                break Restart::Swap;
            }
            opened.store.data_mut().begin_call();
            let polled = Instant::now();
            let batch: PollBatch = match api.source_task().call_poll(&mut opened.store, opened.task).await {
                Ok(Ok(batch)) => batch,
                Ok(Err(error)) => {
                    if !self.is_retryable(&error) {
                        self.park(&describe(&error).1).await;
                        break Restart::Parked;
                    }
                    self.table.state(UnitState::Retrying, Some(&describe(&error).1));
                    if !self.table.shutdown.sleep(backoff.next_delay()).await {
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
                        self.park(&why).await;
                        break Restart::Parked;
                    }
                    tracing::info!(connector = %connector, unit = %table, "reopening at {}", O::POSITIONS);
                    self.table.state(UnitState::Retrying, Some(&message));
                    self.table.ctx.metrics.counter_add(
                        "snow_source_traps_total",
                        1,
                        &labels(&[("connector", &connector), ("table", &table)]),
                    );
                    break Restart::Reopen;
                }
            };
            let took = polled.elapsed();
            traps.succeeded();
            self.version.succeeded();
            if let Some(swap) = self.swapping.take() {
                self.swapped(&swap);
            }
            // The guest may have started the next request (read-ahead): wasmtime spawned it from
            // this worker, into a slot no other worker takes from, so let it run (and send the
            // request) now rather than when the next poll waits for its answer.
            tokio::task::yield_now().await;
            let budget = budget_notice(opened.store.data(), took);
            self.table.ctx.metrics.gauge_set(
                "snow_component_memory_bytes",
                opened.store.data().memory_bytes() as f64,
                &labels(&[("connector", &connector), ("table", &table)]),
            );
            let notice: Vec<&str> = [batch.notice.as_deref(), budget.as_deref()].into_iter().flatten().collect();
            self.table.state(UnitState::Running, (!notice.is_empty()).then(|| notice.join("; ")).as_deref());
            if let Err(why) = self.refused(&batch) {
                self.park(&why).await;
                break Restart::Parked;
            }
            let next_poll_ms = batch.next_poll_ms;
            match self.outlet.deliver(&self.table, batch, &Polled { took, budget }).await {
                Flow::Next => {}
                flow => break self.follow(flow).await,
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
        self.outlet.settle(&self.table).await;
        outcome
    }

    /// Why the unit may not hand `batch` on: broken, or its records for a topic the connector's
    /// configuration does not name.
    fn refused(&self, batch: &PollBatch) -> Result<(), String> {
        check(batch).map_err(|broken| format!("the component returned a broken batch: {broken}"))?;
        if batch.records.is_empty() || self.topics.contains(&batch.topic) {
            return Ok(());
        }
        let (ctx, table) = (&self.table.ctx, &self.table.unit.name);
        ctx.metrics.counter_add("snow_source_topic_refused_total", 1, &labels(&[("connector", ctx.name()), ("table", table)]));
        let named: Vec<&str> = self.topics.iter().map(String::as_str).collect();
        Err(format!(
            "the component asked to produce {} records to topic {:?}, which the connector's configuration does not name (it names: {}); \
             nothing of the batch was {}",
            batch.records.len(),
            batch.topic,
            if named.is_empty() { "none".to_string() } else { named.join(", ") },
            O::HANDED
        ))
    }

    /// The loop's answer to what the outlet said (parking the unit if it must).
    async fn follow(&mut self, flow: Flow) -> Restart {
        match flow {
            Flow::Next | Flow::Reopen => Restart::Reopen,
            Flow::Stop => Restart::Stop,
            Flow::Park(why) => {
                self.park(&why).await;
                Restart::Parked
            }
        }
    }

    /// The pause between sweeps, shorter when the table is woken: `None` when shutdown came, else
    /// the stamp of the wake-up that ended it (one came during the sweep: at once).
    async fn pause(&mut self, pause: Duration) -> Option<Option<snow_core::time::Timestamp>> {
        let Some(wake) = self.wake.as_ref().map(|r| r.wake().clone()) else {
            return self.table.shutdown.sleep(pause).await.then_some(None);
        };
        let mut shutdown = self.table.shutdown.clone();
        let mut woken = tokio::select! {
            woken = wake.wait(pause) => woken,
            () = shutdown.wait() => return None,
        };
        if woken.is_some() {
            // A burst is one sweep, at most one per min.interval: what comes meanwhile joins it.
            let min_interval = self.table.ctx.spec.push.as_ref().map_or(Duration::ZERO, |p| p.min_interval);
            let since = self.swept_at.elapsed();
            if since < min_interval && !self.table.shutdown.sleep(min_interval - since).await {
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
        let t = &self.table;
        tracing::warn!(connector = %t.ctx.name(), unit = %t.unit.name, "a wake-up was not taken: {problem}; the sweep starts with the usual lag");
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
        let t = &self.table;
        let labels = labels(&[("connector", t.ctx.name()), ("unit", &t.unit.name)]);
        t.ctx.metrics.counter_add("snow_component_swaps_total", 1, &labels);
        t.ctx.metrics.gauge_set("snow_component_swap_pause_seconds", pause.as_secs_f64(), &labels);
        tracing::info!(
            connector = %t.ctx.name(),
            unit = %t.unit.name,
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

    /// Counts a poll error and logs it if it is worth retrying.
    fn is_retryable(&self, error: &SnowError) -> bool {
        let (class, message) = describe(error);
        let connector = self.table.ctx.name();
        let table = self.table.unit.name.as_str();
        self.table.ctx.metrics.counter_add(
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

    /// Parks the unit: logged, on the status board, counted, and told to the outlet.
    async fn park(&mut self, message: &str) {
        let connector = self.table.ctx.name();
        let table = self.table.unit.name.as_str();
        tracing::error!(connector = %connector, unit = %table, "unit parked: {message}");
        self.table.state(UnitState::Parked, Some(message));
        self.table.ctx.metrics.gauge_set("snow_source_unit_parked", 1.0, &labels(&[("connector", connector), ("table", table)]));
        self.outlet.parked(&self.table, message).await;
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
