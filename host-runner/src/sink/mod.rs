//! Running a sink connector: a consumer in group `connect-<name>` feeds records to partition lanes
//! ([`lane`]), each its own guest instance, in offset order. A partition's offset advances only past
//! records with a final outcome; a retryable failure holds the partition and is retried with backoff.

mod lane;

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Headers, Message};

use crate::backoff::Backoff;
use crate::component::HostState;
use crate::component::bindings::sink::SinkPre;
use crate::component::bindings::types::{ErrorClass, Header, Operation, Outcome, SinkRecord};
use crate::component::trap::one_line;
use crate::connector::{SharedContext, class_label, config_errors_text, describe};
use crate::metrics::labels;
use crate::shutdown::Shutdown;
use crate::status::UnitState;
use lane::Lane;

/// Most records handed to one `put`.
const MAX_BATCH: usize = 500;

/// Asks the guest to validate the configuration.
pub async fn validate(ctx: &SharedContext, pre: &SinkPre<HostState>) -> Result<()> {
    if ctx.spec.topics.is_empty() {
        bail!("connector {}: topics: is required for a sink (comma-separated topic names)", ctx.name());
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
        bail!("connector {} has an invalid configuration:\n  {}", ctx.name(), config_errors_text(&errors));
    }
    Ok(())
}

/// Consumes and writes until shutdown.
pub async fn run(ctx: SharedContext, pre: SinkPre<HostState>, mut shutdown: Shutdown) -> Result<()> {
    let group = format!("connect-{}", ctx.name());
    let consumer = crate::kafka::consumer(&ctx.spec.kafka, &group)?;
    let topics: Vec<&str> = ctx.spec.topics.iter().map(String::as_str).collect();
    consumer.subscribe(&topics).with_context(|| format!("subscribing to {}", topics.join(",")))?;
    tracing::info!(connector = ctx.name(), group, "consuming {}", topics.join(","));
    let mut lanes: HashMap<(String, i32), Lane> = HashMap::new();
    let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
    let mut consumer_failing = false;
    'consume: loop {
        let first = tokio::select! {
            m = consumer.recv() => m,
            _ = shutdown.wait() => break,
        };
        let first = match first {
            Ok(m) => owned(&m),
            Err(e) => {
                // Shown and logged at once; the consumer keeps trying (a topic may yet be created,
                // a broker come back).
                consumer_failing = true;
                let message = format!("the Kafka consumer failed: {e}; retrying");
                tracing::error!(connector = ctx.name(), "{message}");
                ctx.status.set(ctx.name(), "consumer", UnitState::Retrying, Some(&message));
                if !shutdown.sleep(backoff.next_delay()).await {
                    break;
                }
                continue;
            }
        };
        if std::mem::take(&mut consumer_failing) {
            tracing::info!(connector = ctx.name(), "the Kafka consumer works again");
            ctx.status.set(ctx.name(), "consumer", UnitState::Running, None);
        }
        let mut batch = vec![first];
        // Take what is already buffered, without waiting, up to a batch; an error waits for the next round.
        while batch.len() < MAX_BATCH {
            match tokio::time::timeout(Duration::ZERO, consumer.recv()).await {
                Ok(Ok(m)) => batch.push(owned(&m)),
                Ok(Err(_)) | Err(_) => break,
            }
        }
        for ((topic, partition), mut records) in group_by_partition(batch) {
            let key = (topic.clone(), partition);
            let unit = format!("{topic}-{partition}");
            let state = |state: UnitState, message: Option<&str>| ctx.status.set(ctx.name(), &unit, state, message);
            loop {
                let lane = match lanes.get_mut(&key) {
                    Some(lane) => lane,
                    None => match Lane::open(&ctx, &pre, &topic, partition).await {
                        Ok(lane) => lanes.entry(key.clone()).or_insert(lane),
                        Err(e) => {
                            tracing::error!(connector = ctx.name(), "opening the lane of {topic}-{partition} failed, retrying: {e:#}");
                            state(UnitState::Retrying, Some(&format!("opening the lane failed: {e:#}")));
                            if !shutdown.sleep(backoff.next_delay()).await {
                                break 'consume;
                            }
                            continue;
                        }
                    },
                };
                let outcomes = match lane.put(&records).await {
                    Ok(outcomes) => outcomes,
                    Err(trap) => {
                        tracing::error!(
                            connector = ctx.name(),
                            "the component trapped in put for {topic}-{partition}, reopening the lane: {trap:#}"
                        );
                        lanes.remove(&key);
                        state(UnitState::Retrying, Some(&format!("the component trapped in put: {}", one_line(&trap))));
                        if !shutdown.sleep(backoff.next_delay()).await {
                            break 'consume;
                        }
                        continue;
                    }
                };
                let (done, held) = settle(&ctx, &records, &outcomes);
                if let Some(last) = done.checked_sub(1).map(|i| &records[i]) {
                    consumer
                        .store_offset(&topic, partition, last.offset)
                        .with_context(|| format!("storing the offset of {topic}-{partition}@{}", last.offset))?;
                }
                if !held {
                    state(UnitState::Running, None);
                    backoff.reset();
                    break;
                }
                let at = records.get(done).map_or(0, |r| r.offset);
                state(UnitState::Retrying, Some(&format!("a retryable failure holds the partition at offset {at}")));
                records.drain(..done);
                if !shutdown.sleep(backoff.next_delay()).await {
                    break 'consume;
                }
            }
        }
    }
    for (topic, partition) in lanes.keys() {
        ctx.status.set(ctx.name(), &format!("{topic}-{partition}"), UnitState::Stopped, None);
    }
    if consumer_failing {
        ctx.status.set(ctx.name(), "consumer", UnitState::Stopped, None);
    }
    lanes.clear();
    // Commit what was stored; the records after it will be consumed again by the next run.
    match consumer.commit_consumer_state(CommitMode::Sync) {
        Ok(()) => {}
        // Auto-commit already committed everything stored.
        Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => {}
        Err(e) => tracing::warn!(connector = ctx.name(), "final offset commit: {e}"),
    }
    Ok(())
}

/// Accounts for the outcomes of a `put`: how many leading records are final, and whether the
/// partition is held at the next one (a retryable failure).
fn settle(ctx: &SharedContext, records: &[SinkRecord], outcomes: &[Outcome]) -> (usize, bool) {
    let connector = ctx.name();
    for (i, (record, outcome)) in records.iter().zip(outcomes).enumerate() {
        match outcome {
            Outcome::Written(w) => {
                ctx.metrics.counter_add(
                    "snow_sink_records_total",
                    1,
                    &labels(&[("connector", connector), ("outcome", "written"), ("operation", operation_label(w.operation))]),
                );
            }
            Outcome::Skipped(skipped) => {
                tracing::info!(
                    connector,
                    "record {}-{}@{} skipped: row {} of table {} does not exist (snow.sink.not.found=ignore)",
                    record.topic,
                    record.partition,
                    record.offset,
                    skipped.sys_id,
                    skipped.table
                );
                ctx.metrics.counter_add(
                    "snow_sink_records_total",
                    1,
                    &labels(&[("connector", connector), ("outcome", "skipped"), ("reason", "not_found")]),
                );
            }
            Outcome::Failed(error) => {
                let (class, message) = describe(error);
                if class == ErrorClass::Transient {
                    tracing::warn!(connector, "holding {}-{} at offset {}: {message}", record.topic, record.partition, record.offset);
                    return (i, true);
                }
                // No dead letter queue yet: the failure is logged with the record's coordinates.
                tracing::error!(
                    connector,
                    "record {}-{}@{} failed ({}): {message}",
                    record.topic,
                    record.partition,
                    record.offset,
                    class_label(class)
                );
                ctx.metrics.counter_add(
                    "snow_sink_records_total",
                    1,
                    &labels(&[("connector", connector), ("outcome", "failed"), ("class", class_label(class))]),
                );
            }
        }
    }
    if outcomes.len() < records.len() {
        tracing::error!(connector, "the component returned {} outcomes for {} records; holding the rest", outcomes.len(), records.len());
        return (outcomes.len(), true);
    }
    (records.len(), false)
}

/// The operation as a metric label.
fn operation_label(op: Operation) -> &'static str {
    match op {
        Operation::Create => "create",
        Operation::Patch => "patch",
        Operation::Put => "put",
        Operation::Delete => "delete",
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

/// Groups records by topic-partition, keeping offset order within each.
fn group_by_partition(batch: Vec<SinkRecord>) -> Vec<((String, i32), Vec<SinkRecord>)> {
    let mut groups: Vec<((String, i32), Vec<SinkRecord>)> = Vec::new();
    for record in batch {
        let key = (record.topic.clone(), record.partition);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, list)) => list.push(record),
            None => groups.push((key, vec![record])),
        }
    }
    groups
}
