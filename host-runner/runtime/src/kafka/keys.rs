//! Which librdkafka properties a connector configuration may set, in one place.
//!
//! A connector configuration is untrusted input (design §6): whoever may create a connector may
//! tune its clients, never make the worker load native code, run a command, read or write a
//! worker file, join another group or take over another writer's transactions. So
//! `kafka.producer.*` / `kafka.consumer.*` accept an allow-list of tuning properties
//! ([`PRODUCER`], [`CONSUMER`], [`COMMON`]); the properties that load code or run commands are
//! refused by name with the reason ([`refusal`]); the connection's security settings are
//! [`SECURITY`] keys (`kafka.security.protocol`, `kafka.sasl.*`, `kafka.ssl.*`), which an
//! operator's connector file may set and a fleet takes from `worker.properties` only. Everything
//! else is the worker's decision.
//!
//! librdkafka itself is built with plugin loading (its `configure` has no switch the `rdkafka-sys`
//! crate passes through), so this allow-list is what keeps `plugin.library.paths` away from callers.

use snow_core::error::ConfigError;

/// Tuning properties a connector may set on any of its clients.
pub const COMMON: &[&str] = &[
    "client.id",
    "client.rack",
    "client.dns.lookup",
    "broker.address.family",
    "socket.timeout.ms",
    "socket.keepalive.enable",
    "socket.nagle.disable",
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "socket.connection.setup.timeout.ms",
    "connections.max.idle.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "retry.backoff.ms",
    "retry.backoff.max.ms",
    "metadata.max.age.ms",
    "topic.metadata.refresh.interval.ms",
    "topic.metadata.refresh.fast.interval.ms",
    "topic.metadata.propagation.max.ms",
    "message.max.bytes",
    "receive.message.max.bytes",
    "max.in.flight.requests.per.connection",
    "max.in.flight",
    "request.timeout.ms",
];

/// Tuning properties of a producer (a source's records, a sink's reports and dead letters).
pub const PRODUCER: &[&str] = &[
    "acks",
    "request.required.acks",
    "enable.idempotence",
    "linger.ms",
    "queue.buffering.max.ms",
    "queue.buffering.max.messages",
    "queue.buffering.max.kbytes",
    "batch.size",
    "batch.num.messages",
    "compression.type",
    "compression.codec",
    "compression.level",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "retries",
    "message.send.max.retries",
    "partitioner",
    "sticky.partitioning.linger.ms",
];

/// Tuning properties of a sink's consumer.
pub const CONSUMER: &[&str] = &[
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "partition.assignment.strategy",
    "group.protocol",
    "auto.offset.reset",
    "auto.commit.interval.ms",
    "fetch.wait.max.ms",
    "fetch.min.bytes",
    "fetch.max.bytes",
    "fetch.message.max.bytes",
    "max.partition.fetch.bytes",
    "fetch.error.backoff.ms",
    "queued.min.messages",
    "queued.max.messages.kbytes",
    "isolation.level",
    "check.crcs",
];

/// The connection's security settings: `kafka.<key>` in an operator's connector file, `<key>` in
/// `worker.properties`; they apply to every client of the connector (or of the worker).
pub const SECURITY: &[&str] = &[
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.extensions",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.endpoint.identification.algorithm",
    "ssl.cipher.suites",
    "ssl.curves.list",
    "ssl.sigalgs.list",
    "enable.ssl.certificate.verification",
    "https.ca.location",
];

/// The security settings that are secrets: provider references in a fleet, never shown.
pub const SECURITY_SECRETS: &[&str] = &["sasl.password", "sasl.oauthbearer.client.secret", "ssl.key.password", "ssl.keystore.password"];

/// Which client a `kafka.<client>.*` key configures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// `kafka.producer.*`.
    Producer,
    /// `kafka.consumer.*`.
    Consumer,
}

impl Client {
    /// The key prefix in a connector file.
    pub fn prefix(self) -> &'static str {
        match self {
            Client::Producer => "kafka.producer.",
            Client::Consumer => "kafka.consumer.",
        }
    }
}

/// Why a connector may not set librdkafka property `key` on its `client`, or `None` if it may.
pub fn refusal(client: Client, key: &str) -> Option<ConfigError> {
    let shown = format!("{}{key}", client.prefix());
    if let Some(why) = dangerous(key) {
        return Some(ConfigError::refused(shown, format!("refused: {why}; a connector configuration may never set it")));
    }
    if SECURITY.contains(&key) {
        return Some(ConfigError::refused(
            shown,
            format!(
                "the connection's security is set for every client at once: kafka.{key} in a connector file, {key} in \
                 worker.properties"
            ),
        ));
    }
    let owned = match key {
        "bootstrap.servers" | "metadata.broker.list" => Some("kafka.bootstrap.servers names the brokers"),
        "group.id" | "group.instance.id" => Some("a sink's consumer group is connect-<name>, owned by the host"),
        "transactional.id" | "transaction.timeout.ms" => Some("transactions are the host's (a worker's slot writer fences with them)"),
        "enable.auto.commit" | "enable.auto.offset.store" | "enable.partition.eof" => {
            Some("the host stores a sink's offsets only past records with a final outcome")
        }
        _ => None,
    };
    if let Some(why) = owned {
        return Some(ConfigError::refused(shown, format!("is the host's to set ({why})")));
    }
    let allowed = COMMON.contains(&key)
        || match client {
            Client::Producer => PRODUCER.contains(&key),
            Client::Consumer => CONSUMER.contains(&key),
        };
    (!allowed).then(|| {
        ConfigError::refused(
            shown,
            format!(
                "not a property a connector may set on its {} (the tuning properties it may set are listed in \
                 docs/configuration.md; anything else is the worker's decision)",
                match client {
                    Client::Producer => "producer",
                    Client::Consumer => "consumer",
                }
            ),
        )
    })
}

/// Why `key` is dangerous in anyone's hands but the operator's: it loads native code, runs a
/// command, or reads worker files as credentials.
pub fn dangerous(key: &str) -> Option<&'static str> {
    match key {
        "plugin.library.paths" => Some("it makes the worker load a native library"),
        "ssl.engine.location" | "ssl.engine.id" | "ssl_engine_callback_data" => Some("it makes the worker load an OpenSSL engine"),
        "ssl.providers" => Some("it makes the worker load OpenSSL provider modules"),
        "sasl.kerberos.kinit.cmd" => Some("it makes the worker run a shell command"),
        "sasl.kerberos.keytab" | "sasl.oauthbearer.assertion.private.key.file" | "sasl.oauthbearer.assertion.jwt.template.file" => {
            Some("it makes the worker read a credential file")
        }
        "sasl.oauthbearer.config" | "enable.sasl.oauthbearer.unsecure.jwt" => Some("it lets a client make up its own identity"),
        _ if key.ends_with(".command") || key.ends_with(".cmd") || key.ends_with("_cb") => Some("it names a command or a callback"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dangerous_keys_are_refused_by_name_and_tuning_is_allowed() {
        for key in ["plugin.library.paths", "ssl.engine.location", "sasl.kerberos.kinit.cmd", "ssl.providers", "oauthbearer.token.command"]
        {
            let why = refusal(Client::Producer, key).unwrap();
            assert!(why.to_string().starts_with(&format!("kafka.producer.{key}: refused: ")), "{why}");
        }
        assert_eq!(refusal(Client::Producer, "linger.ms"), None);
        assert_eq!(refusal(Client::Consumer, "session.timeout.ms"), None);
        assert_eq!(refusal(Client::Consumer, "client.id"), None);
        assert!(refusal(Client::Consumer, "linger.ms").unwrap().to_string().contains("not a property a connector may set on its consumer"));
        assert!(refusal(Client::Producer, "transactional.id").unwrap().to_string().contains("is the host's to set"));
        assert!(refusal(Client::Consumer, "group.id").unwrap().to_string().contains("connect-<name>"));
        assert!(refusal(Client::Producer, "sasl.password").unwrap().to_string().contains("kafka.sasl.password in a connector file"));
        assert!(refusal(Client::Producer, "debug").is_some(), "not on the list: the worker's decision");
    }
}
