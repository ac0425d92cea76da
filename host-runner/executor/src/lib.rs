//! `snow-connect task-executor`: our host without Kafka, driven by the Kafka Connect plugin over
//! stdin/stdout (ADR 0037). The plugin starts one executor per connector validation and per
//! Connect task; Connect owns Kafka I/O, offsets, converters, transforms and the group, the
//! executor owns everything it owns in our own runtime: the component (its signature checked
//! against the plugin's signing policy, compiled once into the cache), the outbound gate
//! (credentials, the instance's host, the in-flight cap, the request budget) and the trap budget.
//!
//! One request at a time ([`frame`]): `PLAN` (validate a configuration and plan its tasks),
//! `OPEN_SOURCE` (start a task's tables at the offsets Connect read), `NEXT` (the next batch, or
//! none within [`NEXT_WAIT`]), `OPEN_SINK`, `PUT` (write records, answer their outcomes), `STOP`.
//! The executor ends when its input ends, so a plugin that dies leaves no executor behind. Its log
//! goes to stderr (redacted as ever); the plugin forwards it to Connect's log.

mod config;
pub mod frame;
mod sink;
mod source;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use serde_json::{Value as Json, json};
use tokio::sync::mpsc;

use frame::{Frame, answer, request};
/// A `PUT` body's records (for the fuzz target of the protocol).
pub use sink::read_records as read_put_records;
use snow_runtime::component::Loaded;
use snow_runtime::component::bindings::types::{ConfigEntry, SourceOffset, WorkUnit};
use snow_runtime::config::{ConfigError, InvalidConfig};
use snow_runtime::connector::SharedContext;
use snow_runtime::runner::Runner;
use snow_runtime::shutdown::ShutdownTrigger;
use source::Handed;

/// How long a `NEXT` waits for a batch before answering `EMPTY`.
pub const NEXT_WAIT: Duration = Duration::from_millis(500);

/// Serves the plugin on stdin/stdout until it says `STOP` or closes stdin.
pub async fn serve(plugin_dir: Option<&str>) -> Result<()> {
    let plugin = config::Plugin::load(&config::plugin_dir(plugin_dir)?)?;
    let mut executor = Executor { runner: Runner::new(plugin.cache.as_deref())?, plugin, task: None, sink: None };
    let mut frames = read_frames();
    let mut out = std::io::stdout().lock();
    while let Some(frame) = frames.recv().await {
        let frame = frame?;
        let stop = frame.kind == request::STOP;
        let (kind, body) = executor.answer(frame).await;
        frame::write(&mut out, kind, &body)?;
        if stop {
            break;
        }
    }
    executor.stop();
    Ok(())
}

/// Frames read from stdin on a thread of their own (a read blocks); ends with the input.
fn read_frames() -> mpsc::Receiver<std::io::Result<Frame>> {
    let (tx, rx) = mpsc::channel(1);
    std::thread::spawn(move || {
        let mut input = std::io::stdin().lock();
        loop {
            let frame = frame::read(&mut input).transpose();
            let end = !matches!(frame, Some(Ok(_)));
            if let Some(frame) = frame
                && tx.blocking_send(frame).is_err()
            {
                return;
            }
            if end {
                return;
            }
        }
    });
    rx
}

/// The executor's state between requests.
struct Executor {
    runner: Runner,
    plugin: config::Plugin,
    /// The open source task: its units' queue and their shutdown.
    task: Option<OpenTask>,
    /// The open sink task.
    sink: Option<sink::SinkRun>,
}

struct OpenTask {
    batches: mpsc::Receiver<Handed>,
    trigger: ShutdownTrigger,
}

/// A request that failed: its message and, for a configuration, the problems by key.
struct Failure {
    message: String,
    errors: Vec<ConfigError>,
}

impl Failure {
    fn of(message: impl Into<String>) -> Self {
        Self { message: message.into(), errors: Vec::new() }
    }

    fn body(&self) -> Vec<u8> {
        let errors = snow_runtime::config::redacted_errors(&self.errors);
        json!({"message": snow_runtime::redact::clean(&self.message), "errors": config::keyed(&errors)}).to_string().into_bytes()
    }
}

impl Executor {
    async fn answer(&mut self, frame: Frame) -> (u8, Vec<u8>) {
        let answered = match frame.kind {
            request::PLAN => self.plan(&frame.body).await.map(|j| (answer::JSON, j.to_string().into_bytes())),
            request::OPEN_SOURCE => self.open_source(&frame.body).await.map(|j| (answer::JSON, j.to_string().into_bytes())),
            request::NEXT => self.next().await,
            request::OPEN_SINK => self.open_sink(&frame.body).await.map(|j| (answer::JSON, j.to_string().into_bytes())),
            request::PUT => match self.sink.as_mut() {
                None => Err(Failure::of("PUT before OPEN_SINK")),
                Some(sink) => sink.put(&frame.body).await.map(|b| (answer::OUTCOMES, b)).map_err(Failure::of),
            },
            request::STOP => {
                self.stop();
                Ok((answer::JSON, b"{}".to_vec()))
            }
            other => Err(Failure::of(format!("unknown request kind {:?}", other as char))),
        };
        answered.unwrap_or_else(|f| (answer::FAILED, f.body()))
    }

    /// `PLAN {"kind", "config", "max_tasks"}` → `{"tasks": [[unit…]…]}` (a source: each unit
    /// with `name`, `partition`, `config` and the `partitions` its positions may be stored
    /// under; a sink: `max_tasks` empty tasks).
    async fn plan(&mut self, body: &[u8]) -> Result<Json, Failure> {
        let request: Json = serde_json::from_slice(body).map_err(|e| Failure::of(format!("a PLAN that is not JSON: {e}")))?;
        let max_tasks = request["max_tasks"].as_u64().unwrap_or(1).clamp(1, 1024) as u32;
        let (ctx, loaded) = self.prepare(&request).await?;
        match loaded {
            Loaded::Source(pre) => {
                let tasks = snow_runtime::source::plan_tasks(&ctx, &pre, max_tasks).await.map_err(invalid)?;
                let tasks: Vec<Vec<Json>> = tasks.iter().map(|units| units.iter().map(unit_json).collect()).collect();
                Ok(json!({"tasks": tasks}))
            }
            Loaded::Sink(pre) => {
                snow_runtime::sink::validate(&ctx, &pre).await.map_err(invalid)?;
                Ok(json!({"tasks": vec![Vec::<Json>::new(); max_tasks as usize]}))
            }
            Loaded::Transform(_) => Err(Failure::of("component.path names a transform component; a connector runs a source or sink")),
        }
    }

    /// `OPEN_SOURCE {"config", "units": [unit…], "offsets": {partition: position}}`: starts the
    /// task's units.
    async fn open_source(&mut self, body: &[u8]) -> Result<Json, Failure> {
        let request: Json = serde_json::from_slice(body).map_err(|e| Failure::of(format!("an OPEN that is not JSON: {e}")))?;
        self.share_budget(&request);
        let (ctx, loaded) = self.prepare(&json!({"kind": "source", "config": request["config"]})).await?;
        let Loaded::Source(pre) = loaded else { return Err(Failure::of("the connector's component is not a source")) };
        let offsets: Vec<SourceOffset> = request["offsets"]
            .as_object()
            .map(|o| {
                o.iter().filter_map(|(p, v)| v.as_str().map(|v| SourceOffset { partition: p.clone(), position: v.to_string() })).collect()
            })
            .unwrap_or_default();
        let units: Vec<WorkUnit> = request["units"].as_array().map(|u| u.iter().filter_map(unit_of).collect()).unwrap_or_default();
        if units.is_empty() {
            return Err(Failure::of("an OPEN with no units"));
        }
        self.stop();
        // The previous task's waits are over; this one's requests wait for the budget again
        // (before, a task opened after a stop ran with no budget at all).
        self.runner.resume_waiting();
        let (trigger, shutdown) = snow_runtime::shutdown::channel();
        let (tx, batches) = mpsc::channel(units.len() * 2);
        for unit in &units {
            let run = source::run_unit(ctx.clone(), pre.clone(), unit.clone(), offsets.clone(), tx.clone(), shutdown.clone());
            tokio::spawn(run);
        }
        tracing::info!(connector = ctx.name(), "task opened: {} tables, {} stored positions", units.len(), offsets.len());
        self.task = Some(OpenTask { batches, trigger });
        Ok(json!({"units": units.len()}))
    }

    /// `OPEN_SINK {"config"}`: a sink task, its lanes opened with their partitions' first records.
    async fn open_sink(&mut self, body: &[u8]) -> Result<Json, Failure> {
        let request: Json = serde_json::from_slice(body).map_err(|e| Failure::of(format!("an OPEN_SINK that is not JSON: {e}")))?;
        self.share_budget(&request);
        let (ctx, loaded) = self.prepare(&json!({"kind": "sink", "config": request["config"]})).await?;
        let Loaded::Sink(pre) = loaded else { return Err(Failure::of("the connector's component is not a sink")) };
        tracing::info!(connector = ctx.name(), "sink task opened");
        self.sink = Some(sink::SinkRun::new(ctx, pre));
        Ok(json!({}))
    }

    /// An `OPEN`'s `tasks`: how many tasks (each a process like this one) the connector runs;
    /// this one spends its share of each instance's request budget (ADR 0034, as a fleet's worker).
    fn share_budget(&self, request: &Json) {
        let tasks = request["tasks"].as_u64().unwrap_or(1).clamp(1, 1024) as u32;
        self.runner.fleet_workers(tasks);
    }

    /// `NEXT`: the next batch of any unit, `EMPTY` when none came within [`NEXT_WAIT`].
    async fn next(&mut self) -> Result<(u8, Vec<u8>), Failure> {
        let task = self.task.as_mut().ok_or_else(|| Failure::of("NEXT before OPEN"))?;
        match tokio::time::timeout(NEXT_WAIT, task.batches.recv()).await {
            Err(_) => Ok((answer::EMPTY, Vec::new())),
            Ok(Some(Handed::Batch(body))) => Ok((answer::BATCH, body)),
            Ok(Some(Handed::Parked(why))) => Err(Failure::of(why)),
            Ok(None) => Err(Failure::of("every table of the task stopped")),
        }
    }

    fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.trigger.fire();
        }
        self.runner.stop_waiting();
    }

    /// The connector `request` names (`kind`, `config`): its spec under the plugin's rules, its
    /// component checked against the signing policy and loaded, and its context.
    async fn prepare(&self, request: &Json) -> Result<(SharedContext, Loaded), Failure> {
        let kind = request["kind"].as_str().unwrap_or("source");
        let config: BTreeMap<String, String> = request["config"]
            .as_object()
            .map(|o| o.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string()))).collect())
            .unwrap_or_default();
        let spec = self.plugin.spec(kind, &config).map_err(|errors| Failure { message: "invalid configuration".into(), errors })?;
        spec.register_secrets();
        let artefact = spec.component().map_err(|e| Failure::of(format!("{e:#}")))?;
        let loaded = self.runner.runtime().load(&artefact).await.map_err(|e| Failure::of(format!("loading the component: {e:#}")))?;
        // Transforms are Connect's: none of ours is bound.
        let ctx = self.runner.context(&spec, Default::default()).map_err(|e| Failure::of(format!("{e:#}")))?;
        Ok((ctx, loaded))
    }
}

/// A plan's or validation's error: the configuration's problems by key when it is invalid.
fn invalid(e: anyhow::Error) -> Failure {
    match e.downcast::<InvalidConfig>() {
        Ok(refused) => Failure { message: "invalid configuration".into(), errors: refused.errors },
        Err(e) => Failure::of(format!("{e:#}")),
    }
}

fn unit_json(unit: &WorkUnit) -> Json {
    let config: BTreeMap<String, String> = unit.config.iter().map(|e| (e.key.clone(), e.value.clone())).collect();
    let partitions = snow_core::source::stored_partitions(&config).unwrap_or_else(|_| vec![unit.partition.clone()]);
    json!({"name": unit.name, "partition": unit.partition, "config": config, "partitions": partitions})
}

fn unit_of(j: &Json) -> Option<WorkUnit> {
    let config = j["config"].as_object()?.iter().filter_map(|(k, v)| Some(ConfigEntry { key: k.clone(), value: v.as_str()?.to_string() }));
    Some(WorkUnit { partition: j["partition"].as_str()?.to_string(), name: j["name"].as_str()?.to_string(), config: config.collect() })
}
