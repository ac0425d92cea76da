//! The value conversions the rule tables name: units, formats, and the keys one old value
//! becomes. Each is a plain function of the value (and the [`Context`]), so the tables stay data.

use super::rules::{Context, Converted};

fn one(key: impl Into<String>, value: impl Into<String>) -> Vec<(String, String)> {
    vec![(key.into(), value.into())]
}

fn whole(value: &str) -> Result<u64, Converted> {
    value.trim().parse::<u64>().map_err(|_| Converted::Manual(format!("{value:?} is not a whole number; set our key by hand")))
}

/// `servicenow.url`: the instance's base URL, without the trailing slashes Confluent tolerated.
pub fn instance_url(_: &Context<'_>, value: &str) -> Converted {
    let url = value.trim().trim_end_matches('/');
    if !url.starts_with("https://") && !url.starts_with("http://") {
        return Converted::Manual(format!(
            "{url:?} is not an http(s) URL; set snow.instance.url to the instance's https://<name>.service-now.com"
        ));
    }
    Converted::Keys(one("snow.instance.url", url))
}

/// `servicenow.table` of a source: the one table of `snow.tables`.
pub fn source_table(_: &Context<'_>, value: &str) -> Converted {
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

/// `batch.max.rows` / V2's `table{i}.batch.size`: rows per request, within the Table API's 10,000.
pub fn batch_size(ctx: &Context<'_>, value: &str) -> Converted {
    let n = match whole(value) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let key = ctx.ours("snow.table.<t>.batch.size");
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

/// `retry.max.times` / V2's `max.retries`: retries after the first attempt; ours counts attempts.
pub fn retries_to_attempts(_: &Context<'_>, value: &str) -> Converted {
    match whole(value) {
        Ok(n) => Converted::Keys(one("snow.retry.max.attempts", (n + 1).to_string())),
        Err(e) => e,
    }
}

/// `connection.timeout.ms`: our connect timeout, which the host caps at 60 s.
pub fn connect_timeout(_: &Context<'_>, value: &str) -> Converted {
    match whole(value) {
        Ok(ms) if ms > 60_000 => {
            Converted::Review(one("snow.http.connect.timeout.ms", "60000"), format!("{ms} ms is above the host's 60 s cap; 60000 kept"))
        }
        Ok(ms) => Converted::Keys(one("snow.http.connect.timeout.ms", ms.to_string())),
        Err(e) => e,
    }
}

/// `read.timeout.ms` (and a sink's `write.timeout.ms`, the larger of the two): the time to an
/// answer's first byte.
pub fn request_timeout(ctx: &Context<'_>, value: &str) -> Converted {
    let mut ms = match whole(value) {
        Ok(ms) => ms,
        Err(e) => return e,
    };
    if ctx.product.is_sink() {
        for other in ["read.timeout.ms", "write.timeout.ms"] {
            if let Some(v) = ctx.entries.get(other).and_then(|v| v.trim().parse::<u64>().ok()) {
                ms = ms.max(v);
            }
        }
    }
    let keys = one("snow.http.request.timeout.ms", ms.min(120_000).to_string());
    if ms < 60_000 {
        Converted::Review(
            keys,
            format!(
                "{ms} ms to the first byte: ServiceNow may take up to 60 s on a slow query and ours waits 65 s by default; \
                 a shorter timeout turns slow pages into retries"
            ),
        )
    } else {
        Converted::Keys(keys)
    }
}

/// A source's `write.timeout.ms`: a source never writes. A sink's: with `read.timeout.ms`.
pub fn write_timeout(ctx: &Context<'_>, value: &str) -> Converted {
    if !ctx.product.is_sink() {
        return Converted::NotNeeded("a source never writes to ServiceNow".into());
    }
    if ctx.entries.contains_key("read.timeout.ms") {
        return Converted::NotNeeded("taken with read.timeout.ms into snow.http.request.timeout.ms (the larger of the two)".into());
    }
    request_timeout(ctx, value)
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

/// The converter class of Confluent Cloud's `output.data.format` / `input.data.format`.
fn format_class(format: &str) -> Option<&'static str> {
    Some(match format.trim().to_ascii_uppercase().as_str() {
        "AVRO" => "io.confluent.connect.avro.AvroConverter",
        "JSON_SR" => "io.confluent.connect.json.JsonSchemaConverter",
        "PROTOBUF" => "io.confluent.connect.protobuf.ProtobufConverter",
        "JSON" => "org.apache.kafka.connect.json.JsonConverter",
        _ => return None,
    })
}

/// Cloud's `output.data.format` / `input.data.format`: the value converter, a string key (Cloud
/// forces one), and for the registry formats the registry Cloud supplied implicitly.
pub fn data_format(ctx: &Context<'_>, value: &str) -> Converted {
    let Some(class) = format_class(value) else {
        return Converted::Manual(format!("{value:?} is not AVRO, JSON_SR, PROTOBUF or JSON; set value.converter by hand"));
    };
    let mut keys = vec![
        ("key.converter".to_string(), "org.apache.kafka.connect.storage.StringConverter".to_string()),
        ("value.converter".to_string(), class.to_string()),
    ];
    if class.ends_with("JsonConverter") {
        if !ctx.entries.contains_key("value.converter.schemas.enable") {
            keys.push(("value.converter.schemas.enable".into(), "false".into()));
        }
        return Converted::Keys(keys);
    }
    let registry = ctx.options.schema_registry.clone();
    let given = registry.is_some();
    keys.push(("value.converter.schema.registry.url".into(), registry.unwrap_or_else(|| "${env:SNOW_SCHEMA_REGISTRY_URL}".into())));
    keys.push(("value.converter.basic.auth.credentials.source".into(), "USER_INFO".into()));
    keys.push(("value.converter.basic.auth.user.info".into(), "${env:SNOW_SCHEMA_REGISTRY_USER_INFO}".into()));
    let mut why = String::from(
        "Confluent Cloud supplied its Schema Registry implicitly; set SNOW_SCHEMA_REGISTRY_USER_INFO to its API key and secret (key:secret)",
    );
    if !given {
        why.push_str(
            ", and its URL with --schema-registry (or SNOW_SCHEMA_REGISTRY_URL for a standalone run: a fleet does not resolve \
             references in a registry URL)",
        );
    }
    if ctx.product.is_source() {
        why.push_str("; the value schema is derived from sys_dictionary (typed fields), not inferred from the rows");
    }
    Converted::Review(keys, why)
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

/// Cloud's `kafka.api.key`: SASL/PLAIN over TLS, as Confluent Cloud's clusters take it.
pub fn kafka_api_key(_: &Context<'_>, value: &str) -> Converted {
    Converted::Review(
        vec![
            ("kafka.security.protocol".into(), "SASL_SSL".into()),
            ("kafka.sasl.mechanism".into(), "PLAIN".into()),
            ("kafka.sasl.username".into(), value.trim().into()),
        ],
        "the cluster's API key as SASL/PLAIN for a standalone run (give the cluster with --bootstrap); in a fleet these \
         are the worker's keys (security.protocol, sasl.*) and the connector JSON leaves them out"
            .into(),
    )
}

/// Cloud's `kafka.auth.mode`.
pub fn kafka_auth_mode(_: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_uppercase().as_str() {
        "KAFKA_API_KEY" | "" => Converted::NotNeeded("the API key is translated with kafka.api.key".into()),
        other => Converted::Manual(format!(
            "{other}: a Confluent Cloud service account has no credentials to carry over; create an API key for it and set \
             kafka.sasl.username / kafka.sasl.password (worker.properties: sasl.*)"
        )),
    }
}

/// V2's `auth.type`.
pub fn auth_type(_: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_uppercase().as_str() {
        "BASIC" | "" => Converted::Keys(one("snow.auth.type", "basic")),
        "OAUTH2" => Converted::Keys(one("snow.auth.type", "oauth_client_credentials")),
        other => Converted::Manual(format!("{other:?} is not BASIC or OAUTH2")),
    }
}

/// A switch whose value here must be `default` to mean nothing; any other is manual.
fn only_default(value: &str, default: &[&str], manual: &str) -> Converted {
    let v = value.trim();
    if v.is_empty() || default.iter().any(|d| d.eq_ignore_ascii_case(v)) {
        Converted::NotNeeded(format!("{v:?} is the default, which is how this runtime works"))
    } else {
        Converted::Manual(format!("{v:?}: {manual}"))
    }
}

/// `csfle.enabled`.
pub fn csfle(_: &Context<'_>, value: &str) -> Converted {
    only_default(value, &["false"], "client-side field-level encryption is Confluent Cloud's; encrypt with a transform component instead")
}

/// `schema.context.name`.
pub fn schema_context(_: &Context<'_>, value: &str) -> Converted {
    only_default(value, &["default"], "schema contexts are not addressed here; use a registry (or a subject strategy) without one")
}

/// V2's `servicenow.ssl.enabled`.
pub fn ssl_enabled(_: &Context<'_>, value: &str) -> Converted {
    only_default(
        value,
        &["false"],
        "mutual TLS to ServiceNow is not supported: the host trusts the public web roots and authenticates with Basic or OAuth",
    )
}

/// V2's `oauth2.jwt.enabled`.
pub fn jwt_enabled(_: &Context<'_>, value: &str) -> Converted {
    only_default(
        value,
        &["false"],
        "JWT bearer grants are not supported: use OAuth client credentials (snow.auth.type=oauth_client_credentials)",
    )
}

/// V2's `oauth2.token.property`.
pub fn token_property(_: &Context<'_>, value: &str) -> Converted {
    only_default(value, &["access_token"], "ServiceNow answers access_token, which is the only property read here")
}

/// V2's `oauth2.client.scope`.
pub fn client_scope(_: &Context<'_>, value: &str) -> Converted {
    only_default(
        value,
        &["any"],
        "no scope is sent with the token request here; restrict the OAuth application's scope in ServiceNow instead",
    )
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

/// V2's `table{i}.request.parameters.separator`.
pub fn parameter_separator(_: &Context<'_>, value: &str) -> Converted {
    only_default(value, &["&"], "requests are built here; no other separator is needed")
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

/// V2's `retry.backoff.policy`.
pub fn backoff_policy(ctx: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_uppercase().as_str() {
        "EXPONENTIAL_WITH_JITTER" | "" => Converted::NotNeeded("exponential with full jitter, as here".into()),
        "CONSTANT_VALUE" => {
            let ms = ctx.entries.get("retry.backoff.ms").map(|v| v.trim().to_string()).unwrap_or_else(|| "3000".into());
            Converted::Review(
                one("snow.retry.backoff.max.ms", ms),
                "no constant backoff here: the ceiling is held at the constant, with jitter below it".into(),
            )
        }
        other => Converted::Manual(format!("{other:?} is not CONSTANT_VALUE or EXPONENTIAL_WITH_JITTER")),
    }
}

/// V2's `retry.backoff.ms`.
pub fn backoff_initial(_: &Context<'_>, value: &str) -> Converted {
    match whole(value) {
        Ok(ms) => Converted::Keys(one("snow.retry.backoff.initial.ms", ms.to_string())),
        Err(e) => e,
    }
}

/// V2's `table{i}.allowlisted.fields`.
pub fn fields(ctx: &Context<'_>, value: &str) -> Converted {
    Converted::Keys(one(ctx.ours("snow.table.<t>.fields"), value.trim()))
}

/// V2's `table{i}.name`: one more table of `snow.tables`.
pub fn v2_table(_: &Context<'_>, value: &str) -> Converted {
    Converted::Keys(one("snow.tables", value.trim()))
}

/// A sink's `servicenow.table`.
pub fn sink_table(_: &Context<'_>, value: &str) -> Converted {
    Converted::Keys(one("snow.sink.table", value.trim()))
}

/// Confluent's sinks as a whole: POST without a sys_id, DELETE on a tombstone, PUT otherwise,
/// the sys_id in a key struct's `sysId`. Cloud's sink also goes on past refused records.
pub fn confluent_sink(ctx: &Context<'_>, _: &str) -> Converted {
    let mut keys =
        vec![("snow.sink.update.method".to_string(), "put".to_string()), ("snow.sink.sys.id.key.field".to_string(), "sysId".to_string())];
    if ctx.product == super::Product::CloudSink {
        keys.push(("behavior.on.api.errors".into(), "log".into()));
    }
    Converted::Keys(keys)
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::migrate::{Options, Product};

    fn with<T>(product: Product, entries: &[(&str, &str)], f: impl FnOnce(&Context<'_>) -> T) -> T {
        let entries: BTreeMap<String, String> = entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let options = Options::default();
        f(&Context { product, key: "k", part: None, name: "old", table: Some("incident"), entries: &entries, options: &options })
    }

    fn keys(c: Converted) -> Vec<(String, String)> {
        match c {
            Converted::Keys(k) | Converted::Review(k, _) => k,
            Converted::Manual(m) | Converted::NotNeeded(m) => panic!("no keys: {m}"),
        }
    }

    #[test]
    fn units_and_formats() {
        with(Product::PlatformSource, &[], |c| {
            assert_eq!(keys(since(c, "2024-03-01")), [("snow.table.incident.start.timestamp".into(), "2024-03-01 00:00:00".into())]);
            assert!(matches!(since(c, "01/03/2024"), Converted::Manual(_)));
            assert!(matches!(since(c, "2024-13-01"), Converted::Manual(_)));
            assert_eq!(keys(poll_seconds(c, "30")), [("snow.table.incident.poll.interval.ms".into(), "30000".into())]);
            assert_eq!(keys(retries_to_attempts(c, "3")), [("snow.retry.max.attempts".into(), "4".into())]);
            assert!(matches!(batch_size(c, "20000"), Converted::Review(..)));
            assert_eq!(
                keys(instance_url(c, "https://dev1.service-now.com//")),
                [("snow.instance.url".into(), "https://dev1.service-now.com".into())]
            );
            assert!(matches!(write_timeout(c, "20000"), Converted::NotNeeded(_)));
        });
    }

    #[test]
    fn a_sink_takes_the_larger_of_its_two_timeouts() {
        with(Product::PlatformSink, &[("read.timeout.ms", "20000"), ("write.timeout.ms", "90000")], |c| {
            assert_eq!(keys(request_timeout(c, "20000")), [("snow.http.request.timeout.ms".into(), "90000".into())]);
            assert!(matches!(write_timeout(c, "90000"), Converted::NotNeeded(_)));
        });
    }

    #[test]
    fn cloud_formats_bring_their_registry() {
        with(Product::CloudSourceLegacy, &[], |c| {
            let k = keys(data_format(c, "AVRO"));
            assert!(k.contains(&("value.converter".into(), "io.confluent.connect.avro.AvroConverter".into())));
            assert!(k.contains(&("value.converter.schema.registry.url".into(), "${env:SNOW_SCHEMA_REGISTRY_URL}".into())));
            let json = keys(data_format(c, "json"));
            assert!(json.contains(&("value.converter.schemas.enable".into(), "false".into())));
            assert!(matches!(data_format(c, "XML"), Converted::Manual(_)));
        });
    }
}
