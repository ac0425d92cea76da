//! Where a unit of our own runtime hands its batches: Kafka. Each batch's records are converted
//! (the user's converters and transforms), queued to the producer — or, exactly once, committed
//! in a transaction with their offset — and handed to the instance's [`Pipeline`], which stores
//! the last record's offset once Kafka acknowledged all of them; meanwhile the next page is
//! already being read. A fresh instance opens at the stored offset (rebuilt for exactly once,
//! seeded for a snapshot table): after a Kafka failure the records after it are read again.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::producer::FutureProducer;

use super::budget::RefusalBudget;
use super::exactly_once::table::{ExactlyOnce, Unavailable};
use super::exactly_once::transactions::{OffsetRecord, Records, Transactions};
use super::pipeline::{Acks, Owner, Pending, Pipeline};
use super::produce::{Converted, Made, ProduceFailure, bytes, enqueue};
use super::unit::{Flow, OpenFailure, Outlet, Polled, Table};
use crate::component::bindings::types::{ErrorClass, PollBatch, SourceOffset};
use crate::convert::source::{RowProblem, SourceConverters};
use crate::metrics::labels;
use crate::offsets::OffsetStore;
use crate::status::UnitState;
use snow_data::transform::{Chain, Header, Record};
use snow_data::{Kind, Schema, Value};

/// Longest wait for outstanding acknowledgements when a unit stops or reopens.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A unit's way to Kafka.
pub struct ToKafka {
    offsets: Arc<dyn OffsetStore>,
    producer: FutureProducer,
    /// The topics this unit has said it uses (once each, [`crate::status::StatusBoard::topic_used`]).
    announced: BTreeSet<String>,
    /// The user's key and value converters, with the table schema they last registered.
    converters: SourceConverters,
    /// The topics `topic.creation.*` has made sure of (created, or found existing).
    created: BTreeSet<String>,
    /// Exactly-once mode: where the table's transactions come from (`None`: at-least-once).
    exactly_once: Option<ExactlyOnce>,
    /// Kafka refusing the same record for good, counted across instances.
    refusals: RefusalBudget,
    /// Exactly-once: the producer the current instance's polls commit through.
    transactions: Option<Arc<Transactions>>,
    /// The current instance's records on their way, in order.
    pipeline: Option<Pipeline>,
    /// When the current instance's latest records were queued to Kafka.
    last_enqueued: Option<Instant>,
}

/// Why a record could not be made.
enum Failure {
    /// Its row (`snow.bad.row.behavior`) or the converters (stop).
    Row(RowProblem),
    /// A transform failed (`errors.tolerance`).
    Transform(String),
    /// Something that passes by itself (the broker refused to create a routed topic for now):
    /// reopen at the stored offset and try again.
    Retry(String),
}

/// Why a batch's records could not be converted.
enum Halt {
    /// Stop the table, with why.
    Park(String),
    /// Reopen at the stored offset after a pause, with why.
    Retry(String),
}

impl From<crate::convert::source::TableFailure> for Halt {
    fn from(f: crate::convert::source::TableFailure) -> Self {
        if f.retry { Halt::Retry(f.message) } else { Halt::Park(f.message) }
    }
}

impl ToKafka {
    /// A unit's way to Kafka through `producer`, storing its offsets in `offsets`.
    pub fn new(
        ctx: &crate::connector::SharedContext,
        offsets: Arc<dyn OffsetStore>,
        producer: FutureProducer,
        exactly_once: Option<ExactlyOnce>,
    ) -> Self {
        Self {
            offsets,
            producer,
            announced: BTreeSet::new(),
            converters: SourceConverters::new(ctx.spec.convert.clone()),
            created: BTreeSet::new(),
            exactly_once,
            refusals: RefusalBudget::new(ctx.spec.trap_budget),
            transactions: None,
            pipeline: None,
            last_enqueued: None,
        }
    }
}

impl Outlet for ToKafka {
    const HANDED: &'static str = "produced";
    const POSITIONS: &'static str = "the stored offset";

    async fn positions(&mut self, t: &Table) -> Result<Vec<SourceOffset>, OpenFailure> {
        self.transactions = self.fence(t).await?;
        let mut offsets: Vec<SourceOffset> =
            self.offsets.load(t.ctx.name()).into_iter().map(|(partition, position)| SourceOffset { partition, position }).collect();
        if self.transactions.is_some() {
            offsets = rebuilt(t, offsets).await?;
        }
        snapshot_seeded(t, offsets).await
    }

    fn start(&mut self, t: &Table) {
        let depth = if self.transactions.is_some() { super::pipeline::TRANSACTION_DEPTH } else { super::pipeline::DEPTH };
        let owner = Owner {
            connector: t.ctx.name().to_string(),
            table: t.unit.name.clone(),
            offsets: self.offsets.clone(),
            metrics: t.ctx.metrics.clone(),
            status: t.ctx.status.clone(),
        };
        self.pipeline = Some(Pipeline::start_with_depth(owner, depth));
        self.last_enqueued = None;
    }

    fn failed(&mut self, t: &Table) -> Option<Flow> {
        let failure = self.pipeline.as_ref()?.failure().err()?;
        Some(self.produce_failed(t, &failure))
    }

    fn last_handed(&self) -> Option<Instant> {
        self.last_enqueued
    }

    async fn deliver(&mut self, t: &Table, batch: PollBatch, polled: &Polled) -> Flow {
        if !batch.records.is_empty()
            && let Err(why) = self.create_topic(t, &batch.topic).await
        {
            tracing::warn!(connector = %t.ctx.name(), unit = %t.unit.name, "{why}; trying again");
            t.state(UnitState::Retrying, Some(&why));
            return Flow::Reopen;
        }
        if let Some(schema) = &batch.value_schema
            && let Err(failure) = self.converters.schema(&batch.topic, schema).await
        {
            if failure.retry {
                tracing::warn!(connector = %t.ctx.name(), unit = %t.unit.name, "{}; trying again", failure.message);
                t.state(UnitState::Retrying, Some(&failure.message));
                return Flow::Reopen;
            }
            return Flow::Park(failure.message);
        }
        let converted = match self.convert(t, &batch).await {
            Ok(c) => c,
            Err(Halt::Park(why)) => return Flow::Park(why),
            Err(Halt::Retry(why)) => {
                tracing::warn!(connector = %t.ctx.name(), unit = %t.unit.name, "{why}; trying again");
                t.state(UnitState::Retrying, Some(&why));
                return Flow::Reopen;
            }
        };
        let Some(offset) = batch.offset.clone() else { return Flow::Next };
        let connector = t.ctx.name();
        let enqueued = Instant::now();
        let (topic, records) = (batch.topic.clone(), batch.records.len());
        let acks = match &self.transactions {
            Some(transactions) => {
                let (key, value) = crate::offsets::kafka::record(connector, &offset.partition, &offset.position);
                let job = Records { batch, converted };
                // The queue is full while Kafka is away: a shutdown must still get through.
                let mut shutdown = t.shutdown.clone();
                tokio::select! {
                    answer = transactions.submit(Some(job), OffsetRecord { key, value: Some(value) }) => Acks::Committed(answer),
                    () = shutdown.wait() => return Flow::Stop,
                }
            }
            None => match enqueue(&self.producer, &batch, converted.as_deref(), false).await {
                Ok(d) => Acks::Deliveries(d),
                Err(failure) => return self.produce_failed(t, &failure),
            },
        };
        if !self.announced.contains(&topic) {
            t.ctx.status.topic_used(connector, &t.unit.name, &topic);
            self.announced.insert(topic);
        }
        let enqueue_time = enqueued.elapsed();
        self.last_enqueued = Some(Instant::now());
        let pending = Pending { acks, partition: offset.partition, position: offset.position };
        let submitted = Instant::now();
        let Some(pipeline) = self.pipeline.as_mut() else { return Flow::Reopen };
        // While Kafka is away the pipeline is full and this waits: a shutdown must still get through.
        let mut shutdown = t.shutdown.clone();
        let submitted_or_stopped = tokio::select! {
            submitted = pipeline.submit(pending) => Some(submitted),
            () = shutdown.wait() => None,
        };
        match submitted_or_stopped {
            None => return Flow::Stop,
            Some(Err(failure)) => return self.produce_failed(t, &failure),
            Some(Ok(())) => {}
        }
        tracing::trace!(
            connector = %connector,
            unit = %t.unit.name,
            records,
            poll_us = polled.took.as_micros() as u64,
            enqueue_us = enqueue_time.as_micros() as u64,
            wait_us = submitted.elapsed().as_micros() as u64,
            "poll timings"
        );
        Flow::Next
    }

    async fn parked(&mut self, _: &Table, _: &str) {
        // The status board and the log say it; the records already handed over still settle.
    }

    async fn settle(&mut self, t: &Table) {
        let Some(pipeline) = self.pipeline.take() else { return };
        let (connector, table) = (t.ctx.name(), t.unit.name.as_str());
        // Store the offsets of everything already acknowledged; never hang on a dead broker.
        match tokio::time::timeout(SETTLE_TIMEOUT, pipeline.finish()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(connector = %connector, unit = %table, "{e}; what follows the stored offset will be read again"),
            Err(_) => tracing::warn!(
                connector = %connector,
                unit = %table,
                "records still unacknowledged after {SETTLE_TIMEOUT:?}; they will be read again"
            ),
        }
    }
}

impl ToKafka {
    /// Exactly-once: the producer to commit through, earlier ones fenced. `requested` falls back
    /// to at-least-once (saying why) when the broker refuses transactions; `required` parks.
    async fn fence(&mut self, t: &Table) -> Result<Option<Arc<Transactions>>, OpenFailure> {
        let Some(eos) = self.exactly_once.as_mut() else { return Ok(None) };
        match eos.transactions().await {
            Ok(transactions) => Ok(Some(transactions)),
            Err(Unavailable::Transient(why)) => Err(OpenFailure::Refused(ErrorClass::Transient, format!("exactly-once: {why}"))),
            Err(Unavailable::Refused(why)) if t.ctx.spec.exactly_once == crate::config::exactly_once::ExactlyOnce::Required => Err(
                OpenFailure::Refused(ErrorClass::Fatal, format!("exactly.once.support=required, but Kafka refuses transactions: {why}")),
            ),
            Err(Unavailable::Refused(why)) => {
                let message = format!(
                    "exactly.once.support=requested, but Kafka refuses transactions ({why}): this table runs at-least-once (docs/delivery.md)"
                );
                tracing::warn!(connector = %t.ctx.name(), unit = %t.unit.name, "{message}");
                t.state(UnitState::Starting, Some(&message));
                self.exactly_once = None;
                Ok(None)
            }
        }
    }

    /// After Kafka failed this unit's records: reopen at the stored offset, or park once the same
    /// record was refused for good `component.trap.budget` times in a row.
    fn produce_failed(&mut self, t: &Table, failure: &ProduceFailure) -> Flow {
        let (connector, table) = (t.ctx.name(), t.unit.name.as_str());
        if let ProduceFailure::Fenced(why) = failure {
            // A fleet's slot stops its units itself; standalone, another process took the table.
            if t.shutdown.is_stopping() {
                return Flow::Stop;
            }
            return Flow::Park(format!("table {table}: {why}"));
        }
        if let ProduceFailure::Refused(refusal) = failure {
            t.ctx.metrics.counter_add("snow_source_kafka_refusals_total", 1, &labels(&[("connector", connector), ("table", table)]));
            if let Some(why) = self.refusals.refused(&refusal.sys_id, &format!("table {table}: {refusal}")) {
                return Flow::Park(why);
            }
        }
        tracing::error!(connector = %connector, unit = %table, "{failure}; reopening at the stored offset");
        t.state(UnitState::Retrying, Some(&failure.to_string()));
        Flow::Reopen
    }

    /// Creates `topic` as `topic.creation.*` says, once, before its first record.
    async fn create_topic(&mut self, t: &Table, topic: &str) -> Result<(), String> {
        let Some(creation) = t.ctx.spec.topic_creation.clone() else { return Ok(()) };
        if self.created.contains(topic) {
            return Ok(());
        }
        let group = creation.group_of(topic);
        let outcome = super::create_topic::ensure(&t.ctx.spec.kafka, group, topic).await?;
        if outcome == super::create_topic::Outcome::Created {
            tracing::info!(
                connector = %t.ctx.name(),
                unit = %t.unit.name,
                "created topic {topic} (topic.creation group {}: {} partitions, replication factor {})",
                group.name,
                group.partitions,
                group.replication
            );
        }
        self.created.insert(topic.to_string());
        Ok(())
    }

    /// The batch's records as the user's converters and transforms make them; `None` when
    /// neither is configured (the component's bytes go out as they are).
    async fn convert(&mut self, t: &Table, batch: &PollBatch) -> Result<Option<Vec<Converted>>, Halt> {
        let chain = t.ctx.spec.transforms.clone();
        if (!self.converters.active() && chain.is_none()) || batch.records.is_empty() {
            return Ok(None);
        }
        if chain.is_none() {
            self.converters.key_schema(&batch.topic).await.map_err(Halt::from)?;
        }
        let skip = t.ctx.spec.guest_config.get("snow.bad.row.behavior").is_some_and(|b| b.trim() == "skip");
        let tolerate = t.ctx.spec.sink.tolerate_record_errors;
        let (connector, table) = (t.ctx.name().to_string(), t.unit.name.clone());
        let series = labels(&[("connector", &connector), ("table", &table)]);
        let mut out = Vec::with_capacity(batch.records.len());
        for r in &batch.records {
            let (key, value) = (r.key.and_then(|k| bytes(batch, k)), r.value.and_then(|v| bytes(batch, v)));
            let sys_id = key.map(String::from_utf8_lossy).unwrap_or_default().into_owned();
            let made = match &chain {
                None => self
                    .converters
                    .record(key, value)
                    .map(|(key, value, dropped)| (vec![Made { key, value, ..Made::default() }], dropped))
                    .map_err(Failure::Row),
                Some(chain) => self.transformed(t, chain, batch, r, key, value).await,
            };
            match made {
                Ok((made, dropped)) => {
                    for field in dropped {
                        tracing::warn!(connector = %connector, unit = %table, "field {field} of table {table} is not in its dictionary (or not a column): it is left out of typed records");
                        t.ctx.metrics.counter_add("snow_source_fields_dropped_total", 1, &series);
                    }
                    out.push(made);
                }
                Err(Failure::Row(RowProblem::Bad(why))) if skip => {
                    tracing::warn!(connector = %connector, unit = %table, "skipped row {sys_id}: {why}");
                    t.ctx.metrics.counter_add("snow_source_bad_rows_total", 1, &series);
                    out.push(Vec::new());
                }
                Err(Failure::Row(RowProblem::Bad(why))) => {
                    return Err(Halt::Park(format!(
                        "table {table}: row {sys_id} does not fit its schema: {why} (snow.bad.row.behavior=skip would skip it)"
                    )));
                }
                Err(Failure::Row(RowProblem::Stop(why))) => {
                    return Err(Halt::Park(format!("table {table}: converting row {sys_id} failed: {why}")));
                }
                Err(Failure::Row(RowProblem::Retry(why))) => return Err(Halt::Retry(format!("table {table}: row {sys_id}: {why}"))),
                Err(Failure::Retry(why)) => return Err(Halt::Retry(format!("table {table}: row {sys_id}: {why}"))),
                Err(Failure::Transform(why)) if tolerate => {
                    tracing::warn!(connector = %connector, unit = %table, "skipped row {sys_id} (errors.tolerance=all): {why}");
                    t.ctx.metrics.counter_add("snow_source_transform_failures_total", 1, &series);
                    out.push(Vec::new());
                }
                Err(Failure::Transform(why)) => {
                    return Err(Halt::Park(format!("table {table}: row {sys_id}: {why} (errors.tolerance=all would skip it)")));
                }
            }
        }
        Ok(Some(out))
    }

    /// One record through the connector's transforms (Connect's record: the sys_id as a string
    /// key, the row typed or schemaless, the batch's and the record's headers as strings), then
    /// its converters: none when a transform drops it, several when a transform component makes
    /// several. A routed topic is created as
    /// `topic.creation.*` says; the worker's offsets topic is refused as a destination.
    async fn transformed(
        &mut self,
        t: &Table,
        chain: &Chain,
        batch: &PollBatch,
        r: &crate::component::bindings::types::SourceRecord,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<(Vec<Made>, Vec<String>), Failure> {
        let (value_schema, value, dropped) = self.converters.connect_value(value).map_err(Failure::Row)?;
        let key = key.map(|k| String::from_utf8_lossy(k).into_owned());
        let text = |b: Option<&[u8]>| b.map_or(Value::Null, |b| Value::String(String::from_utf8_lossy(b).into_owned()));
        let string = || Some(Schema::new(Kind::String).optional());
        let mut headers: Vec<Header> =
            batch.headers.iter().map(|h| Header { key: h.key.clone(), schema: string(), value: text(Some(&h.value)) }).collect();
        for h in super::produce::record_headers(batch, r) {
            headers.push(Header { key: h.0, schema: string(), value: text(h.1) });
        }
        let record = Record {
            topic: batch.topic.clone(),
            partition: None,
            offset: None,
            key_schema: key.as_ref().map(|_| Schema::new(Kind::String)),
            key: key.map_or(Value::Null, Value::String),
            value_schema,
            value,
            timestamp: r.timestamp_ms,
            headers,
        };
        let outs = chain.apply(record).await.map_err(|e| Failure::Transform(e.to_string()))?;
        let mut made = Vec::with_capacity(outs.len());
        for out in outs {
            made.push(self.made(t, batch, out).await?);
        }
        Ok((made, dropped))
    }

    /// A transformed record as produced: its topic created (or refused), its key and value through
    /// the converters, its headers as bytes.
    async fn made(&mut self, t: &Table, batch: &PollBatch, out: Record) -> Result<Made, Failure> {
        let routed = (out.topic != batch.topic).then(|| out.topic.clone());
        if let Some(topic) = &routed {
            if t.ctx.spec.offsets_topic.as_ref().is_some_and(|t| &t.name == topic) {
                return Err(Failure::Row(RowProblem::Stop(format!(
                    "a transform routed the record to {topic}, the worker's offsets topic"
                ))));
            }
            if t.ctx.spec.reserved_topics.contains(topic) {
                return Err(Failure::Row(RowProblem::Stop(format!(
                    "a transform routed the record to {topic}, one of the fleet's own state topics"
                ))));
            }
            self.create_topic(t, topic).await.map_err(Failure::Retry)?;
        }
        let (key, value) = self.converters.encode_record(&out).await.map_err(Failure::Row)?;
        let header_bytes = |v: &Value| match v {
            Value::Null => None,
            Value::String(s) => Some(s.clone().into_bytes()),
            other => Some(snow_data::snow_text::to_json(other).to_string().into_bytes()),
        };
        let headers = out.headers.iter().map(|h| (h.key.clone(), header_bytes(&h.value))).collect();
        Ok(Made { key, value, topic: routed, headers: Some(headers) })
    }
}

/// The stored offsets with this table's position carrying the versions its topic already
/// holds over the overlap (ADR 0030).
async fn rebuilt(t: &Table, offsets: Vec<SourceOffset>) -> Result<Vec<SourceOffset>, OpenFailure> {
    match super::exactly_once::table::seeded(&t.ctx.spec, &t.unit, offsets).await {
        Ok((offsets, rebuilt)) => {
            if let Some(r) = rebuilt {
                tracing::info!(
                    connector = %t.ctx.name(),
                    unit = %t.unit.name,
                    versions = r.versions,
                    records = r.records,
                    ms = r.took.as_millis() as u64,
                    "dedup window rebuilt from the topic: {} versions of {} records read back in {} ms",
                    r.versions,
                    r.records,
                    r.took.as_millis()
                );
            }
            Ok(offsets)
        }
        Err(e) => Err(OpenFailure::Refused(ErrorClass::Transient, format!("exactly-once: rebuilding the dedup window: {e:#}"))),
    }
}

/// The stored offsets with what a snapshot table's topic holds (ADR 0035); unchanged for a
/// table read along its cursor.
async fn snapshot_seeded(t: &Table, offsets: Vec<SourceOffset>) -> Result<Vec<SourceOffset>, OpenFailure> {
    match super::snapshot_seed::seeded(&t.ctx.spec, &t.unit, offsets).await {
        Ok((offsets, seeded)) => {
            if let Some(s) = seeded {
                tracing::info!(
                    connector = %t.ctx.name(),
                    unit = %t.unit.name,
                    keys = s.keys,
                    records = s.records,
                    ms = s.took.as_millis() as u64,
                    "snapshot table: its topic holds {} keys ({} records read back in {} ms)",
                    s.keys,
                    s.records,
                    s.took.as_millis()
                );
                if s.unmarked > 0 {
                    tracing::warn!(
                        connector = %t.ctx.name(),
                        unit = %t.unit.name,
                        "{} records of the table on its topic carry no {} header (written in cursor mode, or a \
                         transform dropped it): the rows they hold are emitted again by the next snapshot, and a \
                         transform that drops the header makes every snapshot emit every row",
                        s.unmarked,
                        snow_core::source::snapshot::ID_HEADER
                    );
                }
            }
            Ok(offsets)
        }
        Err(e) => Err(OpenFailure::Refused(ErrorClass::Transient, format!("snapshot mode: reading back the topic's keys: {e:#}"))),
    }
}
