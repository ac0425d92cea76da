//! The fleet's state topics in `worker.properties`: configurations, offsets, status, work slots,
//! components and push wake-ups, each named after `group.id` unless set, with its partitions and
//! replication.

use std::collections::BTreeMap;

use snow_runtime::config::ConfigError;
use snow_runtime::state::TopicSpec;

/// The topics as read.
pub struct Topics {
    /// `config.storage.topic`.
    pub configs: TopicSpec,
    /// `offset.storage.topic`.
    pub offsets: TopicSpec,
    /// `status.storage.topic`.
    pub status: TopicSpec,
    /// `work.slots.topic`.
    pub slots: TopicSpec,
    /// `component.storage.topic`.
    pub components: TopicSpec,
    /// `push.storage.topic`.
    pub push: TopicSpec,
}

/// Reads the section for the fleet `group`.
pub fn read(entries: &BTreeMap<String, String>, group: &str, errors: &mut Vec<ConfigError>) -> Topics {
    let get = |k: &str| super::value(entries, k);
    let number =
        |k: &str, default: i64, min: i64, max: i64, errors: &mut Vec<ConfigError>| super::number(entries, k, default, min, max, errors);
    let replication = |k: &str, errors: &mut Vec<ConfigError>| -> i32 {
        match get(k).map(|v| v.parse::<i32>()) {
            None => -1,
            Some(Ok(r)) if r == -1 || (1..=32).contains(&r) => r,
            Some(_) => {
                errors.push(ConfigError::new(k, "must be -1 (the broker's default.replication.factor) or a whole number from 1 to 32"));
                -1
            }
        }
    };
    let topic = |key: &'static str, suffix: &str, partitions: i32, replication: i32| TopicSpec {
        name: get(key).unwrap_or_else(|| format!("{group}-{suffix}")),
        partitions,
        replication,
        key,
    };
    let configs = topic("config.storage.topic", "configs", 1, replication("config.storage.replication.factor", errors));
    let offsets = topic(
        "offset.storage.topic",
        "offsets",
        number("offset.storage.partitions", 25, 1, 10_000, errors) as i32,
        replication("offset.storage.replication.factor", errors),
    );
    let status = topic(
        "status.storage.topic",
        "status",
        number("status.storage.partitions", 5, 1, 10_000, errors) as i32,
        replication("status.storage.replication.factor", errors),
    );
    let slots = topic(
        "work.slots.topic",
        "slots",
        number("work.slots", 32, 1, 4096, errors) as i32,
        replication("work.slots.replication.factor", errors),
    );
    let components = topic("component.storage.topic", "components", 1, replication("component.storage.replication.factor", errors));
    let push = topic("push.storage.topic", "push", 1, replication("push.storage.replication.factor", errors));
    Topics { configs, offsets, status, slots, components, push }
}
