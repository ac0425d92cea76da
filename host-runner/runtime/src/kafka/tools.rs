//! Topic tools for operators and the demo: count what a topic holds, produce JSON lines to it;
//! and the cluster connection every operator tool (`topic`, `offsets --topic`) uses: `--bootstrap`
//! and a `--command-config` file with Kafka's client keys (a worker's `worker.properties` will do),
//! checked before use so that a refused login is an error, not a hang.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

/// What a topic holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicCount {
    /// Records from the beginning to the end.
    pub records: u64,
    /// Distinct record keys.
    pub distinct_keys: u64,
}

/// The cluster an operator tool talks to.
#[derive(Debug, Clone)]
pub struct Connection {
    /// `bootstrap.servers`.
    pub bootstrap: String,
    /// The connection's librdkafka security settings (empty: PLAINTEXT).
    pub security: BTreeMap<String, String>,
}

impl Connection {
    /// From `--bootstrap` and the entries of `--command-config` (Kafka's Java keys such as
    /// `sasl.jaas.config`, or librdkafka's; references already resolved): `--bootstrap` wins over
    /// the entries' `bootstrap.servers`. The cluster is asked for its metadata before the tool
    /// starts: refused credentials or no answer within 15 s stop it with the listener named.
    pub fn open(bootstrap: Option<&str>, entries: &BTreeMap<String, String>) -> Result<Self> {
        let mut errors = Vec::new();
        let security = super::security::read(entries, "", &mut errors);
        if !errors.is_empty() {
            bail!("--command-config: {}", errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "));
        }
        let bootstrap = bootstrap
            .map(str::to_string)
            .or_else(|| entries.get("bootstrap.servers").cloned())
            .context("--bootstrap (or bootstrap.servers in --command-config) is required")?;
        super::preflight::check(&bootstrap, &security, Duration::from_secs(15))?;
        Ok(Self { bootstrap, security })
    }

    fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap);
        for (k, v) in &self.security {
            config.set(k, v);
        }
        config
    }
}

/// Reads `topic` from the beginning to its current end and counts records and distinct keys.
pub fn count(connection: &Connection, topic: &str, timeout: Duration) -> Result<TopicCount> {
    let (mut records, mut keys) = (0u64, HashSet::new());
    read(connection, topic, None, timeout, |message| {
        records += 1;
        if let Some(key) = message.key {
            keys.insert(key.to_vec());
        }
    })?;
    Ok(TopicCount { records, distinct_keys: keys.len() as u64 })
}

/// One record as [`read`] hands it over.
pub struct Seen<'a> {
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// The record's timestamp (ms), if it has one.
    pub timestamp_ms: Option<i64>,
    /// Its key.
    pub key: Option<&'a [u8]>,
    /// Its value (`None`: a tombstone).
    pub value: Option<&'a [u8]>,
    /// Its headers' names.
    pub headers: Vec<&'a str>,
}

/// True when `topic` exists on the cluster.
pub fn topic_exists(connection: &Connection, topic: &str, timeout: Duration) -> Result<bool> {
    let consumer: BaseConsumer =
        connection.config().set("allow.auto.create.topics", "false").create().context("creating a metadata client")?;
    let metadata = consumer.fetch_metadata(Some(topic), timeout).context("fetching topic metadata")?;
    Ok(metadata.topics().iter().any(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty()))
}

/// Calls `each` for every record of `topic` from the beginning (or, with `since_ms`, from the
/// first record timestamped at or after it in each partition) to the end the topic had when the
/// read began; an error once `timeout` passes before that end is reached.
pub fn read(connection: &Connection, topic: &str, since_ms: Option<i64>, timeout: Duration, mut each: impl FnMut(Seen<'_>)) -> Result<()> {
    let consumer: BaseConsumer = connection
        .config()
        .set("group.id", format!("snow-connect-tool-{}", std::process::id()))
        .set("enable.auto.commit", "false")
        .create()
        .context("creating the reading consumer")?;
    let metadata = consumer.fetch_metadata(Some(topic), timeout).context("fetching topic metadata")?;
    let partitions: Vec<i32> = metadata.topics().iter().flat_map(|t| t.partitions().iter().map(|p| p.id())).collect();
    if partitions.is_empty() {
        bail!("topic {topic} does not exist");
    }
    let mut starts = TopicPartitionList::new();
    for p in &partitions {
        starts.add_partition_offset(topic, *p, since_ms.map_or(Offset::Beginning, Offset::Offset))?;
    }
    if since_ms.is_some() {
        starts = consumer.offsets_for_times(starts, timeout).context("finding the offsets for the start time")?;
    }
    let mut remaining: Vec<(i32, i64)> = Vec::new();
    let mut assignment = TopicPartitionList::new();
    for p in partitions {
        let (low, high) = consumer.fetch_watermarks(topic, p, timeout).context("fetching watermarks")?;
        let start = match starts.find_partition(topic, p).map(|e| e.offset()) {
            Some(Offset::Offset(o)) => o.max(low),
            Some(Offset::End) => high,
            _ => low,
        };
        if high > start {
            remaining.push((p, high));
            assignment.add_partition_offset(topic, p, Offset::Offset(start))?;
        }
    }
    consumer.assign(&assignment)?;
    drop(assignment);
    let deadline = Instant::now() + timeout;
    let mut read = 0u64;
    while !remaining.is_empty() {
        if Instant::now() > deadline {
            bail!("timed out reading {topic} after {read} records");
        }
        let Some(message) = consumer.poll(Duration::from_millis(200)) else { continue };
        let message = message.context("reading the topic")?;
        read += 1;
        let (p, o) = (message.partition(), message.offset());
        if !remaining.iter().any(|(rp, high)| *rp == p && o < *high) {
            continue;
        }
        let headers = message.headers().map(|hs| hs.iter().map(|h| h.key).collect()).unwrap_or_default();
        each(Seen {
            partition: p,
            offset: o,
            timestamp_ms: message.timestamp().to_millis(),
            key: message.key(),
            value: message.payload(),
            headers,
        });
        remaining.retain(|(rp, high)| !(*rp == p && o + 1 >= *high));
    }
    Ok(())
}

/// Produces each non-empty line of `lines` as a record value (key = the line's `key_field`
/// member, if given) and waits until Kafka acknowledged all of them.
pub async fn produce_lines(
    connection: &Connection,
    topic: &str,
    lines: impl Iterator<Item = String>,
    key_field: Option<&str>,
) -> Result<u64> {
    let producer: FutureProducer = connection.config().set("enable.idempotence", "true").create()?;
    let mut records: Vec<(Option<String>, String)> = Vec::new();
    for (i, line) in lines.filter(|l| !l.trim().is_empty()).enumerate() {
        let key = match key_field {
            Some(field) => {
                let value: serde_json::Value = serde_json::from_str(&line).with_context(|| format!("line {}: not JSON", i + 1))?;
                value.get(field).and_then(|v| v.as_str()).map(String::from)
            }
            None => None,
        };
        records.push((key, line));
    }
    for chunk in records.chunks(1000) {
        let pending: Vec<_> = chunk
            .iter()
            .map(|(key, line)| {
                let record = FutureRecord::to(topic).payload(line.as_str());
                let record = match key {
                    Some(k) => record.key(k.as_str()),
                    None => record,
                };
                producer.send(record, Duration::from_secs(30))
            })
            .collect();
        for p in pending {
            p.await.map_err(|(e, _)| e).context("producing")?;
        }
    }
    Ok(records.len() as u64)
}
