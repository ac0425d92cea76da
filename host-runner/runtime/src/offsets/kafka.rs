//! Offsets in a compacted Kafka topic (`offset.storage.topic`), in Kafka Connect's record shape:
//! the key is the JSON array `[connector, partition]` and the value the position, both as JSON
//! (a table's partition names its instance, table, timestamp field and query fingerprint), so a
//! new query over the same table is a new key and never reads another query's position. A
//! tombstone removes a partition's offset (`offsets reset`, `DELETE …/offsets`).
//!
//! [`KafkaOffsetStore`] writes with an idempotent producer (standalone mode). In a fleet every
//! write of a unit goes through its slot's fenced writer instead ([`OffsetWriter`]), so a worker
//! that lost the slot can no longer store anything (ADR 0023); both read the same topic.

use std::sync::Arc;

use anyhow::{Context, Result};
use serde_json::Value;

use super::OffsetStore;
use crate::state::StateTopic;

/// Who writes a unit's offset records.
pub trait OffsetWriter: Send + Sync {
    /// Writes `value` (`None`: a tombstone) at `key` and returns once it is durable and visible to
    /// the store's reader.
    fn write(&self, key: Vec<u8>, value: Option<Vec<u8>>) -> Result<()>;
}

/// Plain, acknowledged writes to the topic itself.
struct Direct(Arc<StateTopic>);

impl OffsetWriter for Direct {
    fn write(&self, key: Vec<u8>, value: Option<Vec<u8>>) -> Result<()> {
        let topic = self.0.clone();
        tokio::runtime::Handle::current().block_on(async move { topic.write(&key, value.as_deref()).await })
    }
}

/// Offsets in a Kafka topic.
#[derive(Clone)]
pub struct KafkaOffsetStore {
    topic: Arc<StateTopic>,
    writer: Arc<dyn OffsetWriter>,
}

impl KafkaOffsetStore {
    /// A store reading and writing `topic` directly.
    pub fn new(topic: Arc<StateTopic>) -> Self {
        Self { writer: Arc::new(Direct(topic.clone())), topic }
    }

    /// The same topic, written through `writer` (a slot's fenced writer).
    pub fn with_writer(&self, writer: Arc<dyn OffsetWriter>) -> Self {
        Self { topic: self.topic.clone(), writer }
    }

    /// The topic read.
    pub fn topic(&self) -> &Arc<StateTopic> {
        &self.topic
    }

    /// Every `(connector, partition, position)` stored, a table's partition in our member order
    /// whatever order its record key has ([`canonical`]); where one partition is stored under
    /// two keys, the further position.
    pub fn entries(&self) -> Vec<(String, String, String)> {
        let mut out: std::collections::BTreeMap<(String, String), String> = std::collections::BTreeMap::new();
        for (_, connector, partition, position) in self.stored() {
            match out.entry((connector, partition)) {
                std::collections::btree_map::Entry::Occupied(mut held) => {
                    if further(&position, held.get()) {
                        held.insert(position);
                    }
                }
                std::collections::btree_map::Entry::Vacant(free) => {
                    free.insert(position);
                }
            }
        }
        out.into_iter().map(|((c, p), v)| (c, p, v)).collect()
    }

    /// Every stored record: its key, and its connector, canonical partition and position.
    fn stored(&self) -> Vec<(Vec<u8>, String, String, String)> {
        self.topic.entries().into_iter().filter_map(|(k, v)| decode_key(&k).map(|(c, p)| (k, c, canonical(&p), decode_value(&v)))).collect()
    }

    /// Removes the offsets of `connector` whose partition passes `matches` (tombstones, every key
    /// the partition is stored under); returns how many partitions.
    pub fn remove(&self, connector: &str, matches: impl Fn(&str) -> bool) -> Result<usize> {
        let doomed: Vec<(Vec<u8>, String)> =
            self.stored().into_iter().filter(|(_, c, p, _)| c == connector && matches(p)).map(|(k, _, p, _)| (k, p)).collect();
        for (key, _) in &doomed {
            self.writer.write(key.clone(), None)?;
        }
        Ok(doomed.iter().map(|(_, p)| p).collect::<std::collections::BTreeSet<_>>().len())
    }
}

impl OffsetStore for KafkaOffsetStore {
    fn load(&self, connector: &str) -> Vec<(String, String)> {
        self.entries().into_iter().filter(|(c, _, _)| c == connector).map(|(_, p, v)| (p, v)).collect()
    }

    fn offsets_topic(&self) -> Option<Arc<StateTopic>> {
        Some(self.topic.clone())
    }

    fn commit(&self, connector: &str, partition: &str, position: &str) -> Result<()> {
        self.writer
            .write(key(connector, partition), Some(encode(position).into_bytes()))
            .with_context(|| format!("storing the offset of {connector} in offset.storage.topic {}", self.topic.name()))
    }
}

/// A table's partition key in our member order (what the component compares), however a writer
/// ordered its members: Kafka Connect's converter writes a map's members in its own order, so a
/// connector that ran inside Connect (docs/kafka-connect.md) stored its partitions that way. Any
/// other partition text is kept byte for byte.
fn canonical(partition: &str) -> String {
    snow_core::cursor::Partition::from_key(partition).map_or_else(|| partition.to_string(), |p| p.key())
}

/// Whether position `a` is further than `b` (one partition stored under two keys): a cursor past
/// the other's, or a cursor against a parallel backfill (which a cursor follows); else `b` stays.
fn further(a: &str, b: &str) -> bool {
    use snow_core::cursor::position::Position;
    match (Position::parse(a), Position::parse(b)) {
        (Ok(Position::Cursor(a, _)), Ok(Position::Cursor(b, _))) => (a.ts, &a.id) > (b.ts, &b.id),
        (Ok(Position::Cursor(..)), Ok(Position::Backfill(_))) => true,
        _ => false,
    }
}

/// The offset record storing `position` of `partition` of `connector`: its key and value.
pub fn record(connector: &str, partition: &str, position: &str) -> (Vec<u8>, Vec<u8>) {
    (key(connector, partition), encode(position).into_bytes())
}

/// The record key of `partition` of `connector`: `["<connector>", <partition>]`. The partition's
/// JSON is kept byte for byte (a guest recognises its partitions by their exact text).
pub fn key(connector: &str, partition: &str) -> Vec<u8> {
    format!("[{},{}]", Value::String(connector.to_string()), as_json_text(partition)).into_bytes()
}

/// The connector and partition of a record key; `None` for a key that is not one of ours.
pub fn decode_key(key: &[u8]) -> Option<(String, String)> {
    let text = std::str::from_utf8(key).ok()?.trim();
    let inner = text.strip_prefix('[')?.strip_suffix(']')?;
    let mut values = serde_json::Deserializer::from_str(inner).into_iter::<Value>();
    let Some(Ok(Value::String(connector))) = values.next() else { return None };
    let rest = inner[values.byte_offset()..].trim_start().strip_prefix(',')?.trim();
    Some((connector, from_json_text(rest)?))
}

/// A stored value as the position text the guest reads.
fn decode_value(value: &[u8]) -> String {
    let text = String::from_utf8_lossy(value);
    from_json_text(&text).unwrap_or_else(|| text.into_owned())
}

/// A position as the record value.
fn encode(position: &str) -> String {
    as_json_text(position)
}

/// `text` as JSON text: itself, byte for byte, when it is a JSON object; else a JSON string.
fn as_json_text(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(_)) => text.trim().to_string(),
        _ => Value::String(text.to_string()).to_string(),
    }
}

/// The text a JSON text stands for: an object's own text, a string's content; `None` if it is not JSON.
fn from_json_text(text: &str) -> Option<String> {
    match serde_json::from_str::<Value>(text).ok()? {
        Value::String(s) => Some(s),
        Value::Object(_) => Some(text.to_string()),
        other => Some(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Clients, TopicSpec};

    #[test]
    fn keys_are_connects_shape_and_round_trip() {
        let partition = r#"{"instance":"acme.service-now.com","table":"incident","timestamp_field":"sys_updated_on","fingerprint":"ab"}"#;
        let k = key("snow-source", partition);
        assert_eq!(String::from_utf8(k.clone()).unwrap(), format!(r#"["snow-source",{partition}]"#));
        assert_eq!(decode_key(&k), Some(("snow-source".to_string(), partition.to_string())), "the partition's text, byte for byte");
        assert_eq!(decode_key(br#"["c","plain"]"#), Some(("c".into(), "plain".into())));
        assert_eq!(decode_key(br#"[ "a\"b" , {"x": [1, "]"]} ]"#), Some(("a\"b".into(), r#"{"x": [1, "]"]}"#.into())));
        assert_eq!(decode_key(b"not json"), None);
        let position = r#"{"v":1,"ts":"2024-01-01 00:00:00","id":"x"}"#;
        assert_eq!(decode_value(encode(position).as_bytes()), position);
        assert_eq!(decode_value(encode("plain").as_bytes()), "plain");
    }

    #[test]
    fn a_partition_stored_in_connects_member_order_is_ours_and_the_further_position_wins() {
        let ours = r#"{"instance":"acme.service-now.com","table":"incident","timestamp_field":"sys_updated_on","fingerprint":"ab"}"#;
        let connects = r#"{"instance":"acme.service-now.com","fingerprint":"ab","timestamp_field":"sys_updated_on","table":"incident"}"#;
        assert_eq!(canonical(connects), ours);
        assert_eq!(canonical("plain"), "plain");
        let (early, late) = (r#"{"v":1,"ts":"2024-01-01 00:00:00","id":"a"}"#, r#"{"id":"b","ts":"2024-01-01 00:00:00","v":1}"#);
        assert!(further(late, early) && !further(early, late) && !further(early, early));
        assert!(!further("plain", early) && !further(early, "plain"), "what is not a cursor never replaces");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn commits_are_read_by_a_new_store_and_removals_are_tombstones() {
        let clients = Clients { bootstrap: kafka_harness::shared().bootstrap().to_string(), common: Default::default() };
        let spec =
            TopicSpec { name: format!("offsets-{}", std::process::id()), partitions: 5, replication: 1, key: "offset.storage.topic" };
        let store = KafkaOffsetStore::new(Arc::new(StateTopic::open(&clients, spec.clone(), true).await.unwrap()));
        let s = store.clone();
        tokio::task::spawn_blocking(move || {
            s.commit("c", "p1", "a").unwrap();
            s.commit("c", "p1", "b").unwrap();
            s.commit("c", "p2", r#"{"v":1}"#).unwrap();
            s.commit("d", "p3", "x").unwrap();
            assert_eq!(s.remove("c", |p| p == "p2").unwrap(), 1);
        })
        .await
        .unwrap();
        let again = KafkaOffsetStore::new(Arc::new(StateTopic::open(&clients, spec.clone(), true).await.unwrap()));
        assert_eq!(again.load("c"), vec![("p1".to_string(), "b".to_string())]);
        assert_eq!(again.load("d"), vec![("p3".to_string(), "x".to_string())]);
        assert!(again.load("none").is_empty());

        // A table that ran inside Kafka Connect stored its partition in Connect's member order,
        // further than ours: our worker reads it as its own, and a reset removes both records.
        let ours = r#"{"instance":"acme.service-now.com","table":"incident","timestamp_field":"sys_updated_on","fingerprint":"ab"}"#;
        let connects = r#"{"instance":"acme.service-now.com","fingerprint":"ab","timestamp_field":"sys_updated_on","table":"incident"}"#;
        let (early, late) = (r#"{"v":1,"ts":"2024-01-01 00:00:00","id":"a"}"#, r#"{"v":1,"ts":"2024-01-02 00:00:00","id":"b"}"#);
        let s = again.clone();
        tokio::task::spawn_blocking(move || {
            s.commit("e", ours, early).unwrap();
            s.commit("e", connects, late).unwrap();
        })
        .await
        .unwrap();
        let third = KafkaOffsetStore::new(Arc::new(StateTopic::open(&clients, spec.clone(), true).await.unwrap()));
        assert_eq!(third.load("e"), vec![(ours.to_string(), late.to_string())], "one partition, the further position");
        let s = third.clone();
        assert_eq!(tokio::task::spawn_blocking(move || s.remove("e", |_| true).unwrap()).await.unwrap(), 1);
        let fourth = KafkaOffsetStore::new(Arc::new(StateTopic::open(&clients, spec, true).await.unwrap()));
        assert!(fourth.load("e").is_empty(), "both records are tombstoned");
    }
}
