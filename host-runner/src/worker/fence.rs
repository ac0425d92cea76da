//! The fence of a work slot (ADR 0023): one transactional producer per slot, with
//! `transactional.id = <group.id>-slot-<n>`. A worker that gains slot n calls `init_transactions`
//! before it starts any of the slot's units; Kafka's transaction coordinator then bumps the id's
//! epoch, aborts an open transaction of the previous owner and refuses that owner's every later
//! commit (`ProducerFenced`). Each offset write of a unit of slot n is a transaction of this
//! producer, and the offsets topic is read `read_committed`, so a worker that lost the slot can
//! no longer store an offset, whatever its clock or network says. When a write finds the writer
//! fenced, the slot's units are stopped at once (its `stop` trigger).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

use crate::offsets::kafka::OffsetWriter;
use crate::shutdown::ShutdownTrigger;
use crate::state::{Clients, StateTopic};

/// How long a transaction step may take.
const TXN_TIMEOUT: Duration = Duration::from_secs(30);

/// A slot's fenced offset writer.
pub struct SlotWriter {
    slot: i32,
    producer: FutureProducer,
    offsets: Arc<StateTopic>,
    /// One transaction at a time.
    lock: Mutex<()>,
    fenced: AtomicBool,
    /// Stops the slot's units when the writer finds itself fenced.
    stop: Mutex<Option<ShutdownTrigger>>,
}

impl SlotWriter {
    /// Fences every earlier owner of `slot` and returns its writer (blocking: call it off the
    /// async threads). Returns once a previous owner's open transaction is aborted or committed.
    pub fn open(clients: &Clients, group: &str, slot: i32, offsets: Arc<StateTopic>, stop: ShutdownTrigger) -> Result<Self> {
        let id = format!("{group}-slot-{slot}");
        let producer = clients.producer(&[("transactional.id", &id), ("transaction.timeout.ms", "60000")])?;
        producer.init_transactions(TXN_TIMEOUT).map_err(|e| anyhow!("fencing slot {slot} (transactional.id {id}): {e}"))?;
        Ok(Self { slot, producer, offsets, lock: Mutex::new(()), fenced: AtomicBool::new(false), stop: Mutex::new(Some(stop)) })
    }

    /// Whether a write found this writer fenced by a newer owner of the slot.
    pub fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::SeqCst)
    }

    fn fence_hit(&self, e: &KafkaError) -> anyhow::Error {
        self.fenced.store(true, Ordering::SeqCst);
        if let Some(stop) = self.stop.lock().unwrap_or_else(|e| e.into_inner()).take() {
            stop.fire();
        }
        tracing::error!(slot = self.slot, "slot {} belongs to another worker now (this worker is fenced: {e}); its units stop", self.slot);
        anyhow!("slot {} is fenced: another worker owns it now; nothing more is stored from here", self.slot)
    }

    fn transaction(&self, key: &[u8], value: Option<&[u8]>) -> Result<(i32, i64)> {
        self.producer.begin_transaction().map_err(|e| self.classify(e))?;
        let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(self.offsets.name()).key(key);
        if let Some(value) = value {
            record = record.payload(value);
        }
        let sent = tokio::runtime::Handle::current().block_on(self.producer.send(record, TXN_TIMEOUT));
        let (partition, offset) = match sent {
            Ok(delivery) => (delivery.partition, delivery.offset),
            Err((e, _)) => {
                let _ = self.producer.abort_transaction(TXN_TIMEOUT);
                return Err(self.classify(e));
            }
        };
        if let Err(e) = self.producer.commit_transaction(TXN_TIMEOUT) {
            let error = self.classify(e);
            if !self.is_fenced() {
                let _ = self.producer.abort_transaction(TXN_TIMEOUT);
            }
            return Err(error);
        }
        Ok((partition, offset))
    }

    /// Fenced or fatal errors fence the writer; others are returned as they are.
    fn classify(&self, e: KafkaError) -> anyhow::Error {
        let fatal = match &e {
            KafkaError::Transaction(t) => t.is_fatal(),
            other => matches!(
                other.rdkafka_error_code(),
                Some(
                    rdkafka::types::RDKafkaErrorCode::Fenced
                        | rdkafka::types::RDKafkaErrorCode::ProducerFenced
                        | rdkafka::types::RDKafkaErrorCode::InvalidProducerEpoch
                )
            ),
        };
        if fatal { self.fence_hit(&e) } else { anyhow!("writing an offset of slot {}: {e}", self.slot) }
    }
}

impl OffsetWriter for SlotWriter {
    fn write(&self, key: Vec<u8>, value: Option<Vec<u8>>) -> Result<()> {
        let _one = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_fenced() {
            bail!("slot {} is fenced: another worker owns it now; nothing more is stored from here", self.slot);
        }
        let (partition, offset) = self.transaction(&key, value.as_deref())?;
        // Committed: this worker's readers see it now (the follower would take a fetch round).
        self.offsets.applied(&key, value.as_deref(), partition, offset);
        Ok(())
    }
}
