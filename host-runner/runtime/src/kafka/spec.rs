//! A connector's Kafka client settings as its configuration reads them ([`KafkaSpec`]): where the
//! cluster is, the connection's security, and the tuning overrides of its producer and consumer.
//! Reading them from configuration keys is the configuration's ([`crate::config`]); making
//! clients of them is this module's parent's.

use std::collections::BTreeMap;

/// Kafka client settings of a connector.
#[derive(Clone, Default)]
pub struct KafkaSpec {
    /// `kafka.bootstrap.servers`.
    pub bootstrap_servers: String,
    /// The connection's security (`kafka.security.protocol`, `kafka.sasl.*`, `kafka.ssl.*`, as
    /// librdkafka names them without `kafka.`), for every client of the connector.
    pub security: BTreeMap<String, String>,
    /// `kafka.producer.<librdkafka key>` overrides (tuning only: [`crate::kafka::keys`]).
    pub producer: BTreeMap<String, String>,
    /// `kafka.consumer.<librdkafka key>` overrides (tuning only).
    pub consumer: BTreeMap<String, String>,
    /// `kafka.producer.unsafe=true`: the user accepts producer settings that can lose records.
    pub unsafe_producer: bool,
}

impl std::fmt::Debug for KafkaSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let security: BTreeMap<&str, &str> = self
            .security
            .iter()
            .map(|(k, v)| (k.as_str(), if super::keys::SECURITY_SECRETS.contains(&k.as_str()) { "[hidden]" } else { v.as_str() }))
            .collect();
        f.debug_struct("KafkaSpec")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("security", &security)
            .field("producer", &self.producer)
            .field("consumer", &self.consumer)
            .field("unsafe_producer", &self.unsafe_producer)
            .finish()
    }
}
