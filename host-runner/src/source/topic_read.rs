//! Reading a table's own topic back (ADR 0030, ADR 0035): a `read_committed` consumer assigned
//! by hand (no group, no commits) that keeps quiet about the ends of partitions, and the
//! partitions of a topic. Used to rebuild an exactly-once table's dedup window and a snapshot
//! table's keys.

use std::time::Duration;

use anyhow::{Context, Result};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;

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
