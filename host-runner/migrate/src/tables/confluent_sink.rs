//! Confluent's ServiceNow sink (Platform, `io.confluent.connect.servicenow.ServiceNowSinkConnector`,
//! and Cloud, `ServiceNowSink`: one class, research §4 and §5): one table, POST / PUT / DELETE
//! chosen per record, the Connect Reporter's success and error topics.

use super::{convert, convert_review, drop, manual};
use crate::conversions::sink;
use crate::rules::KeyRule;

/// Keys of both sinks.
pub const COMMON: &[KeyRule] = &[
    convert(
        "connector.class",
        "component.path, snow.sink.update.method=put, snow.sink.sys.id.key.field=sysId",
        sink::confluent_sink,
        "our sink component, choosing as Confluent's did: POST without a sys_id, DELETE on a tombstone, PUT (the whole row) otherwise, the sys_id from a key struct's sysId (PATCH, our default, writes only the fields given)",
        "D-snk-ov, D-snk-5515",
    ),
    convert("servicenow.table", "snow.sink.table", sink::sink_table, "", "D-snk-cfg, T"),
    convert_review(
        "reporter.result.topic.name",
        "reporter.result.topic.name",
        sink::reporter_result,
        "the same topic; the report's format differs",
        "D-snk-5515, T",
    ),
    convert_review(
        "reporter.error.topic.name",
        "reporter.error.topic.name",
        sink::reporter_error,
        "the same topic; the report's format differs",
        "P, T",
    ),
];

/// The Platform sink's own keys: the Connect Reporter's.
pub const PLATFORM: &[KeyRule] = &[
    convert_review(
        "reporter.bootstrap.servers",
        "reporter.*.topic.name",
        sink::reporter_bootstrap,
        "reports go to the connector's own cluster; Confluent's default topic names are kept where not named",
        "P, RT-234",
    ),
    manual(
        "reporter.result.topic.replication.factor",
        "report topics are not created here: create the topic beforehand (kafka-topics.sh --create --replication-factor N) or let the broker create it",
        "P, RT-234",
    ),
    manual(
        "reporter.error.topic.replication.factor",
        "report topics are not created here: create the topic beforehand (kafka-topics.sh --create --replication-factor N) or let the broker create it",
        "P, RT-234",
    ),
    manual(
        "reporter.result.topic.partitions",
        "report topics are not created here: create the topic beforehand (kafka-topics.sh --create --partitions N)",
        "RT-234",
    ),
    manual(
        "reporter.error.topic.partitions",
        "report topics are not created here: create the topic beforehand (kafka-topics.sh --create --partitions N)",
        "RT-234",
    ),
    drop("reporter.result.topic.*", "the report's format is fixed here: JSON text (read it as a string)", "P, RT-234"),
    drop("reporter.error.topic.*", "the report's format is fixed here: JSON text (read it as a string)", "P, RT-234"),
    drop("reporter.producer.*", "reports use the connector's own producer (idempotent, acks=all) and Kafka security", "P"),
    drop("reporter.admin.*", "report topics are not created here", "P"),
];

/// The Cloud sink's own keys and defaults.
pub const CLOUD: &[KeyRule] = &[convert(
    "errors.deadletterqueue.topic.name",
    "errors.deadletterqueue.topic.name",
    sink::cloud_dead_letters,
    "the same topic (${connector} named Cloud's logical id)",
    "T",
)];

/// Confluent Cloud's sink reported and went on by default (research §5.1, §5.3).
pub const CLOUD_IMPLIED: &[(&str, &str)] = &[
    ("errors.tolerance", "all"),
    ("errors.deadletterqueue.topic.name", "dlq-${connector}"),
    ("reporter.result.topic.name", "success-${connector}"),
    ("reporter.error.topic.name", "error-${connector}"),
];
