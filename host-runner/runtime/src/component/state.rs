//! The state of one store (one guest instance): its WASI and wasi-http contexts, the outbound gate
//! its requests pass, its memory limit and call budget, and the host interface it imports.

use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, ResourceLimiter, Store, StoreLimits, StoreLimitsBuilder, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::bindings::source::snow::connector::host::{self, Label, Level};
use super::stderr::GuestStderr;
use crate::metrics::{GuestValue, Metrics};
use crate::outbound::Gate;

/// Limits for a store.
#[derive(Debug, Clone, Copy)]
pub struct StoreOptions {
    /// Largest linear memory a guest may grow to.
    pub memory_max_bytes: usize,
    /// Longest a single call into the guest may take, waiting on HTTP included.
    pub call_timeout: Duration,
}

/// Data of one store.
pub struct HostState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    gate: Gate,
    limits: Limits,
    connector: String,
    unit: String,
    metrics: Metrics,
    call_started: Instant,
    call_timeout: Duration,
    /// What the gate's budget waits came to when the call began.
    waited_at_call: Duration,
}

impl HostState {
    /// A store for the guest instance running `unit` of `connector`, sending through `gate`.
    pub fn new_store(
        engine: &Engine,
        connector: &str,
        unit: &str,
        gate: Gate,
        metrics: Metrics,
        options: StoreOptions,
    ) -> Store<HostState> {
        // No preopens, no environment, no arguments, no sockets: only what the linker gives.
        let wasi = WasiCtx::builder().stderr(GuestStderr::new(unit)).build();
        let state = HostState {
            wasi,
            http: WasiHttpCtx::new(),
            table: ResourceTable::new(),
            gate,
            limits: Limits {
                store: StoreLimitsBuilder::new().memory_size(options.memory_max_bytes).instances(16).trap_on_grow_failure(true).build(),
                memory_bytes: 0,
            },
            connector: connector.to_string(),
            unit: format!("{connector}/{unit}"),
            metrics,
            call_started: Instant::now(),
            call_timeout: options.call_timeout,
            waited_at_call: Duration::ZERO,
        };
        let mut store = Store::new(engine, state);
        store.limiter(|s| &mut s.limits);
        store.set_epoch_deadline(1);
        // Yield to tokio every tick so a busy guest never holds an executor thread; interrupt a
        // call that outlived its budget.
        // Time its requests waited for the instance's request budget is not the guest's doing.
        store.epoch_deadline_callback(|ctx| {
            let state = ctx.data();
            if state.call_started.elapsed().saturating_sub(state.budget_waited_in_call()) > state.call_timeout {
                Ok(UpdateDeadline::Interrupt)
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });
        store
    }

    /// How long the current call's requests waited for the instance's request budget (ADR 0034).
    pub fn budget_waited_in_call(&self) -> Duration {
        self.gate.budget_waited().saturating_sub(self.waited_at_call)
    }

    /// The fleet's workers sharing the instance's request budget (1 alone).
    pub fn budget_workers(&self) -> u32 {
        self.gate.budget_workers()
    }

    /// How long the instance stays paused after a 429 that said nothing of when to come back.
    pub fn instance_paused_for(&self) -> Option<Duration> {
        self.gate.paused_for()
    }

    /// Marks the start of a call into the guest (its budget starts now).
    pub fn begin_call(&mut self) {
        self.call_started = Instant::now();
        self.waited_at_call = self.gate.budget_waited();
    }

    /// Requests of this store wait for the instance's budget and in-flight places no later than
    /// `at` (a sink put's limit: its partition's rebalance waits that long at most).
    pub fn wait_no_later_than(&mut self, at: Option<tokio::time::Instant>) {
        self.gate.set_deadline(at);
    }

    /// The linear memory the guest has grown to (its largest memory), in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.limits.memory_bytes
    }
}

/// The store's limits, remembering how large the guest's memory grew.
struct Limits {
    store: StoreLimits,
    memory_bytes: usize,
}

impl ResourceLimiter for Limits {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let granted = self.store.memory_growing(current, desired, maximum)?;
        if granted {
            self.memory_bytes = self.memory_bytes.max(desired);
        }
        Ok(granted)
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        self.store.table_growing(current, desired, maximum)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.store.memory_grow_failed(error)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.store.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.store.instances()
    }

    fn tables(&self) -> usize {
        self.store.tables()
    }

    fn memories(&self) -> usize {
        self.store.memories()
    }
}

impl HostState {
    /// A guest's labels with the connector the instance belongs to (a guest cannot set it).
    fn labels(&self, labels: Vec<Label>) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = labels.into_iter().filter(|l| l.name != "connector").map(|l| (l.name, l.value)).collect();
        out.push(("connector".into(), self.connector.clone()));
        out
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.gate }
    }
}

impl host::Host for HostState {
    fn log(&mut self, level: Level, message: String) {
        let message = crate::redact::clean(&message);
        let unit = self.unit.as_str();
        match level {
            Level::Trace => tracing::trace!(unit, "{message}"),
            Level::Debug => tracing::debug!(unit, "{message}"),
            Level::Info => tracing::info!(unit, "{message}"),
            Level::Warn => tracing::warn!(unit, "{message}"),
            Level::Error => tracing::error!(unit, "{message}"),
        }
    }

    fn counter_add(&mut self, name: String, value: u64, labels: Vec<Label>) {
        let labels = self.labels(labels);
        self.metrics.guest_record(&self.connector, &name, GuestValue::Add(value), &labels);
    }

    fn gauge_set(&mut self, name: String, value: f64, labels: Vec<Label>) {
        let labels = self.labels(labels);
        self.metrics.guest_record(&self.connector, &name, GuestValue::Set(value), &labels);
    }
}
