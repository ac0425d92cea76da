//! What a snapshot table's topic holds (ADR 0035), read back when the table opens and handed to
//! the component as the offset of its seed partition: per key, the content hash of its last
//! record, keys whose last record is a tombstone left out. The next snapshot then emits only rows
//! the topic does not hold as they are, and a tombstone for every key it holds that the
//! snapshot no longer reads, whatever happened while the table was stopped.
//!
//! The whole topic is read `read_committed` (records of aborted transactions are not held), and
//! only records whose `snow.table`/`snow.instance` headers are this table's count. A record
//! without `snow.snapshot.id` (written in cursor mode, or stripped by a transform) is counted and
//! reported: the row it holds is emitted again by the next snapshot.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rdkafka::ClientConfig;
use rdkafka::consumer::Consumer;
use rdkafka::message::Message;
use snow_core::config::SourceConfig;
use snow_core::config::source::TableMode;
use snow_core::cursor::Partition;
use snow_core::source::snapshot::{HASH_HEADER, ID_HEADER, seed_partition, seed_text};

use crate::component::bindings::types::{SourceOffset, WorkUnit};
use crate::config::ConnectorSpec;

use super::topic_read;

/// Longest a read-back of a snapshot table's topic may take.
const READ_LIMIT: Duration = Duration::from_secs(30 * 60);

/// What a read-back found, for the log.
pub struct Seeded {
    /// Keys the topic holds.
    pub keys: usize,
    /// Records of the table read.
    pub records: u64,
    /// Records of the table without `snow.snapshot.id`.
    pub unmarked: u64,
    /// How long it took.
    pub took: Duration,
}

/// `offsets` with the seed of `unit`'s table when it is read by snapshots; unchanged otherwise.
pub async fn seeded(spec: &ConnectorSpec, unit: &WorkUnit, mut offsets: Vec<SourceOffset>) -> Result<(Vec<SourceOffset>, Option<Seeded>)> {
    let entries: snow_core::config::Entries = unit.config.iter().map(|e| (e.key.clone(), e.value.clone())).collect();
    // A unit whose configuration the host cannot read as a table's (another component's plan) is
    // not one it reads back for: the component itself says what is wrong with it, if anything.
    let Ok(config) = SourceConfig::parse(&entries) else { return Ok((offsets, None)) };
    let Some(table) = config.tables.first().filter(|t| t.mode == TableMode::Snapshot) else { return Ok((offsets, None)) };
    let key = Partition::of(&config.instance.authority, table).key();
    let reader = TopicKeys {
        config: crate::kafka::admin_config(&spec.kafka),
        topic: table.topic.clone(),
        table: table.name.clone(),
        instance: config.instance.authority.clone(),
    };
    let started = Instant::now();
    let (held, records, unmarked) = tokio::task::spawn_blocking(move || reader.read()).await.context("the read-back task failed")??;
    let keys = held.len();
    let mut sorted: Vec<(&str, u64)> = held.iter().map(|(id, hash)| (id.as_str(), *hash)).collect();
    sorted.sort_unstable();
    offsets.retain(|o| o.partition != seed_partition(&key));
    offsets.push(SourceOffset { partition: seed_partition(&key), position: seed_text(sorted) });
    Ok((offsets, Some(Seeded { keys, records, unmarked, took: started.elapsed() })))
}

/// A read of one table's keys from its whole topic.
struct TopicKeys {
    config: ClientConfig,
    topic: String,
    table: String,
    instance: String,
}

/// What a record of the table says about its key.
enum Said {
    /// The key holds this content.
    Holds(String, u64),
    /// The key is gone (a tombstone).
    Gone(String),
    /// A record of the table that names no key (no `snow.snapshot.id`).
    Unmarked,
}

impl TopicKeys {
    /// The keys the topic holds with their hashes, how many of the table's records were read,
    /// and how many of them named no key.
    fn read(self) -> Result<(HashMap<String, u64>, u64, u64)> {
        let consumer = topic_read::consumer(self.config.clone())?;
        let deadline = Instant::now() + READ_LIMIT;
        let (mut held, mut records, mut unmarked) = (HashMap::new(), 0u64, 0u64);
        for p in topic_read::partitions(&consumer, &self.topic)? {
            let (low, high) = consumer.fetch_watermarks(&self.topic, p, Duration::from_secs(30)).context("fetching watermarks")?;
            if high <= low {
                continue;
            }
            topic_read::read_range(&consumer, &self.topic, (p, low, high), deadline, |message| {
                let Some(said) = self.said(message) else { return };
                records += 1;
                match said {
                    Said::Holds(id, hash) => {
                        held.insert(id, hash);
                    }
                    Said::Gone(id) => {
                        held.remove(&id);
                    }
                    Said::Unmarked => unmarked += 1,
                }
            })
            .with_context(|| format!("a snapshot table's read-back may take {READ_LIMIT:?}"))?;
        }
        Ok((held, records, unmarked))
    }

    /// What `message` says, when it is one of this table's records.
    fn said(&self, message: &rdkafka::message::BorrowedMessage<'_>) -> Option<Said> {
        if !topic_read::of_table(message, &self.table, &self.instance) {
            return None;
        }
        let header = |name: &str| topic_read::header(message, name);
        let Some(id) = header(ID_HEADER).and_then(|v| std::str::from_utf8(v).ok()) else { return Some(Said::Unmarked) };
        if message.payload().is_none() {
            return Some(Said::Gone(id.to_string()));
        }
        let hash = header(HASH_HEADER).and_then(|v| std::str::from_utf8(v).ok()).and_then(|h| u64::from_str_radix(h, 16).ok());
        Some(hash.map_or(Said::Unmarked, |hash| Said::Holds(id.to_string(), hash)))
    }
}
