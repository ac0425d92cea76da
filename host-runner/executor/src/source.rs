//! A Connect source task's tables inside the executor: each unit runs the runtime's one source
//! loop ([`Unit`]: open, poll, retry, trap budget, park, as in our own runtime) with an outlet of
//! its own, which hands its batches — encoded for the plugin — to the task's queue; the plugin
//! takes them one `NEXT` at a time. Connect stores the offsets: a unit reopened after a trap
//! resumes from the last position it handed over (what Connect holds or will hold), and a
//! restarted task from what Connect stored.
//!
//! A record's value travels typed when the component sends the table's schema
//! (`snow.value.schema=dictionary`): as Kafka Connect's JSON envelope (`{"schema": …, "payload": …}`,
//! what `JsonConverter` reads with `schemas.enable=true`), which the plugin reads with Connect's
//! own `JsonConverter`, so the user's converters see exactly what our host's typed records hold.
//! Without a schema it travels as the row's JSON, which the plugin reads into a schemaless map.

use std::time::Instant;

use tokio::sync::mpsc;

use super::frame::Writer;
use snow_data::{Schema, connect_json, snow_text};
use snow_runtime::component::HostState;
use snow_runtime::component::bindings::source::SourcePre;
use snow_runtime::component::bindings::types::{PollBatch, SourceOffset, WorkUnit};
use snow_runtime::component::swap::Versions;
use snow_runtime::connector::SharedContext;
use snow_runtime::shutdown::Shutdown;
use snow_runtime::source::produce::{bytes, record_headers};
use snow_runtime::source::{Flow, OpenFailure, Outlet, Polled, Table, Unit};

/// What a unit hands the task's queue.
pub enum Handed {
    /// A batch, encoded for the plugin.
    Batch(Vec<u8>),
    /// The unit stopped for good, with why (the task fails with it).
    Parked(String),
}

/// Runs `unit` — the runtime's one source loop ([`Unit`]) — until `shutdown` or it parks,
/// handing its batches to `queue`; it opens at `offsets` and, after a trap, at the last
/// position it handed over.
pub async fn run_unit(
    ctx: SharedContext,
    pre: SourcePre<HostState>,
    unit: WorkUnit,
    offsets: Vec<SourceOffset>,
    queue: mpsc::Sender<Handed>,
    shutdown: Shutdown,
) {
    let topics = snow_runtime::source::allowed_topics(&ctx);
    // One version: Connect's plugin restarts its executors to run another.
    let version = Versions::new(pre, "", &ctx.spec.component_path.display().to_string()).watch();
    let outlet = ToConnect { queue, offsets, typed: None };
    Unit::new(Table { ctx, unit, shutdown }, version, topics, None, outlet).run().await;
}

/// A unit's way to Connect: the task's queue, which the plugin takes one `NEXT` at a time.
struct ToConnect {
    queue: mpsc::Sender<Handed>,
    /// The last position handed over per partition (what Connect holds or will hold).
    offsets: Vec<SourceOffset>,
    /// The table's value schema, once the component sent it.
    typed: Option<Schema>,
}

impl Outlet for ToConnect {
    const HANDED: &'static str = "handed to Connect";
    const POSITIONS: &'static str = "the last position handed to Connect";

    async fn positions(&mut self, _: &Table) -> Result<Vec<SourceOffset>, OpenFailure> {
        Ok(self.offsets.clone())
    }

    fn start(&mut self, _: &Table) {}

    fn failed(&mut self, _: &Table) -> Option<Flow> {
        // Connect reports what it failed to write by failing the task.
        None
    }

    fn last_handed(&self) -> Option<Instant> {
        None
    }

    async fn deliver(&mut self, t: &Table, batch: PollBatch, polled: &Polled) -> Flow {
        let encoded = match encode(&t.ctx, &t.unit, &batch, &mut self.typed, polled.budget.as_deref()) {
            Ok(encoded) => encoded,
            Err(why) => return Flow::Park(why),
        };
        let Some(encoded) = encoded else { return Flow::Next };
        if self.queue.send(Handed::Batch(encoded)).await.is_err() {
            return Flow::Stop;
        }
        if let Some(offset) = batch.offset {
            self.offsets.retain(|o| o.partition != offset.partition);
            self.offsets.push(offset);
        }
        Flow::Next
    }

    async fn settle(&mut self, _: &Table) {}

    async fn parked(&mut self, t: &Table, why: &str) {
        let _ = self.queue.send(Handed::Parked(format!("table {}: {why}", t.unit.name))).await;
    }
}

/// The batch as the plugin reads it (`None`: nothing to hand over — no record, no new position,
/// no notice). The loop has checked it (well formed, to a configured topic).
///
/// Layout: unit, partition, position (nullable), topic, notice (nullable), the batch's headers
/// (count, then name and nullable value each), the records (count, then per record: the key
/// nullable, the value as it travels ([`Travels`]), timestamp or `i64::MIN`, its own headers as
/// the batch's).
fn encode(
    ctx: &SharedContext,
    unit: &WorkUnit,
    batch: &PollBatch,
    typed: &mut Option<Schema>,
    budget: Option<&str>,
) -> Result<Option<Vec<u8>>, String> {
    let notice: Vec<&str> = [batch.notice.as_deref(), budget].into_iter().flatten().collect();
    if batch.records.is_empty() && notice.is_empty() {
        // A position with no record cannot be stored by Connect (no record carries it): it goes
        // with the next batch's records, and a restart before them re-reads an empty range.
        return Ok(None);
    }
    if let Some(text) = &batch.value_schema {
        *typed = connect_json::schema_from_text(text).map_err(|e| format!("the component sent a value schema Connect cannot read: {e}"))?;
    }
    let skip = ctx.spec.guest_config.get("snow.bad.row.behavior").is_some_and(|b| b.trim() == "skip");
    let mut w = Writer::default();
    w.str(&unit.name);
    w.str(batch.offset.as_ref().map_or("", |o| o.partition.as_str()));
    w.opt(batch.offset.as_ref().map(|o| o.position.as_bytes()));
    w.str(&batch.topic);
    let notice = notice.join("; ");
    w.opt((!notice.is_empty()).then_some(notice.as_bytes()));
    w.u16(batch.headers.len() as u16);
    for h in &batch.headers {
        w.str(&h.key);
        w.opt(Some(&h.value));
    }
    let mut kept = Vec::with_capacity(batch.records.len());
    for r in &batch.records {
        let (key, value) = (r.key.and_then(|k| bytes(batch, k)), r.value.and_then(|v| bytes(batch, v)));
        match envelope(value, typed.as_ref()) {
            Ok(envelope) => kept.push((r, key, envelope)),
            Err(why) => {
                let id = key.map(String::from_utf8_lossy).unwrap_or_default();
                if !skip {
                    return Err(format!("row {id} does not fit its schema: {why} (snow.bad.row.behavior=skip would skip it)"));
                }
                tracing::warn!(connector = %ctx.name(), unit = %unit.name, "skipped row {id}: {why}");
            }
        }
    }
    w.u32(kept.len() as u32);
    for (r, key, envelope) in kept {
        w.opt(key);
        envelope.write(&mut w);
        w.i64(r.timestamp_ms.unwrap_or(i64::MIN));
        let headers = record_headers(batch, r);
        w.u16(headers.len() as u16);
        for (name, value) in headers {
            w.str(&name);
            w.opt(value);
        }
    }
    Ok(Some(w.bytes))
}

/// How a record's value travels to the plugin.
#[derive(Debug, PartialEq, Eq)]
enum Travels<'a> {
    /// A tombstone.
    Null,
    /// The row as the component wrote it: schemaless JSON, read straight into a map.
    Plain(&'a [u8]),
    /// Connect's JSON envelope of the row typed by its schema, read by Connect's `JsonConverter`.
    Typed(Vec<u8>),
}

impl Travels<'_> {
    /// Its tag and bytes in a batch (0 null, 1 plain JSON, 2 Connect's envelope).
    fn write(&self, w: &mut Writer) {
        match self {
            Travels::Null => w.bytes.push(0),
            Travels::Plain(row) => {
                w.bytes.push(1);
                w.opt(Some(row));
            }
            Travels::Typed(envelope) => {
                w.bytes.push(2);
                w.opt(Some(envelope));
            }
        }
    }
}

/// A row as it travels: typed by `schema` into Connect's JSON envelope, or as it is.
fn envelope<'a>(value: Option<&'a [u8]>, schema: Option<&Schema>) -> Result<Travels<'a>, String> {
    let Some(row) = value else { return Ok(Travels::Null) };
    match schema {
        None => Ok(Travels::Plain(row)),
        Some(schema) => {
            let (typed, _dropped) = snow_text::row(row, schema).map_err(|e| e.to_string())?;
            let envelope = connect_json::encode(Some(schema), &typed, true).map_err(|e| e.to_string())?;
            Ok(envelope.map_or(Travels::Null, Travels::Typed))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_travels_typed_as_connects_json_envelope_or_as_it_is() {
        let row = br#"{"sys_id":"a1","n":"7"}"#;
        assert_eq!(envelope(Some(row), None).unwrap(), Travels::Plain(row));
        let schema = connect_json::schema_from_text(
            r#"{"type":"struct","optional":false,"fields":[{"field":"sys_id","type":"string","optional":false},{"field":"n","type":"int64","optional":true}]}"#,
        )
        .unwrap()
        .unwrap();
        let Travels::Typed(bytes) = envelope(Some(row), Some(&schema)).unwrap() else { panic!("typed") };
        let typed: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(typed["payload"], serde_json::json!({"sys_id": "a1", "n": 7}));
        assert_eq!(typed["schema"]["fields"][1]["type"], "int64");
        assert_eq!(envelope(None, Some(&schema)).unwrap(), Travels::Null, "a tombstone stays null");
    }
}
