//! Running a source connector: validate the configuration in the guest, plan its tables over
//! tasks, and run each table as a unit in its own guest instance ([`unit`], the one source loop,
//! which the Connect executor runs too). Our runtime's units hand their batches to Kafka
//! ([`to_kafka`]) — only to the topics the connector's configuration names — and a table's offset
//! is stored only after Kafka acknowledged every record up to it ([`produce`], [`pipeline`]).

mod budget;
mod create_topic;
pub mod exactly_once;
pub mod pipeline;
pub mod produce;
mod snapshot_seed;
mod to_kafka;
pub(crate) mod topic_read;
mod unit;

pub use unit::{Flow, OpenFailure, Outlet, Polled, Table, Unit, budget_notice};

use std::sync::Arc;

use anyhow::{Result, anyhow};

use crate::component::HostState;
use crate::component::bindings::config_errors;
use crate::component::bindings::source::SourcePre;
use crate::component::bindings::types::WorkUnit;
use crate::component::swap::Versions;
use crate::config::InvalidConfig;
use crate::connector::{SharedContext, describe};
use crate::offsets::OffsetStore;
use crate::shutdown::Shutdown;

/// Asks the guest to validate the configuration and plan its units.
pub async fn plan(ctx: &SharedContext, pre: &SourcePre<HostState>) -> Result<Vec<WorkUnit>> {
    Ok(plan_tasks(ctx, pre, ctx.spec.tasks_max).await?.into_iter().flatten().collect())
}

/// Asks the guest to validate the configuration and plan its units over at most `max_tasks`
/// tasks, as it groups them.
pub async fn plan_tasks(ctx: &SharedContext, pre: &SourcePre<HostState>, max_tasks: u32) -> Result<Vec<Vec<WorkUnit>>> {
    let mut store = ctx.new_store("plan");
    let instance = pre.instantiate_async(&mut store).await.map_err(|e| anyhow!("instantiating the source component: {e:#}"))?;
    let api = instance.snow_connector_source_api();
    let config = ctx.guest_config();
    store.data_mut().begin_call();
    if let Err(errors) = api.call_validate(&mut store, &config).await.map_err(|e| anyhow!("the component trapped in validate: {e:#}"))? {
        return Err(InvalidConfig::new(ctx.name(), config_errors(&errors, "")).into());
    }
    store.data_mut().begin_call();
    let tasks = api
        .call_plan(&mut store, &config, max_tasks)
        .await
        .map_err(|e| anyhow!("the component trapped in plan: {e:#}"))?
        .map_err(|e| anyhow!("connector {}: {}", ctx.name(), describe(&e).1))?;
    tracing::info!(
        connector = ctx.name(),
        "planned {} units over {} tasks",
        tasks.iter().map(|t| t.units.len()).sum::<usize>(),
        tasks.len()
    );
    Ok(tasks.into_iter().map(|t| t.units).collect())
}

/// Runs every unit until shutdown; a unit that fails for good is parked and the others go on.
pub async fn run(
    ctx: SharedContext,
    versions: Arc<Versions<SourcePre<HostState>>>,
    units: Vec<WorkUnit>,
    offsets: Arc<dyn OffsetStore>,
    shutdown: Shutdown,
) -> Result<()> {
    let producer = crate::kafka::producer(&ctx.spec.kafka)?;
    let topics = allowed_topics(&ctx);
    let handles: Vec<_> = units
        .into_iter()
        .map(|unit| spawn_unit(&ctx, &versions, unit, offsets.clone(), &producer, &topics, None, shutdown.clone()))
        .collect();
    for handle in handles {
        handle.await?;
    }
    Ok(())
}

/// The only topics the component may produce to: those the connector's own configuration names
/// (never what the component's plan or batches say).
pub fn allowed_topics(ctx: &SharedContext) -> Arc<std::collections::BTreeSet<String>> {
    Arc::new(snow_core::config::source::configured_topics(&ctx.spec.guest_config))
}

/// Starts one unit, following the connector's component versions, until `shutdown`. In exactly-once
/// mode its polls commit through `fence` (a fleet versions's producer) or, without one, a producer of
/// its own (standalone, offsets in a topic).
#[allow(clippy::too_many_arguments)]
pub fn spawn_unit(
    ctx: &SharedContext,
    versions: &Arc<Versions<SourcePre<HostState>>>,
    unit: WorkUnit,
    offsets: Arc<dyn OffsetStore>,
    producer: &rdkafka::producer::FutureProducer,
    topics: &Arc<std::collections::BTreeSet<String>>,
    fence: Option<Arc<crate::source::exactly_once::transactions::Transactions>>,
    shutdown: Shutdown,
) -> tokio::task::JoinHandle<()> {
    let exactly_once = match (ctx.spec.exactly_once.wanted(), fence, offsets.offsets_topic()) {
        (false, _, _) | (true, _, None) => None,
        (true, Some(fence), Some(topic)) => {
            Some(exactly_once::table::ExactlyOnce { fence: exactly_once::table::Fence::Slot(fence), offsets: topic })
        }
        (true, None, Some(topic)) => Some(exactly_once::table::ExactlyOnce::own(&ctx.spec, &unit.name, topic)),
    };
    let wake = ctx.spec.push.as_ref().map(|push| ctx.wakes.register(ctx.name(), &unit.name, push.clone()));
    let outlet = to_kafka::ToKafka::new(ctx, offsets, producer.clone(), exactly_once);
    let unit_name = unit.name.clone();
    let table = Table { ctx: ctx.clone(), unit, shutdown };
    let runner = Unit::new(table, versions.watch(), topics.clone(), wake, outlet);
    crate::supervise::supervised(ctx.status.clone(), ctx.name().to_string(), unit_name, runner.run())
}
