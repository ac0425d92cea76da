//! The WIT record conversion a source's batch goes through: any batch a component returns (its
//! ranges into the batch's bytes, its headers) is checked before it is read, and once checked every
//! range can be read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snow_runtime::component::bindings::types::{HeaderSpan, PollBatch, SourceRecord, Span};

/// A batch whose bytes and ranges come from `data`.
fn batch(data: &[u8]) -> PollBatch {
    let mut words = data.chunks(4).map(|c| c.iter().fold(0u32, |a, b| (a << 8) | u32::from(*b)));
    let mut next = || words.next().unwrap_or(0);
    let span = |n: &mut dyn FnMut() -> u32| Span { start: n() % 4096, len: n() % 4096 };
    let buffer = data.iter().rev().copied().collect::<Vec<u8>>();
    let split = (next() as usize) % (buffer.len() + 1);
    let headers: Vec<HeaderSpan> = (0..next() % 4).map(|_| HeaderSpan { key: span(&mut next), value: span(&mut next) }).collect();
    let records: Vec<SourceRecord> = (0..next() % 8)
        .map(|_| SourceRecord {
            key: (next() % 2 == 0).then(|| span(&mut next)),
            value: (next() % 2 == 0).then(|| span(&mut next)),
            headers: span(&mut next),
            timestamp_ms: None,
        })
        .collect();
    PollBatch {
        topic: "t".into(),
        headers: Vec::new(),
        data: buffer[..split].to_vec(),
        extra: buffer[split..].to_vec(),
        record_headers: headers,
        records,
        offset: None,
        next_poll_ms: 0,
        notice: None,
        value_schema: None,
    }
}

fuzz_target!(|data: &[u8]| {
    let batch = batch(data);
    if snow_runtime::source::produce::check(&batch).is_ok() {
        for r in &batch.records {
            for span in [r.key, r.value].into_iter().flatten() {
                assert!(
                    snow_core::record::span_bytes(&batch.data, &batch.extra, snow_core::record::Span { start: span.start, len: span.len })
                        .is_some()
                );
            }
        }
    }
});
