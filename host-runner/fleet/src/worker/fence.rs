//! The fence of a work slot (ADR 0023): one transactional producer per slot, with
//! `transactional.id = <group.id>-slot-<n>`. A worker that gains slot n initialises it before it
//! starts any of the slot's units; Kafka's transaction coordinator then bumps the id's epoch,
//! aborts an open transaction of the previous owner and refuses that owner's every later commit
//! (`ProducerFenced`). Each offset write of an at-least-once unit of slot n is a transaction of
//! this producer, and an exactly-once unit's polls join its transactions with their offsets
//! (ADR 0030, [`snow_runtime::source::exactly_once::transactions`]); the offsets topic is read `read_committed`, so a
//! worker that lost the slot can no longer store an offset or a record, whatever its clock or
//! network says. When a commit finds the producer fenced, the slot's units are stopped at once
//! (its `stop` trigger).

use std::sync::Arc;

use anyhow::{Result, bail};

use snow_runtime::offsets::kafka::OffsetWriter;
use snow_runtime::shutdown::ShutdownTrigger;
use snow_runtime::source::exactly_once::transactions::Transactions;
use snow_runtime::state::{Clients, StateTopic};

/// A slot's fenced writer.
pub struct SlotWriter {
    slot: i32,
    transactions: Arc<Transactions>,
}

impl SlotWriter {
    /// Fences every earlier owner of `slot` and returns its writer (blocking: call it off the
    /// async threads). Returns once a previous owner's open transaction is aborted or committed.
    /// Records join its transactions with the worker's producer settings (`clients`).
    pub fn open(clients: &Clients, group: &str, slot: i32, offsets: Arc<StateTopic>, stop: ShutdownTrigger) -> Result<Self> {
        let id = format!("{group}-slot-{slot}");
        // A source's producer settings, on the worker's connection.
        let spec = snow_runtime::kafka::KafkaSpec {
            bootstrap_servers: clients.bootstrap.clone(),
            security: clients.common.clone(),
            ..Default::default()
        };
        let config = snow_runtime::kafka::producer_config(&spec);
        let transactions =
            Transactions::open(config, &id, offsets, Some(stop)).map_err(|e| anyhow::anyhow!("fencing slot {slot}: {e:#}"))?;
        Ok(Self { slot, transactions })
    }

    /// The slot's transactions, which exactly-once units' polls join.
    pub fn transactions(&self) -> Arc<Transactions> {
        self.transactions.clone()
    }

    /// Whether a commit found this writer fenced by a newer owner of the slot (or its producer
    /// failed for good): the slot must be fenced again before its units run here.
    pub fn is_fenced(&self) -> bool {
        self.transactions.is_broken()
    }
}

impl OffsetWriter for SlotWriter {
    fn write(&self, key: Vec<u8>, value: Option<Vec<u8>>) -> Result<()> {
        if self.transactions.is_broken() {
            bail!("slot {} is fenced: another worker owns it now; nothing more is stored from here", self.slot);
        }
        self.transactions.write_blocking(key, value)
    }
}
