//! Kafka helpers for assertions: topics created with the admin API, records produced with
//! acknowledgement, and a consumer that reads until a condition on what it has seen holds.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

/// A record as read back.
#[derive(Debug, Clone)]
pub struct Read {
    /// Key as text.
    pub key: String,
    /// Value bytes.
    pub value: Vec<u8>,
    /// Headers as text.
    pub headers: HashMap<String, String>,
    /// Partition.
    pub partition: i32,
    /// Offset in its partition.
    pub offset: i64,
    /// Timestamp in ms.
    pub timestamp_ms: Option<i64>,
}

impl Read {
    /// The row version the record carries: its key (the sys_id) and its `snow.sys_mod_count` header.
    pub fn version(&self) -> (String, String) {
        (self.key.clone(), self.headers.get("snow.sys_mod_count").cloned().unwrap_or_default())
    }

    /// The value as JSON (a report, for example).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.value).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.value)))
    }
}

/// Creates `topic` with `partitions`.
pub async fn create_topic(bootstrap: &str, topic: &str, partitions: i32) {
    create_topic_with(bootstrap, topic, partitions, &[]).await;
}

/// Creates `topic` with `partitions` and topic `config` (e.g. `message.timestamp.type`).
pub async fn create_topic_with(bootstrap: &str, topic: &str, partitions: i32, config: &[(&str, &str)]) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for (k, v) in config {
        new = new.set(k, v);
    }
    let results = admin.create_topics(&[new], &AdminOptions::new()).await.unwrap();
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("creating {t}: {e}"));
    }
}

/// Produces `(key, value)` records to `topic` and waits for every acknowledgement.
pub async fn produce(bootstrap: &str, topic: &str, records: &[(Option<String>, String)]) {
    let records: Vec<Produced> =
        records.iter().map(|(k, v)| Produced { key: k.clone(), value: Some(v.clone()), headers: vec![] }).collect();
    produce_records(bootstrap, topic, &records).await;
}

/// A record to produce: key, value (`None`: a tombstone) and headers.
#[derive(Debug, Clone, Default)]
pub struct Produced {
    /// Key.
    pub key: Option<String>,
    /// Value; `None` is a tombstone.
    pub value: Option<String>,
    /// Headers.
    pub headers: Vec<(String, String)>,
}

/// Produces `records` to `topic`, in order, and waits for every acknowledgement. Records are
/// handed to the producer at once (`send` would wait for each before starting the next).
pub async fn produce_records(bootstrap: &str, topic: &str, records: &[Produced]) {
    use rdkafka::error::{KafkaError, RDKafkaErrorCode};
    use rdkafka::message::{Header, OwnedHeaders};
    let producer: FutureProducer =
        ClientConfig::new().set("bootstrap.servers", bootstrap).set("enable.idempotence", "true").create().unwrap();
    let mut pending = std::collections::VecDeque::new();
    for p in records {
        let mut headers = OwnedHeaders::new();
        for (k, v) in &p.headers {
            headers = headers.insert(Header { key: k, value: Some(v.as_bytes()) });
        }
        let mut r: FutureRecord<'_, str, str> = FutureRecord::to(topic).headers(headers);
        if let Some(k) = &p.key {
            r = r.key(k.as_str());
        }
        if let Some(v) = &p.value {
            r = r.payload(v.as_str());
        }
        loop {
            match producer.send_result(r) {
                Ok(delivery) => {
                    pending.push_back(delivery);
                    break;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    r = back;
                    let oldest = pending.pop_front().expect("a full queue holds a record");
                    oldest.await.unwrap().unwrap_or_else(|(e, _)| panic!("producing: {e}"));
                }
                Err((e, _)) => panic!("producing: {e}"),
            }
        }
    }
    for delivery in pending {
        delivery.await.unwrap().unwrap_or_else(|(e, _)| panic!("producing: {e}"));
    }
}

/// Reads `topic` from the beginning until `done(records so far)` holds, then reads on until the
/// topic's current end so no record already written is missed. Fails after `timeout`.
///
/// `done` is asked whenever the reader has caught up, but not more than a fifth of the time: a
/// check that walks 100,000 records (in a debug build) is asked again only after four times as
/// long as it took, so the test's thread does not take the CPU the processes under test need.
pub fn read_until(bootstrap: &str, topic: &str, timeout: Duration, mut done: impl FnMut(&[Read]) -> bool) -> Vec<Read> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("e2e-check-{}", std::process::id()))
        .set("enable.auto.commit", "false")
        .set("topic.metadata.refresh.interval.ms", "500")
        .create()
        .unwrap();
    let deadline = Instant::now() + timeout;
    // The topic may not exist yet (the runner creates it by producing); wait for its metadata.
    let partitions: Vec<i32> = loop {
        let found = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(5))
            .ok()
            .map(|m| {
                m.topics().iter().filter(|t| t.error().is_none()).flat_map(|t| t.partitions().iter().map(|p| p.id())).collect::<Vec<_>>()
            })
            .unwrap_or_default();
        if !found.is_empty() {
            break found;
        }
        assert!(Instant::now() < deadline, "topic {topic} never appeared");
        std::thread::sleep(Duration::from_millis(200));
    };
    {
        let mut tpl = TopicPartitionList::new();
        for p in &partitions {
            tpl.add_partition_offset(topic, *p, Offset::Beginning).unwrap();
        }
        consumer.assign(&tpl).unwrap();
    }
    let mut records = Vec::new();
    let mut ends: Option<Vec<(i32, i64)>> = None;
    let mut next_check = Instant::now();
    loop {
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.unwrap();
            let headers = m
                .headers()
                .map(|hs| {
                    hs.iter().map(|h| (h.key.to_string(), String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned())).collect()
                })
                .unwrap_or_default();
            records.push(Read {
                key: String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned(),
                value: m.payload().unwrap_or_default().to_vec(),
                headers,
                partition: m.partition(),
                offset: m.offset(),
                timestamp_ms: m.timestamp().to_millis(),
            });
            continue;
        }
        if ends.is_none() && Instant::now() >= next_check && {
            let asked = Instant::now();
            let held = done(&records);
            next_check = Instant::now() + asked.elapsed() * 4;
            held
        } {
            // The end as it is now: what was written before `done` held is read too, what is
            // written after is not waited for (a topic written all the time has no end).
            ends = Some(partitions.iter().map(|p| (*p, consumer.fetch_watermarks(topic, *p, Duration::from_secs(5)).unwrap().1)).collect());
        }
        if let Some(ends) = &ends {
            // Reached when the consumer's position is at the end (transaction markers and
            // compacted records take offsets no record is read at).
            let positions = consumer.position().unwrap();
            let at_end = ends.iter().all(|(p, end)| {
                let read_up_to = records.iter().filter(|r| r.partition == *p).map(|r| r.offset + 1).max().unwrap_or(0);
                let position = positions.find_partition(topic, *p).and_then(|e| e.offset().to_raw()).unwrap_or(0);
                read_up_to.max(position) >= *end
            });
            if at_end {
                return records;
            }
        }
        assert!(Instant::now() < deadline, "timed out after {timeout:?} reading {topic}: {} records so far", records.len());
    }
}

/// Reads `topic` from the beginning until `count` records were read, and returns at once (not at
/// the topic's end, unlike [`read_until`]): for acting while records still flow.
pub fn read_at_least(bootstrap: &str, topic: &str, timeout: Duration, count: usize) -> Vec<String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("e2e-check-{}", std::process::id()))
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("topic.metadata.refresh.interval.ms", "500")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let deadline = Instant::now() + timeout;
    let mut keys = Vec::new();
    while keys.len() < count {
        assert!(Instant::now() < deadline, "timed out after {timeout:?} reading {topic}: {} of {count} records", keys.len());
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            keys.push(String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned());
        }
    }
    keys
}

/// Waits until `group` has committed `expected` records of `topic` in all (its `partitions`).
pub fn wait_committed(group: &str, topic: &str, partitions: i32, expected: i64, timeout: Duration) {
    let bootstrap = kafka_harness::shared().bootstrap();
    super::wait_until(&format!("{group} committed {expected} records of {topic}"), timeout, || {
        let offsets = try_committed(bootstrap, group, topic, partitions).ok()?;
        (offsets.iter().map(|o| (*o).max(0)).sum::<i64>() >= expected).then_some(())
    });
}

/// The committed offset of each partition of `topic` for `group` (scoped so no list outlives the consumer).
pub fn committed(bootstrap: &str, group: &str, topic: &str, partitions: i32) -> Vec<i64> {
    try_committed(bootstrap, group, topic, partitions).unwrap_or_else(|e| panic!("reading the committed offsets of {group}: {e}"))
}

/// Like [`committed`], for polling while the group's coordinator may still be loading: an error
/// (`NotCoordinator`, a timeout) comes back instead of failing the test.
pub fn try_committed(bootstrap: &str, group: &str, topic: &str, partitions: i32) -> Result<Vec<i64>, rdkafka::error::KafkaError> {
    let consumer: BaseConsumer =
        ClientConfig::new().set("bootstrap.servers", bootstrap).set("group.id", group).set("enable.auto.commit", "false").create()?;
    let offsets = {
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition(topic, p);
        }
        let committed = consumer.committed_offsets(tpl, Duration::from_secs(10))?;
        (0..partitions).map(|p| committed.find_partition(topic, p).map(|e| e.offset().to_raw().unwrap_or(-1)).unwrap_or(-1)).collect()
    };
    drop(consumer);
    Ok(offsets)
}

/// [`create_topic`] from a test thread without a runtime.
pub fn create_topic_blocking(bootstrap: &str, topic: &str, partitions: i32) {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(create_topic(bootstrap, topic, partitions));
}

/// [`produce`] from a test thread without a runtime.
pub fn produce_blocking(bootstrap: &str, topic: &str, records: &[(Option<String>, String)]) {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(produce(bootstrap, topic, records));
}

/// Watches the ends of a topic's partitions: the last stable offset (a `read_committed` reader's
/// end, held back by an open transaction) against the high watermark.
pub struct Ends {
    topic: String,
    stable: BaseConsumer,
    high: BaseConsumer,
}
impl Ends {
    /// A watch on `topic`.
    pub fn new(bootstrap: &str, topic: &str) -> Self {
        let consumer = |level: &str| -> BaseConsumer {
            ClientConfig::new()
                .set("bootstrap.servers", bootstrap)
                .set("group.id", format!("e2e-ends-{}", std::process::id()))
                .set("isolation.level", level)
                .create()
                .unwrap()
        };
        Self { topic: topic.to_string(), stable: consumer("read_committed"), high: consumer("read_uncommitted") }
    }

    fn ends(&self, consumer: &BaseConsumer) -> Vec<(i32, i64)> {
        let Ok(metadata) = consumer.fetch_metadata(Some(&self.topic), Duration::from_secs(5)) else { return Vec::new() };
        let partitions: Vec<i32> =
            metadata.topics().iter().filter(|t| t.error().is_none()).flat_map(|t| t.partitions().iter().map(|p| p.id())).collect();
        partitions
            .into_iter()
            .filter_map(|p| consumer.fetch_watermarks(&self.topic, p, Duration::from_secs(5)).ok().map(|(_, high)| (p, high)))
            .collect()
    }

    /// The sum of the partitions' last stable offsets.
    pub fn stable(&self) -> i64 {
        self.ends(&self.stable).iter().map(|(_, o)| o).sum()
    }

    /// Whether a transaction with records is open: some partition's last stable offset is below
    /// its high watermark.
    pub fn transaction_open(&self) -> bool {
        !self.open_ranges().is_empty()
    }

    /// The partitions with an open transaction, each as `(partition, last stable offset, high
    /// watermark)`: what lies between the two is not decided yet.
    pub fn open_ranges(&self) -> Vec<(i32, i64, i64)> {
        let (stable, high) = (self.ends(&self.stable), self.ends(&self.high));
        high.iter().filter_map(|&(p, h)| stable.iter().find(|(sp, _)| *sp == p).filter(|(_, s)| *s < h).map(|&(_, s)| (p, s, h))).collect()
    }

    /// Whether every range of `ranges` is decided: each partition's last stable offset reached
    /// the range's end (its transaction was committed or aborted).
    pub fn decided(&self, ranges: &[(i32, i64, i64)]) -> bool {
        let stable = self.ends(&self.stable);
        ranges.iter().all(|(p, _, end)| stable.iter().any(|(sp, s)| sp == p && s >= end))
    }

    /// How many records of `ranges` (decided ones) a `read_committed` reader gets: 0 when their
    /// transactions were aborted.
    pub fn committed_in(&self, bootstrap: &str, ranges: &[(i32, i64, i64)]) -> usize {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", format!("e2e-range-{}", std::process::id()))
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        for (p, start, _) in ranges {
            tpl.add_partition_offset(&self.topic, *p, Offset::Offset(*start)).unwrap();
        }
        consumer.assign(&tpl).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut read = 0;
        loop {
            if let Some(m) = consumer.poll(Duration::from_millis(200)) {
                let m = m.unwrap();
                read += ranges.iter().filter(|(p, s, e)| *p == m.partition() && m.offset() >= *s && m.offset() < *e).count();
                continue;
            }
            // Past the ranges' ends: aborted records and markers are skipped, so the position,
            // not the last record read, says how far the reader went.
            let positions = consumer.position().unwrap();
            let past = ranges
                .iter()
                .all(|(p, _, end)| positions.find_partition(&self.topic, *p).and_then(|e| e.offset().to_raw()).is_some_and(|o| o >= *end));
            if past {
                return read;
            }
            assert!(Instant::now() < deadline, "reading {:?} of {} read_committed did not get past them in 60 s", ranges, self.topic);
        }
    }
}
