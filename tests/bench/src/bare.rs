//! (c) The practical limit of this machine: no cursor, no dedup, no headers. Keep-alive GET of
//! pages by sys_id, raw row parse, produce with the same producer settings and acknowledgement
//! pipeline as the connector, and the same read-ahead (the next page is requested before this
//! one is produced).

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, anyhow, bail};
use snow_core::http::native::NativeTransport;
use snow_core::http::transport::Timeouts;
use snow_core::http::url::encode;
use snow_core::http::{Method, Request, Transport};
use snow_core::table::parse_page;
use snow_runtime::component::bindings::types::{PollBatch, SourceRecord, Span};
use snow_runtime::kafka::KafkaSpec;
use snow_runtime::metrics::Metrics;
use snow_runtime::offsets::OffsetStore;
use snow_runtime::source::pipeline::{Acks, Owner, Pending, Pipeline};
use snow_runtime::source::produce::enqueue;
use snow_runtime::status::StatusBoard;

use crate::measure::Outcome;

/// Offsets are connector logic: the bare pipeline stores none.
struct NoOffsets;

impl OffsetStore for NoOffsets {
    fn load(&self, _connector: &str) -> Vec<(String, String)> {
        Vec::new()
    }
    fn commit(&self, _connector: &str, _partition: &str, _position: &str) -> Result<()> {
        Ok(())
    }
}

/// Reads `rows` rows of table incident from `fake` into `topic`, 1,000 per page.
pub async fn run(fake: &str, bootstrap: &str, topic: &str, rows: u64) -> Result<Outcome> {
    let started = Instant::now();
    let spec = KafkaSpec { bootstrap_servers: bootstrap.to_string(), ..Default::default() };
    let producer = snow_runtime::kafka::producer(&spec)?;
    let mut pipeline = Pipeline::start(Owner {
        connector: "bench-bare".into(),
        table: "incident".into(),
        offsets: Arc::new(NoOffsets),
        metrics: Metrics::default(),
        status: StatusBoard::default(),
    });
    let mut transport = NativeTransport::default();
    let (mut produced, mut after, mut first, mut reads, mut enqueues) = (0u64, String::new(), None, Vec::new(), Vec::new());
    let request = |after: &str| {
        let query = if after.is_empty() { "ORDERBYsys_id".to_string() } else { format!("sys_id>{after}^ORDERBYsys_id") };
        Request {
            method: Method::Get,
            url: format!("{fake}/api/now/table/incident?sysparm_query={}&sysparm_limit=1000&sysparm_no_count=true", encode(&query)),
            headers: vec![("accept".into(), "application/json".into())],
            body: Vec::new(),
            timeouts: Timeouts { connect_ms: 10_000, first_byte_ms: 60_000, body_ms: 60_000 },
            max_response_bytes: 256 << 20,
        }
    };
    while produced < rows {
        let read = Instant::now();
        let response = tokio::task::block_in_place(|| transport.send(&request(&after))).map_err(|e| anyhow!("{e}"))?;
        if response.status != 200 {
            bail!("the fake answered {}", response.status);
        }
        let page = parse_page(&response.body, "sys_id", "sys_updated_on").map_err(|e| anyhow!(e))?;
        let Some(last) = page.last() else { break };
        after = last.id.as_deref().unwrap_or_default().to_string();
        let more = page.len() >= 1000;
        if more {
            // The same read-ahead as the connector: the next page is on its way while this one is produced.
            transport.start(&request(&after));
        }
        // Keys and values as ranges of the page, as the connector carries them.
        let at = |part: &[u8]| Span { start: (part.as_ptr() as usize - response.body.as_ptr() as usize) as u32, len: part.len() as u32 };
        let records: Vec<SourceRecord> = page
            .iter()
            .map(|row| SourceRecord {
                key: row.id.as_deref().map(|id| at(id.as_bytes())),
                value: Some(at(row.raw)),
                headers: Span { start: 0, len: 0 },
                timestamp_ms: None,
            })
            .collect();
        drop(page);
        let batch = PollBatch {
            topic: topic.to_string(),
            headers: Vec::new(),
            data: response.body,
            extra: Vec::new(),
            record_headers: Vec::new(),
            records,
            offset: None,
            next_poll_ms: 0,
            notice: None,
            value_schema: None,
        };
        reads.push(read.elapsed());
        first.get_or_insert_with(Instant::now);
        let queued = Instant::now();
        let deliveries = enqueue(&producer, &batch, None, false).await?;
        enqueues.push(queued.elapsed());
        pipeline
            .submit(Pending { acks: Acks::Deliveries(deliveries), partition: String::new(), position: String::new() })
            .await
            .map_err(|e| anyhow!(e))?;
        produced += batch.records.len() as u64;
        if !more {
            break;
        }
    }
    pipeline.finish().await.map_err(|e| anyhow!(e))?;
    Ok(Outcome::of_this_process(produced, started, first, &mut reads, &mut enqueues, None))
}
