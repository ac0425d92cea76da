//! Conversions of Confluent Cloud's own keys: its Kafka credentials, data formats and switches.

use super::super::rules::{Context, Converted};
use super::only_default;

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

/// `csfle.enabled`.
pub fn csfle(_: &Context<'_>, value: &str) -> Converted {
    only_default(value, &["false"], "client-side field-level encryption is Confluent Cloud's; encrypt with a transform component instead")
}

/// `schema.context.name`.
pub fn schema_context(_: &Context<'_>, value: &str) -> Converted {
    only_default(value, &["default"], "schema contexts are not addressed here; use a registry (or a subject strategy) without one")
}
