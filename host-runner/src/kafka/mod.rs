//! Kafka clients: the producer sources write with, the consumer sinks read with, and the small
//! topic tools (`snow-connect topic ...`) used to inspect what flowed.
//!
//! Defaults favour correctness: an idempotent producer with `acks=all` (ordering survives retries),
//! consumers with `enable.auto.offset.store=false` so only finished records are committed. Both
//! reconnect within a second of a broker's return (librdkafka's default backoff grows to 10 s, which
//! a table waiting for its acknowledgements would spend idle).
//! Any librdkafka key can be overridden with `kafka.producer.*` / `kafka.consumer.*`.

pub mod tools;

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use rdkafka::ClientConfig;
use rdkafka::consumer::StreamConsumer;
use rdkafka::producer::FutureProducer;

use crate::config::KafkaSpec;

fn client_config(bootstrap: &str, defaults: &[(&str, &str)], overrides: &BTreeMap<String, String>) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for (k, v) in defaults {
        config.set(*k, *v);
    }
    for (k, v) in overrides {
        config.set(k, v);
    }
    config
}

/// The producer of a source connector.
pub fn producer(spec: &KafkaSpec) -> Result<FutureProducer> {
    let defaults = [
        ("enable.idempotence", "true"),
        ("acks", "all"),
        ("linger.ms", "5"),
        ("compression.type", "lz4"),
        ("message.timeout.ms", "300000"),
        ("queue.buffering.max.messages", "200000"),
        ("reconnect.backoff.ms", "100"),
        ("reconnect.backoff.max.ms", "1000"),
    ];
    client_config(&spec.bootstrap_servers, &defaults, &spec.producer).create().context("creating the Kafka producer")
}

/// The consumer of a sink connector, in consumer group `group`.
pub fn consumer(spec: &KafkaSpec, group: &str) -> Result<StreamConsumer> {
    let defaults = [
        ("group.id", group),
        ("enable.auto.commit", "true"),
        ("auto.commit.interval.ms", "1000"),
        ("enable.auto.offset.store", "false"),
        ("auto.offset.reset", "earliest"),
        ("session.timeout.ms", "10000"),
        ("reconnect.backoff.ms", "100"),
        ("reconnect.backoff.max.ms", "1000"),
    ];
    client_config(&spec.bootstrap_servers, &defaults, &spec.consumer).create().context("creating the Kafka consumer")
}
