//! A worker of a fleet (`snow-connect worker --config worker.properties`, ADR 0023): every worker
//! of one `group.id` shares the connectors of the configuration topic ([`configs`]), keeps source
//! offsets in the offsets topic ([`snow_runtime::offsets::kafka`]) and publishes status to the status
//! topic ([`status_log`]). Kafka's group coordinator shares the work: the worker holds the work
//! slots it is assigned ([`slots`]) and runs the source units that hash to them, each slot fenced
//! by its transactional writer before a unit of it starts ([`fence`]); every worker runs each
//! sink's consumer, whose lanes the sink's own consumer group shares. The REST API
//! ([`crate::rest`]) on every worker reads and writes those topics, so it acts on the fleet.
//!
//! The worker's loop owns what runs here and reconciles it with what the topics say whenever they
//! change, a slot moves, or a second passes; a revocation stops the revoked slots' units (their
//! offsets stored, their status published) before the slots are handed on.

pub mod components;
pub mod config;
pub mod configs;
pub mod connectors;
pub mod fence;
pub mod push;
pub mod slots;
pub mod status_log;
pub mod view;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};

pub use config::WorkerConfig;
use configs::{ConfigLog, ConnectorRecord, TargetState};
use connectors::{Live, Managed, RunningUnit, fleet_spec};
pub use connectors::{SINK_CLASS, SOURCE_CLASS};
use fence::SlotWriter;
use slots::{Membership, SlotEvent, slot_of};
use snow_runtime::component::Loaded;
use snow_runtime::component::swap::Versions;
use snow_runtime::config::shown;
use snow_runtime::offsets::KafkaOffsetStore;
use snow_runtime::runner::{Plan, Ready, Runner};
use snow_runtime::shutdown::{Shutdown, linked};
use snow_runtime::state::StateTopic;
use snow_runtime::status::UnitState;
use status_log::StatusLog;

/// What the worker shares with its REST API.
pub struct Fleet {
    /// The worker's settings.
    pub config: WorkerConfig,
    /// Engine, gates, metrics and the local status board.
    pub runner: Arc<Runner>,
    /// The configuration topic.
    pub configs: ConfigLog,
    /// The status topic.
    pub status: StatusLog,
    /// The offsets topic.
    pub offsets: KafkaOffsetStore,
    /// The components topic.
    pub components: components::ComponentStore,
    /// Where resolved `component.ref`s are written.
    pub resolved: std::path::PathBuf,
    /// Fetches `component.ref=oci://…` components (the worker's `component.registry.*`), into
    /// `resolved/oci`.
    pub oci: snow_oci::Resolver,
    /// The Kafka cluster's id (`GET /`).
    pub cluster_id: Option<String>,
    /// Push notifications' wake topic, doors and rates.
    pub push: push::FleetPush,
    /// The push endpoint on the REST listener (set once the fleet is shared).
    pub push_endpoint: std::sync::OnceLock<snow_runtime::push::endpoint::Endpoint>,
}

/// A slot held here, once fenced.
struct Held {
    writer: Arc<SlotWriter>,
    /// Fires when the writer finds itself fenced.
    fenced: Shutdown,
}

/// The worker loop's state.
struct WorkerLoop {
    fleet: Arc<Fleet>,
    shutdown: Shutdown,
    held: HashMap<i32, Held>,
    /// Assigned and not yet fenced (fencing failed; retried every pass).
    pending: BTreeSet<i32>,
    managed: BTreeMap<String, Managed>,
    components: HashMap<String, Loaded>,
    /// The fleet-wide log levels applied here.
    loggers: BTreeMap<String, String>,
}

/// Opens the state topics, joins the fleet, serves the REST API and runs until `shutdown`.
pub async fn run(config: WorkerConfig, compile_cache: Option<&Path>, shutdown: Shutdown) -> Result<()> {
    for (key, value) in &config.security {
        if snow_runtime::kafka::security::is_secret_key(key) {
            snow_runtime::redact::register(value);
        }
    }
    let clients = config.clients();
    snow_runtime::kafka::preflight::wait_until_answered(&clients.bootstrap, &clients.common, &shutdown).await?;
    let Some(state) = open_state(&config, &shutdown).await? else { return Ok(()) };
    let State { configs, status, offsets, components: component_topic, push: push_topic } = state;
    let cluster_id = {
        let topic = configs.clone();
        tokio::task::spawn_blocking(move || topic.cluster_id()).await.ok().flatten()
    };
    // Components resolved from the fleet's topic: beside the compile cache, or in a new private
    // directory (never a predictable path others could prepare).
    let resolved = match compile_cache {
        Some(dir) => dir.join("resolved"),
        None => snow_runtime::files::private_temp_dir("snow-connect-components")?,
    };
    let runner = Arc::new(Runner::new(compile_cache)?);
    runner.set_worker(&config.worker_id);
    let oci = snow_oci::Resolver::new(snow_oci::Settings::read(&config.registries, resolved.join("oci"), &mut Vec::new()));
    let fleet = Arc::new(Fleet {
        oci,
        configs: ConfigLog::new(configs),
        status: StatusLog::new(status, &config.worker_id, config.session_timeout),
        offsets: KafkaOffsetStore::new(offsets),
        components: components::ComponentStore::new(component_topic),
        resolved,
        cluster_id,
        runner: runner.clone(),
        config,
        push: push::FleetPush::new(push_topic),
        push_endpoint: std::sync::OnceLock::new(),
    });
    let reception = Arc::new(push::FleetReception(Arc::downgrade(&fleet)));
    let _ = fleet.push_endpoint.set(snow_runtime::push::endpoint::Endpoint::new(reception, runner.metrics().clone()));
    fleet.push.follow(runner.wakes().clone(), shutdown.clone());
    tracing::info!(
        group = fleet.config.group,
        worker = fleet.config.worker_id,
        "worker started: {} connector(s) in {}",
        fleet.configs.connectors().len(),
        fleet.config.configs.name
    );
    if let Err(e) = fleet.status.beat().await {
        tracing::warn!("publishing this worker's beat: {e:#}");
    }
    {
        let (status, mut stop) = (fleet.status.clone(), shutdown.clone());
        tokio::spawn(async move {
            let mut every = tokio::time::interval(status_log::BEAT);
            loop {
                tokio::select! {
                    _ = every.tick() => {}
                    () = stop.wait() => break,
                }
                if let Err(e) = status.beat().await {
                    tracing::warn!("publishing this worker's beat: {e:#}");
                }
            }
        });
    }
    let (events, board) = tokio::sync::mpsc::unbounded_channel();
    runner.status().listen(events);
    let targets = fleet.configs.clone();
    tokio::spawn(fleet.status.clone().publish(board, move |connector| match targets.connector(connector).map(|c| c.target) {
        Some(TargetState::Paused) => Some("PAUSED"),
        Some(TargetState::Stopped) => Some("STOPPED"),
        _ => None,
    }));
    if let Some(addr) = &fleet.config.status_listen {
        let admin = snow_runtime::admin::Admin { status: runner.status().clone(), metrics: runner.metrics().clone() };
        let bound = snow_runtime::admin::serve(addr, admin, shutdown.clone()).await?;
        tracing::info!("status endpoint on http://{bound}/status and http://{bound}/metrics");
    }
    let bound = crate::rest::serve(fleet.clone(), &fleet.config.listener(), shutdown.clone()).await?;
    tracing::info!("REST API on {}://{bound}/connectors", if fleet.config.tls.is_some() { "https" } else { "http" });
    let (membership, mut slot_events) = Membership::join(&fleet.config)?;
    let mut worker = WorkerLoop {
        fleet: fleet.clone(),
        shutdown: shutdown.clone(),
        held: HashMap::new(),
        pending: BTreeSet::new(),
        managed: BTreeMap::new(),
        components: HashMap::new(),
        loggers: BTreeMap::new(),
    };
    let mut changes = fleet.configs.changes();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut stop = shutdown.clone();
    loop {
        tokio::select! {
            () = stop.wait() => break,
            event = slot_events.recv() => match event {
                Some(SlotEvent::Assigned(slots)) => worker.assigned(slots).await,
                Some(SlotEvent::Members(n)) => worker.fleet.runner.fleet_workers(n),
                Some(SlotEvent::Revoked { slots, lost, done }) => {
                    worker.revoked(&slots, lost).await;
                    let _ = done.send(());
                }
                None => break,
            },
            _ = changes.changed() => {}
            _ = tick.tick() => {}
        }
        worker.reconcile().await;
    }
    tracing::info!("worker stopping: stopping its units, then leaving the group");
    runner.stop_waiting();
    worker.stop_all().await;
    runner.status().flush().await;
    if let Err(e) = fleet.status.leave().await {
        tracing::warn!("publishing this worker's departure: {e:#}");
    }
    drop(slot_events);
    drop(membership);
    Ok(())
}

/// The fleet's state topics, open and read to their end.
struct State {
    configs: Arc<StateTopic>,
    status: Arc<StateTopic>,
    offsets: Arc<StateTopic>,
    components: Arc<StateTopic>,
    push: Arc<StateTopic>,
}

/// Opens the state topics (creating the missing ones, and the slots topic) and reads them to their
/// end. What passes by itself — a leader moving or being elected right after a topic was created,
/// a coordinator loading, a broker out of reach — is waited out with a growing pause (logged, up to
/// 10 s) for as long as it lasts; only a refusal (a denied principal, a topic that is not
/// compacted) stops the start. `None` when `shutdown` fired first.
async fn open_state(config: &WorkerConfig, shutdown: &Shutdown) -> Result<Option<State>> {
    let clients = config.clients();
    let mut pause = Duration::from_millis(200);
    loop {
        let opened = async {
            let configs = Arc::new(StateTopic::open(&clients, config.configs.clone(), false).await?);
            let status = Arc::new(StateTopic::open(&clients, config.status.clone(), false).await?);
            let offsets = Arc::new(StateTopic::open(&clients, config.offsets.clone(), true).await?);
            let components = Arc::new(StateTopic::open(&clients, config.components.clone(), false).await?);
            let push = Arc::new(StateTopic::open(&clients, config.push.clone(), false).await?);
            snow_runtime::state::topic::ensure(&clients, &config.slots).await?;
            anyhow::Ok(State { configs, status, offsets, components, push })
        };
        let mut stop = shutdown.clone();
        let result = tokio::select! {
            r = opened => r,
            () = stop.wait() => return Ok(None),
        };
        match result {
            Ok(state) => return Ok(Some(state)),
            Err(e) if snow_runtime::state::topic::is_refusal(&e) => return Err(e),
            Err(e) => {
                tracing::warn!("opening the fleet's state topics: {e:#}; trying again in {pause:?}");
                let mut stop = shutdown.clone();
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = stop.wait() => return Ok(None),
                }
                pause = (pause * 2).min(Duration::from_secs(10));
            }
        }
    }
}

impl WorkerLoop {
    /// Fences the newly assigned slots, then reads the offsets topic to its end (a previous
    /// owner's last offsets are committed or aborted by then).
    async fn assigned(&mut self, slots: Vec<i32>) {
        self.pending.extend(slots);
        self.fence_pending().await;
    }

    async fn fence_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let started = std::time::Instant::now();
        let mut fencing = Vec::new();
        for slot in std::mem::take(&mut self.pending) {
            let (clients, group, offsets) =
                (self.fleet.config.clients(), self.fleet.config.group.clone(), self.fleet.offsets.topic().clone());
            let (trigger, fenced) = linked(&[]);
            fencing.push((slot, fenced, tokio::task::spawn_blocking(move || SlotWriter::open(&clients, &group, slot, offsets, trigger))));
        }
        let mut fenced_now = Vec::new();
        for (slot, fenced, task) in fencing {
            match task.await.map_err(anyhow::Error::from).and_then(|r| r) {
                Ok(writer) => {
                    self.held.insert(slot, Held { writer: Arc::new(writer), fenced });
                    fenced_now.push(slot);
                }
                Err(e) => {
                    tracing::error!(slot, "could not fence work slot {slot}, retrying: {e:#}");
                    self.pending.insert(slot);
                }
            }
        }
        if let Err(e) = self.fleet.offsets.topic().read_to_end().await {
            tracing::error!("reading the offsets topic after fencing: {e:#}; the slots' units wait");
            for slot in fenced_now.drain(..) {
                self.held.remove(&slot);
                self.pending.insert(slot);
            }
        }
        if !fenced_now.is_empty() {
            tracing::info!(slots = ?fenced_now, ms = started.elapsed().as_millis() as u64, "work slots fenced; their units start");
        }
    }

    /// Stops the units of `slots` (offsets stored), publishes their status, and lets the slots go.
    async fn revoked(&mut self, slots: &[i32], lost: bool) {
        let started = std::time::Instant::now();
        let mut stopping = Vec::new();
        for managed in self.managed.values_mut() {
            let doomed: Vec<String> = managed.units.iter().filter(|(_, u)| slots.contains(&u.slot)).map(|(n, _)| n.clone()).collect();
            for name in doomed {
                if let Some(unit) = managed.units.remove(&name) {
                    unit.stop.fire();
                    stopping.push(unit.task);
                }
            }
        }
        let stopped = stopping.len();
        for task in stopping {
            let _ = task.await;
        }
        for slot in slots {
            self.held.remove(slot);
            self.pending.remove(slot);
        }
        for managed in self.managed.values_mut() {
            managed.published = None;
        }
        self.fleet.runner.status().flush().await;
        tracing::info!(?slots, lost, units = stopped, ms = started.elapsed().as_millis() as u64, "work slots released");
    }

    /// Whether this worker leads `connector` (publishes its own status): it holds its slot.
    fn leads(&self, connector: &str) -> bool {
        self.held.contains_key(&slot_of(connector, "", self.fleet.config.slots.partitions))
    }

    /// Brings what runs here in line with the configuration topic and the slots held.
    async fn reconcile(&mut self) {
        if self.shutdown.is_stopping() {
            return;
        }
        self.fence_pending().await;
        for (logger, level) in self.fleet.configs.loggers() {
            if self.loggers.get(&logger) != Some(&level) {
                match snow_runtime::logging::set_level(&logger, &level) {
                    Ok(()) => tracing::info!(logger, level, "log level set for the fleet"),
                    Err(why) => tracing::warn!(logger, level, "a fleet log level cannot be applied: {why}"),
                }
                self.loggers.insert(logger, level);
            }
        }
        // Slots whose writer was fenced: stop their units now (the revocation follows).
        let fenced: Vec<i32> = self.held.iter().filter(|(_, h)| h.fenced.is_stopping() || h.writer.is_fenced()).map(|(s, _)| *s).collect();
        if !fenced.is_empty() {
            self.revoked(&fenced, true).await;
        }
        let desired = self.fleet.configs.connectors();
        let stale: Vec<String> = self
            .managed
            .iter()
            .filter(|(name, m)| desired.get(*name).is_none_or(|d| d.properties != m.properties))
            .map(|(name, _)| name.clone())
            .collect();
        for name in stale {
            let leads = self.leads(&name);
            if let Some(managed) = self.managed.remove(&name) {
                stop_managed(managed).await;
            }
            if !desired.contains_key(&name) {
                self.fleet.runner.record_plan(&name, None);
                if leads && let Err(e) = self.fleet.status.forget(&name).await {
                    tracing::warn!(connector = name, "removing the status of a deleted connector: {e:#}");
                }
                tracing::info!(connector = name, "connector deleted; its units here stopped");
            } else {
                tracing::info!(connector = name, "connector reconfigured; restarting it");
            }
        }
        for (name, record) in &desired {
            if !self.managed.contains_key(name) {
                let managed = self.load(name, record).await;
                self.managed.insert(name.clone(), managed);
            }
            self.restart_if_asked(name, record).await;
            self.run_as_targeted(name, record.target).await;
            self.publish_connector(name, record.target).await;
        }
    }

    /// Loads and plans a connector (or notes why it cannot run).
    async fn load(&mut self, name: &str, record: &ConnectorRecord) -> Managed {
        let live = match fleet_spec(&self.fleet, name, &record.properties).await {
            Ok(spec) => match self.fleet.runner.ready(&spec, &mut self.components).await {
                Ok(ready) => {
                    spec.register_secrets();
                    self.fleet.runner.record_plan(name, Some(Plan::of(&ready)));
                    live(ready)
                }
                Err(e) => Err(shown(&e)),
            },
            Err(e) => Err(shown(&e)),
        };
        if let Err(e) = &live {
            tracing::error!(connector = name, "the connector cannot run: {e}");
        }
        Managed {
            properties: record.properties.clone(),
            live,
            units: HashMap::new(),
            sink: None,
            sink_failed: None,
            restart_seen: record.restart.as_ref().map(|r| r.id),
            published: None,
        }
    }

    /// Acts on a restart request not yet acted on.
    async fn restart_if_asked(&mut self, name: &str, record: &ConnectorRecord) {
        let Some(request) = record.restart.clone() else { return };
        let Some(managed) = self.managed.get_mut(name) else { return };
        if managed.restart_seen == Some(request.id) {
            return;
        }
        managed.restart_seen = Some(request.id);
        if let Some(unit) = &request.unit {
            // One task: a source unit running here stops and is started again by this pass; a
            // sink lane written here restarts with the sink's consumer on this worker.
            let published = self.fleet.status.units(name).into_iter().find(|(u, _)| u == unit).map(|(_, p)| p.worker_id);
            if let Some(running) = managed.units.remove(unit) {
                tracing::info!(connector = name, unit, "task restart asked for: restarting it");
                stop_units(vec![running], None).await;
            } else if managed.sink.is_some() && published.as_deref() == Some(self.fleet.config.worker_id.as_str()) {
                tracing::info!(connector = name, unit, "task restart asked for: restarting the sink's consumer here");
                let sink = managed.sink.take();
                managed.sink_failed = None;
                stop_units(Vec::new(), sink).await;
            }
            return;
        }
        tracing::info!(connector = name, include_tasks = request.include_tasks, only_failed = request.only_failed, "restart asked for");
        let failed = managed.live.is_err() || managed.sink_failed.is_some();
        if failed || (request.include_tasks && !request.only_failed) {
            // The connector itself restarts: loaded and planned again, its units started again.
            if let Some(managed) = self.managed.remove(name) {
                stop_managed(managed).await;
            }
            let managed = self.load(name, record).await;
            self.managed.insert(name.to_string(), managed);
            return;
        }
        if request.include_tasks {
            // Only the failed units: a parked unit's task has ended; dropping it starts it again.
            let status = self.fleet.runner.status().clone();
            let parked: BTreeSet<String> = status.in_state(name, UnitState::Parked).into_iter().map(|s| s.unit).collect();
            managed.units.retain(|unit, _| !parked.contains(unit));
            if managed.sink.as_ref().is_some_and(|(_, task)| task.is_finished()) {
                managed.sink = None;
            }
        }
    }

    /// Starts or stops the connector's units here as its target state and the held slots say.
    async fn run_as_targeted(&mut self, name: &str, target: TargetState) {
        let slots = self.fleet.config.slots.partitions;
        let Some(managed) = self.managed.get_mut(name) else { return };
        if target != TargetState::Started {
            let units: Vec<RunningUnit> = managed.units.drain().map(|(_, u)| u).collect();
            let sink = managed.sink.take();
            stop_units(units, sink).await;
            return;
        }
        match &managed.live {
            Ok(Live::Source { ctx, versions, units, producer, topics }) => {
                for unit in units {
                    let at = slot_of(name, &unit.name, slots);
                    let Some(held) = self.held.get(&at) else { continue };
                    if managed.units.contains_key(&unit.name) {
                        continue;
                    }
                    let offsets: Arc<dyn snow_runtime::offsets::OffsetStore> =
                        Arc::new(self.fleet.offsets.with_writer(held.writer.clone()));
                    let (stop, watch) = linked(&[self.shutdown.clone(), held.fenced.clone()]);
                    let fence = Some(held.writer.transactions());
                    let task = snow_runtime::source::spawn_unit(ctx, versions, unit.clone(), offsets, producer, topics, fence, watch);
                    tracing::info!(connector = name, unit = unit.name, slot = at, "unit started on this worker");
                    managed.units.insert(unit.name.clone(), RunningUnit { slot: at, stop, task });
                }
            }
            Ok(Live::Sink { ctx, versions }) => {
                if managed.sink.as_ref().is_some_and(|(_, task)| task.is_finished())
                    && let Some((_, task)) = managed.sink.take()
                {
                    let why = match task.await {
                        Ok(Ok(())) => None,
                        Ok(Err(e)) => Some(shown(&e)),
                        Err(e) => Some(snow_runtime::redact::clean(&format!("the sink's task failed: {e}"))),
                    };
                    if let Some(why) = &why {
                        tracing::error!(connector = name, "the sink stopped: {why}");
                    }
                    managed.sink_failed = why;
                }
                if managed.sink.is_none() && managed.sink_failed.is_none() {
                    let (stop, watch) = linked(std::slice::from_ref(&self.shutdown));
                    let task = tokio::spawn(snow_runtime::sink::run(ctx.clone(), versions.clone(), watch));
                    managed.sink = Some((stop, task));
                }
            }
            Err(_) => {}
        }
    }

    /// The connector's own state, published by its leader when it changed.
    async fn publish_connector(&mut self, name: &str, target: TargetState) {
        if !self.leads(name) {
            return;
        }
        let Some(managed) = self.managed.get_mut(name) else { return };
        let (state, trace) = match (&managed.live, target) {
            (Err(e), _) => ("FAILED", Some(e.clone())),
            (Ok(_), _) if managed.sink_failed.is_some() => ("FAILED", managed.sink_failed.clone()),
            (Ok(_), TargetState::Started) => ("RUNNING", None),
            (Ok(_), TargetState::Paused) => ("PAUSED", None),
            (Ok(_), TargetState::Stopped) => ("STOPPED", None),
        };
        let key = format!("{state}{}", trace.as_deref().unwrap_or(""));
        if managed.published.as_deref() == Some(key.as_str()) {
            return;
        }
        match self.fleet.status.publish_connector(name, state, trace.as_deref()).await {
            Ok(()) => managed.published = Some(key),
            Err(e) => tracing::warn!(connector = name, "publishing the connector's status: {e:#}"),
        }
    }

    async fn stop_all(&mut self) {
        let all: Vec<Managed> = std::mem::take(&mut self.managed).into_values().collect();
        for managed in all {
            stop_managed(managed).await;
        }
    }
}

/// A loaded connector ready to run here.
fn live(ready: Ready) -> Result<Live, String> {
    match ready {
        Ready::Source { ctx, pre, digest, units } => {
            let producer = snow_runtime::kafka::producer(&ctx.spec.kafka).map_err(|e| format!("{e:#}"))?;
            let topics = snow_runtime::source::allowed_topics(&ctx);
            let versions = Versions::new(pre, &digest, &ctx.spec.component_path.display().to_string());
            Ok(Live::Source { ctx, versions, units, producer, topics })
        }
        Ready::Sink { ctx, pre, digest } => {
            let versions = Versions::new(pre, &digest, &ctx.spec.component_path.display().to_string());
            Ok(Live::Sink { ctx, versions })
        }
    }
}

async fn stop_managed(mut managed: Managed) {
    let units: Vec<RunningUnit> = managed.units.drain().map(|(_, u)| u).collect();
    stop_units(units, managed.sink.take()).await;
}

async fn stop_units(units: Vec<RunningUnit>, sink: Option<(snow_runtime::shutdown::ShutdownTrigger, tokio::task::JoinHandle<Result<()>>)>) {
    for unit in &units {
        unit.stop.fire();
    }
    if let Some((stop, _)) = &sink {
        stop.fire();
    }
    for unit in units {
        let _ = unit.task.await;
    }
    if let Some((_, task)) = sink {
        match task.await {
            Ok(Err(e)) => tracing::warn!("a sink ended with an error: {e:#}"),
            Err(e) => tracing::warn!("a sink task failed: {e}"),
            Ok(Ok(())) => {}
        }
    }
}

/// `worker.properties` read for `snow-connect worker --config`.
pub fn load_config(path: &Path) -> Result<WorkerConfig> {
    WorkerConfig::load(path).context("the worker configuration")
}
