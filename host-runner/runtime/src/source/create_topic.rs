//! Creating a source's topic before its first record (`topic.creation.*`, KIP-158): the group the
//! topic falls in gives its partitions, replication factor and topic settings. A topic that exists
//! already is left as it is (as Connect leaves it); a broker that does not answer yet is asked
//! again by the unit's retry, before anything is produced to the topic.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;

use crate::config::topic_creation::Group;
use crate::kafka::KafkaSpec;

/// How long one creation may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// What became of the topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It was created with the group's settings.
    Created,
    /// It existed already.
    Existed,
}

/// Creates `topic` with `group`'s settings unless it exists.
pub async fn ensure(spec: &KafkaSpec, group: &Group, topic: &str) -> Result<Outcome, String> {
    let admin: AdminClient<DefaultClientContext> =
        crate::kafka::admin_config(spec).create().map_err(|e| format!("creating a Kafka admin client: {e}"))?;
    let mut new = NewTopic::new(topic, group.partitions, TopicReplication::Fixed(group.replication));
    for (k, v) in &group.configs {
        new = new.set(k, v);
    }
    let options = AdminOptions::new().operation_timeout(Some(TIMEOUT)).request_timeout(Some(TIMEOUT));
    let results = admin.create_topics(std::slice::from_ref(&new), &options).await.map_err(|e| format!("creating topic {topic}: {e}"))?;
    match results.into_iter().next() {
        Some(Ok(_)) => Ok(Outcome::Created),
        Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) => Ok(Outcome::Existed),
        Some(Err((_, code))) => Err(format!(
            "creating topic {topic} (topic.creation group {}: {} partitions, replication factor {}{}): {code}",
            group.name,
            group.partitions,
            group.replication,
            if group.configs.is_empty() { String::new() } else { format!(", {:?}", group.configs) }
        )),
        None => Err(format!("creating topic {topic}: the broker gave no answer")),
    }
}
