//! Conversions of a sink's keys: its table, Confluent's write choices, its reports and dead letters.

use super::super::rules::{Context, Converted};
use super::one;

/// A sink's `servicenow.table`.
pub fn sink_table(_: &Context<'_>, value: &str) -> Converted {
    Converted::Keys(one("snow.sink.table", value.trim()))
}

/// Confluent's sinks as a whole: POST without a sys_id, DELETE on a tombstone, PUT otherwise,
/// the sys_id in a key struct's `sysId`. Cloud's sink also goes on past refused records.
pub fn confluent_sink(ctx: &Context<'_>, _: &str) -> Converted {
    let mut keys =
        vec![("snow.sink.update.method".to_string(), "put".to_string()), ("snow.sink.sys.id.key.field".to_string(), "sysId".to_string())];
    if ctx.product == crate::Product::CloudSink {
        keys.push(("behavior.on.api.errors".into(), "log".into()));
    }
    Converted::Keys(keys)
}

/// CP's `reporter.bootstrap.servers`: reports go to the connector's own cluster here; its
/// presence switched Confluent's reporter on, with its default topic names.
pub fn reporter_bootstrap(ctx: &Context<'_>, _: &str) -> Converted {
    let mut keys = Vec::new();
    if !ctx.entries.contains_key("reporter.result.topic.name") {
        keys.push(("reporter.result.topic.name".to_string(), "${connector}-success".to_string()));
    }
    if !ctx.entries.contains_key("reporter.error.topic.name") {
        keys.push(("reporter.error.topic.name".to_string(), "${connector}-error".to_string()));
    }
    Converted::Review(
        keys,
        "reports go to the connector's own Kafka cluster; Confluent's reporter was on with this key, so its default topics \
         (${connector}-success, ${connector}-error) are kept where not named"
            .into(),
    )
}

fn reporter_topic(ctx: &Context<'_>, key: &str, value: &str) -> Converted {
    let v = value.trim();
    let mut why = String::from(
        "same topic; a report is JSON ({connector, topic, partition, offset, key, outcome, operation, table, sys_id, \
         status, message}) where Confluent wrote {requestMethod, statusCode, responseString}: adapt its consumers",
    );
    if ctx.product.is_cloud() && v.contains("${connector}") {
        why.push_str(CLOUD_CONNECTOR_NAME);
    }
    Converted::Review(one(key, v), why)
}

/// `reporter.result.topic.name`.
pub fn reporter_result(ctx: &Context<'_>, value: &str) -> Converted {
    reporter_topic(ctx, "reporter.result.topic.name", value)
}

/// `reporter.error.topic.name`.
pub fn reporter_error(ctx: &Context<'_>, value: &str) -> Converted {
    reporter_topic(ctx, "reporter.error.topic.name", value)
}

const CLOUD_CONNECTOR_NAME: &str = "; ${connector} is the connector's name here and was Confluent Cloud's logical id (lcc-…) there: \
     write the old topic's name if its consumers stay";

/// Cloud's `errors.deadletterqueue.topic.name`: the same, `${connector}` naming another thing.
pub fn cloud_dead_letters(ctx: &Context<'_>, value: &str) -> Converted {
    let keys = one("errors.deadletterqueue.topic.name", value.trim());
    if ctx.product.is_cloud() && value.contains("${connector}") {
        return Converted::Review(keys, CLOUD_CONNECTOR_NAME.trim_start_matches("; ").to_string());
    }
    Converted::Keys(keys)
}
