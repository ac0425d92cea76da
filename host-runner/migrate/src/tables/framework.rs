//! Kafka Connect's own keys, shared by every product: what this runtime reads as Connect does
//! passes through unchanged (and is then checked by the runtime's own configuration parser, so a
//! converter option or transform it does not take is reported by name); the rest is classified.

use super::{convert, decide, drop, manual, same};
use crate::conversions::connect;
use crate::rules::KeyRule;

const CONNECT: &str = "Apache Kafka Connect";

pub const RULES: &[KeyRule] = &[
    same("name", "the connector's name (folded connectors get a new one)", CONNECT),
    same(
        "tasks.max",
        "a source spreads its tables over this many tasks; a sink writes its partitions in lanes (snow.sink.max.in.flight)",
        CONNECT,
    ),
    same("key.converter", "checked by the runtime's converter configuration", CONNECT),
    same("key.converter.*", "checked by the runtime's converter configuration", CONNECT),
    same("value.converter", "checked by the runtime's converter configuration", CONNECT),
    same("value.converter.*", "checked by the runtime's converter configuration", CONNECT),
    same("header.converter", "SimpleHeaderConverter only", CONNECT),
    same("header.converter.*", "SimpleHeaderConverter only", CONNECT),
    same("transforms", "Connect's built-in transforms by their class names (docs/transforms.md)", CONNECT),
    same("transforms.*", "checked by the runtime's transform configuration", CONNECT),
    same("predicates", "Connect's built-in predicates", CONNECT),
    same("predicates.*", "checked by the runtime's transform configuration", CONNECT),
    same("topics", "", CONNECT),
    same("topics.regex", "librdkafka's POSIX-style expression, matched against whole names", CONNECT),
    same("errors.tolerance", "", CONNECT),
    same("errors.deadletterqueue.topic.name", "", CONNECT),
    same("errors.deadletterqueue.context.headers.enable", "on by default here", CONNECT),
    manual(
        "errors.deadletterqueue.topic.replication.factor",
        "the dead letter topic is not created here: create it beforehand (kafka-topics.sh --create --replication-factor N) or let the broker create it",
        CONNECT,
    ),
    drop(
        "errors.retry.timeout",
        "transient failures (ServiceNow's, Kafka's) are retried without a bound here; converters and transforms do not fail transiently",
        CONNECT,
    ),
    drop("errors.retry.delay.max.ms", "see errors.retry.timeout", CONNECT),
    drop("errors.log.enable", "failures are always logged (without the record's contents) and counted", CONNECT),
    drop("errors.log.include.messages", "record contents are never logged here (they may hold personal data)", CONNECT),
    convert(
        "topic.creation.*",
        "topic.creation.*",
        connect::topic_creation,
        "a source's topics, as Connect creates them; a sink creates none",
        CONNECT,
    ),
    decide(
        "exactly.once.support",
        connect::exactly_once,
        "requested: at-least-once with a stated bound; required: transactions (ADR 0030)",
        CONNECT,
    ),
    drop("transaction.boundary", "with exactly.once.support", CONNECT),
    drop("transaction.boundary.interval.ms", "with exactly.once.support", CONNECT),
    manual(
        "offsets.storage.topic",
        "a source's offsets live in offset.storage.topic (standalone) or the worker's offsets topic; the old connector's position carries over with `snow-connect migrate cutover`",
        CONNECT,
    ),
    convert(
        "producer.override.*",
        "kafka.producer.*",
        connect::producer_override,
        "the producer's tuning settings a connector may set",
        CONNECT,
    ),
    convert(
        "consumer.override.*",
        "kafka.consumer.*",
        connect::consumer_override,
        "the consumer's tuning settings a connector may set",
        CONNECT,
    ),
    drop("admin.override.*", "no admin client settings per connector", CONNECT),
    drop("config.action.reload", "a changed configuration is taken at the next start (SIGHUP swaps components)", CONNECT),
];
