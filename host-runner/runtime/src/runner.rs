//! The runner: loads each component once, validates and plans every connector before anything
//! starts (a bad configuration stops the process with every problem named), then runs them all
//! until shutdown and reports what flowed.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};

use crate::auth::Credentials;
use crate::auth::tokens::TokenRegistry;
use crate::component::bindings::{sink::SinkPre, source::SourcePre};
use crate::component::swap::Versions;
use crate::component::transform::TransformComponent;
use crate::component::{ComponentKind, ComponentRuntime, HostState, Loaded, StoreOptions};
use crate::config::ConnectorSpec;
use crate::config::{ConfigError, InvalidConfig};
use crate::connector::{ConnectorContext, SharedContext};
use crate::metrics::Metrics;
use crate::offsets::{FileOffsetStore, KafkaOffsetStore, OffsetStore};
use crate::outbound::{Gate, GateSettings, LimiterRegistry};
use crate::shutdown::Shutdown;
use crate::state::{Clients, StateTopic};
use crate::status::{StatusBoard, UnitState};

/// Everything one process shares between connectors.
pub struct Runner {
    runtime: ComponentRuntime,
    limiters: LimiterRegistry,
    /// The instances' request budgets (ADR 0034).
    budgets: Arc<crate::outbound::BudgetRegistry>,
    tokens: TokenRegistry,
    metrics: Metrics,
    status: StatusBoard,
    prepared: Mutex<Vec<(String, ComponentKind)>>,
    /// Each connector's plan as this process made it (for the REST API); a new version of the
    /// map is announced on the watch, so a caller can await a plan instead of polling for it.
    plans: tokio::sync::watch::Sender<std::collections::BTreeMap<String, Plan>>,
    /// Each source connector's offset store (for the REST API).
    offset_stores: Mutex<HashMap<String, Arc<dyn OffsetStore>>>,
    /// In a fleet, this worker's id (sent with every request, [`crate::outbound::GateSettings`]).
    worker_id: std::sync::OnceLock<String>,
    /// Each running connector's spec and component versions, for hot-swap ([`crate::reload`]).
    pub(crate) running: Mutex<HashMap<String, Running>>,
    /// The running tables that take push notifications (ADR 0032).
    wakes: Arc<crate::push::wakes::Wakes>,
}

/// A running connector as a reload sees it.
pub(crate) struct Running {
    pub(crate) ctx: SharedContext,
    pub(crate) versions: ConnectorVersions,
}

/// A connector's component versions, by kind.
#[derive(Clone)]
pub(crate) enum ConnectorVersions {
    Source(Arc<Versions<SourcePre<HostState>>>),
    Sink(Arc<Versions<SinkPre<HostState>>>),
}

/// A connector's plan: its kind and, a source, its units in task order with their configuration.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `source` or `sink`.
    pub kind: &'static str,
    /// The source's units in task order, with their configuration.
    pub units: Vec<(String, Vec<(String, String)>)>,
}

impl Plan {
    /// The plan of a connector made ready.
    pub fn of(ready: &Ready) -> Self {
        match ready {
            Ready::Source { units, .. } => Plan {
                kind: "source",
                units: units
                    .iter()
                    .map(|u| (u.name.clone(), u.config.iter().map(|e| (e.key.clone(), e.value.clone())).collect()))
                    .collect(),
            },
            Ready::Sink { .. } => Plan { kind: "sink", units: Vec::new() },
        }
    }
}

/// A connector validated (and a source planned), with its component and the component's digest.
pub enum Ready {
    /// A source and its units.
    Source {
        /// What its units share.
        ctx: SharedContext,
        /// Its component, linked.
        pre: SourcePre<HostState>,
        /// The component's digest.
        digest: String,
        /// Its units in plan order.
        units: Vec<crate::component::bindings::types::WorkUnit>,
    },
    /// A sink.
    Sink {
        /// What its lanes share.
        ctx: SharedContext,
        /// Its component, linked.
        pre: SinkPre<HostState>,
        /// The component's digest.
        digest: String,
    },
}

impl Runner {
    /// A runner with a fresh engine, keeping compiled components in `compile_cache` when given.
    pub fn new(compile_cache: Option<&std::path::Path>) -> Result<Self> {
        let metrics = Metrics::default();
        Ok(Self {
            runtime: ComponentRuntime::new()?.with_cache(compile_cache),
            limiters: LimiterRegistry::default(),
            budgets: Default::default(),
            tokens: TokenRegistry::new(metrics.clone()),
            metrics,
            status: StatusBoard::default(),
            prepared: Mutex::default(),
            worker_id: std::sync::OnceLock::new(),
            plans: tokio::sync::watch::Sender::default(),
            offset_stores: Mutex::default(),
            running: Mutex::default(),
            wakes: Arc::default(),
        })
    }

    /// The plan of `connector`, if this process made one.
    pub fn plan(&self, connector: &str) -> Option<Plan> {
        self.plans.borrow().get(connector).cloned()
    }

    /// The plan of `connector` once this process made one, waiting at most `within` for it.
    pub async fn planned(&self, connector: &str, within: std::time::Duration) -> Option<Plan> {
        let mut plans = self.plans.subscribe();
        let made = tokio::time::timeout(within, plans.wait_for(|plans| plans.contains_key(connector))).await;
        made.ok()?.ok()?.get(connector).cloned()
    }

    /// Records (or, `None`, forgets) the plan of `connector`, and wakes whoever awaits it.
    pub fn record_plan(&self, connector: &str, plan: Option<Plan>) {
        self.plans.send_modify(|plans| {
            match plan {
                Some(plan) => plans.insert(connector.to_string(), plan),
                None => plans.remove(connector),
            };
        });
    }

    /// The offset store of source connector `connector` in a standalone run.
    pub fn offsets_of(&self, connector: &str) -> Option<Arc<dyn OffsetStore>> {
        self.offset_stores.lock().unwrap_or_else(|e| e.into_inner()).get(connector).cloned()
    }

    /// Marks this runner as worker `id` of a fleet (before any connector is prepared).
    pub fn set_worker(&self, id: &str) {
        let _ = self.worker_id.set(id.to_string());
    }

    /// The engine and linker.
    pub fn runtime(&self) -> &ComponentRuntime {
        &self.runtime
    }

    /// The push endpoint of this process's running tables (a standalone run's `snow.push.listen`).
    pub fn push_endpoint(&self) -> crate::push::endpoint::Endpoint {
        crate::push::endpoint::Endpoint::new(self.wakes.clone(), self.metrics.clone())
    }

    /// The wake-ups of this process's running tables.
    pub fn wakes(&self) -> &Arc<crate::push::wakes::Wakes> {
        &self.wakes
    }

    /// The process's metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// What every unit is doing.
    pub fn status(&self) -> &StatusBoard {
        &self.status
    }

    /// Validates every connector (loading its component and asking it), without running anything.
    pub async fn validate(&self, specs: &[ConnectorSpec]) -> Result<()> {
        self.prepare(specs).await.map(drop)
    }

    /// The fleet this worker belongs to has `workers` members (or, in the Kafka Connect plugin,
    /// the connector runs `workers` tasks, each a process): each instance's request budget is
    /// shared among them (ADR 0034).
    pub fn fleet_workers(&self, workers: u32) {
        self.budgets.set_workers(workers);
    }

    /// The process is stopping: no request waits for an instance's request budget any more, so
    /// every unit's last call ends.
    pub fn stop_waiting(&self) {
        self.budgets.stop();
    }

    /// Budgets hold again after [`Self::stop_waiting`]: the Kafka Connect executor's next task
    /// spends from them as the one before did.
    pub fn resume_waiting(&self) {
        self.budgets.resume();
    }

    /// Runs `specs` until `shutdown` fires or every connector ended. A connector that ends with an
    /// error is logged and shown on the status board (unit `connector`, parked) the moment it
    /// ends, whatever the others do; the first such error is returned once all have ended.
    pub async fn run(&self, specs: &[ConnectorSpec], shutdown: Shutdown) -> Result<()> {
        {
            let (budgets, mut stopping) = (self.budgets.clone(), shutdown.clone());
            tokio::spawn(async move {
                stopping.wait().await;
                budgets.stop();
            });
        }
        specs.iter().for_each(ConnectorSpec::register_secrets);
        // Only a start connects to Kafka; validating a configuration does not.
        let mut checked: Vec<(&str, &std::collections::BTreeMap<String, String>)> = Vec::new();
        for spec in specs {
            let cluster = (spec.kafka.bootstrap_servers.as_str(), &spec.kafka.security);
            if !checked.contains(&cluster) {
                check_cluster(spec).await?;
                checked.push(cluster);
            }
        }
        let prepared = self.prepare(specs).await?;
        crate::push::listen::serve(specs, &self.push_endpoint(), &shutdown).await?;
        let mut running = tokio::task::JoinSet::new();
        for p in prepared {
            let shutdown = shutdown.clone();
            let path = |ctx: &SharedContext| ctx.spec.component_path.display().to_string();
            let (ctx, versions) = match p {
                (Ready::Source { ctx, pre, digest, units }, Some(offsets)) => {
                    let (name, versions) = (ctx.name().to_string(), Versions::new(pre, &digest, &path(&ctx)));
                    let task = crate::source::run(ctx.clone(), versions.clone(), units, offsets, shutdown);
                    running.spawn(async move { (name, task.await) });
                    (ctx, ConnectorVersions::Source(versions))
                }
                (Ready::Sink { ctx, pre, digest }, _) => {
                    let (name, versions) = (ctx.name().to_string(), Versions::new(pre, &digest, &path(&ctx)));
                    let task = crate::sink::run(ctx.clone(), versions.clone(), shutdown);
                    running.spawn(async move { (name, task.await) });
                    (ctx, ConnectorVersions::Sink(versions))
                }
                (Ready::Source { ctx, .. }, None) => bail!("connector {}: a source prepared without its offset store", ctx.name()),
            };
            self.running.lock().unwrap_or_else(|e| e.into_inner()).insert(ctx.name().to_string(), Running { ctx, versions });
        }
        let mut first_error = None;
        while let Some(ended) = running.join_next().await {
            let (name, result) = match ended {
                Ok(ended) => ended,
                Err(e) => (String::from("?"), Err(anyhow::anyhow!("a connector task panicked: {e}"))),
            };
            if let Err(e) = result {
                let message = format!("the connector ended with an error: {e:#}");
                tracing::error!(connector = %name, "{message}");
                self.status.set(&name, "connector", UnitState::Parked, Some(&message));
                first_error.get_or_insert(e.context(format!("connector {name}")));
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Makes every connector ready (a source with its offset store) before any runs: one that is
    /// not stops the start.
    async fn prepare(&self, specs: &[ConnectorSpec]) -> Result<Vec<(Ready, Option<Arc<dyn OffsetStore>>)>> {
        // Keyed by the SHA-256 of the bytes checked: each connector's signature policy is applied
        // to the file as it reads it, and identical bytes are compiled once.
        let mut components: HashMap<String, Loaded> = HashMap::new();
        let mut offset_stores = OffsetStores::default();
        let mut prepared = Vec::new();
        for spec in specs {
            let ready = self.ready(spec, &mut components).await?;
            self.record_plan(&spec.name, Some(Plan::of(&ready)));
            let offsets = match ready {
                Ready::Source { .. } => {
                    exactly_once_offsets(spec)?;
                    let offsets = offset_stores.of(spec).await.with_context(|| format!("connector {}", spec.name))?;
                    self.offset_stores.lock().unwrap_or_else(|e| e.into_inner()).insert(spec.name.clone(), offsets.clone());
                    Some(offsets)
                }
                Ready::Sink { .. } => None,
            };
            prepared.push((ready, offsets));
        }
        Ok(prepared)
    }

    /// Loads `spec`'s component (signature checked; identical bytes compiled once through
    /// `components`), asks it to validate the configuration and, a source, to plan its units.
    pub async fn ready(&self, spec: &ConnectorSpec, components: &mut HashMap<String, Loaded>) -> Result<Ready> {
        self.ready_as(spec, components, Purpose::Run).await
    }

    /// [`Self::ready`] for a validation only: nothing of the process changes — the connector's
    /// gate has an in-flight cap, a request budget and token providers of its own (the instance's
    /// are not set or lowered by a configuration that is only checked), and it is not counted
    /// among the connectors prepared.
    pub async fn check(&self, spec: &ConnectorSpec, components: &mut HashMap<String, Loaded>) -> Result<Ready> {
        self.ready_as(spec, components, Purpose::Check).await
    }

    async fn ready_as(&self, spec: &ConnectorSpec, components: &mut HashMap<String, Loaded>, purpose: Purpose) -> Result<Ready> {
        let artefact = spec.component()?;
        let loaded = self.load_once(&artefact, components).await.with_context(|| format!("connector {}", spec.name))?;
        let kind = loaded.kind();
        if kind == ComponentKind::Transform {
            return Err(InvalidConfig::one(
                &spec.name,
                ConfigError::refused(
                    "component.path",
                    format!(
                        "{} is a transform component (world transform); a connector runs a source or sink component and names \
                         transforms in transforms.<alias>.component.path",
                        spec.component_path.display()
                    ),
                ),
            )
            .into());
        }
        let (spec, transforms) = self.bind_transforms(spec, components).await?;
        let spec = &spec;
        if let Some(class) = &spec.connector_class {
            let (expected, short) = match kind {
                ComponentKind::Source => (crate::connector::SOURCE_CLASS, "ServiceNowSourceConnector"),
                ComponentKind::Sink | ComponentKind::Transform => (crate::connector::SINK_CLASS, "ServiceNowSinkConnector"),
            };
            if class != expected && class != short {
                return Err(InvalidConfig::one(
                    &spec.name,
                    ConfigError::new(
                        "connector.class",
                        format!("{class:?} does not match its component {}, a {kind:?} (use {expected})", spec.component_path.display()),
                    ),
                )
                .into());
            }
        }
        let ctx = match purpose {
            Purpose::Run => self.context(spec, transforms)?,
            Purpose::Check => self.context_with(spec, transforms, self.detached_gate(spec)?),
        };
        let digest = artefact.digest().to_string();
        let ready = match loaded {
            Loaded::Source(pre) => {
                crate::kafka::check_producer(&spec.kafka).with_context(|| format!("connector {}", spec.name))?;
                let units = crate::source::plan(&ctx, &pre).await?;
                Ready::Source { ctx, pre, digest, units }
            }
            Loaded::Sink(pre) => {
                crate::kafka::check_consumer(&spec.kafka, &format!("connect-{}", spec.name))
                    .and_then(|()| crate::kafka::check_producer(&spec.kafka))
                    .with_context(|| format!("connector {}", spec.name))?;
                crate::sink::validate(&ctx, &pre).await?;
                Ready::Sink { ctx, pre, digest }
            }
            Loaded::Transform(_) => unreachable!("refused above"),
        };
        if purpose == Purpose::Check {
            return Ok(ready);
        }
        tracing::info!(connector = spec.name, kind = ?kind, component = %spec.component_path.display(), "connector ready");
        let mut prepared = self.prepared.lock().unwrap_or_else(|e| e.into_inner());
        if !prepared.iter().any(|(n, _)| n == &spec.name) {
            prepared.push((spec.name.clone(), kind));
        }
        Ok(ready)
    }

    /// `artefact` compiled and pre-instantiated, once per digest through `components`.
    async fn load_once(&self, artefact: &crate::artefact::Checked, components: &mut HashMap<String, Loaded>) -> Result<Loaded> {
        if let Some(loaded) = components.get(artefact.digest()) {
            return Ok(loaded.clone());
        }
        let loaded = self.runtime.load(artefact).await?;
        components.insert(artefact.digest().to_string(), loaded.clone());
        Ok(loaded)
    }

    /// `spec` with its transform components loaded (each checked against the connector's trust
    /// policy and pinned digest, compiled once per digest through `components`), asked to
    /// validate their keys, and bound into its chain.
    async fn bind_transforms(
        &self,
        spec: &ConnectorSpec,
        components: &mut HashMap<String, Loaded>,
    ) -> Result<(ConnectorSpec, HashMap<String, Arc<TransformComponent>>)> {
        let Some(chain) = spec.transforms.as_ref().filter(|_| !spec.transform_components.is_empty()) else {
            return Ok((spec.clone(), HashMap::new()));
        };
        let mut stages: HashMap<String, Arc<TransformComponent>> = HashMap::new();
        for stage in &spec.transform_components {
            let artefact = spec.transform_component(stage)?;
            let loaded = self
                .load_once(&artefact, components)
                .await
                .with_context(|| format!("connector {}: transform {}", spec.name, stage.alias))?;
            let Loaded::Transform(pre) = loaded else {
                return Err(InvalidConfig::one(
                    &spec.name,
                    ConfigError::refused(
                        format!("transforms.{}.component.path", stage.alias),
                        format!("{} is a {:?} component, not a transform component (world transform)", stage.path.display(), loaded.kind()),
                    ),
                )
                .into());
            };
            let running = crate::component::transform::Stage {
                connector: spec.name.clone(),
                alias: stage.alias.clone(),
                config: crate::connector::to_entries(stage.config.iter()),
                options: StoreOptions { memory_max_bytes: stage.memory_max_bytes, call_timeout: stage.call_timeout },
            };
            let component = TransformComponent::new(pre, artefact.digest(), self.runtime.engine().clone(), running, self.metrics.clone());
            let problems = component.validate().await.with_context(|| format!("connector {}: transform {}", spec.name, stage.alias))?;
            if !problems.is_empty() {
                return Err(InvalidConfig::new(&spec.name, problems).into());
            }
            tracing::info!(connector = spec.name, transform = stage.alias, component = %stage.path.display(), sha256 = artefact.digest(), "transform component ready");
            stages.insert(stage.alias.clone(), Arc::new(component));
        }
        let mut bound = spec.clone();
        bound.transforms = Some(Arc::new(chain.bind(|alias| stages[alias].clone())));
        Ok((bound, stages))
    }

    /// The context a connector of `spec` runs in: this process's engine, metrics, status board
    /// and wake-ups, its own gate, and its bound transform components.
    pub fn context(&self, spec: &ConnectorSpec, transforms: HashMap<String, Arc<TransformComponent>>) -> Result<SharedContext> {
        Ok(self.context_with(spec, transforms, self.gate(spec)?))
    }

    fn context_with(&self, spec: &ConnectorSpec, transforms: HashMap<String, Arc<TransformComponent>>, gate: Gate) -> SharedContext {
        Arc::new(ConnectorContext {
            spec: spec.clone(),
            engine: self.runtime.engine().clone(),
            gate,
            metrics: self.metrics.clone(),
            status: self.status.clone(),
            transforms,
            wakes: self.wakes.clone(),
        })
    }

    /// A gate of `spec` sharing nothing with the process: what a validation runs with.
    fn detached_gate(&self, spec: &ConnectorSpec) -> Result<Gate> {
        let settings = self.gate_settings(spec, &TokenRegistry::new(Metrics::default()), None)?;
        let limiter = crate::outbound::LimiterRegistry::default().limiter(&spec.instance_authority, spec.max_in_flight);
        let budget = Arc::new(crate::outbound::InstanceBudget::new(spec.requests_per_hour, spec.requests_per_minute));
        Ok(Gate::new(settings, limiter, budget, Metrics::default()))
    }

    pub(crate) fn gate(&self, spec: &ConnectorSpec) -> Result<Gate> {
        let settings = self.gate_settings(spec, &self.tokens, self.worker_id.get().cloned())?;
        let limiter = self.limiters.limiter(&spec.instance_authority, spec.max_in_flight);
        let budget = self.budgets.budget(&spec.instance_authority, spec.requests_per_hour, spec.requests_per_minute);
        Ok(Gate::new(settings, limiter, budget, self.metrics.clone()))
    }

    /// What `spec`'s gate allows and adds, its credentials from `tokens`.
    fn gate_settings(&self, spec: &ConnectorSpec, tokens: &TokenRegistry, worker: Option<String>) -> Result<GateSettings> {
        let credentials = Credentials::from_spec(&spec.auth, tokens).with_context(|| format!("connector {}", spec.name))?;
        Ok(GateSettings {
            connector: spec.name.clone(),
            scheme: spec.instance_scheme.clone(),
            authority: spec.instance_authority.clone(),
            credentials,
            worker,
            priorities: spec.priorities.clone(),
            route: spec.instance_route.clone(),
        })
    }
}

impl Runner {
    /// A human summary of what each prepared connector did, from the metrics.
    pub fn summary(&self) -> String {
        let metrics = &self.metrics;
        let mut out = String::from("snow-connect summary\n");
        for (name, kind) in self.prepared.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let c = |metric: &str, extra: &[(&str, &str)]| {
                let mut filter = vec![("connector", name.as_str())];
                filter.extend_from_slice(extra);
                metrics.sum(metric, &filter) as u64
            };
            let line = match kind {
                ComponentKind::Source => format!(
                    "  {name:<24} source  {} records produced and acknowledged by Kafka, {} offsets stored, {} poll errors, {} requests to ServiceNow\n                     {:<32} time in the component: requests {} ms, parsing {} ms, building records {} ms; {} duplicates suppressed",
                    c("snow_source_records_total", &[]),
                    c("snow_source_offset_commits_total", &[]),
                    c("snow_source_poll_errors_total", &[]),
                    c("snow_outbound_requests_total", &[]),
                    "",
                    c("snow_source_request_micros_total", &[]) / 1000,
                    c("snow_source_parse_micros_total", &[]) / 1000,
                    c("snow_source_build_micros_total", &[]) / 1000,
                    c("snow_source_duplicates_suppressed_total", &[]),
                ),
                ComponentKind::Sink => format!(
                    "  {name:<24} sink    {} records written ({} created, {} patched, {} replaced, {} deleted), {} skipped, {} failed, {} requests to ServiceNow",
                    c("snow_sink_records_total", &[("outcome", "written")]),
                    c("snow_sink_records_total", &[("operation", "create")]),
                    c("snow_sink_records_total", &[("operation", "patch")]),
                    c("snow_sink_records_total", &[("operation", "put")]),
                    c("snow_sink_records_total", &[("operation", "delete")]),
                    c("snow_sink_records_total", &[("outcome", "skipped")]),
                    c("snow_sink_records_total", &[("outcome", "failed")]),
                    c("snow_outbound_requests_total", &[])
                ),
                // A connector never runs a transform component as its own (refused in `ready`).
                ComponentKind::Transform => continue,
            };
            out.push_str(&line);
            out.push('\n');
            for parked in self.status.in_state(name, UnitState::Parked) {
                out.push_str(&format!("  {name:<24} parked  {}: {}\n", parked.unit, parked.message.unwrap_or_default()));
            }
        }
        out
    }
}

/// The offset stores of one start: one per file however its path is spelled, one per topic of one
/// cluster (two stores of one place would each replace the other's offsets).
#[derive(Default)]
struct OffsetStores {
    files: HashMap<PathBuf, Arc<FileOffsetStore>>,
    topics: HashMap<(String, String), KafkaOffsetStore>,
}

impl OffsetStores {
    async fn of(&mut self, spec: &ConnectorSpec) -> Result<Arc<dyn OffsetStore>> {
        if let Some(topic) = &spec.offsets_topic {
            let place = (spec.kafka.bootstrap_servers.clone(), topic.name.clone());
            if let Some(store) = self.topics.get(&place) {
                return Ok(Arc::new(store.clone()));
            }
            let clients = Clients { bootstrap: spec.kafka.bootstrap_servers.clone(), common: spec.kafka.security.clone() };
            let store = KafkaOffsetStore::new(Arc::new(StateTopic::open(&clients, topic.clone(), true).await?));
            tracing::info!(connector = spec.name, "offsets in offset.storage.topic {} ({} stored)", topic.name, store.entries().len());
            self.topics.insert(place, store.clone());
            return Ok(Arc::new(store));
        }
        let path = crate::offsets::file::canonical_path(&spec.offsets_file);
        if let Some(store) = self.files.get(&path) {
            return Ok(store.clone());
        }
        let store = Arc::new(FileOffsetStore::open(&path)?);
        self.files.insert(path, store.clone());
        Ok(store)
    }
}

/// Exactly-once needs offsets in a topic, where a transaction can write them with the records
/// (ADR 0030): with a file, `required` is refused and `requested` runs at-least-once, saying so.
fn exactly_once_offsets(spec: &ConnectorSpec) -> Result<()> {
    use crate::config::exactly_once::ExactlyOnce;
    if spec.offsets_topic.is_some() {
        return Ok(());
    }
    match spec.exactly_once {
        ExactlyOnce::Off => Ok(()),
        ExactlyOnce::Required => Err(InvalidConfig::one(
            &spec.name,
            ConfigError::new(
                "exactly.once.support",
                format!(
                    "required: offsets in a file ({}) cannot join a Kafka transaction; set offset.storage.topic (e.g. \
                     offset.storage.topic=snow-connect-offsets) to keep them in Kafka",
                    spec.offsets_file.display()
                ),
            ),
        )
        .into()),
        ExactlyOnce::Requested => {
            tracing::warn!(
                connector = spec.name,
                "exactly.once.support=requested, but offsets are kept in a file, which cannot join a Kafka transaction: the connector \
                 runs at-least-once (set offset.storage.topic for exactly-once)"
            );
            Ok(())
        }
    }
}

/// Whether `spec`'s Kafka cluster accepts its clients: a refusal (credentials, TLS) stops the
/// start with the listener and the cause; a cluster that does not answer yet is only logged (the
/// connector's clients wait for it, as they wait through any outage).
async fn check_cluster(spec: &ConnectorSpec) -> Result<()> {
    let (bootstrap, security) = (spec.kafka.bootstrap_servers.clone(), spec.kafka.security.clone());
    let checked =
        tokio::task::spawn_blocking(move || crate::kafka::preflight::check(&bootstrap, &security, std::time::Duration::from_secs(5)))
            .await?;
    match checked {
        Ok(()) => Ok(()),
        Err(e) if e.is_retryable() => {
            tracing::warn!(connector = spec.name, "{e}; starting anyway (records wait for the brokers)");
            Ok(())
        }
        Err(e) => Err(anyhow::anyhow!("connector {}: {e}", spec.name)),
    }
}

/// Fails unless every spec's component exists (a quick check before compiling anything).
pub fn check_paths(specs: &[ConnectorSpec]) -> Result<()> {
    for spec in specs {
        if !spec.component_path.is_file() {
            bail!("connector {}: component.path {} does not exist (build it with `make wasm`)", spec.name, spec.component_path.display());
        }
    }
    Ok(())
}

/// What a connector is made ready for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// To run: its gate shares the instance's cap, budget and tokens with the process.
    Run,
    /// To be checked only: nothing of the process changes.
    Check,
}
