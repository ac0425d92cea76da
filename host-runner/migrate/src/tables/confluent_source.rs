//! Confluent's ServiceNow source (Platform, `io.confluent.connect.servicenow.ServiceNowSourceConnector`,
//! and Cloud Legacy, `ServiceNowSource`: one class, research §1 and §2): one table per connector,
//! a timestamp offset, `batch.max.rows` pages, `poll.interval.s`, `servicenow.since`.

use super::{convert, convert_review, rename};
use crate::conversions::source;
use crate::rules::KeyRule;

/// Keys of both the Platform and the Cloud Legacy source.
pub const COMMON: &[KeyRule] = &[
    convert_review(
        "connector.class",
        "component.path",
        source::confluent_source,
        "our source component; the offset does not carry over (run the cutover)",
        "D-src-cfg, T",
    ),
    convert("servicenow.table", "snow.tables", source::source_table, "the one table (or database view) of the old connector", "D-src-cfg"),
    rename("kafka.topic", "snow.table.<t>.topic", "", "RT-231, RT-265, T"),
    convert(
        "servicenow.since",
        "snow.table.<t>.start.timestamp",
        source::since,
        "yyyy-MM-dd → yyyy-MM-dd 00:00:00 (UTC)",
        "D-src-cfg, D-src-514, T",
    ),
    convert(
        "batch.max.rows",
        "snow.table.<t>.batch.size",
        source::batch_size,
        "rows per request (sysparm_limit); the keyset cursor pages inside a second, so the same-second limit of Confluent's offset paging does not apply",
        "D-src-514, RT-265, T",
    ),
    convert_review(
        "poll.interval.s",
        "snow.table.<t>.poll.interval.ms",
        source::poll_seconds,
        "seconds → milliseconds; ours pauses between sweeps once caught up and reads full pages back to back (a backfill asks more often: snow.instance.max.in.flight bounds the load)",
        "RT-231, RT-265, T",
    ),
    convert_review(
        "servicenow.view.variable.prefix",
        "snow.table.<t>.timestamp.field, snow.table.<t>.sys.id.field",
        source::view_prefix,
        "the view's prefixed cursor columns",
        "T, RT-265",
    ),
    convert_review(
        "value.converter",
        "value.converter",
        source::source_value_converter,
        "the same converter; values are typed from sys_dictionary",
        "P, RT-265",
    ),
];

/// Keys a Platform or Cloud Legacy configuration leaves out whose default differs from ours
/// (an empty value: only explained).
pub const IMPLIED: &[(&str, &str)] = &[("poll.interval.s", "30"), ("servicenow.since", "")];
