//! A table in exactly-once mode (ADR 0030): the transactional producer its polls go through, and
//! the dedup window rebuilt from its topic when it opens.
//!
//! Standalone, each table owns its producer (`transactional.id = snow-connect-<connector>-<table>`),
//! made when the table first opens and again after it broke; in a fleet the slot's producer is
//! shared and owned by the slot. Opening fences every earlier producer of the id, so the committed
//! position read next is final, and the table's topic is read back `read_committed` over the
//! overlap before that position: the versions found go to the component inside the position
//! (`"seen"`), and the first sweep's re-read suppresses them as the lost window would have.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use snow_core::config::SourceConfig;
use snow_core::cursor::position::Position;
use snow_core::cursor::{Cursor, Partition, SeenVersion};
use snow_core::time::Timestamp;

use super::transactions::Transactions;
use crate::component::bindings::types::{SourceOffset, WorkUnit};
use crate::config::ConnectorSpec;
use crate::state::StateTopic;

use crate::source::topic_read::{self, Quiet};

/// Longest a read-back of a table's topic may take.
const READ_BACK_LIMIT: Duration = Duration::from_secs(120);

/// Where a table's transactions come from.
pub enum Fence {
    /// Standalone: the table's own producer, made (again) when needed.
    Own {
        /// The connector's producer settings.
        config: ClientConfig,
        /// `transactional.id`.
        id: String,
        /// The producer of now, if made and not broken.
        current: Option<Arc<Transactions>>,
    },
    /// A fleet: the slot's producer (fenced and owned by the slot).
    Slot(Arc<Transactions>),
}

/// Why transactions could not be had.
pub enum Unavailable {
    /// The broker is away or busy: try again.
    Transient(String),
    /// The broker refuses (no transaction coordinator, an ACL): `requested` falls back.
    Refused(String),
}

/// A table's exactly-once state.
pub struct ExactlyOnce {
    /// Where its transactions come from.
    pub fence: Fence,
    /// The offsets topic positions are committed to.
    pub offsets: Arc<StateTopic>,
}

impl ExactlyOnce {
    /// Standalone: a table of `spec` with its own producer (made at its first open).
    pub fn own(spec: &ConnectorSpec, unit: &str, offsets: Arc<StateTopic>) -> Self {
        let config = crate::kafka::producer_config(&spec.kafka);
        Self { fence: Fence::Own { config, id: format!("snow-connect-{}-{unit}", spec.name), current: None }, offsets }
    }

    /// The producer to use now: standalone, made (fencing every earlier one) when there is none or
    /// it broke. The offsets topic is read to its end afterwards, so the committed position is final.
    pub async fn transactions(&mut self) -> Result<Arc<Transactions>, Unavailable> {
        let transactions = match &mut self.fence {
            Fence::Slot(t) => t.clone(),
            Fence::Own { current: Some(t), .. } if !t.is_broken() => return Ok(t.clone()),
            Fence::Own { config, id, current } => {
                let (config, id_text, offsets) = (config.clone(), id.clone(), self.offsets.clone());
                let opened = tokio::task::spawn_blocking(move || Transactions::open(config, &id_text, offsets, None))
                    .await
                    .map_err(|e| Unavailable::Transient(format!("opening the transactional producer: {e}")))?;
                let t = opened.map_err(|e| classify(&e))?;
                tracing::info!(transactional_id = %id, "transactional producer ready (earlier producers of this id fenced)");
                *current = Some(t.clone());
                t
            }
        };
        self.offsets.read_to_end().await.map_err(|e| Unavailable::Transient(format!("reading the offsets topic: {e:#}")))?;
        Ok(transactions)
    }
}

/// An error opening transactions as transient or a refusal.
fn classify(e: &anyhow::Error) -> Unavailable {
    let transient = e.chain().any(|cause| {
        cause.downcast_ref::<KafkaError>().is_some_and(|k| match k {
            KafkaError::Transaction(t) => t.is_retriable() || !t.is_fatal() && transient_code(t.code()),
            other => other.rdkafka_error_code().is_some_and(transient_code),
        })
    });
    if transient { Unavailable::Transient(format!("{e:#}")) } else { Unavailable::Refused(format!("{e:#}")) }
}

fn transient_code(code: rdkafka::types::RDKafkaErrorCode) -> bool {
    use rdkafka::types::RDKafkaErrorCode::*;
    matches!(
        code,
        OperationTimedOut
            | RequestTimedOut
            | AllBrokersDown
            | BrokerTransportFailure
            | CoordinatorNotAvailable
            | NotCoordinator
            | CoordinatorLoadInProgress
            | ConcurrentTransactions
    )
}

/// What a read-back found, for the log.
pub struct Rebuilt {
    /// Versions handed to the component.
    pub versions: usize,
    /// Records read.
    pub records: u64,
    /// How long it took.
    pub took: Duration,
}

/// `offsets` with the table's stored position carrying the versions its topic holds over the
/// overlap before it (ADR 0030); unchanged when the table has no position yet or no overlap.
pub async fn seeded(spec: &ConnectorSpec, unit: &WorkUnit, mut offsets: Vec<SourceOffset>) -> Result<(Vec<SourceOffset>, Option<Rebuilt>)> {
    let entries: snow_core::config::Entries = unit.config.iter().map(|e| (e.key.clone(), e.value.clone())).collect();
    let config = SourceConfig::parse(&entries).map_err(|e| anyhow::anyhow!("table {}: {e}", unit.name))?;
    let Some(table) = config.tables.first() else { return Ok((offsets, None)) };
    let key = Partition::of(&config.instance.authority, table).key();
    let Some(stored) = offsets.iter_mut().rev().find(|o| o.partition == key) else { return Ok((offsets, None)) };
    // A parallel backfill's slices resume exactly where they stored (no re-read): nothing to seed.
    let (cursor, mut seen) = match Position::parse(&stored.position).map_err(|e| anyhow::anyhow!("table {}: {e}", unit.name))? {
        Position::Cursor(cursor, seen) => (cursor, seen),
        Position::Backfill(_) | Position::Snapshot(_) => return Ok((offsets, None)),
    };
    if config.overlap_seconds == 0 || cursor == Cursor::before(table.start) {
        return Ok((offsets, None));
    }
    let since = cursor.ts.plus_seconds(-i64::from(config.overlap_seconds)).max(table.start);
    let reader = ReadBack {
        config: crate::kafka::admin_config(&spec.kafka),
        topic: table.topic.clone(),
        table: table.name.clone(),
        instance: config.instance.authority.clone(),
        since,
        until: cursor.ts,
        floor: since.plus_seconds(-i64::from(config.overlap_seconds)),
    };
    let started = Instant::now();
    let (found, records) = tokio::task::spawn_blocking(move || reader.read()).await.context("the read-back task failed")??;
    let versions = found.len();
    seen.extend(found);
    stored.position = cursor.to_position_with(&seen);
    Ok((offsets, Some(Rebuilt { versions, records, took: started.elapsed() })))
}

/// A read of one table's records over `[since, until]` from its topic.
///
/// The start cannot be found by timestamp: transaction markers are stamped with the broker's
/// clock, so after a backfill of old rows the first marker is "at or after" any row time. The
/// read goes backwards instead, in chunks that double, until a chunk holds one of this table's
/// records stamped before `floor` (`since − overlap`): a record at that stamp was emitted by a
/// sweep that started at most `overlap` after it, so every record of the table before it was
/// stamped before `since` (ADR 0030).
struct ReadBack {
    config: ClientConfig,
    topic: String,
    table: String,
    instance: String,
    since: Timestamp,
    until: Timestamp,
    floor: Timestamp,
}

/// The first chunk read back, in offsets per partition (each next one doubles).
const FIRST_CHUNK: i64 = 1000;

impl ReadBack {
    /// The versions of this table's committed records stamped in `[since, until]`, and how many
    /// records were read.
    fn read(self) -> Result<(Vec<SeenVersion>, u64)> {
        let consumer = topic_read::consumer(self.config.clone())?;
        let partitions = topic_read::partitions(&consumer, &self.topic)?;
        let deadline = Instant::now() + READ_BACK_LIMIT;
        let (mut found, mut records) = (Vec::new(), 0u64);
        for p in partitions {
            let (low, high) = consumer.fetch_watermarks(&self.topic, p, Duration::from_secs(30)).context("fetching watermarks")?;
            let (mut end, mut chunk) = (high, FIRST_CHUNK);
            while end > low {
                let start = end.saturating_sub(chunk).max(low);
                let (older, read) = self.chunk(&consumer, p, start, end, deadline, &mut found)?;
                records += read;
                if older {
                    break;
                }
                end = start;
                chunk = chunk.saturating_mul(2);
            }
        }
        Ok((found, records))
    }

    /// Reads `[start, end)` of partition `p` (or to its last stable offset, when that comes first);
    /// whether it held one of the table's records stamped before `floor`, and how many it read.
    fn chunk(
        &self,
        consumer: &BaseConsumer<Quiet>,
        p: i32,
        start: i64,
        end: i64,
        deadline: Instant,
        found: &mut Vec<SeenVersion>,
    ) -> Result<(bool, u64)> {
        let mut older = false;
        let read = topic_read::read_range(consumer, &self.topic, (p, start, end), deadline, |message| {
            if let Some((ts, version)) = self.stamp(message) {
                older |= ts < self.floor;
                found.extend(version);
            }
        })
        .with_context(|| format!("the read-back may take {READ_BACK_LIMIT:?}"))?;
        Ok((older, read))
    }

    /// When `message` is one of this table's records: its stamp, and its version when that lies in
    /// `[since, until]`.
    fn stamp(&self, message: &rdkafka::message::BorrowedMessage<'_>) -> Option<(Timestamp, Option<SeenVersion>)> {
        if !topic_read::of_table(message, &self.table, &self.instance) {
            return None;
        }
        let header = |name: &str| topic_read::header(message, name);
        // A delete is stamped with its own time, not by the table's cursor: its stamp says nothing
        // about where the table's records are (the deletes' own position carries their versions).
        if header("snow.source.operation") == Some(b"DELETE".as_slice()) {
            return None;
        }
        match header(crate::source::produce::VERSION_HEADER).and_then(crate::source::produce::parse_version) {
            Some((ts, id, mod_count)) => Some((ts, (self.since..=self.until).contains(&ts).then_some(SeenVersion { ts, id, mod_count }))),
            // A record written at least once (before exactly-once was on) carries no version.
            None => Some((Timestamp(message.timestamp().to_millis()?.div_euclid(1000)), None)),
        }
    }
}
