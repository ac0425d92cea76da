//! Handing one poll's records to the producer: every record is queued in order (to the batch's
//! topic, with the batch's headers then its own) and its delivery future returned, so the next
//! page can be fetched while these are acknowledged.

use std::time::Duration;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};

use crate::component::bindings::types::PollBatch;

/// Queues the records of `batch` in order; returns their deliveries. The first refusal is
/// returned (records queued before it may still be written: the caller reopens at its stored offset).
pub async fn enqueue(producer: &FutureProducer, batch: &PollBatch) -> Result<Vec<DeliveryFuture>, KafkaError> {
    let mut deliveries = Vec::with_capacity(batch.records.len());
    for r in &batch.records {
        let mut headers = OwnedHeaders::new_with_capacity(batch.headers.len() + r.headers.len());
        for h in batch.headers.iter().chain(&r.headers) {
            headers = headers.insert(Header { key: &h.key, value: Some(&h.value) });
        }
        let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&batch.topic).headers(headers);
        if let Some(key) = &r.key {
            record = record.key(key.as_slice());
        }
        if let Some(value) = &r.value {
            record = record.payload(value.as_slice());
        }
        if let Some(ts) = r.timestamp_ms {
            record = record.timestamp(ts);
        }
        loop {
            match producer.send_result(record) {
                Ok(delivery) => {
                    deliveries.push(delivery);
                    break;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    // The local queue (queue.buffering.max.messages) is full; librdkafka's own
                    // thread drains it as the broker acknowledges. Give it a moment.
                    record = back;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Err((e, _)) => return Err(e),
            }
        }
    }
    Ok(deliveries)
}
