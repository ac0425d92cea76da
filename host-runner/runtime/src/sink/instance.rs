//! A lane's guest instance: a store with the sink component and its opened `sink-task`.

use anyhow::{Result, anyhow};
use wasmtime::Store;
use wasmtime::component::ResourceAny;

use crate::component::HostState;
use crate::component::bindings::sink::{Sink, SinkPre};
use crate::component::bindings::types::{ConfigEntry, Outcome, SinkRecord};
use crate::connector::{SharedContext, describe};

/// What the host knows of a lane's records when it opens the lane's instance, told to the
/// component as `snow.sink.*` keys (snow-core's `LaneFacts`).
#[derive(Debug, Clone, Copy, Default)]
pub struct LaneFacts {
    /// The partition's end when the lane took it over: an earlier owner may have written the
    /// records below it.
    pub takeover_below: Option<i64>,
    /// The last offset of a put that ended without outcomes (a trap, a call timeout).
    pub unknown_through: Option<i64>,
    /// How long one put may go on starting writes: well inside the wait of a revocation, so a
    /// partition is never written by two workers at once.
    pub put_limit: std::time::Duration,
}

impl LaneFacts {
    /// `config` with the facts added.
    fn config(&self, mut config: Vec<ConfigEntry>) -> Vec<ConfigEntry> {
        let mut add = |key: &str, value: String| config.push(ConfigEntry { key: key.to_string(), value });
        if let Some(below) = self.takeover_below {
            add("snow.sink.takeover.below", below.to_string());
        }
        if let Some(through) = self.unknown_through {
            add("snow.sink.unknown.through", through.to_string());
        }
        add("snow.sink.put.budget.ms", self.put_limit.as_millis().to_string());
        config
    }
}

/// A lane's guest instance.
pub struct Instance {
    store: Store<HostState>,
    instance: Sink,
    task: ResourceAny,
}

impl Instance {
    /// Instantiates the component and opens a sink task for `topic`-`partition`, telling it
    /// `facts` (what the host knows of the lane's records: [`LaneFacts`]).
    pub async fn open(ctx: &SharedContext, pre: &SinkPre<HostState>, topic: &str, partition: i32, facts: &LaneFacts) -> Result<Self> {
        let mut store = ctx.new_store(&format!("{topic}-{partition}"));
        let instance = pre.instantiate_async(&mut store).await.map_err(|e| anyhow!("instantiating: {e:#}"))?;
        store.data_mut().begin_call();
        let task = instance
            .snow_connector_sink_api()
            .sink_task()
            .call_open(&mut store, &facts.config(ctx.guest_config()))
            .await
            .map_err(|e| anyhow!("the component trapped in open: {e:#}"))?
            .map_err(|e| anyhow!("{}", describe(&e).1))?;
        Ok(Self { store, instance, task })
    }

    /// Writes `records` within `limit` (no request waits for the instance's budget or an
    /// in-flight place past it); an `Err` is a trap (the lane must be reopened).
    pub async fn put(&mut self, records: &[SinkRecord], limit: std::time::Duration) -> wasmtime::Result<Vec<Outcome>> {
        self.store.data_mut().begin_call();
        self.store.data_mut().wait_no_later_than(Some(tokio::time::Instant::now() + limit));
        self.instance.snow_connector_sink_api().sink_task().call_put(&mut self.store, self.task, records).await
    }
}
