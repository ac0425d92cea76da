//! Keys Confluent's connectors share: the instance, credentials, HTTP and licence keys of the
//! ServiceNow connector class (Platform and Cloud Legacy sources, both sinks), and Confluent
//! Cloud's own keys (Kafka credentials, data formats, CSFLE, restart policy).

use super::{convert, convert_review, decide, drop, manual, rename};
use crate::conversions::{cloud, instance, network};
use crate::rules::KeyRule;

/// The ServiceNow connector class's instance keys (research §1.1, §4.1, §5.1).
pub const INSTANCE: &[KeyRule] = &[
    convert("servicenow.url", "snow.instance.url", instance::instance_url, "trailing slashes dropped", "D-src-cfg, RT-231, T"),
    rename("servicenow.user", "snow.auth.username", "Basic authentication (snow.auth.type=basic, our default)", "RT-231, RT-265, T"),
    rename("servicenow.username", "snow.auth.username", "the documentation's name of servicenow.user", "D-src-cfg, D-src-514"),
    rename("servicenow.password", "snow.auth.password", "a secret: a literal becomes an ${env:…} placeholder", "D-src-cfg, RT-231, T"),
    convert(
        "retry.max.times",
        "snow.retry.max.attempts",
        instance::retries_to_attempts,
        "retries after the first attempt → attempts in all (+1)",
        "D-src-ov, RT-234",
    ),
    convert(
        "connection.timeout.ms",
        "snow.http.connect.timeout.ms",
        instance::connect_timeout,
        "connect timeout (capped at 60 s)",
        "RT-231, RT-265, T",
    ),
    convert(
        "read.timeout.ms",
        "snow.http.request.timeout.ms",
        instance::request_timeout,
        "time to the answer's first byte",
        "RT-265, README",
    ),
    convert(
        "write.timeout.ms",
        "snow.http.request.timeout.ms",
        instance::write_timeout,
        "a sink's, with read.timeout.ms (the larger); a source never writes",
        "RT-265, README",
    ),
    convert(
        "proxy.url",
        "snow.proxy.url",
        network::proxy_url,
        "host:port → http://host:port (https destinations are tunnelled with CONNECT)",
        "RT-231, RT-265, D-snk-cfg",
    ),
    rename("proxy.user", "snow.proxy.username", "Basic proxy authentication", "RT-231, RT-265"),
    rename("proxy.password", "snow.proxy.password", "a secret: a literal becomes an ${env:…} placeholder", "RT-231, RT-265"),
    convert(
        "servicenow.ssl.keystore.path",
        "snow.instance.ssl.keystore.location, .type",
        network::keystore_path,
        "the client certificate's store; a JKS store becomes the PKCS#12 store keytool converts it to (review)",
        "RT-231, RT-265, README",
    ),
    rename(
        "servicenow.ssl.keystore.password",
        "snow.instance.ssl.keystore.password",
        "a secret: a literal becomes an ${env:…} placeholder",
        "RT-231, RT-265, README",
    ),
    convert(
        "servicenow.ssl.truststore.path",
        "snow.instance.ssl.truststore.location, .type",
        network::truststore_path,
        "the trusted CA certificates; a JKS store becomes the PKCS#12 store keytool converts it to (review)",
        "RT-231, RT-265, README",
    ),
    rename(
        "servicenow.ssl.truststore.password",
        "snow.instance.ssl.truststore.password",
        "a secret: a literal becomes an ${env:…} placeholder",
        "RT-231, RT-265, README",
    ),
    manual(
        "servicenow.ssl.*",
        "not a documented key of the connector's TLS settings (servicenow.ssl.keystore.* and .truststore.* are)",
        "RT-231, RT-265",
    ),
    drop("confluent.license", "no licence here", "RT-231, P"),
    drop("confluent.topic", "the licence topic: no licence here", "RT-231"),
    drop("confluent.topic.*", "the licence topic's clients: no licence here", "RT-231, P"),
];

/// Confluent Cloud's keys (research §2.1, §3.1, §5.1).
pub const CLOUD: &[KeyRule] = &[
    decide("kafka.auth.mode", cloud::kafka_auth_mode, "KAFKA_API_KEY: taken with kafka.api.key; SERVICE_ACCOUNT: manual", "T"),
    convert_review(
        "kafka.api.key",
        "kafka.security.protocol, kafka.sasl.*",
        cloud::kafka_api_key,
        "the cluster's API key as SASL/PLAIN (standalone); a fleet's worker holds it",
        "T",
    ),
    rename(
        "kafka.api.secret",
        "kafka.sasl.password",
        "a secret: a literal becomes an ${env:…} placeholder (standalone; a fleet's worker holds it)",
        "T",
    ),
    manual(
        "kafka.service.account.id",
        "a Confluent Cloud service account: create an API key for it and set kafka.sasl.username / kafka.sasl.password (worker: sasl.*)",
        "T",
    ),
    convert_review(
        "output.data.format",
        "key.converter, value.converter, value.converter.*",
        cloud::data_format,
        "AVRO, JSON_SR, PROTOBUF → Confluent's converters with a Schema Registry; JSON → JsonConverter without schemas; the key a string, as Cloud forced",
        "T, D-cc-src",
    ),
    convert_review(
        "input.data.format",
        "key.converter, value.converter, value.converter.*",
        cloud::data_format,
        "as output.data.format: the converter records are read with",
        "T, D-cc-snk",
    ),
    decide("schema.context.name", cloud::schema_context, "`default` means none; another context is manual", "T"),
    decide("csfle.enabled", cloud::csfle, "false: nothing to do; true: manual", "T"),
    drop("csfle.onFailure", "client-side field-level encryption is not used (csfle.enabled)", "T"),
    manual(
        "sr.service.account.id",
        "a Schema Registry service account: give the registry's API key in value.converter.basic.auth.user.info",
        "T",
    ),
    drop(
        "auto.restart.on.user.error",
        "units retry transient failures themselves and park permanent ones with the reason on /status; a restart is POST /connectors/<name>/restart",
        "T",
    ),
    drop("datapreview.schemas.enable", "Confluent Cloud's data preview", "T"),
    rename("max.poll.interval.ms", "kafka.consumer.max.poll.interval.ms", "", "T"),
    drop("max.poll.records", "librdkafka fetches by bytes; a lane takes records as they come", "T"),
];
