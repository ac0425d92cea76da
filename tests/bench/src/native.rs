//! (b) The source path without wasm: snow-core's `SourceTask` over the native transport, records
//! queued with the host's own `enqueue` and acknowledged through the host's `Pipeline`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use snow_core::clock::SystemClock;
use snow_core::config::reader::entries_from_pairs;
use snow_core::http::native::NativeTransport;
use snow_core::source::SourceTask;
use snow_runtime::component::bindings::types::{Header, HeaderSpan, PollBatch, SourceOffset, SourceRecord, Span};
use snow_runtime::kafka::KafkaSpec;
use snow_runtime::metrics::Metrics;
use snow_runtime::offsets::FileOffsetStore;
use snow_runtime::source::pipeline::{Acks, Owner, Pending, Pipeline};
use snow_runtime::source::produce::enqueue;
use snow_runtime::status::StatusBoard;

use crate::measure::Outcome;

/// A snow-core batch in the shape the host's producer code takes (what lifting it out of the
/// guest builds in the wasm path).
fn to_host(b: snow_core::record::PollBatch) -> PollBatch {
    let span = |s: snow_core::record::Span| Span { start: s.start, len: s.len };
    PollBatch {
        topic: b.topic,
        headers: b.headers.into_iter().map(|h| Header { key: h.key, value: h.value }).collect(),
        data: b.data,
        extra: b.extra,
        record_headers: b.record_headers.into_iter().map(|h| HeaderSpan { key: span(h.key), value: span(h.value) }).collect(),
        records: b
            .records
            .into_iter()
            .map(|r| SourceRecord {
                key: r.key.map(span),
                value: r.value.map(span),
                headers: span(r.headers),
                timestamp_ms: r.timestamp_ms,
            })
            .collect(),
        offset: b.offset.map(|o| SourceOffset { partition: o.partition, position: o.position }),
        next_poll_ms: b.next_poll_ms,
        notice: b.notice,
        value_schema: b.value_schema,
    }
}

/// Reads `rows` rows of table incident from `fake` into `topic`.
pub async fn run(fake: &str, bootstrap: &str, topic: &str, rows: u64) -> Result<Outcome> {
    let started = Instant::now();
    let entries = entries_from_pairs([
        ("snow.instance.url", fake),
        ("snow.tables", "incident"),
        ("snow.table.incident.topic", topic),
        ("snow.batch.size", "1000"),
    ])
    .map_err(|e| anyhow!("{e}"))?;
    let mut task = SourceTask::open(&entries, &[], NativeTransport::default(), SystemClock::default()).map_err(|e| anyhow!("{e}"))?;
    let spec = KafkaSpec { bootstrap_servers: bootstrap.to_string(), ..Default::default() };
    let producer = snow_runtime::kafka::producer(&spec)?;
    let offsets_file = std::env::temp_dir().join(format!("snow-bench-native-{}.json", std::process::id()));
    let offsets = Arc::new(FileOffsetStore::open(&offsets_file)?);
    let mut pipeline = Pipeline::start(Owner {
        connector: "bench-native".into(),
        table: "incident".into(),
        offsets,
        metrics: Metrics::default(),
        status: StatusBoard::default(),
    });
    let (mut produced, mut first, mut reads, mut enqueues) = (0u64, None, Vec::new(), Vec::new());
    while produced < rows {
        let read = Instant::now();
        let batch = to_host(tokio::task::block_in_place(|| task.poll()).map_err(|e| anyhow!("{e}"))?);
        let Some(offset) = batch.offset.clone() else {
            if batch.next_poll_ms > 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            continue;
        };
        reads.push(read.elapsed());
        first.get_or_insert_with(Instant::now);
        let queued = Instant::now();
        let deliveries = enqueue(&producer, &batch, None, false).await?;
        enqueues.push(queued.elapsed());
        pipeline
            .submit(Pending { acks: Acks::Deliveries(deliveries), partition: offset.partition, position: offset.position })
            .await
            .map_err(|e| anyhow!(e))?;
        produced += batch.records.len() as u64;
    }
    pipeline.finish().await.map_err(|e| anyhow!(e))?;
    let _ = std::fs::remove_file(&offsets_file);
    let c = task.counters();
    let ms = |us: u64| Duration::from_micros(us);
    let phases = Some((ms(c.request_micros), ms(c.parse_micros), ms(c.build_micros)));
    Ok(Outcome::of_this_process(produced, started, first, &mut reads, &mut enqueues, phases))
}
