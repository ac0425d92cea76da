//! The acknowledgement side of a unit: batches handed over in poll order are awaited in order, and
//! a table's offset is stored only once Kafka acknowledged every record up to it.
//!
//! At most [`DEPTH`] batches wait in the channel, so a slow or absent broker slows the polling
//! instead of filling memory. With the one the committer awaits and the one the unit hands over
//! while the channel is full, **at most [`MAX_UNACKNOWLEDGED`] polls' records are produced and not
//! yet acknowledged** — what a crash can make a table read and produce again, besides the overlap
//! (docs/delivery.md); the gauge `snow_source_unacknowledged_polls` shows how many are now. While a
//! delivery takes longer than [`WAIT_REPORT`], the unit shows as `waiting` on the status board with
//! what it waits for, and the offset stays where Kafka's last acknowledgement put it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rdkafka::producer::DeliveryFuture;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::produce::{ProduceFailure, delivery_failure};
use crate::metrics::{Metrics, labels};
use crate::offsets::OffsetStore;
use crate::status::{StatusBoard, UnitState};

/// Batches waiting in the channel at most.
pub const DEPTH: usize = 2;

/// Polls whose records can be produced and not yet acknowledged at once: the one the committer
/// awaits, [`DEPTH`] in the channel, and the one the unit is handing over.
pub const MAX_UNACKNOWLEDGED: usize = DEPTH + 2;

/// Batches waiting in the channel at most in exactly-once mode: polls in flight there are never
/// read twice (a crash leaves their transaction open, and the next owner aborts it), so more may
/// wait, and a transaction can take several of them at once (ADR 0030).
pub const TRANSACTION_DEPTH: usize = 16;

/// A delivery slower than this shows the unit as waiting for Kafka.
pub const WAIT_REPORT: Duration = Duration::from_secs(3);

/// How a poll's records are known to be in Kafka.
pub enum Acks {
    /// Their deliveries from the idempotent producer, in order: the committer stores the offset
    /// once every one arrived.
    Deliveries(Vec<DeliveryFuture>),
    /// The answer of the transaction that wrote them with their offset (exactly-once): nothing
    /// is left to store.
    Committed(tokio::sync::oneshot::Receiver<crate::source::exactly_once::transactions::Outcome>),
}

/// One poll's records on their way.
pub struct Pending {
    /// How their arrival is known.
    pub acks: Acks,
    /// The source partition.
    pub partition: String,
    /// The position to store once all are acknowledged.
    pub position: String,
}

/// Who a pipeline works for, and where it reports.
#[derive(Clone)]
pub struct Owner {
    /// The connector's name.
    pub connector: String,
    /// The unit (table).
    pub table: String,
    /// Where offsets are stored.
    pub offsets: Arc<dyn OffsetStore>,
    /// The process's metrics.
    pub metrics: Metrics,
    /// The process's status board.
    pub status: StatusBoard,
}

/// The committer of one unit.
pub struct Pipeline {
    tx: Option<mpsc::Sender<Pending>>,
    failed: watch::Receiver<Option<ProduceFailure>>,
    task: JoinHandle<()>,
    /// Polls handed over (or being handed over) and not yet stored.
    unacknowledged: Arc<AtomicUsize>,
    owner: Owner,
}

impl Pipeline {
    /// Starts the committer of `owner`'s table.
    pub fn start(owner: Owner) -> Self {
        Self::start_with_depth(owner, DEPTH)
    }

    /// Starts the committer of `owner`'s table, with `depth` batches waiting at most.
    pub fn start_with_depth(owner: Owner, depth: usize) -> Self {
        let (tx, mut rx) = mpsc::channel::<Pending>(depth);
        let (fail, failed) = watch::channel(None);
        let unacknowledged = Arc::new(AtomicUsize::new(0));
        let (committer, count) = (owner.clone(), unacknowledged.clone());
        let task = tokio::spawn(async move {
            let l = labels(&[("connector", &committer.connector), ("table", &committer.table)]);
            while let Some(p) = rx.recv().await {
                let records = match p.acks {
                    Acks::Deliveries(deliveries) => {
                        let records = deliveries.len() as u64;
                        if let Err(failure) = acknowledged(&committer, deliveries, &count).await {
                            let _ = fail.send(Some(failure));
                            return;
                        }
                        let (store, c, part, pos) = (committer.offsets.clone(), committer.connector.clone(), p.partition, p.position);
                        let stored = match tokio::task::spawn_blocking(move || store.commit(&c, &part, &pos)).await {
                            Ok(Ok(())) => Ok(()),
                            Ok(Err(e)) => Err(format!("{e:#}")),
                            Err(e) => Err(format!("the offset commit task failed: {e}")),
                        };
                        if let Err(e) = stored {
                            let _ = fail.send(Some(ProduceFailure::Failed(e)));
                            return;
                        }
                        records
                    }
                    Acks::Committed(mut answer) => {
                        let what = || "the transaction of a poll's records and its offset to commit".to_string();
                        let outcome = patiently(&committer, &count, what, &mut answer).await;
                        match outcome.unwrap_or_else(|_| Err(ProduceFailure::Failed("the transaction task stopped".into()))) {
                            Ok(records) => records,
                            Err(failure) => {
                                let _ = fail.send(Some(failure));
                                return;
                            }
                        }
                    }
                };
                let now = count.fetch_sub(1, Ordering::SeqCst).saturating_sub(1);
                committer.metrics.gauge_set("snow_source_unacknowledged_polls", now as f64, &l);
                committer.metrics.counter_add("snow_source_records_total", records, &l);
                committer.metrics.counter_add("snow_source_offset_commits_total", 1, &l);
                tracing::debug!(connector = %committer.connector, unit = %committer.table, records, "batch acknowledged, offset stored");
            }
        });
        Self { tx: Some(tx), failed, task, unacknowledged, owner }
    }

    /// Hands a batch over, waiting while [`DEPTH`] batches are already waiting. An error says
    /// why the committer stopped (the unit must reopen at its stored offset).
    pub async fn submit(&mut self, pending: Pending) -> Result<(), ProduceFailure> {
        self.failure()?;
        let tx = self.tx.as_ref().ok_or_else(|| ProduceFailure::Failed("the pipeline is closed".into()))?;
        let now = self.unacknowledged.fetch_add(1, Ordering::SeqCst) + 1;
        let l = labels(&[("connector", &self.owner.connector), ("table", &self.owner.table)]);
        self.owner.metrics.gauge_set("snow_source_unacknowledged_polls", now as f64, &l);
        if tx.send(pending).await.is_err() {
            return Err(self.failed.borrow().clone().unwrap_or_else(|| ProduceFailure::Failed("the committer stopped".into())));
        }
        Ok(())
    }

    /// The committer's failure, if it failed.
    pub fn failure(&self) -> Result<(), ProduceFailure> {
        match self.failed.borrow().clone() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Waits until every batch handed over is acknowledged and stored (or the committer failed).
    pub async fn finish(mut self) -> Result<(), ProduceFailure> {
        drop(self.tx.take());
        let _ = (&mut self.task).await;
        self.failure()
    }
}

/// Awaits `deliveries` in order. While one takes longer than [`WAIT_REPORT`], the unit is shown as
/// waiting for Kafka (and logged once); it is shown running again when they arrive.
async fn acknowledged(owner: &Owner, deliveries: Vec<DeliveryFuture>, count: &AtomicUsize) -> Result<(), ProduceFailure> {
    let total = deliveries.len();
    for (i, mut delivery) in deliveries.into_iter().enumerate() {
        let what = || format!("Kafka to acknowledge {} records", total - i);
        match patiently(owner, count, what, &mut delivery).await {
            Ok(Ok(_)) => {}
            Ok(Err((e, message))) => return Err(delivery_failure(&e, &message)),
            Err(_) => return Err(ProduceFailure::Failed("the producer dropped the delivery".into())),
        }
    }
    Ok(())
}

/// Awaits `answer`. While it takes longer than [`WAIT_REPORT`], the unit is shown as waiting for
/// `what` (and logged once); it is shown running again when the answer arrives.
async fn patiently<F: std::future::Future + Unpin>(
    owner: &Owner,
    count: &AtomicUsize,
    what: impl Fn() -> String,
    answer: &mut F,
) -> F::Output {
    let mut waiting_since: Option<Instant> = None;
    let outcome = loop {
        match tokio::time::timeout(WAIT_REPORT, &mut *answer).await {
            Ok(outcome) => break outcome,
            Err(_) => {
                let since = *waiting_since.get_or_insert_with(|| {
                    tracing::warn!(connector = %owner.connector, unit = %owner.table, "Kafka has not acknowledged records for {WAIT_REPORT:?}; the offset stays at the last acknowledged batch");
                    Instant::now() - WAIT_REPORT
                });
                let message = format!(
                    "waiting for {} of {} polls for {} s (the broker is unreachable or slow); \
                     the stored offset stays at the last acknowledged batch",
                    what(),
                    count.load(Ordering::SeqCst),
                    since.elapsed().as_secs()
                );
                owner.status.set(&owner.connector, &owner.table, UnitState::Waiting, Some(&message));
            }
        }
    };
    if let Some(since) = waiting_since {
        tracing::info!(connector = %owner.connector, unit = %owner.table, "Kafka acknowledges again after {:.1} s", since.elapsed().as_secs_f64());
        owner.status.set(&owner.connector, &owner.table, UnitState::Running, None);
    }
    outcome
}

impl Drop for Pipeline {
    /// A pipeline dropped before [`finish`](Pipeline::finish) returned (a unit that gave up
    /// waiting) stores nothing more: a late commit could otherwise land after a new instance
    /// already stored a further offset. Those records are read again from the stored offset.
    fn drop(&mut self) {
        self.task.abort();
        let l = labels(&[("connector", &self.owner.connector), ("table", &self.owner.table)]);
        self.owner.metrics.gauge_set("snow_source_unacknowledged_polls", 0.0, &l);
    }
}
