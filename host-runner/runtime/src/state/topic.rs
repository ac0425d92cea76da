//! A compacted Kafka topic read as a table: [`StateTopic`] creates the topic when it is missing
//! (refusing one that is not compacted), reads it from the beginning into memory, follows it from
//! then on, and writes keys (a `None` value is a tombstone) waiting for Kafka's acknowledgement.
//! It is Kafka Connect's `KafkaBasedLog`: the offsets, configuration and status topics of a fleet
//! are each one of these ([`crate::state`]).
//!
//! Reading to the end ([`StateTopic::read_to_end`]) means: every record below the end offsets
//! taken when it was called has been applied. With `read_committed` the follower never applies a
//! record of an aborted or still open transaction (the fenced offset writes of ADR 0023).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use tokio::sync::watch;

/// How long a metadata or watermark request may take before the caller is told.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A state topic the cluster will not let this worker use, whatever it waits for: a denied
/// principal, a topic that is not compacted. Every other failure to open or read one is worth
/// waiting out ([`is_refusal`]).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

/// Whether `error` (anywhere in its chain) is a [`Refusal`] or a Kafka refusal of the client.
pub fn is_refusal(error: &anyhow::Error) -> bool {
    error.chain().any(|e| e.is::<Refusal>() || e.downcast_ref::<crate::kafka::preflight::Refused>().is_some_and(|r| !r.is_retryable()))
}

/// Whether Kafka's `code` passes by itself: a leader moving or being elected, a coordinator
/// loading, a topic just created that not every broker knows yet, a request that timed out, a
/// broker out of reach for a moment.
pub fn is_transient(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::NotLeaderForPartition
            | RDKafkaErrorCode::LeaderNotAvailable
            | RDKafkaErrorCode::UnknownTopicOrPartition
            | RDKafkaErrorCode::UnknownPartition
            | RDKafkaErrorCode::UnknownTopic
            | RDKafkaErrorCode::CoordinatorLoadInProgress
            | RDKafkaErrorCode::CoordinatorNotAvailable
            | RDKafkaErrorCode::NotCoordinator
            | RDKafkaErrorCode::RequestTimedOut
            | RDKafkaErrorCode::OperationTimedOut
            | RDKafkaErrorCode::BrokerTransportFailure
            | RDKafkaErrorCode::AllBrokersDown
            | RDKafkaErrorCode::MessageTimedOut
            | RDKafkaErrorCode::NetworkException
            | RDKafkaErrorCode::KafkaStorageError
            | RDKafkaErrorCode::FencedLeaderEpoch
            | RDKafkaErrorCode::UnknownLeaderEpoch
            | RDKafkaErrorCode::OffsetNotAvailable
            | RDKafkaErrorCode::NotEnoughReplicas
            | RDKafkaErrorCode::NotEnoughReplicasAfterAppend
            | RDKafkaErrorCode::NotController
            | RDKafkaErrorCode::Resolve
            | RDKafkaErrorCode::PreviousInProgress
    )
}

/// Whether `error` is one that passes by itself ([`is_transient`]).
fn is_transient_error(error: &rdkafka::error::KafkaError) -> bool {
    error.rdkafka_error_code().is_some_and(is_transient)
}

/// Runs `attempt` again while it fails with a transient Kafka error, pausing between tries (100 ms
/// doubling to 2 s), until `REQUEST_TIMEOUT` has passed; `what` names it in the log.
fn retrying<T>(what: &str, mut attempt: impl FnMut() -> Result<T, rdkafka::error::KafkaError>) -> Result<T, rdkafka::error::KafkaError> {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let mut pause = Duration::from_millis(100);
    loop {
        match attempt() {
            Err(e) if is_transient_error(&e) && Instant::now() + pause < deadline => {
                tracing::debug!("{what}: {e}; asking again in {pause:?}");
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            other => return other,
        }
    }
}

/// Where a state topic lives and how it is made.
#[derive(Debug, Clone)]
pub struct TopicSpec {
    /// The topic's name.
    pub name: String,
    /// Partitions when it is created.
    pub partitions: i32,
    /// Replication factor when it is created (`-1`: the broker's `default.replication.factor`).
    pub replication: i32,
    /// The configuration key that names it, for messages (`offset.storage.topic`).
    pub key: &'static str,
}

/// The Kafka clients' settings a state topic uses.
#[derive(Debug, Clone)]
pub struct Clients {
    /// `bootstrap.servers`.
    pub bootstrap: String,
    /// Extra librdkafka settings for every client (security, for example).
    pub common: BTreeMap<String, String>,
}

impl Clients {
    /// The listener these clients connect to, as messages name it.
    pub fn listener(&self) -> String {
        crate::kafka::preflight::listener(&self.bootstrap, &self.common)
    }

    /// A client's settings: the brokers, the connection's security, quick reconnects.
    pub fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap);
        config.set("reconnect.backoff.ms", "100").set("reconnect.backoff.max.ms", "1000");
        for (k, v) in &self.common {
            config.set(k, v);
        }
        config
    }

    /// An idempotent producer with `acks=all` (what a state write needs), plus `extra`.
    pub fn producer(&self, extra: &[(&str, &str)]) -> Result<FutureProducer> {
        let mut config = self.config();
        config.set("enable.idempotence", "true").set("acks", "all").set("linger.ms", "0").set("message.timeout.ms", "60000");
        for (k, v) in extra {
            config.set(*k, *v);
        }
        config.create().context("creating a Kafka producer for the state topics")
    }
}

/// What the follower (and this process's own acknowledged writes) applied.
#[derive(Default)]
struct View {
    entries: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Where each key's value (or its removal) was written: `(partition, offset)`. A record is
    /// applied only if it is not older than what the key holds, so a write applied as soon as Kafka
    /// acknowledged it is never undone by the follower reading older records afterwards.
    written_at: HashMap<Vec<u8>, (i32, i64)>,
    /// The next offset to read, per partition.
    positions: HashMap<i32, i64>,
}

impl View {
    /// Applies `value` (`None`: a removal) of `key`, written at `offset` of `partition`, unless the
    /// key already holds something written later in that partition.
    fn apply(&mut self, key: &[u8], value: Option<&[u8]>, partition: i32, offset: i64) {
        if self.written_at.get(key).is_some_and(|(p, o)| *p == partition && *o > offset) {
            return;
        }
        self.written_at.insert(key.to_vec(), (partition, offset));
        match value {
            Some(value) => self.entries.insert(key.to_vec(), value.to_vec()),
            None => self.entries.remove(key),
        };
    }
}

/// One compacted topic, read into memory and followed.
pub struct StateTopic {
    spec: TopicSpec,
    producer: FutureProducer,
    view: Arc<Mutex<View>>,
    /// Bumped after every change the follower applied (or its position moved).
    changed: watch::Receiver<u64>,
    partitions: Vec<i32>,
    consumer: Arc<BaseConsumer>,
    stop: Arc<AtomicBool>,
    follower: Option<std::thread::JoinHandle<()>>,
}

impl StateTopic {
    /// Creates the topic if it is missing, reads it to its end and follows it.
    pub async fn open(clients: &Clients, spec: TopicSpec, read_committed: bool) -> Result<Self> {
        ensure(clients, &spec).await?;
        let mut config = clients.config();
        config
            .set("group.id", format!("snow-connect-state-{}", std::process::id()))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false")
            // Other workers' writes show within tens of milliseconds (librdkafka waits 500 ms).
            .set("fetch.wait.max.ms", "50")
            .set("isolation.level", if read_committed { "read_committed" } else { "read_uncommitted" });
        let consumer: Arc<BaseConsumer> = Arc::new(config.create().context("creating the state topic reader")?);
        let partitions = {
            let (consumer, spec) = (consumer.clone(), spec.clone());
            let listener = clients.listener();
            tokio::task::spawn_blocking(move || partitions_of(&consumer, &spec, &listener)).await??
        };
        {
            let mut assignment = TopicPartitionList::new();
            for p in &partitions {
                assignment.add_partition_offset(&spec.name, *p, Offset::Beginning)?;
            }
            consumer.assign(&assignment).with_context(|| format!("reading {} {}", spec.key, spec.name))?;
        }
        let view = Arc::new(Mutex::new(View::default()));
        let (tx, changed) = watch::channel(0u64);
        let stop = Arc::new(AtomicBool::new(false));
        let follower = {
            let (consumer, view, stop, topic) = (consumer.clone(), view.clone(), stop.clone(), spec.name.clone());
            std::thread::Builder::new().name(format!("state-{}", spec.name)).spawn(move || follow(&consumer, &topic, &view, &tx, &stop))?
        };
        let producer = clients.producer(&[])?;
        let topic = Self { spec, producer, view, changed, partitions, consumer, stop, follower: Some(follower) };
        topic.read_to_end().await?;
        Ok(topic)
    }

    /// The Kafka cluster's id (blocking: a metadata request).
    pub fn cluster_id(&self) -> Option<String> {
        self.consumer.client().fetch_cluster_id(REQUEST_TIMEOUT)
    }

    /// The topic's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The value of `key`, if it has one.
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.lock().entries.get(key).cloned()
    }

    /// Every live `(key, value)`, in key order.
    pub fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.lock().entries.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// A receiver that changes whenever the follower applied something.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed.clone()
    }

    /// Writes `value` at `key` (`None`: deletes it) and waits until Kafka acknowledged it; a read
    /// after this sees it (it is applied here at once, [`StateTopic::applied`]).
    pub async fn write(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&self.spec.name).key(key);
        if let Some(value) = value {
            record = record.payload(value);
        }
        let (partition, offset) = self
            .producer
            .send(record, REQUEST_TIMEOUT)
            .await
            .map_err(|(e, _)| anyhow!("writing to {} {}: {e}", self.spec.key, self.spec.name))
            .map(|d| (d.partition, d.offset))?;
        self.applied(key, value, partition, offset);
        Ok(())
    }

    /// Applies a write this process made and Kafka acknowledged (committed, for a transactional
    /// one) at `offset` of `partition`, without waiting for the follower to read it back.
    pub fn applied(&self, key: &[u8], value: Option<&[u8]>, partition: i32, offset: i64) {
        self.lock().apply(key, value, partition, offset);
    }

    /// Waits until every record below the topic's end offsets of now is applied.
    pub async fn read_to_end(&self) -> Result<()> {
        let (consumer, topic, partitions) = (self.consumer.clone(), self.spec.name.clone(), self.partitions.clone());
        let ends = tokio::task::spawn_blocking(move || {
            partitions
                .iter()
                .map(|p| {
                    retrying(&format!("reading the end of {topic}[{p}]"), || consumer.fetch_watermarks(&topic, *p, REQUEST_TIMEOUT))
                        .map(|(_, high)| (*p, high))
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .await?
        .with_context(|| format!("reading the end of {} {}", self.spec.key, self.spec.name))?;
        self.seen(&ends).await
    }

    /// Waits until the follower's position reached `ends` in every partition named.
    async fn seen(&self, ends: &[(i32, i64)]) -> Result<()> {
        let mut changed = self.changed.clone();
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        loop {
            {
                let view = self.lock();
                if ends.iter().all(|(p, end)| view.positions.get(p).copied().unwrap_or(0) >= *end) {
                    return Ok(());
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!("{} {} was not read to its end within {REQUEST_TIMEOUT:?}", self.spec.key, self.spec.name);
            }
            let _ = tokio::time::timeout(left.min(Duration::from_millis(200)), changed.changed()).await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for StateTopic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(follower) = self.follower.take() {
            let _ = follower.join();
        }
    }
}

/// The follower: applies every record in order; when idle, takes the consumer's positions (they
/// move past transaction markers and aborted records, which are never handed out).
fn follow(consumer: &BaseConsumer, topic: &str, view: &Mutex<View>, changed: &watch::Sender<u64>, stop: &AtomicBool) {
    let mut generation = 0u64;
    let mut last_position_check = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        let polled = consumer.poll(Duration::from_millis(50));
        let mut moved = false;
        match polled {
            Some(Ok(message)) => {
                let mut view = view.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(key) = message.key() {
                    view.apply(key, message.payload(), message.partition(), message.offset());
                }
                let next = message.offset() + 1;
                let at = view.positions.entry(message.partition()).or_insert(0);
                *at = (*at).max(next);
                moved = true;
            }
            Some(Err(e)) => tracing::warn!(topic, "reading a state topic: {e}"),
            None => {}
        }
        if !moved || last_position_check.elapsed() > Duration::from_millis(100) {
            last_position_check = Instant::now();
            if let Ok(positions) = consumer.position() {
                let mut view = view.lock().unwrap_or_else(|e| e.into_inner());
                for element in positions.elements() {
                    if let Offset::Offset(next) = element.offset() {
                        let at = view.positions.entry(element.partition()).or_insert(0);
                        if next > *at {
                            *at = next;
                            moved = true;
                        }
                    }
                }
            }
        }
        if moved {
            generation += 1;
            let _ = changed.send(generation);
        }
    }
}

/// Whether `code` says the principal may not do what it asked.
fn is_denied(code: &RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::GroupAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed
            | RDKafkaErrorCode::TransactionalIdAuthorizationFailed
    )
}

/// The message for a denial of `code` on `spec`'s topic.
fn denied(spec: &TopicSpec, code: RDKafkaErrorCode, listener: &str) -> String {
    format!(
        "{} {}: {code} on Kafka at {listener}: the principal may not use this topic; a fleet's workers need the ACLs \
         docs/security.md lists (create, describe, read and write on the state topics, and on their group and transactional ids)",
        spec.key, spec.name
    )
}

/// The partitions of the topic (a topic just created may list none for a moment: asked again).
fn partitions_of(consumer: &BaseConsumer, spec: &TopicSpec, listener: &str) -> Result<Vec<i32>> {
    let started = Instant::now();
    loop {
        let metadata =
            retrying(&format!("reading the metadata of {}", spec.name), || consumer.fetch_metadata(Some(&spec.name), REQUEST_TIMEOUT))
                .with_context(|| format!("reading the metadata of {} {}", spec.key, spec.name))?;
        if let Some(code) = metadata.topics().iter().filter_map(|t| t.error()).map(RDKafkaErrorCode::from).find(is_denied) {
            return Err(Refusal(denied(spec, code, listener)).into());
        }
        let partitions: Vec<i32> =
            metadata.topics().iter().filter(|t| t.error().is_none()).flat_map(|t| t.partitions().iter().map(|p| p.id())).collect();
        if !partitions.is_empty() {
            return Ok(partitions);
        }
        if started.elapsed() > REQUEST_TIMEOUT {
            bail!("{} {} has no partitions", spec.key, spec.name);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Creates the topic, compacted, if it does not exist; refuses one that exists and is not
/// compacted (old state would be deleted by retention).
pub async fn ensure(clients: &Clients, spec: &TopicSpec) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = clients.config().create().context("creating a Kafka admin client")?;
    let new =
        NewTopic::new(&spec.name, spec.partitions, TopicReplication::Fixed(spec.replication.max(-1))).set("cleanup.policy", "compact");
    let options = AdminOptions::new().operation_timeout(Some(REQUEST_TIMEOUT));
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let mut pause = Duration::from_millis(100);
    'create: loop {
        let created = match admin.create_topics(std::slice::from_ref(&new), &options).await {
            Ok(created) => created,
            Err(e) if is_transient_error(&e) && Instant::now() < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("creating {} {} on Kafka at {}", spec.key, spec.name, clients.listener())),
        };
        for result in created {
            match result {
                Ok(_) => {
                    tracing::info!("created {} {} ({} partitions, compacted)", spec.key, spec.name, spec.partitions);
                    return Ok(());
                }
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((_, e)) if is_denied(&e) => return Err(Refusal(denied(spec, e, &clients.listener())).into()),
                Err((_, e)) if is_transient(e) && Instant::now() < deadline => {
                    tracing::debug!("creating {} {}: {e}; asking again in {pause:?}", spec.key, spec.name);
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                    continue 'create;
                }
                Err((_, e)) => bail!("creating {} {} on Kafka at {}: {e}", spec.key, spec.name, clients.listener()),
            }
        }
        break;
    }
    // A topic another client has just created may not show its configuration yet: ask again a
    // few times before judging it.
    let mut policy = String::new();
    for _ in 0..20 {
        let described = match admin.describe_configs(&[ResourceSpecifier::Topic(&spec.name)], &options).await {
            Ok(described) => described,
            Err(e) if is_transient_error(&e) => {
                tokio::time::sleep(Duration::from_millis(250)).await;
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("reading the configuration of {} {}", spec.key, spec.name)),
        };
        for resource in described {
            match resource {
                Ok(resource) => policy = resource.get("cleanup.policy").and_then(|e| e.value.clone()).unwrap_or_default(),
                Err(e) if is_denied(&e) => return Err(Refusal(denied(spec, e, &clients.listener())).into()),
                Err(e) if is_transient(e) => {}
                Err(e) => bail!("reading the configuration of {} {}: {e}", spec.key, spec.name),
            }
        }
        if !policy.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    if policy.is_empty() {
        bail!("{} {}: its configuration could not be read on Kafka at {}", spec.key, spec.name, clients.listener());
    }
    if !policy.split(',').any(|p| p.trim() == "compact") {
        return Err(Refusal(format!(
            "{} {} has cleanup.policy={policy}; a state topic must be compacted (cleanup.policy=compact), or its old entries are lost to retention",
            spec.key, spec.name
        ))
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rdkafka::producer::Producer;

    use super::*;

    fn clients() -> Clients {
        Clients { bootstrap: kafka_harness::shared().bootstrap().to_string(), common: BTreeMap::new() }
    }

    fn spec(name: &str) -> TopicSpec {
        TopicSpec { name: name.into(), partitions: 3, replication: 1, key: "test.topic" }
    }

    #[test]
    fn a_write_applied_on_acknowledgement_is_not_undone_by_older_records_read_later() {
        let mut view = View::default();
        view.apply(b"k", Some(b"new"), 0, 7);
        view.apply(b"k", Some(b"old"), 0, 5);
        assert_eq!(view.entries.get(&b"k"[..]).map(Vec::as_slice), Some(&b"new"[..]));
        view.apply(b"k", Some(b"new"), 0, 7);
        view.apply(b"k", None, 0, 9);
        assert!(!view.entries.contains_key(&b"k"[..]), "a later tombstone removes it");
        view.apply(b"k", Some(b"older"), 0, 8);
        assert!(!view.entries.contains_key(&b"k"[..]), "and stays removed");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_are_read_back_by_a_second_reader_tombstones_included() {
        let name = format!("state-rw-{}", std::process::id());
        let one = StateTopic::open(&clients(), spec(&name), false).await.unwrap();
        one.write(b"a", Some(b"1")).await.unwrap();
        one.write(b"b", Some(b"2")).await.unwrap();
        one.write(b"a", Some(b"3")).await.unwrap();
        one.write(b"b", None).await.unwrap();
        assert_eq!(one.get(b"a").as_deref(), Some(&b"3"[..]), "read your writes");
        let two = StateTopic::open(&clients(), spec(&name), false).await.unwrap();
        assert_eq!(two.entries(), vec![(b"a".to_vec(), b"3".to_vec())], "the second reader reads to the end at open");
        one.write(b"c", Some(b"4")).await.unwrap();
        two.read_to_end().await.unwrap();
        assert_eq!(two.get(b"c").as_deref(), Some(&b"4"[..]), "and follows");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_topic_that_is_not_compacted_is_refused() {
        let name = format!("state-delete-{}", std::process::id());
        let admin: AdminClient<DefaultClientContext> = clients().config().create().unwrap();
        let new = NewTopic::new(&name, 1, TopicReplication::Fixed(1)).set("cleanup.policy", "delete");
        admin.create_topics(&[new], &AdminOptions::new()).await.unwrap();
        let err = StateTopic::open(&clients(), spec(&name), false).await.err().unwrap().to_string();
        assert!(err.contains("test.topic") && err.contains("cleanup.policy=delete") && err.contains("must be compacted"), "{err}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn read_committed_reaches_the_end_past_transaction_markers_and_skips_aborted_writes() {
        let name = format!("state-txn-{}", std::process::id());
        let reader = StateTopic::open(&clients(), spec(&name), true).await.unwrap();
        let producer = clients().producer(&[("transactional.id", &format!("state-txn-test-{}", std::process::id()))]).unwrap();
        producer.init_transactions(REQUEST_TIMEOUT).unwrap();
        producer.begin_transaction().unwrap();
        producer.send(FutureRecord::to(&name).key(&b"k"[..]).payload(&b"kept"[..]), REQUEST_TIMEOUT).await.unwrap();
        producer.commit_transaction(REQUEST_TIMEOUT).unwrap();
        producer.begin_transaction().unwrap();
        producer.send(FutureRecord::to(&name).key(&b"k"[..]).payload(&b"aborted"[..]), REQUEST_TIMEOUT).await.unwrap();
        producer.abort_transaction(REQUEST_TIMEOUT).unwrap();
        reader.read_to_end().await.unwrap();
        assert_eq!(reader.get(b"k").as_deref(), Some(&b"kept"[..]));
    }
}
