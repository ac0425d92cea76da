//! Confluent Cloud's ServiceNow Source V2 (`ServiceNowSourceV2`, the generic HTTP source
//! underneath: research §3): up to five tables as `table{i}.*`, Basic or OAuth client
//! credentials, retries by status code.

use super::{convert, convert_review, decide, drop, manual, rename, review};
use crate::conversions::{instance, network, source};
use crate::rules::KeyRule;

pub const RULES: &[KeyRule] = &[
    convert_review(
        "connector.class",
        "component.path",
        source::confluent_source,
        "our source component; the offset does not carry over (run the cutover)",
        "T, D-cc-v2",
    ),
    convert("servicenow.url", "snow.instance.url", instance::instance_url, "trailing slashes dropped", "T"),
    convert("auth.type", "snow.auth.type", instance::auth_type, "BASIC → basic, OAUTH2 → oauth_client_credentials", "T"),
    rename("connection.user", "snow.auth.username", "", "T"),
    rename("connection.password", "snow.auth.password", "a secret: a literal becomes an ${env:…} placeholder", "T"),
    rename("oauth2.token.url", "snow.auth.token.url", "", "T"),
    rename("oauth2.client.id", "snow.auth.client.id", "", "T"),
    rename("oauth2.client.secret", "snow.auth.client.secret", "a secret: a literal becomes an ${env:…} placeholder", "T"),
    decide("oauth2.token.property", instance::token_property, "access_token (ServiceNow's) is the only one read", "T"),
    decide("oauth2.client.scope", instance::client_scope, "`any` (the default) means none; another scope is manual", "T"),
    drop("oauth2.client.auth.mode", "ServiceNow takes the client's credentials in the form, which is how the host sends them", "T"),
    manual("oauth2.client.headers", "extra token request headers are not sent here", "T"),
    drop("oauth2.client.header.separator", "no extra token headers (oauth2.client.headers)", "T"),
    decide("oauth2.jwt.enabled", instance::jwt_enabled, "false: nothing to do; true: manual", "T"),
    manual("oauth2.jwt.*", "JWT bearer grants are not supported: use OAuth client credentials", "T"),
    decide("servicenow.ssl.enabled", network::ssl_enabled, "the stores are used when set", "T"),
    convert_review(
        "servicenow.ssl.keystorefile",
        "snow.instance.ssl.keystore.location, .type",
        network::uploaded_keystore,
        "the uploaded store, saved as a PKCS#12 file on each worker",
        "T",
    ),
    rename(
        "servicenow.ssl.keystore.password",
        "snow.instance.ssl.keystore.password",
        "a secret: a literal becomes an ${env:…} placeholder",
        "T",
    ),
    rename("servicenow.ssl.key.password", "snow.instance.ssl.key.password", "a secret; the key's password must be the store's", "T"),
    convert_review(
        "servicenow.ssl.truststorefile",
        "snow.instance.ssl.truststore.location, .type",
        network::uploaded_truststore,
        "the uploaded store, saved as a PKCS#12 file on each worker",
        "T",
    ),
    rename(
        "servicenow.ssl.truststore.password",
        "snow.instance.ssl.truststore.password",
        "a secret: a literal becomes an ${env:…} placeholder",
        "T",
    ),
    decide("servicenow.ssl.protocol", network::ssl_protocol, "TLS 1.3 or 1.2 is negotiated", "T"),
    manual("servicenow.ssl.*", "not a documented key of V2's TLS settings", "T"),
    drop("tables.num", "the tables are those named by table{i}.name (tables past tables.num are ignored, as Confluent did)", "T"),
    decide("behavior.on.error", source::behavior_on_error, "FAIL: as here; IGNORE (skip a failing page) is manual", "T, D-cc-v2"),
    convert(
        "max.retries",
        "snow.retry.max.attempts",
        instance::retries_to_attempts,
        "retries after the first attempt → attempts in all (+1)",
        "T",
    ),
    decide(
        "retry.backoff.policy",
        instance::backoff_policy,
        "EXPONENTIAL_WITH_JITTER: as here; CONSTANT_VALUE: the ceiling held at the constant",
        "T",
    ),
    convert("retry.backoff.ms", "snow.retry.backoff.initial.ms", instance::backoff_initial, "", "T"),
    drop(
        "retry.on.status.codes",
        "the retried answers are fixed here: 429, 408, 503, and 500/502/504 or a cut-off answer of a read; another 4xx is final (a table parks with the reason instead of retrying a 404 or 403 forever)",
        "T",
    ),
    manual("reporter.error.topic.name", "a source's errors are its units' states (GET /status, the snow_* metrics), not records", "T"),
    convert("table{i}.name", "snow.tables", source::v2_table, "one table of snow.tables per table{i}", "T"),
    rename("table{i}.topic", "snow.table.<t>.topic", "", "T"),
    convert(
        "table{i}.batch.size",
        "snow.table.<t>.batch.size",
        source::batch_size,
        "rows per request (sysparm_limit), at most 10,000",
        "T, RT-v2",
    ),
    convert(
        "table{i}.start.timestamp",
        "snow.table.<t>.start.timestamp",
        source::start_timestamp,
        "yyyy-MM-dd HH:mm:ss (UTC), as ours",
        "T",
    ),
    rename("table{i}.timestamp.field", "snow.table.<t>.timestamp.field", "", "T"),
    decide(
        "table{i}.pagination.query",
        source::pagination_query,
        "empty: the timestamp pagination, as here; a custom query is manual",
        "T",
    ),
    decide("table{i}.pagination.query.field", source::pagination_query, "with table{i}.pagination.query", "T"),
    convert_review(
        "table{i}.display.value",
        "snow.table.<t>.display.value",
        source::display_value,
        "display values with the cursor fields kept raw",
        "T",
    ),
    convert(
        "table{i}.allowlisted.fields",
        "snow.table.<t>.fields",
        source::fields,
        "sysparm_fields (must hold the cursor fields, as Confluent required)",
        "T",
    ),
    review(
        "table{i}.request.interval.ms",
        "snow.table.<t>.poll.interval.ms",
        "V2 waited this long between any two requests; ours pauses between sweeps once caught up and reads full pages back to back (snow.instance.max.in.flight bounds the load)",
        "T",
    ),
    rename("table{i}.exclude.reference.link", "snow.table.<t>.exclude.reference.link", "", "T"),
    rename("table{i}.query.category", "snow.table.<t>.query.category", "", "T"),
    drop("table{i}.count.records", "the cursor asks for counts only where it needs them (crossing rows hidden by ACLs)", "T"),
    decide(
        "table{i}.query.domain",
        source::query_domain,
        "true: the session's domains, as here; false: every domain (query.domain=all)",
        "T",
    ),
    drop("table{i}.suppress.pagination.header", "the cursor reads the Link header where it needs it", "T"),
    decide("table{i}.request.parameters.separator", source::parameter_separator, "`&`: as here", "RT-v2"),
];

/// V2 configurations without `output.data.format` wrote JSON Schema.
pub const IMPLIED: &[(&str, &str)] = &[("output.data.format", "JSON_SR")];
