//! Conversions for the open Kafka Connect ServiceNow connector's keys (`sh.oso.servicenow.*`,
//! research in `docs/research/open-servicenow-connector-keys.md`): nearly ours, with tables
//! under aliases and a few other names and values.

use super::super::rules::{Context, Converted};
use super::one;

/// The open source as a whole: its offsets hold a keyset cursor too, in another form.
pub fn source_class(_: &Context<'_>, _: &str) -> Converted {
    Converted::Review(
        Vec::new(),
        "the open connector's offsets ((timestamp, sys_id) under {instance, table, query_fingerprint, timestamp_field}) are \
         not ours: run `snow-connect migrate cutover` to start where it stopped (docs/migration.md)"
            .into(),
    )
}

/// `snow.auth.type` (`basic`, or `oauth2` with `snow.oauth.grant.type`).
pub fn auth_type(ctx: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_lowercase().as_str() {
        "basic" | "" => Converted::Keys(one("snow.auth.type", "basic")),
        "oauth2" => {
            let grant = ctx.entries.get("snow.oauth.grant.type").map(|g| g.trim().to_ascii_lowercase());
            match grant.as_deref() {
                None | Some("" | "client_credentials") => Converted::Keys(one("snow.auth.type", "oauth_client_credentials")),
                Some("password") => Converted::Keys(one("snow.auth.type", "oauth_password")),
                Some(other) => Converted::Manual(format!("snow.oauth.grant.type={other:?} is not client_credentials or password")),
            }
        }
        other => Converted::Manual(format!("{other:?} is not basic or oauth2")),
    }
}

/// `snow.table.<alias>.name`: the table joins `snow.tables`; the alias's keys become the table's.
/// The open connector left reference links out unless told otherwise; ours keeps them.
pub fn table_name(ctx: &Context<'_>, value: &str) -> Converted {
    let table = value.trim();
    let mut keys = one("snow.tables", table);
    let alias = ctx.part.unwrap_or_default();
    if !ctx.entries.contains_key(&format!("snow.table.{alias}.exclude.reference.link")) {
        keys.push((format!("snow.table.{table}.exclude.reference.link"), "true".into()));
    }
    Converted::Keys(keys)
}

/// `snow.table.<alias>.query.domain` (a boolean there; `session` or `all` here).
pub fn query_domain(ctx: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "" => Converted::NotNeeded("the session's domains, our default".into()),
        "false" => Converted::Keys(one(ctx.ours("snow.table.<t>.query.domain"), "all")),
        other => Converted::Manual(format!("{other:?} is not true or false")),
    }
}

/// `snow.source.schema.mode`.
pub fn schema_mode(_: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_lowercase().as_str() {
        "schemaless" | "" => Converted::NotNeeded("the row as read: our default without a typed value.converter".into()),
        "typed" => Converted::Review(
            Vec::new(),
            "typed values come from sys_dictionary with a typed value.converter (JsonConverter with schemas, Avro, JSON Schema, \
             Protobuf); snow.source.typed.fields is not needed"
                .into(),
        ),
        "strings" => Converted::Manual(
            "a Struct of optional strings is not written here: use a typed value.converter (fields typed from sys_dictionary) \
             or none (the row's JSON as ServiceNow sent it)"
                .into(),
        ),
        other => Converted::Manual(format!("{other:?} is not schemaless, strings or typed")),
    }
}

/// `snow.source.emit.envelope`.
pub fn emit_envelope(_: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_lowercase().as_str() {
        "false" | "" => Converted::NotNeeded("the row itself, as here".into()),
        _ => Converted::Manual(
            "no change envelope here: the row is the value, its table and operation are headers (snow.table, snow.source.operation)".into(),
        ),
    }
}

/// `snow.http.adaptive.throttling`.
pub fn adaptive_throttling(_: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "" => Converted::NotNeeded("always on here: the in-flight cap halves on a 429 and grows back".into()),
        _ => Converted::Review(Vec::new(), "always on here: the in-flight cap halves on a 429 and grows back".into()),
    }
}

/// A choice whose values are ours under other names (`pairs`: theirs → ours).
fn renamed_choice(key: &str, value: &str, pairs: &[(&str, &str)]) -> Converted {
    let v = value.trim().to_ascii_lowercase();
    match pairs.iter().find(|(theirs, _)| *theirs == v) {
        Some((_, ours)) => Converted::Keys(one(key, *ours)),
        None => Converted::Manual(format!("{value:?} is none of {}", pairs.iter().map(|p| p.0).collect::<Vec<_>>().join(", "))),
    }
}

/// `snow.sink.update.method` (`PATCH`/`PUT`, any case).
pub fn update_method(_: &Context<'_>, value: &str) -> Converted {
    renamed_choice("snow.sink.update.method", value, &[("patch", "patch"), ("put", "put")])
}

/// `snow.sink.unknown.field.behavior`.
pub fn unknown_fields(_: &Context<'_>, value: &str) -> Converted {
    renamed_choice("snow.sink.unknown.fields", value, &[("fail", "fail"), ("drop", "drop"), ("report", "report"), ("passthrough", "pass")])
}

/// `snow.sink.create.ambiguous.behavior`.
pub fn ambiguous_create(_: &Context<'_>, value: &str) -> Converted {
    renamed_choice(
        "snow.sink.unknown.outcome",
        value,
        &[("fail_ambiguous", "fail"), ("retry", "retry"), ("correlation_lookup", "correlation_lookup")],
    )
}

/// `snow.sink.not.found.behavior`.
pub fn not_found(_: &Context<'_>, value: &str) -> Converted {
    renamed_choice("snow.sink.not.found", value, &[("fail", "fail"), ("ignore", "ignore"), ("create", "create")])
}

/// `snow.sink.null.behavior`.
pub fn null_policy(_: &Context<'_>, value: &str) -> Converted {
    renamed_choice("snow.sink.null.policy", value, &[("omit", "omit"), ("clear", "clear"), ("reject", "reject")])
}

/// `snow.sink.nested.behavior`.
pub fn nested_policy(_: &Context<'_>, value: &str) -> Converted {
    renamed_choice("snow.sink.nested.policy", value, &[("reject", "reject"), ("flatten", "flatten"), ("stringify", "stringify")])
}

/// `snow.sink.operation.fixed`.
pub fn operation_fixed(_: &Context<'_>, value: &str) -> Converted {
    renamed_choice("snow.sink.operation", value, &[("create", "create"), ("patch", "patch"), ("put", "put"), ("delete", "delete")])
}

/// `snow.sink.operation.mode`: `key_value` is our `auto`; under `header` the header already wins
/// here; `fixed` is taken with `snow.sink.operation.fixed`.
pub fn operation_mode(ctx: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_lowercase().as_str() {
        "key_value" | "" => Converted::NotNeeded("auto (tombstone → delete, no sys_id → create, else update), our default".into()),
        "fixed" => Converted::NotNeeded("taken with snow.sink.operation.fixed".into()),
        "header" if ctx.entries.get("snow.sink.operation.header.required").is_some_and(|r| r.trim() == "true") => Converted::Manual(
            "a record without the operation header is not an error here (the key and value choose): add a Filter transform \
             with a HasHeaderKey predicate to drop or route such records"
                .into(),
        ),
        "header" => Converted::NotNeeded("the operation header wins whenever present here; without it the key and value choose".into()),
        other => Converted::Manual(format!("{other:?} is not key_value, header or fixed")),
    }
}

/// `snow.sink.routing.mode`: which of the table keys applies.
pub fn routing_mode(_: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_lowercase().as_str() {
        "fixed" | "topic_map" | "header" | "" => {
            Converted::NotNeeded("the table keys given say it here (table, table.map, table.header)".into())
        }
        other => Converted::Manual(format!("{other:?} is not fixed, topic_map or header")),
    }
}

/// `snow.sink.table.header`: only under header routing.
pub fn table_header(ctx: &Context<'_>, value: &str) -> Converted {
    if ctx.entries.get("snow.sink.routing.mode").is_some_and(|m| m.trim().eq_ignore_ascii_case("header")) {
        Converted::Keys(one("snow.sink.table.header", value.trim()))
    } else {
        Converted::NotNeeded("read only under snow.sink.routing.mode=header".into())
    }
}

/// `snow.sink.table.allowlist`: the tables a header may name.
pub fn table_allowlist(_: &Context<'_>, value: &str) -> Converted {
    Converted::Keys(one("snow.sink.table.header.allowed", value.trim()))
}

/// `snow.sink.topic.<topic>.table`: one entry of `snow.sink.table.map`.
pub fn topic_table(ctx: &Context<'_>, value: &str) -> Converted {
    Converted::Keys(one("snow.sink.table.map", format!("{}:{}", ctx.part.unwrap_or_default(), value.trim())))
}

/// `snow.sink.sys.id.precedence` (`reject` disagreeing ids there; an order here).
pub fn precedence(_: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_lowercase().as_str() {
        "key" => Converted::NotNeeded("the key before the value, as here (a snow.sys_id header wins over both)".into()),
        "reject" | "" => Converted::Review(
            Vec::new(),
            "ids that disagree are not an error here: the snow.sys_id header wins, then the key, then the value".into(),
        ),
        "value" => Converted::Manual(
            "the value's sys_id never wins over the key here: set snow.sink.sys.id.key=ignore to name rows by the value".into(),
        ),
        other => Converted::Manual(format!("{other:?} is not reject, key or value")),
    }
}

/// The open sink's reporter topics: ours, with another record format.
pub fn reporter_success(_: &Context<'_>, value: &str) -> Converted {
    reporter("reporter.result.topic.name", value)
}

/// See [`reporter_success`].
pub fn reporter_error(_: &Context<'_>, value: &str) -> Converted {
    reporter("reporter.error.topic.name", value)
}

fn reporter(key: &str, value: &str) -> Converted {
    Converted::Review(
        one(key, value.trim()),
        "same topic; a report here is {connector, topic, partition, offset, key, outcome, operation, table, sys_id, status, \
         message} with headers snow.outcome and snow.source.*: adapt its consumers"
            .into(),
    )
}

/// `snow.sink.reporter.include.request.body`.
pub fn include_body(_: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_lowercase().as_str() {
        "false" | "" => Converted::NotNeeded("no request bodies in reports, as here".into()),
        _ => Converted::Manual("reports never carry the request body here (it may hold personal data)".into()),
    }
}
