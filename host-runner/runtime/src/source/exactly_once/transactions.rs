//! Kafka transactions of one fence (ADR 0030): one transactional producer, run by one task.
//!
//! A [`Job`] is one poll's records (already converted and transformed) and the offset record of
//! its table's new position, or an offset record alone (an at-least-once unit of a fleet slot).
//! The task takes every job waiting when it is free, begins a transaction, produces the jobs'
//! records in order and awaits their deliveries (a record Kafka refuses is named, as outside
//! transactions), takes the jobs that arrived meanwhile the same way for up to [`GATHER`], then
//! writes each offset key's last record to the offsets topic, commits, and only then applies the
//! offsets to the local view of the offsets topic and answers each job. Jobs that arrive while a
//! transaction commits make the next one: a transaction holds whole polls, never part of one.
//!
//! `init_transactions` in [`Transactions::open`] fences every earlier producer of the same
//! `transactional.id` (its open transaction is aborted, its later commits refused). When a commit
//! finds this producer fenced, every later job fails with [`ProduceFailure::Fenced`] and `on_fenced`
//! fires. Any other failure aborts the transaction and fails every job in it (their tables reopen
//! at their committed positions); a fatal one leaves the producer unusable ([`Transactions::is_broken`]).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use rdkafka::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use tokio::sync::{mpsc, oneshot};

use crate::component::bindings::types::PollBatch;
use crate::shutdown::ShutdownTrigger;
use crate::source::produce::{Converted, ProduceFailure, delivery_failure, enqueue};
use crate::state::StateTopic;

/// How long a transaction step (init, commit, abort) may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// `transaction.timeout.ms`: the coordinator aborts a transaction open longer than this (a
/// producer that died with one open), so a table of a dead process is readable again after it.
pub const TRANSACTION_TIMEOUT_MS: &str = "60000";

/// Jobs in one transaction at most.
const MAX_JOBS: usize = 64;

/// How long a transaction goes on taking the jobs that arrive while its records are acknowledged:
/// under load a transaction holds several polls and its commit is paid once for them; a record
/// waits this much longer before `read_committed` readers see it.
const GATHER: Duration = Duration::from_millis(100);

/// Jobs waiting for the task at most (more wait in `submit`).
const QUEUE: usize = 16;

/// One poll's records to produce in a transaction.
pub struct Records {
    /// The batch as the component returned it.
    pub batch: PollBatch,
    /// What the converters and transforms made of its records (`None`: the batch's bytes).
    pub converted: Option<Vec<Converted>>,
}

/// An offset record: key and value of the offsets topic (`None`: a tombstone).
pub struct OffsetRecord {
    /// `["<connector>", <partition>]`.
    pub key: Vec<u8>,
    /// The position's JSON.
    pub value: Option<Vec<u8>>,
}

/// What a job's answer carries: how many records it produced.
pub type Outcome = Result<u64, ProduceFailure>;

struct Job {
    records: Option<Records>,
    offset: OffsetRecord,
    done: oneshot::Sender<Outcome>,
}

/// The state the task and its callers share.
struct Shared {
    id: String,
    fenced: AtomicBool,
    broken: AtomicBool,
    on_fenced: Mutex<Option<ShutdownTrigger>>,
}

/// One transactional producer and the task running its transactions.
pub struct Transactions {
    shared: Arc<Shared>,
    jobs: mpsc::Sender<Job>,
}

impl Transactions {
    /// Creates the producer of `config` with `transactional.id = id`, fences every earlier
    /// producer of that id, and starts the task (blocking: call it off the async threads, inside
    /// the runtime). Offsets go to `offsets`.
    pub fn open(mut config: ClientConfig, id: &str, offsets: Arc<StateTopic>, on_fenced: Option<ShutdownTrigger>) -> Result<Arc<Self>> {
        config.set("transactional.id", id).set("transaction.timeout.ms", TRANSACTION_TIMEOUT_MS);
        // A record's delivery may not outlast its transaction (librdkafka refuses the settings).
        let longest: u64 = TRANSACTION_TIMEOUT_MS.parse().unwrap_or(60_000);
        if config.get("message.timeout.ms").and_then(|v| v.trim().parse::<u64>().ok()).is_none_or(|ms| ms > longest) {
            config.set("message.timeout.ms", TRANSACTION_TIMEOUT_MS);
        }
        // The Kafka errors stay the causes: a caller tells a broker that is away from a refusal by them.
        let producer: FutureProducer = config.create().with_context(|| format!("creating the transactional producer {id}"))?;
        producer.init_transactions(STEP_TIMEOUT).with_context(|| format!("initialising transactions of transactional.id {id}"))?;
        let shared = Arc::new(Shared {
            id: id.to_string(),
            fenced: AtomicBool::new(false),
            broken: AtomicBool::new(false),
            on_fenced: Mutex::new(on_fenced),
        });
        let (jobs, rx) = mpsc::channel(QUEUE);
        tokio::runtime::Handle::current().spawn(run(producer, offsets, rx, shared.clone()));
        Ok(Arc::new(Self { shared, jobs }))
    }

    /// Whether a newer producer of the same id fenced this one.
    pub fn is_fenced(&self) -> bool {
        self.shared.fenced.load(Ordering::SeqCst)
    }

    /// Whether the producer failed for good (fenced, or a fatal error): a new one is needed.
    pub fn is_broken(&self) -> bool {
        self.shared.broken.load(Ordering::SeqCst)
    }

    /// Queues a job (waiting while the queue is full); its answer arrives once its transaction
    /// committed or failed.
    pub async fn submit(&self, records: Option<Records>, offset: OffsetRecord) -> oneshot::Receiver<Outcome> {
        let (done, answer) = oneshot::channel();
        if let Err(mpsc::error::SendError(job)) = self.jobs.send(Job { records, offset, done }).await {
            let _ = job.done.send(Err(self.stopped()));
        }
        answer
    }

    /// Writes one offset record in a transaction and waits for its commit (blocking: call it off
    /// the async threads).
    pub fn write_blocking(&self, key: Vec<u8>, value: Option<Vec<u8>>) -> Result<()> {
        let (done, answer) = oneshot::channel();
        let job = Job { records: None, offset: OffsetRecord { key, value }, done };
        if self.jobs.blocking_send(job).is_err() {
            return Err(anyhow!("{}", self.stopped()));
        }
        match answer.blocking_recv() {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(failure)) => Err(anyhow!("{failure}")),
            Err(_) => Err(anyhow!("{}", self.stopped())),
        }
    }

    fn stopped(&self) -> ProduceFailure {
        if self.is_fenced() {
            fenced(&self.shared.id)
        } else {
            ProduceFailure::Failed(format!("the transactional producer {} stopped", self.shared.id))
        }
    }
}

fn fenced(id: &str) -> ProduceFailure {
    ProduceFailure::Fenced(format!(
        "transactional.id {id} was taken over by a newer producer (another worker or process runs this now); nothing more is written from here"
    ))
}

/// The task: one transaction at a time.
async fn run(producer: FutureProducer, offsets: Arc<StateTopic>, mut rx: mpsc::Receiver<Job>, shared: Arc<Shared>) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        let outcome = if shared.broken.load(Ordering::SeqCst) {
            take_waiting(&mut rx, &mut jobs);
            Err(if shared.fenced.load(Ordering::SeqCst) {
                fenced(&shared.id)
            } else {
                ProduceFailure::Failed(format!(
                    "the transactional producer {} failed for good; the table reopens with a new one",
                    shared.id
                ))
            })
        } else {
            transaction(&producer, &offsets, &mut rx, &mut jobs, &shared).await
        };
        match outcome {
            Ok(committed) => {
                for (i, at) in committed.offsets {
                    let offset = &jobs[i].offset;
                    offsets.applied(&offset.key, offset.value.as_deref(), at.0, at.1);
                }
                for (job, records) in jobs.into_iter().zip(committed.records) {
                    let _ = job.done.send(Ok(records));
                }
            }
            Err(failure) => {
                for job in jobs {
                    let _ = job.done.send(Err(failure.clone()));
                }
            }
        }
    }
    // Every sender is gone: nothing is open (each transaction ends before its jobs are answered).
    tokio::task::spawn_blocking(move || drop(producer));
}

/// Moves the jobs waiting now into `jobs` (up to [`MAX_JOBS`]); whether there were any.
fn take_waiting(rx: &mut mpsc::Receiver<Job>, jobs: &mut Vec<Job>) -> bool {
    let before = jobs.len();
    while jobs.len() < MAX_JOBS {
        match rx.try_recv() {
            Ok(job) => jobs.push(job),
            Err(_) => break,
        }
    }
    jobs.len() > before
}

/// What a committed transaction wrote.
struct Committed {
    /// Per job, the records it produced.
    records: Vec<u64>,
    /// For the last job of each offset key (the only one whose offset record is written), where
    /// that record landed.
    offsets: Vec<(usize, (i32, i64))>,
}

/// One transaction: the records of `jobs` and of the jobs that arrive while they are acknowledged
/// (for [`GATHER`] at most), then each key's last offset record, then the commit.
async fn transaction(
    producer: &FutureProducer,
    offsets: &StateTopic,
    rx: &mut mpsc::Receiver<Job>,
    jobs: &mut Vec<Job>,
    shared: &Shared,
) -> Result<Committed, ProduceFailure> {
    producer.begin_transaction().map_err(|e| failed(shared, "beginning a transaction", e))?;
    let started = Instant::now();
    let written = match gather(producer, rx, jobs, started).await {
        Ok(records) => match write_offsets(producer, offsets, jobs) {
            Ok(pending) => landed(pending).await.map(|landed| (records, landed)),
            Err(failure) => Err(failure),
        },
        Err(failure) => Err(failure),
    };
    let (records, landed) = match written {
        Ok(written) => written,
        Err(failure) => {
            let p = producer.clone();
            let aborted = tokio::task::spawn_blocking(move || p.abort_transaction(STEP_TIMEOUT)).await;
            if let Ok(Err(e)) = aborted {
                let _ = failed(shared, "aborting a transaction", e);
            }
            return Err(failure);
        }
    };
    // Every delivery has arrived: the commit finds nothing to flush (rdkafka's flush before a
    // commit would otherwise wait up to 100 ms for a delivery report its poll thread served).
    let gathered = started.elapsed();
    let p = producer.clone();
    match tokio::task::spawn_blocking(move || commit(&p)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(abort_after(producer, shared, "committing", e).await),
        Err(e) => {
            // The commit's outcome is unknown: nothing more goes through this producer.
            shared.broken.store(true, Ordering::SeqCst);
            return Err(ProduceFailure::Failed(format!("the commit of transactional.id {} did not finish: {e}", shared.id)));
        }
    }
    tracing::debug!(
        transactional_id = %shared.id,
        jobs = jobs.len(),
        records = records.iter().sum::<u64>(),
        gather_ms = gathered.as_millis() as u64,
        commit_ms = (started.elapsed() - gathered).as_millis() as u64,
        "transaction committed"
    );
    Ok(Committed { records, offsets: landed })
}

/// Produces the records of `jobs` and awaits them; while jobs arrived meanwhile and the
/// transaction is younger than [`GATHER`], takes those too. Per job, the records it produced.
async fn gather(
    producer: &FutureProducer,
    rx: &mut mpsc::Receiver<Job>,
    jobs: &mut Vec<Job>,
    started: Instant,
) -> Result<Vec<u64>, ProduceFailure> {
    take_waiting(rx, jobs);
    let mut records = Vec::with_capacity(jobs.len());
    loop {
        let mut deliveries = Vec::new();
        for job in &jobs[records.len()..] {
            deliveries.push(match &job.records {
                Some(r) => enqueue(producer, &r.batch, r.converted.as_deref(), true).await?,
                None => Vec::new(),
            });
        }
        for job in deliveries {
            records.push(acknowledged(job).await?);
        }
        if started.elapsed() >= GATHER || !take_waiting(rx, jobs) {
            return Ok(records);
        }
    }
}

/// Sends the offset record of the last job of each key (an earlier one of the same key would be
/// replaced at once); their deliveries, by job.
fn write_offsets(producer: &FutureProducer, offsets: &StateTopic, jobs: &[Job]) -> Result<Vec<(usize, DeliveryFuture)>, ProduceFailure> {
    let mut pending = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        if jobs[i + 1..].iter().any(|later| later.offset.key == job.offset.key) {
            continue;
        }
        let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(offsets.name()).key(&job.offset.key);
        if let Some(value) = &job.offset.value {
            record = record.payload(value);
        }
        let delivery = producer.send_result(record).map_err(|(e, _)| ProduceFailure::Failed(format!("writing an offset record: {e}")))?;
        pending.push((i, delivery));
    }
    Ok(pending)
}

/// Where each offset record landed, by job, once its delivery arrived.
async fn landed(pending: Vec<(usize, DeliveryFuture)>) -> Result<Vec<(usize, (i32, i64))>, ProduceFailure> {
    let mut landed = Vec::with_capacity(pending.len());
    for (i, delivery) in pending {
        match delivery.await {
            Ok(Ok(d)) => landed.push((i, (d.partition, d.offset))),
            Ok(Err((e, _))) => return Err(ProduceFailure::Failed(format!("writing an offset record: {e}"))),
            Err(_) => return Err(ProduceFailure::Failed("the producer dropped a delivery".into())),
        }
    }
    Ok(landed)
}

/// Awaits one job's record deliveries in order: how many there were.
async fn acknowledged(deliveries: Vec<DeliveryFuture>) -> Result<u64, ProduceFailure> {
    let count = deliveries.len() as u64;
    for delivery in deliveries {
        match delivery.await {
            Ok(Ok(_)) => {}
            Ok(Err((e, message))) => return Err(delivery_failure(&e, &message)),
            Err(_) => return Err(ProduceFailure::Failed("the producer dropped a delivery".into())),
        }
    }
    Ok(count)
}

/// Longest the commit waits for librdkafka to release messages whose deliveries were served.
const RELEASE_WAIT: Duration = Duration::from_millis(500);

/// Commits, retrying what librdkafka says may be retried.
///
/// rust-rdkafka's `commit_transaction` flushes first, and its flush, finding any message still
/// counted by librdkafka, polls for a full 100 ms. Every delivery was awaited before this, but
/// librdkafka counts a message until the event that delivered it is released, a moment after the
/// delivery was served: so the count is awaited here in 1 ms steps, which made about one commit
/// in ten cost 100 ms more.
fn commit(producer: &FutureProducer) -> Result<(), KafkaError> {
    let deadline = Instant::now() + RELEASE_WAIT;
    while producer.in_flight_count() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    loop {
        match producer.commit_transaction(STEP_TIMEOUT) {
            Err(KafkaError::Transaction(e)) if e.is_retriable() => continue,
            other => return other,
        }
    }
}

/// After a failed commit: aborts when that is what the error asks for; the failure to report.
async fn abort_after(producer: &FutureProducer, shared: &Shared, what: &str, e: KafkaError) -> ProduceFailure {
    let requires_abort = matches!(&e, KafkaError::Transaction(t) if t.txn_requires_abort());
    let failure = failed(shared, what, e);
    if requires_abort {
        let p = producer.clone();
        if let Ok(Err(e)) = tokio::task::spawn_blocking(move || p.abort_transaction(STEP_TIMEOUT)).await {
            return failed(shared, "aborting a transaction", e);
        }
    }
    failure
}

/// `e` (while doing `what`) as a failure; a fenced producer or a fatal error marks the producer
/// broken (and, fenced, fires `on_fenced`).
fn failed(shared: &Shared, what: &str, e: KafkaError) -> ProduceFailure {
    let code = match &e {
        KafkaError::Transaction(t) => Some(t.code()),
        other => other.rdkafka_error_code(),
    };
    let fenced_now =
        matches!(code, Some(RDKafkaErrorCode::ProducerFenced | RDKafkaErrorCode::Fenced | RDKafkaErrorCode::InvalidProducerEpoch));
    let fatal = matches!(&e, KafkaError::Transaction(t) if t.is_fatal());
    if fenced_now {
        shared.fenced.store(true, Ordering::SeqCst);
        shared.broken.store(true, Ordering::SeqCst);
        if let Some(stop) = shared.on_fenced.lock().unwrap_or_else(|e| e.into_inner()).take() {
            stop.fire();
        }
        tracing::error!(transactional_id = %shared.id, "{what}: {e}: this producer is fenced (a newer one of the same transactional.id took over)");
        return fenced(&shared.id);
    }
    if fatal {
        shared.broken.store(true, Ordering::SeqCst);
        if let Some(stop) = shared.on_fenced.lock().unwrap_or_else(|e| e.into_inner()).take() {
            stop.fire();
        }
    }
    ProduceFailure::Failed(format!("{what} (transactional.id {}): {e}", shared.id))
}
