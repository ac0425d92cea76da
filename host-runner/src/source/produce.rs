//! Producing one poll's records and waiting until Kafka acknowledged all of them.

use std::collections::VecDeque;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};

use crate::component::bindings::types::SourceRecord;

/// Produces `records` in order and resolves once every one is acknowledged; the first failure is
/// returned (later records may or may not have been written: the caller re-reads from its stored
/// offset, so nothing is lost).
pub async fn produce_all(producer: &FutureProducer, records: &[SourceRecord]) -> Result<(), KafkaError> {
    let mut pending: VecDeque<DeliveryFuture> = VecDeque::with_capacity(records.len());
    for r in records {
        let mut headers = OwnedHeaders::new_with_capacity(r.headers.len());
        for h in &r.headers {
            headers = headers.insert(Header { key: &h.key, value: Some(&h.value) });
        }
        let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&r.topic).headers(headers);
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
                    pending.push_back(delivery);
                    break;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    // The local queue is full: wait for the oldest delivery to free a slot.
                    match pending.pop_front() {
                        Some(oldest) => check(oldest.await)?,
                        None => tokio::task::yield_now().await,
                    }
                }
                Err((e, _)) => return Err(e),
            }
        }
    }
    for delivery in pending {
        check(delivery.await)?;
    }
    Ok(())
}

/// A delivery's outcome; a dropped delivery (the producer went away) counts as a failure.
fn check<C>(result: Result<rdkafka::producer::future_producer::OwnedDeliveryResult, C>) -> Result<(), KafkaError> {
    match result {
        Ok(Ok(_)) => Ok(()),
        Ok(Err((e, _))) => Err(e),
        Err(_) => Err(KafkaError::Canceled),
    }
}
