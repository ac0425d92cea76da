//! The acknowledgement side of a unit: batches handed over in poll order are awaited in order, and
//! a table's offset is stored only once Kafka acknowledged every record up to it. At most
//! [`DEPTH`] batches wait at once, so a slow broker slows the polling instead of filling memory.

use std::sync::Arc;

use rdkafka::producer::DeliveryFuture;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::metrics::{Metrics, labels};
use crate::offsets::OffsetStore;

/// Batches waiting for acknowledgement at most.
pub const DEPTH: usize = 2;

/// One poll's records on their way.
pub struct Pending {
    /// Their deliveries, in order.
    pub deliveries: Vec<DeliveryFuture>,
    /// The source partition.
    pub partition: String,
    /// The position to store once all are acknowledged.
    pub position: String,
}

/// The committer of one unit.
pub struct Pipeline {
    tx: Option<mpsc::Sender<Pending>>,
    failed: watch::Receiver<Option<String>>,
    task: JoinHandle<()>,
}

impl Pipeline {
    /// Starts the committer of `table` of `connector`.
    pub fn start(connector: String, table: String, offsets: Arc<dyn OffsetStore>, metrics: Metrics) -> Self {
        let (tx, mut rx) = mpsc::channel::<Pending>(DEPTH);
        let (fail, failed) = watch::channel(None);
        let task = tokio::spawn(async move {
            let l = labels(&[("connector", &connector), ("table", &table)]);
            while let Some(p) = rx.recv().await {
                let count = p.deliveries.len() as u64;
                for delivery in p.deliveries {
                    let error = match delivery.await {
                        Ok(Ok(_)) => continue,
                        Ok(Err((e, _))) => e.to_string(),
                        Err(_) => "the producer dropped the delivery".to_string(),
                    };
                    let _ = fail.send(Some(format!("producing to Kafka failed: {error}")));
                    return;
                }
                let (store, c, part, pos) = (offsets.clone(), connector.clone(), p.partition, p.position);
                match tokio::task::spawn_blocking(move || store.commit(&c, &part, &pos)).await {
                    Ok(Ok(())) => {
                        metrics.counter_add("snow_source_records_total", count, &l);
                        metrics.counter_add("snow_source_offset_commits_total", 1, &l);
                        tracing::debug!(connector = %connector, unit = %table, records = count, "batch acknowledged, offset stored");
                    }
                    Ok(Err(e)) => {
                        let _ = fail.send(Some(format!("{e:#}")));
                        return;
                    }
                    Err(e) => {
                        let _ = fail.send(Some(format!("the offset commit task failed: {e}")));
                        return;
                    }
                }
            }
        });
        Self { tx: Some(tx), failed, task }
    }

    /// Hands a batch over, waiting while [`DEPTH`] batches are already waiting. An error says
    /// why the committer stopped (the unit must reopen at its stored offset).
    pub async fn submit(&mut self, pending: Pending) -> Result<(), String> {
        self.failure()?;
        let tx = self.tx.as_ref().ok_or("the pipeline is closed")?;
        if tx.send(pending).await.is_err() {
            return Err(self.failed.borrow().clone().unwrap_or_else(|| "the committer stopped".into()));
        }
        Ok(())
    }

    /// The committer's failure, if it failed.
    pub fn failure(&self) -> Result<(), String> {
        match self.failed.borrow().clone() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Waits until every batch handed over is acknowledged and stored (or the committer failed).
    pub async fn finish(mut self) -> Result<(), String> {
        drop(self.tx.take());
        let _ = (&mut self.task).await;
        self.failure()
    }
}

impl Drop for Pipeline {
    /// A pipeline dropped before [`finish`](Pipeline::finish) returned (a unit that gave up
    /// waiting) stores nothing more: a late commit could otherwise land after a new instance
    /// already stored a further offset. Those records are read again from the stored offset.
    fn drop(&mut self) {
        self.task.abort();
    }
}
