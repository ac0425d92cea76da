//! Kafka Connect's converter keys, read as Connect reads them: `key.converter` /
//! `value.converter` name a class, and everything under `key.converter.` / `value.converter.` is
//! that converter's own configuration (`schemas.enable`, `schema.registry.url`, `basic.auth.*`,
//! `auto.register.schemas`, `*.subject.name.strategy`, `schema.registry.ssl.*`...). Keys a converter does not use are
//! ignored with a warning, as Connect does, so a Connect configuration moves over unchanged.

use snow_core::error::ConfigError;
use std::collections::BTreeMap;

use snow_core::auth::Secret;

use super::registry::{RegistryAuth, SchemaType};

/// Connect's converter classes and what each writes.
pub const CLASSES: [(&str, Format); 6] = [
    ("org.apache.kafka.connect.json.JsonConverter", Format::Json),
    ("org.apache.kafka.connect.storage.StringConverter", Format::AsIs),
    ("org.apache.kafka.connect.converters.ByteArrayConverter", Format::AsIs),
    ("io.confluent.connect.avro.AvroConverter", Format::Avro),
    ("io.confluent.connect.json.JsonSchemaConverter", Format::JsonSchema),
    ("io.confluent.connect.protobuf.ProtobufConverter", Format::Protobuf),
];

/// What a converter writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The bytes as they are: the row's JSON text, the sys_id (`StringConverter`, `ByteArrayConverter`).
    AsIs,
    /// Connect's JSON, with the schema envelope unless `schemas.enable=false`.
    Json,
    /// Avro with a registry.
    Avro,
    /// JSON Schema with a registry.
    JsonSchema,
    /// Protobuf with a registry.
    Protobuf,
}

impl Format {
    /// The registry's schema type, for formats that use one.
    pub fn schema_type(self) -> Option<SchemaType> {
        match self {
            Format::Avro => Some(SchemaType::Avro),
            Format::JsonSchema => Some(SchemaType::Json),
            Format::Protobuf => Some(SchemaType::Protobuf),
            Format::AsIs | Format::Json => None,
        }
    }
}

/// Confluent's subject name strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubjectStrategy {
    /// `<topic>-key` / `<topic>-value` (the default).
    Topic,
    /// The record's fully-qualified name.
    Record,
    /// `<topic>-<record name>`.
    TopicRecord,
}

impl SubjectStrategy {
    /// The subject of a `key` or value schema called `record` on `topic`.
    pub fn subject(self, topic: &str, is_key: bool, record: Option<&str>) -> String {
        let part = if is_key { "key" } else { "value" };
        match (self, record) {
            (SubjectStrategy::Record, Some(r)) => r.to_string(),
            (SubjectStrategy::TopicRecord, Some(r)) => format!("{topic}-{r}"),
            _ => format!("{topic}-{part}"),
        }
    }
}

/// One converter as configured.
#[derive(Debug, Clone)]
pub struct ConverterSpec {
    /// The class as written.
    pub class: String,
    /// What it writes.
    pub format: Format,
    /// `schemas.enable` (JsonConverter; default true as in Connect).
    pub schemas_enable: bool,
    /// `schema.registry.url`, split at commas.
    pub registry_urls: Vec<String>,
    /// `basic.auth.*` / `bearer.auth.*`.
    pub registry_auth: RegistryAuth,
    /// `auto.register.schemas` (default true).
    pub auto_register: bool,
    /// `use.latest.version`: write with the subject's latest schema instead of the derived one.
    pub use_latest: bool,
    /// `key.subject.name.strategy` / `value.subject.name.strategy`.
    pub subject: SubjectStrategy,
    /// `ProtobufConverter`'s `optional.for.nullables`.
    pub protobuf: snow_data::protobuf::Options,
    /// `schema.registry.ssl.*`: the registry's trust store and client certificate, when set.
    pub registry_tls: Option<crate::transport::tls::TlsProfile>,
    /// The registry's TLS secrets (store passwords, an inline key), for scrubbing.
    registry_secrets: Vec<Secret>,
}

/// The connector's converters; `None` keeps the host's own behaviour (the sys_id and the row's
/// JSON as read, `snow.value.format`).
#[derive(Debug, Clone, Default)]
pub struct ConvertSpec {
    /// `key.converter`.
    pub key: Option<ConverterSpec>,
    /// `value.converter`.
    pub value: Option<ConverterSpec>,
    /// Converter keys no converter uses (logged as Connect does).
    pub unused: Vec<String>,
}

/// Whether a converter of `format` understands its sub-key `key`.
fn uses_key(format: Format, key: &str) -> bool {
    const REGISTRY: [&str; 9] = [
        "schema.registry.url",
        "basic.auth.credentials.source",
        "basic.auth.user.info",
        "bearer.auth.credentials.source",
        "bearer.auth.token",
        "auto.register.schemas",
        "key.subject.name.strategy",
        "value.subject.name.strategy",
        "use.latest.version",
    ];
    let registry = || {
        REGISTRY.contains(&key) || key.strip_prefix("schema.registry.ssl.").is_some_and(|rest| crate::transport::tls::KEYS.contains(&rest))
    };
    match format {
        Format::Json => ["schemas.enable", "decimal.format"].contains(&key),
        Format::AsIs => key == "encoding",
        Format::Avro | Format::JsonSchema => registry(),
        Format::Protobuf => registry() || ["optional.for.nullables", "wrapper.for.nullables"].contains(&key),
    }
}

/// True for keys this module reads (the converter keys and their sub-keys).
pub fn is_converter_key(key: &str) -> bool {
    ["key.converter", "value.converter", "header.converter"]
        .iter()
        .any(|p| key == *p || key.strip_prefix(p).is_some_and(|r| r.starts_with('.')))
}

impl ConvertSpec {
    /// Reads the converter keys of `entries`; problems go to `errors`, naming the key.
    pub fn from_entries(entries: &BTreeMap<String, String>, errors: &mut Vec<ConfigError>) -> Self {
        let mut unused = Vec::new();
        let key = converter(entries, "key.converter", errors, &mut unused);
        let value = converter(entries, "value.converter", errors, &mut unused);
        if let Some(class) =
            entries.get("header.converter").map(|c| c.trim()).filter(|c| *c != "org.apache.kafka.connect.storage.SimpleHeaderConverter")
        {
            errors.push(ConfigError::new(
                "header.converter",
                format!("only org.apache.kafka.connect.storage.SimpleHeaderConverter (Connect's default) is supported, got {class:?}"),
            ));
        }
        unused.extend(entries.keys().filter(|k| k.starts_with("header.converter.")).cloned());
        Self { key, value, unused }
    }

    /// True when the value converter needs the table's types (everything but `AsIs`).
    pub fn typed_value(&self) -> bool {
        self.value.as_ref().is_some_and(|v| v.format != Format::AsIs)
    }

    /// The registry credentials, for scrubbing.
    pub fn secrets(&self) -> Vec<&str> {
        [&self.key, &self.value]
            .into_iter()
            .flatten()
            .flat_map(|c| {
                let auth = match &c.registry_auth {
                    RegistryAuth::Basic(s) | RegistryAuth::Bearer(s) => Some(s.expose()),
                    RegistryAuth::None => None,
                };
                auth.into_iter().chain(c.registry_secrets.iter().map(Secret::expose))
            })
            .collect()
    }
}

fn converter(
    entries: &BTreeMap<String, String>,
    prefix: &str,
    errors: &mut Vec<ConfigError>,
    unused: &mut Vec<String>,
) -> Option<ConverterSpec> {
    let sub: BTreeMap<&str, &str> =
        entries.iter().filter_map(|(k, v)| Some((k.strip_prefix(prefix)?.strip_prefix('.')?, v.trim()))).collect();
    let Some(class) = entries.get(prefix).map(|c| c.trim().to_string()) else {
        unused.extend(sub.keys().map(|k| format!("{prefix}.{k}")));
        return None;
    };
    let Some(format) = CLASSES.iter().find(|(c, _)| *c == class).map(|(_, f)| *f) else {
        let known: Vec<&str> = CLASSES.iter().map(|(c, _)| *c).collect();
        errors.push(ConfigError::new(prefix, format!("{class:?} is not a converter this runtime has (it has {})", known.join(", "))));
        return None;
    };
    let flag = |key: &str, default: bool, errors: &mut Vec<ConfigError>| match sub.get(key).copied() {
        None => default,
        Some(v) if v.eq_ignore_ascii_case("true") => true,
        Some(v) if v.eq_ignore_ascii_case("false") => false,
        Some(v) => {
            errors.push(ConfigError::new(format!("{prefix}.{key}"), format!("must be true or false, got {v:?}")));
            default
        }
    };
    let schemas_enable = flag("schemas.enable", true, errors);
    let protobuf = snow_data::protobuf::Options { optional_for_nullables: flag("optional.for.nullables", false, errors) };
    if format == Format::Protobuf && flag("wrapper.for.nullables", false, errors) {
        errors.push(ConfigError::new(
            format!("{prefix}.wrapper.for.nullables"),
            "true is not supported (optional.for.nullables=true keeps nulls with proto3 optional fields)",
        ));
    }
    let auto_register = flag("auto.register.schemas", true, errors);
    // As Confluent's serializers: the latest version is used only when nothing is registered.
    let use_latest = flag("use.latest.version", false, errors) && !auto_register;
    let registry_tls = if format.schema_type().is_some() {
        let ssl: BTreeMap<&str, &str> = sub.iter().filter_map(|(k, v)| Some((k.strip_prefix("schema.registry.ssl.")?, *v))).collect();
        crate::transport::tls::read(&ssl, &format!("{prefix}.schema.registry.ssl"), errors)
    } else {
        None
    };
    let registry_secrets = crate::transport::tls::SECRET_KEYS
        .iter()
        .filter_map(|k| sub.get(format!("schema.registry.ssl.{k}").as_str()).filter(|v| !v.is_empty()).map(|v| Secret::new(v.to_string())))
        .collect();
    if sub.get("decimal.format").is_some_and(|f| !f.eq_ignore_ascii_case("BASE64")) {
        errors.push(ConfigError::new(format!("{prefix}.decimal.format"), "only BASE64 (Connect's default) is supported"));
    }
    let registry_urls: Vec<String> = sub
        .get("schema.registry.url")
        .map(|u| u.split(',').map(str::trim).filter(|u| !u.is_empty()).map(str::to_string).collect())
        .unwrap_or_default();
    if format.schema_type().is_some() {
        if registry_urls.is_empty() {
            errors.push(ConfigError::missing(format!("{prefix}.schema.registry.url"), format!("is required for {class}")));
        }
        for url in &registry_urls {
            if let Some(problem) = url_problem(url) {
                errors.push(ConfigError::new(format!("{prefix}.schema.registry.url"), format!("{url:?} {problem}")));
            }
        }
    }
    let registry_auth = match (sub.get("basic.auth.credentials.source").copied(), sub.get("bearer.auth.credentials.source").copied()) {
        (Some(_), Some(_)) => {
            for key in ["basic.auth.credentials.source", "bearer.auth.credentials.source"] {
                errors.push(ConfigError::new(format!("{prefix}.{key}"), "set one, not both"));
            }
            RegistryAuth::None
        }
        (Some("USER_INFO"), None) => match sub.get("basic.auth.user.info").filter(|u| u.contains(':')) {
            Some(info) => RegistryAuth::Basic(Secret::new(info.to_string())),
            None => {
                errors.push(ConfigError::missing(
                    format!("{prefix}.basic.auth.user.info"),
                    "is required as user:password for basic.auth.credentials.source=USER_INFO",
                ));
                RegistryAuth::None
            }
        },
        (Some(other), None) => {
            errors.push(ConfigError::new(
                format!("{prefix}.basic.auth.credentials.source"),
                format!("only USER_INFO is supported, got {other:?}"),
            ));
            RegistryAuth::None
        }
        (None, Some("STATIC_TOKEN")) => match sub.get("bearer.auth.token").filter(|t| !t.is_empty()) {
            Some(token) => RegistryAuth::Bearer(Secret::new(token.to_string())),
            None => {
                errors.push(ConfigError::missing(
                    format!("{prefix}.bearer.auth.token"),
                    "is required for bearer.auth.credentials.source=STATIC_TOKEN",
                ));
                RegistryAuth::None
            }
        },
        (None, Some(other)) => {
            errors.push(ConfigError::new(
                format!("{prefix}.bearer.auth.credentials.source"),
                format!("only STATIC_TOKEN is supported, got {other:?}"),
            ));
            RegistryAuth::None
        }
        (None, None) => RegistryAuth::None,
    };
    let is_key = prefix == "key.converter";
    let strategy_key = if is_key { "key.subject.name.strategy" } else { "value.subject.name.strategy" };
    let subject = match sub.get(strategy_key).copied() {
        None => SubjectStrategy::Topic,
        Some(class) => match class.rsplit('.').next() {
            Some("TopicNameStrategy") => SubjectStrategy::Topic,
            Some("RecordNameStrategy") => SubjectStrategy::Record,
            Some("TopicRecordNameStrategy") => SubjectStrategy::TopicRecord,
            _ => {
                errors.push(ConfigError::new(
                    format!("{prefix}.{strategy_key}"),
                    format!("{class:?} is not TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy"),
                ));
                SubjectStrategy::Topic
            }
        },
    };
    unused.extend(sub.keys().filter(|k| !uses_key(format, k)).map(|k| format!("{prefix}.{k}")));
    Some(ConverterSpec {
        class,
        format,
        schemas_enable,
        registry_urls,
        registry_auth,
        auto_register,
        use_latest,
        subject,
        protobuf,
        registry_tls,
        registry_secrets,
    })
}

/// What is wrong with a registry URL, if anything (a path is fine: Apicurio serves the API under one).
fn url_problem(url: &str) -> Option<&'static str> {
    let Some((scheme, rest)) = url.split_once("://") else { return Some("must start with http:// or https://") };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Some("must start with http:// or https://");
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Some("carries user info: give credentials in basic.auth.user.info (a URL is logged; credentials must not be)");
    }
    authority.is_empty().then_some("has no host")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, &str)]) -> (ConvertSpec, Vec<String>) {
        let entries = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut errors = Vec::new();
        (ConvertSpec::from_entries(&entries, &mut errors), snow_core::error::config_lines(&errors))
    }

    #[test]
    fn a_confluent_avro_configuration_reads_as_written() {
        let (spec, errors) = read(&[
            ("value.converter", "io.confluent.connect.avro.AvroConverter"),
            ("value.converter.schema.registry.url", "http://r1:8081,http://r2:8081"),
            ("value.converter.basic.auth.credentials.source", "USER_INFO"),
            ("value.converter.basic.auth.user.info", "sr:secret"),
            ("value.converter.value.subject.name.strategy", "io.confluent.kafka.serializers.subject.RecordNameStrategy"),
            ("value.converter.enhanced.avro.schema.support", "true"),
            ("key.converter", "org.apache.kafka.connect.storage.StringConverter"),
        ]);
        assert!(errors.is_empty(), "{errors:?}");
        let value = spec.value.as_ref().expect("value");
        assert_eq!((value.format, value.registry_urls.len(), value.subject), (Format::Avro, 2, SubjectStrategy::Record));
        assert!(spec.typed_value());
        assert_eq!(spec.unused, ["value.converter.enhanced.avro.schema.support"]);
        assert_eq!(spec.secrets(), ["sr:secret"]);
        assert_eq!(value.subject.subject("t", false, Some("servicenow.incident")), "servicenow.incident");
        assert_eq!(SubjectStrategy::Topic.subject("t", true, None), "t-key");
    }

    #[test]
    fn protobuf_reads_its_nullables_keys() {
        let (spec, errors) = read(&[
            ("value.converter", "io.confluent.connect.protobuf.ProtobufConverter"),
            ("value.converter.schema.registry.url", "http://r:8081"),
            ("value.converter.optional.for.nullables", "true"),
        ]);
        assert!(errors.is_empty(), "{errors:?}");
        let value = spec.value.as_ref().expect("value");
        assert_eq!((value.format, value.protobuf.optional_for_nullables), (Format::Protobuf, true));
        assert!(spec.unused.is_empty(), "{:?}", spec.unused);
        let (_, errors) = read(&[
            ("value.converter", "io.confluent.connect.protobuf.ProtobufConverter"),
            ("value.converter.schema.registry.url", "http://r:8081"),
            ("value.converter.wrapper.for.nullables", "true"),
        ]);
        assert!(errors.iter().any(|e| e.starts_with("value.converter.wrapper.for.nullables: true is not supported")), "{errors:?}");
    }

    #[test]
    fn problems_name_their_key() {
        let (_, errors) = read(&[
            ("value.converter", "io.confluent.connect.avro.AvroConverter"),
            ("value.converter.basic.auth.credentials.source", "USER_INFO"),
            ("key.converter", "com.example.Mine"),
            ("header.converter", "com.example.Headers"),
            ("value.converter.schema.registry.ssl.truststore.location", "/etc/ts.jks"),
            ("value.converter.schema.registry.ssl.truststore.type", "JKS"),
        ]);
        let all = errors.join("\n");
        for key in [
            "value.converter.schema.registry.url: is required",
            "value.converter.basic.auth.user.info",
            "key.converter: \"com.example.Mine\"",
            "header.converter:",
            "value.converter.schema.registry.ssl.truststore.type: /etc/ts.jks is a Java key store (JKS), which cannot be read here",
        ] {
            assert!(all.contains(key), "{key} missing from {all}");
        }
        assert!(!all.contains("sr:secret"));
    }
}
