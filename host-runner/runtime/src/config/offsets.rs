//! Where a source connector's offsets are stored: a local file (`offset.storage.file.filename`,
//! the default) or a compacted Kafka topic (`offset.storage.topic` with its partitions and
//! replication), never both.

use std::collections::BTreeMap;
use std::path::PathBuf;

use snow_core::error::ConfigError;

use crate::state::TopicSpec;

/// Next to where the runner was started, as Kafka Connect standalone does by convention.
fn default_offsets_file() -> PathBuf {
    PathBuf::from("snow-connect.offsets.json")
}

/// Reads the section: the file, and the topic when one is named.
pub fn read(entries: &BTreeMap<String, String>, errors: &mut Vec<ConfigError>) -> (PathBuf, Option<TopicSpec>) {
    let file = super::value(entries, "offset.storage.file.filename").map(PathBuf::from).unwrap_or_else(default_offsets_file);
    let topic = super::value(entries, "offset.storage.topic").map(|name| TopicSpec {
        name,
        partitions: super::whole_number(entries, "offset.storage.partitions", 25, 1, 10_000, errors) as i32,
        replication: match super::value(entries, "offset.storage.replication.factor").map(|v| v.parse::<i32>()) {
            None => -1,
            Some(Ok(r)) if r == -1 || (1..=32).contains(&r) => r,
            Some(_) => {
                errors.push(ConfigError::new(
                    "offset.storage.replication.factor",
                    "must be -1 (the broker's default) or a whole number from 1 to 32",
                ));
                -1
            }
        },
        key: "offset.storage.topic",
    });
    if topic.is_some() && entries.contains_key("offset.storage.file.filename") {
        for key in ["offset.storage.topic", "offset.storage.file.filename"] {
            errors.push(ConfigError::new(key, "name one place for offsets, not both"));
        }
    }
    (file, topic)
}
