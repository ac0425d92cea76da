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

/// `exactly.once.support`: Confluent's ServiceNow source is at-least-once whatever it says, so
/// `requested` (Connect's default) keeps that; `required` asks for this runtime's transactions.
pub fn exactly_once(ctx: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_lowercase().as_str() {
        "requested" | "" => Converted::NotNeeded(
            "requested: at-least-once as Confluent's ServiceNow source ran, duplicates bounded and counted (docs/delivery.md); \
             exactly.once.support=required makes this runtime write transactions"
                .into(),
        ),
        "required" if !ctx.product.is_sink() => Converted::Review(
            one("exactly.once.support", "required"),
            "transactions per table (ADR 0030): consumers must read isolation.level=read_committed, and a standalone run needs \
             offset.storage.topic"
                .into(),
        ),
        other => Converted::Manual(format!("{other:?}: exactly-once applies to sources with requested or required; leave the key out")),
    }
}
