//! The `kafka.*` section of a connector: the brokers, the tuning overrides of its producer and
//! consumer (an allow-list: [`crate::kafka::keys`]) and the connection's security, read into a
//! [`KafkaSpec`].

use std::collections::BTreeMap;

use snow_core::error::ConfigError;

use crate::kafka::KafkaSpec;
use crate::kafka::keys::Client;

/// Reads the section.
pub fn read(entries: &BTreeMap<String, String>, errors: &mut Vec<ConfigError>) -> KafkaSpec {
    let bootstrap_servers = super::required(entries, "kafka.bootstrap.servers", "the Kafka brokers, e.g. 127.0.0.1:9092", errors);
    let bad_server = bootstrap_servers.split(',').map(str::trim).find(|s| !super::is_host_port(s));
    if let Some(bad) = bad_server.filter(|_| !bootstrap_servers.is_empty()) {
        errors.push(ConfigError::new(
            "kafka.bootstrap.servers",
            format!("{bad:?} is not host:port (a comma-separated list, e.g. 127.0.0.1:9092)"),
        ));
    }
    let prefixed = |prefix: &str| -> BTreeMap<String, String> {
        entries.iter().filter_map(|(k, v)| k.strip_prefix(prefix).map(|rest| (rest.to_string(), v.clone()))).collect()
    };
    let mut producer = prefixed("kafka.producer.");
    let unsafe_producer = match producer.remove("unsafe").as_deref().map(str::trim) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            errors.push(ConfigError::new("kafka.producer.unsafe", format!("must be true or false, got {other:?}")));
            false
        }
    };
    let consumer = prefixed("kafka.consumer.");
    for (client, keys) in [(Client::Producer, &producer), (Client::Consumer, &consumer)] {
        errors.extend(keys.keys().filter_map(|k| crate::kafka::keys::refusal(client, k)));
    }
    let security = crate::kafka::security::read(entries, "kafka.", errors);
    KafkaSpec { bootstrap_servers, security, producer, consumer, unsafe_producer }
}
