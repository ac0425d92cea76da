//! Reading a table's own topic back (ADR 0030, ADR 0035): a `read_committed` consumer assigned
//! by hand (no group, no commits) that keeps quiet about the ends of partitions, and the
//! partitions of a topic. Used to rebuild an exactly-once table's dedup window and a snapshot
//! table's keys.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

/// A consumer context that does not log the ends of partitions it was asked to report.
pub struct Quiet;

impl rdkafka::client::ClientContext for Quiet {
    fn error(&self, error: KafkaError, reason: &str) {
        if !matches!(error, KafkaError::PartitionEOF(_)) {
            tracing::warn!("reading back a table's topic: {error}: {reason}");
        }
    }
}

impl rdkafka::consumer::ConsumerContext for Quiet {}

/// A `read_committed` consumer over `config` (the connector's Kafka settings) that reports the
/// end of each partition it reads.
pub fn consumer(mut config: ClientConfig) -> Result<BaseConsumer<Quiet>> {
    config
        .set("group.id", "snow-connect-read-back")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .create_with_context(Quiet)
        .context("creating the read-back consumer")
}

/// The partitions of `topic` (none when it does not exist).
pub fn partitions(consumer: &BaseConsumer<Quiet>, topic: &str) -> Result<Vec<i32>> {
    let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(30)).context("fetching topic metadata")?;
    Ok(metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic && t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect())
}

/// Reads `[start, end)` of partition `p` of `topic` (or up to its last stable offset, when that
/// comes first), handing each message to `each`; how many it read. Fails once `deadline` passed.
pub fn read_range(
    consumer: &BaseConsumer<Quiet>,
    topic: &str,
    (p, start, end): (i32, i64, i64),
    deadline: Instant,
    mut each: impl FnMut(&BorrowedMessage<'_>),
) -> Result<u64> {
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(topic, p, Offset::Offset(start))?;
    consumer.assign(&assignment)?;
    let mut read = 0u64;
    loop {
        if Instant::now() > deadline {
            bail!("reading back topic {topic} took too long ({read} records read)");
        }
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(message)) if message.offset() < end => {
                read += 1;
                each(&message);
            }
            Some(Ok(_)) | Some(Err(KafkaError::PartitionEOF(_))) => return Ok(read),
            Some(Err(e)) => return Err(e).context("reading back the table's topic"),
            None => {
                // Aborted records and markers are skipped without a message: done once past `end`.
                let position = consumer.position()?.find_partition(topic, p).and_then(|e| e.offset().to_raw());
                if position.is_some_and(|at| at >= end) {
                    return Ok(read);
                }
            }
        }
    }
}

/// The value of header `name` of `message`, when it has one.
pub fn header<'m>(message: &'m BorrowedMessage<'_>, name: &str) -> Option<&'m [u8]> {
    message.headers()?.iter().find(|h| h.key == name).and_then(|h| h.value)
}

/// Whether `message` is a record of `table` on `instance` (its `snow.table`/`snow.instance`).
pub fn of_table(message: &BorrowedMessage<'_>, table: &str, instance: &str) -> bool {
    header(message, "snow.table") == Some(table.as_bytes()) && header(message, "snow.instance") == Some(instance.as_bytes())
}
