//! Conversions of Kafka Connect's framework keys: client overrides, topic creation, exactly-once.

use super::super::rules::{Context, Converted};
use super::one;

/// `producer.override.<k>` → `kafka.producer.<k>` (then checked against the producer's allow-list).
pub fn producer_override(ctx: &Context<'_>, value: &str) -> Converted {
    Converted::Keys(one(ctx.key.replacen("producer.override.", "kafka.producer.", 1), value.trim()))
}

/// `consumer.override.<k>` → `kafka.consumer.<k>` (then checked against the consumer's allow-list).
pub fn consumer_override(ctx: &Context<'_>, value: &str) -> Converted {
    Converted::Keys(one(ctx.key.replacen("consumer.override.", "kafka.consumer.", 1), value.trim()))
}

/// `topic.creation.*`: a source's, as Connect's; a sink creates no topics.
pub fn topic_creation(ctx: &Context<'_>, value: &str) -> Converted {
    if ctx.product.is_sink() {
        return Converted::NotNeeded("a sink creates no topics".into());
    }
    Converted::Keys(one(ctx.key, value))
}

/// `exactly.once.support`.
pub fn exactly_once(_: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_lowercase().as_str() {
        "requested" | "" => Converted::NotNeeded(
            "requested: at-least-once here, duplicates bounded and counted (docs/delivery.md), as Confluent's ServiceNow source".into(),
        ),
        other => Converted::Manual(format!("{other:?}: this runtime's sources are at-least-once; leave the key out")),
    }
}
