//! One table's unit: a guest instance opened at the stored offset, polled in a loop.
//!
//! Each poll's records are produced, and once Kafka acknowledged all of them the last record's
//! offset is stored. On a trap or a Kafka failure the instance is dropped and a new one opens at
//! the stored offset (records after it are read again: at-least-once). A transient guest error is
//! retried with backoff on the same instance (its cursor did not move); a fatal one parks the unit.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::producer::FutureProducer;
use wasmtime::Store;
use wasmtime::component::ResourceAny;

use super::produce::produce_all;
use crate::backoff::Backoff;
use crate::component::HostState;
use crate::component::bindings::source::{Source, SourcePre};
use crate::component::bindings::types::{ErrorClass, PollBatch, SnowError, SourceOffset, WorkUnit};
use crate::connector::{SharedContext, class_label, describe, to_entries};
use crate::metrics::labels;
use crate::offsets::OffsetStore;
use crate::shutdown::Shutdown;

/// Runs one unit until shutdown or a fatal error.
pub struct UnitRunner {
    pub ctx: SharedContext,
    pub pre: SourcePre<HostState>,
    pub unit: WorkUnit,
    pub offsets: Arc<dyn OffsetStore>,
    pub producer: FutureProducer,
    pub shutdown: Shutdown,
}

/// An opened guest instance and its task handle.
struct Opened {
    store: Store<HostState>,
    instance: Source,
    task: ResourceAny,
}

/// Why the inner loop ended.
enum Restart {
    /// Open a fresh instance at the stored offset after a pause.
    Reopen,
    /// Stop this unit.
    Stop,
}

impl UnitRunner {
    /// The unit loop.
    pub async fn run(mut self) {
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
        let name = self.unit.name.clone();
        while !self.shutdown.is_stopping() {
            let opened = match self.open().await {
                Ok(opened) => opened,
                Err((ErrorClass::Transient, message)) => {
                    tracing::warn!(connector = %self.ctx.name(), unit = %name, "opening failed, retrying: {message}");
                    if !self.shutdown.sleep(backoff.next_delay()).await {
                        break;
                    }
                    continue;
                }
                Err((_, message)) => {
                    self.park(&message);
                    return;
                }
            };
            match self.poll_loop(opened, &mut backoff).await {
                Restart::Stop => break,
                Restart::Reopen => {
                    if !self.shutdown.sleep(backoff.next_delay()).await {
                        break;
                    }
                }
            }
        }
        tracing::info!(connector = %self.ctx.name(), unit = %name, "unit stopped");
    }

    async fn open(&self) -> Result<Opened, (ErrorClass, String)> {
        let mut store = self.ctx.new_store(&self.unit.name);
        let instance = self.pre.instantiate_async(&mut store).await.map_err(|e| (ErrorClass::Fatal, format!("instantiating: {e:#}")))?;
        let offsets: Vec<SourceOffset> =
            self.offsets.load(self.ctx.name()).into_iter().map(|(partition, position)| SourceOffset { partition, position }).collect();
        let config = to_entries(self.unit.config.iter().map(|e| (&e.key, &e.value)));
        store.data_mut().begin_call();
        let task = instance
            .snow_connector_source_api()
            .source_task()
            .call_open(&mut store, &config, &offsets)
            .await
            .map_err(|trap| (ErrorClass::Transient, format!("the component trapped in open: {trap:#}")))?
            .map_err(|e| describe(&e))?;
        Ok(Opened { store, instance, task })
    }

    async fn poll_loop(&mut self, mut opened: Opened, backoff: &mut Backoff) -> Restart {
        let table = self.unit.name.clone();
        let connector = self.ctx.name().to_string();
        let api = opened.instance.snow_connector_source_api();
        loop {
            if self.shutdown.is_stopping() {
                return Restart::Stop;
            }
            opened.store.data_mut().begin_call();
            let batch: PollBatch = match api.source_task().call_poll(&mut opened.store, opened.task).await {
                Ok(Ok(batch)) => batch,
                Ok(Err(error)) => {
                    if !self.is_retryable(&error) {
                        self.park(&describe(&error).1);
                        return Restart::Stop;
                    }
                    if !self.shutdown.sleep(backoff.next_delay()).await {
                        return Restart::Stop;
                    }
                    continue;
                }
                Err(trap) => {
                    tracing::error!(connector = %connector, unit = %table, "the component trapped in poll, reopening at the stored offset: {trap:#}");
                    self.ctx.metrics.counter_add("snow_source_traps_total", 1, &labels(&[("connector", &connector), ("table", &table)]));
                    return Restart::Reopen;
                }
            };
            if let Some(last) = batch.records.last() {
                if let Err(e) = produce_all(&self.producer, &batch.records).await {
                    tracing::error!(connector = %connector, unit = %table, "producing to Kafka failed, reopening at the stored offset: {e}");
                    return Restart::Reopen;
                }
                let offsets = self.offsets.clone();
                let (c, p, pos) = (connector.clone(), last.offset.partition.clone(), last.offset.position.clone());
                let committed = tokio::task::spawn_blocking(move || offsets.commit(&c, &p, &pos)).await;
                match committed {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::error!(connector = %connector, unit = %table, "{e:#}; reopening at the stored offset");
                        return Restart::Reopen;
                    }
                    Err(e) => {
                        tracing::error!(connector = %connector, unit = %table, "offset commit task failed: {e}");
                        return Restart::Reopen;
                    }
                }
                let l = labels(&[("connector", &connector), ("table", &table)]);
                self.ctx.metrics.counter_add("snow_source_records_total", batch.records.len() as u64, &l);
                self.ctx.metrics.counter_add("snow_source_offset_commits_total", 1, &l);
                tracing::debug!(connector = %connector, unit = %table, records = batch.records.len(), "batch acknowledged, offset stored");
            }
            backoff.reset();
            if batch.next_poll_ms > 0 && !self.shutdown.sleep(Duration::from_millis(u64::from(batch.next_poll_ms))).await {
                return Restart::Stop;
            }
        }
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
        self.ctx.metrics.gauge_set("snow_source_unit_parked", 1.0, &labels(&[("connector", connector), ("table", table)]));
    }
}
