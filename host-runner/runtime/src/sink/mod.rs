//! Running a sink connector: a consumer in group `connect-<name>` hands records to partition
//! lanes ([`lane`]), each its own guest instance writing its partition in offset order, up to
//! `snow.sink.max.in.flight` at once. Each outcome is judged ([`verdict`]) and reported
//! ([`report`]); a partition's offset advances only past records with a final outcome whose
//! reports Kafka acknowledged. Rebalances are followed ([`rebalance`]).

pub mod instance;
mod lane;
mod rebalance;
mod report;
pub mod verdict;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use rdkafka::TopicPartitionList;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Headers, Message};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::backoff::Backoff;
use crate::component::HostState;
use crate::component::bindings::config_errors;
use crate::component::bindings::sink::SinkPre;
use crate::component::bindings::types::{Header, SinkRecord};
use crate::component::swap::Versions;
use crate::config::InvalidConfig;
use crate::connector::SharedContext;
use crate::convert::sink::SinkConverters;
use crate::shutdown::{Shutdown, ShutdownTrigger};
use crate::status::UnitState;
pub use lane::MAX_BATCH;
use lane::{Lane, LaneIo, LaneShared};
use rebalance::{Change, SinkContext};
use report::Reporter;

/// How long one put may go on starting writes: well inside the wait of a revocation, so a
/// partition is never written by two workers at once.
pub fn rebalance_put_limit() -> Duration {
    rebalance::QUIESCE_LIMIT / 3
}

/// Asks the guest to validate the configuration.
pub async fn validate(ctx: &SharedContext, pre: &SinkPre<HostState>) -> Result<()> {
    if ctx.spec.topics.is_empty() && ctx.spec.sink.topics_regex.is_none() {
        bail!("connector {}: topics: is required for a sink (comma-separated topic names), or topics.regex", ctx.name());
    }
    let mut store = ctx.new_store("validate");
    let instance = pre.instantiate_async(&mut store).await.map_err(|e| anyhow!("instantiating the sink component: {e:#}"))?;
    store.data_mut().begin_call();
    if let Err(errors) = instance
        .snow_connector_sink_api()
        .call_validate(&mut store, &ctx.guest_config())
        .await
        .map_err(|e| anyhow!("the component trapped in validate: {e:#}"))?
    {
        return Err(InvalidConfig::new(ctx.name(), config_errors(&errors, "")).into());
    }
    Ok(())
}

/// A lane's queue above this pauses its partition (the consumer fetches nothing more for it);
/// below [`RESUME_BELOW`] it is resumed. librdkafka drops what it had fetched for a paused
/// partition and fetches again from the next record the lane has not been given.
const PAUSE_ABOVE: usize = 2 * MAX_BATCH;
const RESUME_BELOW: usize = MAX_BATCH / 2;

/// The consumer loop's view of a running lane.
struct LaneEntry {
    io: LaneIo,
    stop: ShutdownTrigger,
    task: JoinHandle<()>,
    /// The last offset handed to the lane (a record at or below it is not handed again).
    last: i64,
    paused: bool,
    /// The lane ended by itself (a panic): its partition stays paused.
    gone: bool,
}

/// Consumes and writes until shutdown: the consumer loop hands each record to its partition's
/// lane ([`lane`]), pauses partitions whose lane is behind, and stops the lanes of partitions a
/// rebalance took away.
pub async fn run(ctx: SharedContext, versions: Arc<Versions<SinkPre<HostState>>>, mut shutdown: Shutdown) -> Result<()> {
    let group = format!("connect-{}", ctx.name());
    let consumer = Arc::new(crate::kafka::consumer(&ctx.spec.kafka, &group, SinkContext::new(ctx.name()))?);
    let mut topics: Vec<String> = ctx.spec.topics.clone();
    if let Some(pattern) = &ctx.spec.sink.topics_regex {
        // librdkafka takes a subscription starting with ^ as a pattern; Connect matches whole names.
        topics.push(format!("^({pattern})$"));
    }
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    consumer.subscribe(&names).with_context(|| format!("subscribing to {}", names.join(",")))?;
    tracing::info!(connector = ctx.name(), group, max_in_flight = ctx.spec.sink.max_in_flight, "consuming {}", names.join(","));
    let shared = Arc::new(LaneShared {
        ctx: ctx.clone(),
        versions,
        consumer: consumer.clone(),
        writers: Arc::new(Semaphore::new(ctx.spec.sink.max_in_flight)),
        reporter: Reporter::new(&ctx.spec)?,
        converters: Some(Arc::new(SinkConverters::new(ctx.spec.convert.clone(), ctx.spec.transforms.clone()))).filter(|c| c.active()),
    });
    let mut lanes: HashMap<(String, i32), LaneEntry> = HashMap::new();
    // Lanes of revoked partitions finishing their put; a new lane of the partition waits for its
    // predecessor, so one partition is never written by two lanes at once.
    let mut stopping: HashMap<(String, i32), JoinHandle<()>> = HashMap::new();
    let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
    let mut consumer_failing = false;
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let received = tokio::select! {
            m = consumer.recv() => Some(m.map(|m| owned(&m))),
            _ = tick.tick() => None,
            _ = shutdown.wait() => break,
        };
        // A rebalance happens inside the poll that returned this record: act on it first, so
        // the record goes to the lane of the partition as it is now assigned, never to a lane
        // that is about to be stopped (whose queue is dropped).
        for change in consumer.context().take_changes() {
            // `topics.regex` may match the sink's own reports or dead letters (only the broker's
            // topic list tells): consuming them would feed the sink on itself forever.
            if let rebalance::Change::Assigned(partitions) = &change
                && let Some((topic, _)) =
                    partitions.iter().find(|(t, _)| own_topics(&ctx).contains(&t.as_str()) || ctx.spec.reserved_topics.contains(t))
            {
                for entry in lanes.values() {
                    entry.stop.fire();
                }
                anyhow::bail!(
                    "topics.regex matches {topic}, one of the sink's own report or dead letter topics or of the fleet's state \
                     topics: it may not consume it; narrow the pattern"
                );
            }
            apply(&shared, &mut lanes, &mut stopping, change);
        }
        match received {
            Some(Ok(record)) => {
                if std::mem::take(&mut consumer_failing) {
                    tracing::info!(connector = ctx.name(), "the Kafka consumer works again");
                    ctx.status.set(ctx.name(), "consumer", UnitState::Running, None);
                }
                backoff.reset();
                let key = (record.topic.clone(), record.partition);
                let entry = lane_of(&shared, &mut lanes, &mut stopping, &key);
                if record.offset <= entry.last {
                    continue;
                }
                entry.last = record.offset;
                entry.io.buffered.fetch_add(1, Ordering::Relaxed);
                if entry.io.queue.send(record).is_err() && !entry.gone {
                    // The lane ended by itself (a panic: its status says so). Its partition stays
                    // paused, its offset where its last reported record left it, until the
                    // connector restarts: said once, not for every record.
                    entry.gone = true;
                    let mut list = TopicPartitionList::new();
                    list.add_partition(&key.0, key.1);
                    if consumer.pause(&list).is_ok() {
                        entry.paused = true;
                    }
                    tracing::error!(
                        connector = ctx.name(),
                        "the lane of {}-{} stopped; its partition is paused until the connector restarts (its records are consumed again then)",
                        key.0,
                        key.1
                    );
                }
            }
            Some(Err(e)) => {
                // Shown and logged at once; the consumer keeps trying (a topic may yet be created,
                // a broker come back).
                consumer_failing = true;
                let message = format!("the Kafka consumer failed: {e}; retrying");
                tracing::error!(connector = ctx.name(), "{message}");
                ctx.status.set(ctx.name(), "consumer", UnitState::Retrying, Some(&message));
                if !shutdown.sleep(backoff.next_delay()).await {
                    break;
                }
            }
            None => {}
        }
        stopping.retain(|_, task| !task.is_finished());
        flow_control(&ctx, &consumer, &mut lanes);
    }
    for entry in lanes.values() {
        entry.stop.fire();
    }
    for (_, entry) in lanes.drain() {
        let _ = entry.task.await;
    }
    for (_, task) in stopping.drain() {
        let _ = task.await;
    }
    if consumer_failing {
        ctx.status.set(ctx.name(), "consumer", UnitState::Stopped, None);
    }
    // Commit what was stored; the records after it will be consumed again by the next run.
    match consumer.commit_consumer_state(CommitMode::Sync) {
        Ok(()) => {}
        // Auto-commit already committed everything stored.
        Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => {}
        Err(e) => tracing::warn!(connector = ctx.name(), "final offset commit: {e}"),
    }
    Ok(())
}

/// The lane of `key`, started (after its predecessor in `stopping`, if any) when there is none.
fn lane_of<'a>(
    shared: &Arc<LaneShared>,
    lanes: &'a mut HashMap<(String, i32), LaneEntry>,
    stopping: &mut HashMap<(String, i32), JoinHandle<()>>,
    key: &(String, i32),
) -> &'a mut LaneEntry {
    lanes.entry(key.clone()).or_insert_with(|| start_lane(shared, &key.0, key.1, stopping.remove(key)))
}

/// A new lane of `topic`-`partition`; it starts writing once `predecessor` (the lane of an earlier
/// assignment of the partition, still finishing its put) has ended.
fn start_lane(shared: &Arc<LaneShared>, topic: &str, partition: i32, predecessor: Option<JoinHandle<()>>) -> LaneEntry {
    let (stop, watch) = crate::shutdown::channel();
    let (lane, io) = Lane::new(shared.clone(), topic, partition, watch);
    let (board, connector, unit) = (shared.ctx.status.clone(), shared.ctx.name().to_string(), format!("{topic}-{partition}"));
    let task = crate::supervise::supervised(board, connector, unit, async move {
        if let Some(previous) = predecessor {
            let _ = previous.await;
        }
        lane.run().await;
    });
    LaneEntry { io, stop, task, last: -1, paused: false, gone: false }
}

/// Acts on a rebalance: revoked partitions' lanes stop (the rebalance callback already waited for
/// their puts in progress, [`rebalance`]); assigned partitions get their lanes at once (so the
/// fleet's status shows where each partition is written, records or not) and are resumed
/// (librdkafka keeps a partition paused across a reassignment).
/// The topics the sink produces to: its report and dead letter topics.
fn own_topics(ctx: &SharedContext) -> Vec<&str> {
    let sink = &ctx.spec.sink;
    [&sink.dlq_topic, &sink.result_topic, &sink.error_topic].into_iter().flatten().map(String::as_str).collect()
}

fn apply(
    shared: &Arc<LaneShared>,
    lanes: &mut HashMap<(String, i32), LaneEntry>,
    stopping: &mut HashMap<(String, i32), JoinHandle<()>>,
    change: Change,
) {
    let ctx = &shared.ctx;
    match change {
        Change::Revoked(partitions) => {
            for key in partitions {
                if let Some(entry) = lanes.remove(&key) {
                    tracing::info!(connector = ctx.name(), "partition {}-{} was revoked; its lane stops", key.0, key.1);
                    entry.stop.fire();
                    stopping.insert(key.clone(), entry.task);
                }
            }
        }
        Change::Assigned(partitions) => {
            tracing::info!(connector = ctx.name(), "assigned {} partition(s): {}", partitions.len(), rebalance::names(&partitions));
            let mut list = TopicPartitionList::new();
            for key in partitions {
                list.add_partition(&key.0, key.1);
                lane_of(shared, lanes, stopping, &key);
            }
            if let Err(e) = shared.consumer.resume(&list) {
                tracing::warn!(connector = ctx.name(), "resuming the assigned partitions: {e}");
            }
        }
    }
}

/// Pauses partitions whose lane has [`PAUSE_ABOVE`] records waiting, resumes them below
/// [`RESUME_BELOW`]: a slow or held partition never makes the consumer stop the others.
fn flow_control(ctx: &SharedContext, consumer: &StreamConsumer<SinkContext>, lanes: &mut HashMap<(String, i32), LaneEntry>) {
    for ((topic, partition), entry) in lanes.iter_mut().filter(|(_, e)| !e.gone) {
        let waiting = entry.io.buffered.load(Ordering::Relaxed);
        let flip = if entry.paused { waiting < RESUME_BELOW } else { waiting > PAUSE_ABOVE };
        if !flip {
            continue;
        }
        let mut list = TopicPartitionList::new();
        list.add_partition(topic, *partition);
        let result = if entry.paused { consumer.resume(&list) } else { consumer.pause(&list) };
        match result {
            Ok(()) => {
                entry.paused = !entry.paused;
                let verb = if entry.paused { "paused" } else { "resumed" };
                tracing::debug!(connector = ctx.name(), "{topic}-{partition} {verb} ({waiting} record(s) waiting in its lane)");
            }
            Err(e) => tracing::warn!(connector = ctx.name(), "pausing or resuming {topic}-{partition}: {e}"),
        }
    }
}

fn owned(m: &rdkafka::message::BorrowedMessage<'_>) -> SinkRecord {
    let headers = m
        .headers()
        .map(|hs| hs.iter().map(|h| Header { key: h.key.to_string(), value: h.value.map(<[u8]>::to_vec).unwrap_or_default() }).collect())
        .unwrap_or_default();
    SinkRecord {
        topic: m.topic().to_string(),
        partition: m.partition(),
        offset: m.offset(),
        key: m.key().map(<[u8]>::to_vec),
        value: m.payload().map(<[u8]>::to_vec),
        headers,
        timestamp_ms: m.timestamp().to_millis(),
    }
}
