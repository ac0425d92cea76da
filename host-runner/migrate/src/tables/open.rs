//! The open Kafka Connect ServiceNow connector (`sh.oso.servicenow.source.ServiceNowSourceConnector`,
//! `…sink.ServiceNowSinkConnector`; research in `docs/research/open-servicenow-connector-keys.md`):
//! keys nearly ours, tables under aliases (`snow.table.<alias>.name`).

use super::{convert, convert_review, decide, drop, manual, rename, same};
use crate::conversions::{instance, network, open as o, source};
use crate::rules::KeyRule;

/// The shared core keys (`CoreConfigDefs.java`).
pub const CORE: &[KeyRule] = &[
    convert("snow.url", "snow.instance.url", instance::instance_url, "", "O-core"),
    convert(
        "snow.auth.type",
        "snow.auth.type",
        o::auth_type,
        "basic; oauth2 with snow.oauth.grant.type → oauth_client_credentials or oauth_password",
        "O-core",
    ),
    same("snow.auth.username", "", "O-core"),
    same("snow.auth.password", "a secret: a literal becomes an ${env:…} placeholder", "O-core"),
    drop("snow.oauth.grant.type", "taken with snow.auth.type", "O-core"),
    rename("snow.oauth.token.url", "snow.auth.token.url", "", "O-core"),
    rename("snow.oauth.client.id", "snow.auth.client.id", "", "O-core"),
    rename("snow.oauth.client.secret", "snow.auth.client.secret", "a secret: a literal becomes an ${env:…} placeholder", "O-core"),
    decide("snow.oauth.scope", instance::client_scope, "none is sent here; a scope is manual", "O-core"),
    same("snow.http.connect.timeout.ms", "", "O-core"),
    same("snow.http.request.timeout.ms", "time to the first byte (ours defaults to 65 s, theirs to 60 s)", "O-core"),
    convert("snow.http.proxy.url", "snow.proxy.url", network::proxy_url, "http://host:port", "O-core"),
    rename("snow.http.proxy.username", "snow.proxy.username", "", "O-core"),
    rename("snow.http.proxy.password", "snow.proxy.password", "a secret: a literal becomes an ${env:…} placeholder", "O-core"),
    manual("snow.http.proxy.*", "not a documented proxy key of theirs (url, username, password are)", "O-core"),
    rename(
        "snow.http.max.concurrent.requests",
        "snow.instance.max.in.flight",
        "per instance, shared by the connectors of the process (theirs: of the JVM)",
        "O-core",
    ),
    same("snow.http.max.response.bytes", "", "O-core"),
    drop("snow.http.user.agent", "the host sends its own User-Agent", "O-core"),
    decide("snow.http.adaptive.throttling", o::adaptive_throttling, "always on here", "O-core"),
    convert(
        "snow.tls.truststore.path",
        "snow.instance.ssl.truststore.location, .type",
        network::open_truststore_path,
        "PKCS12 as is; a JKS store (their default type) becomes the PKCS#12 store keytool converts it to (review)",
        "O-core",
    ),
    rename(
        "snow.tls.truststore.password",
        "snow.instance.ssl.truststore.password",
        "a secret: a literal becomes an ${env:…} placeholder",
        "O-core",
    ),
    decide("snow.tls.truststore.type", network::store_type, "taken with snow.tls.truststore.path", "O-core"),
    convert(
        "snow.tls.keystore.path",
        "snow.instance.ssl.keystore.location, .type",
        network::open_keystore_path,
        "PKCS12 as is; a JKS store (their default type) becomes the PKCS#12 store keytool converts it to (review)",
        "O-core",
    ),
    rename(
        "snow.tls.keystore.password",
        "snow.instance.ssl.keystore.password",
        "a secret: a literal becomes an ${env:…} placeholder",
        "O-core",
    ),
    decide("snow.tls.keystore.type", network::store_type, "taken with snow.tls.keystore.path", "O-core"),
    manual("snow.tls.*", "not a documented TLS key of theirs (truststore.* and keystore.* are)", "O-core"),
    same("snow.retry.max.attempts", "attempts in all, as theirs", "O-core"),
    same("snow.retry.max.elapsed.ms", "", "O-core"),
    rename("snow.retry.initial.backoff.ms", "snow.retry.backoff.initial.ms", "", "O-core"),
    rename("snow.retry.max.backoff.ms", "snow.retry.backoff.max.ms", "", "O-core"),
    drop("snow.task.id", "internal: set by their connector for its tasks", "O-core"),
];

/// The source's keys (`SourceConfig.java`, `TableSpec.java`).
pub const SOURCE: &[KeyRule] = &[
    convert_review(
        "connector.class",
        "component.path",
        o::source_class,
        "our source component; the stored offset ((timestamp, sys_id) there too) carries over with the cutover",
        "O-src",
    ),
    drop("snow.tables", "table aliases there; the tables are their snow.table.<alias>.name", "O-src"),
    drop("snow.task.tables", "internal: set by their connector for its tasks", "O-src"),
    rename("snow.source.poll.interval.ms", "snow.poll.interval.ms", "", "O-src"),
    convert("snow.source.batch.size", "snow.batch.size", source::batch_size, "at most 10,000 (theirs 50,000)", "O-src"),
    rename("snow.source.overlap.seconds", "snow.overlap.seconds", "", "O-src"),
    rename("snow.source.safety.lag.seconds", "snow.safety.lag.seconds", "", "O-src"),
    rename("snow.source.dedup.window.records", "snow.dedup.window.size", "", "O-src"),
    rename("snow.source.bad.row.behavior", "snow.bad.row.behavior", "", "O-src"),
    rename("snow.source.startup.probe", "snow.startup.probe", "", "O-src"),
    decide("snow.source.schema.mode", o::schema_mode, "schemaless: as here; typed: a typed value.converter; strings: manual", "O-src"),
    drop("snow.source.typed.fields", "field types come from sys_dictionary here", "O-src"),
    drop(
        "snow.source.schema.evolution",
        "a dictionary change evolves the registered schema (BACKWARD) or parks the table naming the fields",
        "O-src",
    ),
    decide("snow.source.emit.envelope", o::emit_envelope, "false: as here; true: manual", "O-src"),
    convert(
        "snow.table.{a}.name",
        "snow.tables",
        o::table_name,
        "the alias's table joins snow.tables; its keys become snow.table.<table>.*",
        "O-tbl",
    ),
    rename("snow.table.{a}.topic", "snow.table.<t>.topic", "", "O-tbl"),
    rename("snow.table.{a}.start.timestamp", "snow.table.<t>.start.timestamp", "", "O-tbl"),
    rename("snow.table.{a}.timestamp.field", "snow.table.<t>.timestamp.field", "", "O-tbl"),
    rename("snow.table.{a}.sys.id.field", "snow.table.<t>.sys.id.field", "", "O-tbl"),
    rename("snow.table.{a}.query", "snow.table.<t>.query", "", "O-tbl"),
    rename("snow.table.{a}.fields", "snow.table.<t>.fields", "", "O-tbl"),
    rename("snow.table.{a}.display.value", "snow.table.<t>.display.value", "", "O-tbl"),
    rename("snow.table.{a}.exclude.reference.link", "snow.table.<t>.exclude.reference.link", "", "O-tbl"),
    convert(
        "snow.table.{a}.query.domain",
        "snow.table.<t>.query.domain",
        o::query_domain,
        "true → session (ours by default), false → all",
        "O-tbl",
    ),
    rename("snow.table.{a}.query.category", "snow.table.<t>.query.category", "", "O-tbl"),
    convert("snow.table.{a}.batch.size", "snow.table.<t>.batch.size", source::batch_size, "at most 10,000", "O-tbl"),
    rename("snow.table.{a}.poll.interval.ms", "snow.table.<t>.poll.interval.ms", "", "O-tbl"),
];

/// The sink's keys (`SinkConfig.java`).
pub const SINK: &[KeyRule] = &[
    convert("connector.class", "component.path", |_, _| crate::rules::Converted::Keys(Vec::new()), "our sink component", "O-snk"),
    decide("snow.sink.routing.mode", o::routing_mode, "the table keys given say it here", "O-snk"),
    same("snow.sink.table", "", "O-snk"),
    convert("snow.sink.table.header", "snow.sink.table.header", o::table_header, "under header routing", "O-snk"),
    convert("snow.sink.table.allowlist", "snow.sink.table.header.allowed", o::table_allowlist, "", "O-snk"),
    convert("snow.sink.topic.{topic}.table", "snow.sink.table.map", o::topic_table, "one topic:table entry of the map", "O-snk"),
    decide("snow.sink.operation.mode", o::operation_mode, "key_value: auto, ours; header: the header wins when present, as here", "O-snk"),
    convert("snow.sink.operation.fixed", "snow.sink.operation", o::operation_fixed, "", "O-snk"),
    same("snow.sink.operation.header", "", "O-snk"),
    drop("snow.sink.operation.header.required", "taken with snow.sink.operation.mode", "O-snk"),
    convert("snow.sink.update.method", "snow.sink.update.method", o::update_method, "PATCH/PUT → patch/put", "O-snk"),
    same("snow.sink.sys.id.key.field", "", "O-snk"),
    rename("snow.sink.sys.id.value.field", "snow.sink.sys.id.field", "", "O-snk"),
    decide("snow.sink.sys.id.precedence", o::precedence, "key: as here; reject: the header, key, value order applies instead", "O-snk"),
    convert("snow.sink.null.behavior", "snow.sink.null.policy", o::null_policy, "", "O-snk"),
    convert("snow.sink.unknown.field.behavior", "snow.sink.unknown.fields", o::unknown_fields, "passthrough → pass", "O-snk"),
    convert("snow.sink.nested.behavior", "snow.sink.nested.policy", o::nested_policy, "", "O-snk"),
    rename("snow.sink.nested.flatten.delimiter", "snow.sink.nested.delimiter", "", "O-snk"),
    rename("snow.sink.field.rename", "snow.sink.fields.rename", "", "O-snk"),
    rename("snow.sink.field.allowlist", "snow.sink.fields.allow", "", "O-snk"),
    rename("snow.sink.field.denylist", "snow.sink.fields.deny", "", "O-snk"),
    same("snow.sink.max.in.flight", "", "O-snk"),
    convert("snow.sink.create.ambiguous.behavior", "snow.sink.unknown.outcome", o::ambiguous_create, "fail_ambiguous → fail", "O-snk"),
    same("snow.sink.correlation.field", "", "O-snk"),
    convert("snow.sink.not.found.behavior", "snow.sink.not.found", o::not_found, "", "O-snk"),
    same("behavior.on.api.errors", "", "O-snk"),
    drop("snow.sink.reporter.bootstrap.servers", "reports go to the connector's own Kafka cluster", "O-snk"),
    convert_review(
        "snow.sink.reporter.success.topic",
        "reporter.result.topic.name",
        o::reporter_success,
        "the same topic; the report's format differs",
        "O-snk",
    ),
    convert_review(
        "snow.sink.reporter.error.topic",
        "reporter.error.topic.name",
        o::reporter_error,
        "the same topic; the report's format differs",
        "O-snk",
    ),
    decide("snow.sink.reporter.include.request.body", o::include_body, "false: as here; true: manual", "O-snk"),
    drop("snow.sink.reporter.producer.*", "reports use the connector's own producer (idempotent, acks=all) and Kafka security", "O-snk"),
];

/// Keys the open source leaves out whose default differs from ours.
pub const SOURCE_IMPLIED: &[(&str, &str)] = &[];

/// Keys the open sink leaves out whose default differs from ours.
pub const SINK_IMPLIED: &[(&str, &str)] = &[("snow.sink.unknown.field.behavior", "fail"), ("snow.sink.sys.id.precedence", "reject")];
