//! Kafka clients: the producer sources write with, the consumer sinks read with, and the small
//! topic tools (`snow-connect topic ...`) used to inspect what flowed.
//!
//! Defaults favour correctness: an idempotent producer with `acks=all` (ordering survives retries),
//! consumers with `enable.auto.offset.store=false` so only finished records are committed. Both
//! reconnect within a second of a broker's return (librdkafka's default backoff grows to 10 s, which
//! a table waiting for its acknowledgements would spend idle).
//! A connector tunes its clients with `kafka.producer.*` / `kafka.consumer.*` (an allow-list:
//! [`keys`]); the connection's security applies to every client ([`KafkaSpec::security`]).

pub mod keys;
pub mod preflight;
pub mod security;
mod spec;
pub mod tools;

pub use spec::KafkaSpec;

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use rdkafka::ClientConfig;
use rdkafka::consumer::{ConsumerContext, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::FutureProducer;

/// The settings of a client of `spec`'s cluster: its brokers and security, `defaults`, then
/// `overrides`.
fn client_config(spec: &KafkaSpec, defaults: &[(&str, &str)], overrides: &BTreeMap<String, String>) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &spec.bootstrap_servers);
    for (k, v) in &spec.security {
        config.set(k, v);
    }
    for (k, v) in defaults {
        config.set(*k, *v);
    }
    for (k, v) in overrides {
        config.set(k, v);
    }
    config
}

/// The producer settings of a source connector: the defaults, then `kafka.producer.*`.
pub fn producer_config(spec: &KafkaSpec) -> ClientConfig {
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
    client_config(spec, &defaults, &spec.producer)
}

/// The settings of an admin client of `spec`'s cluster (a source creating its topics).
pub fn admin_config(spec: &KafkaSpec) -> ClientConfig {
    client_config(spec, &[], &BTreeMap::new())
}

/// The producer of a source connector.
pub fn producer(spec: &KafkaSpec) -> Result<FutureProducer> {
    producer_config(spec).create().context("creating the Kafka producer")
}

/// The consumer settings of a sink connector in group `group`: the defaults, then `kafka.consumer.*`.
fn consumer_config(spec: &KafkaSpec, group: &str) -> ClientConfig {
    let defaults = [
        ("group.id", group),
        ("enable.auto.commit", "true"),
        ("auto.commit.interval.ms", "1000"),
        ("enable.auto.offset.store", "false"),
        ("auto.offset.reset", "earliest"),
        ("session.timeout.ms", "10000"),
        // A rebalance moves only the partitions that must move: the others' lanes go on writing
        // (an eager rebalance would stop every lane, each revocation waiting for its put).
        ("partition.assignment.strategy", "cooperative-sticky"),
        ("reconnect.backoff.ms", "100"),
        ("reconnect.backoff.max.ms", "1000"),
    ];
    client_config(spec, &defaults, &spec.consumer)
}

/// The consumer of a sink connector, in consumer group `group`, with `context` told of rebalances.
pub fn consumer<C: ConsumerContext + 'static>(spec: &KafkaSpec, group: &str, context: C) -> Result<StreamConsumer<C>> {
    consumer_config(spec, group).create_with_context(context).context("creating the Kafka consumer")
}

/// Checks a connector's producer settings (a source's records, a sink's reports and dead
/// letters) without creating a client (nothing connects): librdkafka
/// takes every key and value, and nothing lets Kafka lose records it acknowledged — `acks` other
/// than `all` or `enable.idempotence=false` — unless `kafka.producer.unsafe=true` says the user
/// accepts that loss.
pub fn check_producer(spec: &KafkaSpec) -> Result<()> {
    let config = producer_config(spec);
    native(&config, spec, "kafka.producer.")?;
    if !spec.unsafe_producer {
        if let Some(acks) = config.get("acks").filter(|a| !matches!(a.trim(), "all" | "-1")) {
            bail!(
                "kafka.producer.acks={acks}: a record counts as done once Kafka acknowledged it (a source's records, a sink's \
                 reports and dead letters), and acks other than all lets a broker failure lose acknowledged records; use acks=all, or \
                 set kafka.producer.unsafe=true to accept the loss"
            );
        }
        if let Some(off) = config.get("enable.idempotence").filter(|v| v.trim() == "false") {
            bail!(
                "kafka.producer.enable.idempotence={off}: without idempotence a retried send can reorder or repeat records; keep it \
                 true, or set kafka.producer.unsafe=true to accept that"
            );
        }
    }
    Ok(())
}

/// Checks a sink's consumer settings without creating a client.
pub fn check_consumer(spec: &KafkaSpec, group: &str) -> Result<()> {
    native(&consumer_config(spec, group), spec, "kafka.consumer.")
}

/// Builds librdkafka's configuration from `config` (each key and value checked, nothing started);
/// an error names the key as the connector file writes it (`prefix` + the librdkafka key) and
/// never shows a secret's value.
fn native(config: &ClientConfig, spec: &KafkaSpec, prefix: &str) -> Result<()> {
    match config.create_native_config() {
        Ok(_) => Ok(()),
        Err(KafkaError::ClientConfig(_, description, key, value)) => {
            let shown = match key.as_str() {
                "bootstrap.servers" => "kafka.bootstrap.servers".to_string(),
                k if spec.security.contains_key(k) => format!("kafka.{k}"),
                k => format!("{prefix}{k}"),
            };
            let value = if keys::SECURITY_SECRETS.contains(&key.as_str()) { "[hidden]".to_string() } else { value };
            bail!("{shown}={value}: {description}")
        }
        Err(e) => Err(e).context("checking the Kafka client settings"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(producer: &[(&str, &str)], unsafe_producer: bool) -> KafkaSpec {
        KafkaSpec {
            bootstrap_servers: "127.0.0.1:9092".into(),
            producer: producer.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            unsafe_producer,
            ..Default::default()
        }
    }

    #[test]
    fn producer_settings_are_checked_without_connecting() {
        assert!(check_producer(&spec(&[("linger.ms", "20")], false)).is_ok());
        let err = check_producer(&spec(&[("linger.ms", "soon")], false)).unwrap_err().to_string();
        assert!(err.starts_with("kafka.producer.linger.ms=soon: "), "{err}");
        let err = check_producer(&spec(&[("no.such.key", "1")], false)).unwrap_err().to_string();
        assert!(err.starts_with("kafka.producer.no.such.key=1: "), "{err}");
        let secure = KafkaSpec { security: [("security.protocol".into(), "NOPE".into())].into(), ..spec(&[], false) };
        let err = check_producer(&secure).unwrap_err().to_string();
        assert!(err.starts_with("kafka.security.protocol=NOPE: "), "{err}");
        let err = check_producer(&spec(&[("acks", "1")], false)).unwrap_err().to_string();
        assert!(err.starts_with("kafka.producer.acks=1: ") && err.contains("kafka.producer.unsafe=true"), "{err}");
        assert!(check_producer(&spec(&[("acks", "-1")], false)).is_ok());
        let err = check_producer(&spec(&[("enable.idempotence", "false")], false)).unwrap_err().to_string();
        assert!(err.starts_with("kafka.producer.enable.idempotence=false"), "{err}");
        assert!(check_producer(&spec(&[("acks", "1"), ("enable.idempotence", "false")], true)).is_ok(), "the user accepts the loss");
        let err = check_consumer(&KafkaSpec { consumer: [("fetch.wait.max.ms".into(), "x".into())].into(), ..spec(&[], false) }, "g")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("kafka.consumer.fetch.wait.max.ms=x"), "{err}");
    }
}
