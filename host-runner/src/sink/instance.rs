//! A lane's guest instance: a store with the sink component and its opened `sink-task`.

use anyhow::{Result, anyhow};
use wasmtime::Store;
use wasmtime::component::ResourceAny;

use crate::component::HostState;
use crate::component::bindings::sink::{Sink, SinkPre};
use crate::component::bindings::types::{Outcome, SinkRecord};
use crate::connector::{SharedContext, describe};

/// A lane's guest instance.
pub struct Instance {
    store: Store<HostState>,
    instance: Sink,
    task: ResourceAny,
}

impl Instance {
    /// Instantiates the component and opens a sink task for `topic`-`partition`.
    pub async fn open(ctx: &SharedContext, pre: &SinkPre<HostState>, topic: &str, partition: i32) -> Result<Self> {
        let mut store = ctx.new_store(&format!("{topic}-{partition}"));
        let instance = pre.instantiate_async(&mut store).await.map_err(|e| anyhow!("instantiating: {e:#}"))?;
        store.data_mut().begin_call();
        let task = instance
            .snow_connector_sink_api()
            .sink_task()
            .call_open(&mut store, &ctx.guest_config())
            .await
            .map_err(|e| anyhow!("the component trapped in open: {e:#}"))?
            .map_err(|e| anyhow!("{}", describe(&e).1))?;
        Ok(Self { store, instance, task })
    }

    /// Writes `records`; an `Err` is a trap (the lane must be reopened).
    pub async fn put(&mut self, records: &[SinkRecord]) -> wasmtime::Result<Vec<Outcome>> {
        self.store.data_mut().begin_call();
        self.instance.snow_connector_sink_api().sink_task().call_put(&mut self.store, self.task, records).await
    }
}
