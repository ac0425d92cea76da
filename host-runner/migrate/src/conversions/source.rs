//! Conversions of a source's keys: its tables, start, pages, polls, views and query options.

use super::super::rules::{Context, Converted};
use super::{one, only_default, whole};

/// `servicenow.table` of a source: the one table of `snow.tables`.
pub fn source_table(_: &Context<'_>, value: &str) -> Converted {
    Converted::Keys(one("snow.tables", value.trim()))
}

/// V2's `table{i}.name`: one more table of `snow.tables`.
pub fn v2_table(_: &Context<'_>, value: &str) -> Converted {
    Converted::Keys(one("snow.tables", value.trim()))
}

/// `servicenow.since` (`yyyy-MM-dd`, 00:00 UTC; an early README also allowed a time).
pub fn since(ctx: &Context<'_>, value: &str) -> Converted {
    let v = value.trim();
    if v.is_empty() {
        return Converted::Review(
            Vec::new(),
            format!(
                "not set: Confluent started at 00:00 UTC of the day it was first started; ours starts at {} = 1970-01-01 00:00:00 \
                 (a full backfill) unless `snow-connect migrate cutover` writes the old connector's position",
                ctx.ours("snow.table.<t>.start.timestamp")
            ),
        );
    }
    let at = match v.len() {
        10 => format!("{v} 00:00:00"),
        19 => v.replacen('T', " ", 1),
        20 if v.ends_with('Z') => v[..19].replacen('T', " ", 1),
        _ => return Converted::Manual(format!("{v:?} is not yyyy-MM-dd; set {} by hand", ctx.ours("snow.table.<t>.start.timestamp"))),
    };
    if snow_core::time::Timestamp::parse(&at).is_err() {
        return Converted::Manual(format!("{v:?} is not a date (yyyy-MM-dd); set {} by hand", ctx.ours("snow.table.<t>.start.timestamp")));
    }
    Converted::Keys(one(ctx.ours("snow.table.<t>.start.timestamp"), at))
}

/// V2's `table{i}.start.timestamp` (`yyyy-MM-dd HH:mm:ss`, UTC).
pub fn start_timestamp(ctx: &Context<'_>, value: &str) -> Converted {
    if value.trim().is_empty() {
        return Converted::NotNeeded("empty: 1970-01-01 00:00:00, as ours".into());
    }
    since(ctx, value)
}

/// `batch.max.rows`, V2's `table{i}.batch.size`, the open connector's `snow.source.batch.size`
/// (a table's key when the old key had a table, `snow.batch.size` otherwise): rows per request,
/// within the Table API's 10,000.
pub fn batch_size(ctx: &Context<'_>, value: &str) -> Converted {
    let n = match whole(value) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let key = if ctx.table.is_some() { ctx.ours("snow.table.<t>.batch.size") } else { "snow.batch.size".into() };
    if n == 0 {
        return Converted::Manual("0 rows per request is not a page size; leave it out (1000 rows)".into());
    }
    if n > 10_000 {
        return Converted::Review(one(key, "10000"), format!("{n} rows per request is above the Table API's 10,000; 10,000 kept"));
    }
    Converted::Keys(one(key, n.to_string()))
}

/// `poll.interval.s`: seconds to milliseconds.
pub fn poll_seconds(ctx: &Context<'_>, value: &str) -> Converted {
    match whole(value) {
        Ok(s) => Converted::Keys(one(ctx.ours("snow.table.<t>.poll.interval.ms"), (s * 1000).to_string())),
        Err(e) => e,
    }
}

/// V2's `table{i}.request.interval.ms`.
pub fn poll_millis(ctx: &Context<'_>, value: &str) -> Converted {
    match whole(value) {
        Ok(ms) => Converted::Keys(one(ctx.ours("snow.table.<t>.poll.interval.ms"), ms.to_string())),
        Err(e) => e,
    }
}

/// `servicenow.view.variable.prefix`: the view's cursor columns are `<prefix>_sys_updated_on`
/// and `<prefix>_sys_id`.
pub fn view_prefix(ctx: &Context<'_>, value: &str) -> Converted {
    let p = value.trim();
    Converted::Review(
        vec![
            (ctx.ours("snow.table.<t>.timestamp.field"), format!("{p}_sys_updated_on")),
            (ctx.ours("snow.table.<t>.sys.id.field"), format!("{p}_sys_id")),
        ],
        format!(
            "the view's cursor columns are taken as {p}_sys_updated_on and {p}_sys_id (Confluent's documented form); \
             check them against the view (a one-row read: GET /api/now/table/<view>?sysparm_limit=1)"
        ),
    )
}

/// A source's own `value.converter`: the same class; the values are typed here.
pub fn source_value_converter(_: &Context<'_>, value: &str) -> Converted {
    let keys = one("value.converter", value.trim());
    if value.trim().ends_with("StringConverter") || value.trim().ends_with("ByteArrayConverter") {
        return Converted::Keys(keys);
    }
    Converted::Review(
        keys,
        "Confluent's source wrote every field as a string (a Struct of optional strings); ours types each field from \
         sys_dictionary (integers, booleans, decimals, date-times) — consumers reading fields as strings must be checked"
            .into(),
    )
}

/// V2's `table{i}.allowlisted.fields`.
pub fn fields(ctx: &Context<'_>, value: &str) -> Converted {
    Converted::Keys(one(ctx.ours("snow.table.<t>.fields"), value.trim()))
}

/// V2's `table{i}.query.domain` (true: only the user's domains, as a session does).
pub fn query_domain(ctx: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "" => Converted::NotNeeded("the session's domains, our default".into()),
        "false" => Converted::Review(
            one(ctx.ours("snow.table.<t>.query.domain"), "all"),
            "every domain (sysparm_query_no_domain=true) needs a role that allows it".into(),
        ),
        other => Converted::Manual(format!("{other:?} is not true or false")),
    }
}

/// V2's `table{i}.display.value`.
pub fn display_value(ctx: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_lowercase().as_str() {
        "false" | "" => Converted::NotNeeded("raw values, our default".into()),
        "true" => Converted::Review(
            one(ctx.ours("snow.table.<t>.display.value"), "true"),
            "display values, with the cursor fields (sys_updated_on, sys_id) kept raw so the cursor can read them".into(),
        ),
        other => Converted::Manual(format!("{other:?} is not true or false")),
    }
}

/// V2's `table{i}.pagination.query` / `.pagination.query.field`.
pub fn pagination_query(ctx: &Context<'_>, value: &str) -> Converted {
    if value.trim().is_empty() {
        return Converted::NotNeeded("empty: the timestamp pagination, which is what this runtime does".into());
    }
    Converted::Manual(format!(
        "a custom pagination query: put its filter (without ORDERBY and ${{offset}}) in {} and its field in {}",
        ctx.ours("snow.table.<t>.query"),
        ctx.ours("snow.table.<t>.timestamp.field")
    ))
}

/// V2's `table{i}.request.parameters.separator`.
pub fn parameter_separator(_: &Context<'_>, value: &str) -> Converted {
    only_default(value, &["&"], "requests are built here; no other separator is needed")
}

/// V2's `behavior.on.error`.
pub fn behavior_on_error(_: &Context<'_>, value: &str) -> Converted {
    only_default(
        value,
        &["FAIL"],
        "a failing read is never skipped here (skipping loses rows): transient errors are retried, permanent ones park \
         the table with the reason on /status",
    )
}

/// Confluent's sources as a whole: the offset is a timestamp; ours a keyset cursor.
pub fn confluent_source(_: &Context<'_>, _: &str) -> Converted {
    Converted::Review(
        Vec::new(),
        "the old connector's position is a timestamp only (sys_updated_on >= T, paged by offset); ours is a keyset cursor \
         (timestamp, sys_id) that re-reads an overlap and drops the versions it already wrote. A translated configuration \
         starts from its start timestamp: run `snow-connect migrate cutover` to start where the old connector stopped \
         (docs/migration.md)"
            .into(),
    )
}
