//! Reports of final outcomes to Kafka: a result topic (written, skipped), an error topic (failed),
//! and the dead letter queue (the failed record itself, with Kafka Connect's `__connect.errors.*`
//! headers). A lane commits past records only once every report of them is acknowledged, so a
//! report is never missing for a committed record; a crash between the two sends a report again
//! (reports are at least once, like the writes).
//!
//! A report's value is JSON: `connector`, `topic`, `partition`, `offset`, `key` (UTF-8, lossy),
//! `outcome` (`written`, `skipped`, `failed`), and as they apply `operation`, `table`, `sys_id`,
//! `status` (ServiceNow's), `reason` (a skip's), `kind` (`record` or `api`), `classification`
//! (`fatal`, `ambiguous`), `message` (redacted). Its key is the record's key; its headers
//! `snow.outcome`, `snow.source.topic`, `snow.source.partition`, `snow.source.offset`.
//!
//! A report or dead letter Kafka refuses for good (too large, invalid, a topic it will never
//! take) is not retried forever: under `reporter.refused.behavior=truncate` (the default) it is
//! sent again cut down — its value to [`TRUNCATED_VALUE`] bytes, each header to
//! [`TRUNCATED_HEADER`], with a header `snow.truncated.from.bytes` saying how large it was — and if
//! that is refused too, or under `park`, the lane stops at the record with the reason
//! ([`Refused`]). Anything else (a broker away, a full queue) is waited out by the caller.

use std::time::Duration;

use anyhow::{Result, anyhow};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use serde_json::{Value, json};

use super::verdict::{Final, Stage};
use crate::component::bindings::types::SinkRecord;
use crate::config::ConnectorSpec;

/// How much of a refused record's value a truncated copy keeps.
pub const TRUNCATED_VALUE: usize = 64 * 1024;
/// How much of each header a truncated copy keeps.
pub const TRUNCATED_HEADER: usize = 4 * 1024;

/// Kafka refused a report or dead letter for good, and the policy does not let it go on.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// Whether Kafka's `code` refuses a record for good (sending it again cannot help).
fn is_permanent(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::InvalidMessage
            | RDKafkaErrorCode::InvalidRecord
            | RDKafkaErrorCode::MessageBatchTooLarge
            | RDKafkaErrorCode::InvalidTopic
            | RDKafkaErrorCode::InvalidRequiredAcks
            | RDKafkaErrorCode::UnsupportedForMessageFormat
    )
}

/// Produces a sink connector's reports and dead letters.
pub struct Reporter {
    producer: FutureProducer,
    connector: String,
    result_topic: Option<String>,
    error_topic: Option<String>,
    dlq_topic: Option<String>,
    dlq_context_headers: bool,
    on_refused: crate::config::OnRefused,
}

/// One record to produce.
#[derive(Clone)]
struct Outgoing {
    topic: String,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Vec<u8>)>,
}

impl Reporter {
    /// A reporter for `spec`, or none when it names no report or dead letter topic.
    pub fn new(spec: &ConnectorSpec) -> Result<Option<Self>> {
        if !spec.sink.produces() {
            return Ok(None);
        }
        Ok(Some(Self {
            producer: crate::kafka::producer(&spec.kafka)?,
            connector: spec.name.clone(),
            result_topic: spec.sink.result_topic.clone(),
            error_topic: spec.sink.error_topic.clone(),
            dlq_topic: spec.sink.dlq_topic.clone(),
            dlq_context_headers: spec.sink.dlq_context_headers,
            on_refused: spec.sink.on_refused,
        }))
    }

    /// Produces the reports and dead letters of `settled` records, in order, and resolves once
    /// Kafka acknowledged every one; an error names the first that failed. A [`Refused`] error
    /// (in the chain) means Kafka will never take it: waiting does not help.
    pub async fn send(&self, settled: &[(&SinkRecord, Final)]) -> Result<()> {
        let mut deliveries: Vec<(String, Outgoing, Option<DeliveryFuture>)> = Vec::new();
        for (record, outcome) in settled {
            for out in self.outgoing(record, outcome) {
                let what = format!("the {} record of {}-{}@{}", out.topic, record.topic, record.partition, record.offset);
                match self.enqueue(&out).await {
                    Ok(delivery) => deliveries.push((what, out, Some(delivery))),
                    Err(code) if is_permanent(code) => deliveries.push((what, out, None)),
                    Err(code) => return Err(anyhow!("producing {what}: {}", KafkaError::MessageProduction(code))),
                }
            }
        }
        for (what, out, delivery) in deliveries {
            let refused = match delivery {
                None => RDKafkaErrorCode::MessageSizeTooLarge,
                Some(delivery) => match delivery.await {
                    Ok(Ok(_)) => continue,
                    Ok(Err((e, _))) => match e.rdkafka_error_code().filter(|c| is_permanent(*c)) {
                        Some(code) => code,
                        None => return Err(anyhow!("Kafka refused {what}: {e}")),
                    },
                    Err(_) => return Err(anyhow!("the producer went away before {what} was acknowledged")),
                },
            };
            self.refused(&what, out, refused).await?;
        }
        Ok(())
    }

    /// Applies `reporter.refused.behavior` to `out`, which Kafka refused for good with `code`.
    async fn refused(&self, what: &str, out: Outgoing, code: RDKafkaErrorCode) -> Result<()> {
        let why = format!("Kafka refuses {what} for good ({code}, {} bytes)", out.size());
        if self.on_refused == crate::config::OnRefused::Park {
            return Err(Refused(format!("{why}; reporter.refused.behavior=park stops the partition here")).into());
        }
        let cut = out.truncated();
        tracing::warn!(connector = self.connector, "{why}; sending it truncated to {} bytes", cut.size());
        let delivered = match self.enqueue(&cut).await {
            Ok(delivery) => delivery.await.map_err(|_| anyhow!("the producer went away")).and_then(|r| r.map_err(|(e, _)| anyhow!("{e}"))),
            Err(code) => Err(anyhow!("{}", KafkaError::MessageProduction(code))),
        };
        delivered.map(drop).map_err(|e| Refused(format!("{why}, and its truncated copy too ({e}); the partition stops here")).into())
    }

    /// Hands one record to the producer, waiting while its queue is full; an error is the code
    /// librdkafka refused it with.
    async fn enqueue(&self, out: &Outgoing) -> std::result::Result<DeliveryFuture, RDKafkaErrorCode> {
        let mut headers = OwnedHeaders::new_with_capacity(out.headers.len());
        for (key, value) in &out.headers {
            headers = headers.insert(Header { key, value: Some(value) });
        }
        loop {
            let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&out.topic).headers(headers.clone());
            if let Some(k) = &out.key {
                record = record.key(k.as_slice());
            }
            if let Some(v) = &out.value {
                record = record.payload(v.as_slice());
            }
            match self.producer.send_result(record) {
                Ok(delivery) => return Ok(delivery),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err((e, _)) => return Err(e.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail)),
            }
        }
    }

    /// What `outcome` of `record` produces.
    fn outgoing(&self, record: &SinkRecord, outcome: &Final) -> Vec<Outgoing> {
        let mut out = Vec::new();
        let report_topic = match outcome {
            Final::Failed { .. } => &self.error_topic,
            _ => &self.result_topic,
        };
        if let Some(topic) = report_topic {
            out.push(Outgoing {
                topic: topic.clone(),
                key: record.key.clone(),
                value: Some(report(&self.connector, record, outcome).to_string().into_bytes()),
                headers: vec![
                    ("snow.outcome".into(), outcome.outcome().as_bytes().to_vec()),
                    ("snow.source.topic".into(), record.topic.clone().into_bytes()),
                    ("snow.source.partition".into(), record.partition.to_string().into_bytes()),
                    ("snow.source.offset".into(), record.offset.to_string().into_bytes()),
                ],
            });
        }
        if let (Final::Failed { dead_letter: true, .. }, Some(topic)) = (outcome, &self.dlq_topic) {
            let mut headers: Vec<(String, Vec<u8>)> = record.headers.iter().map(|h| (h.key.clone(), h.value.clone())).collect();
            if self.dlq_context_headers {
                headers.extend(dead_letter_headers(&self.connector, record, outcome));
            }
            out.push(Outgoing { topic: topic.clone(), key: record.key.clone(), value: record.value.clone(), headers });
        }
        out
    }
}

impl Outgoing {
    /// Bytes of key, value and headers.
    fn size(&self) -> usize {
        self.key.as_ref().map_or(0, Vec::len)
            + self.value.as_ref().map_or(0, Vec::len)
            + self.headers.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
    }

    /// This record cut down: value and key to [`TRUNCATED_VALUE`], each header to
    /// [`TRUNCATED_HEADER`], and `snow.truncated.from.bytes` saying how large it was.
    fn truncated(&self) -> Outgoing {
        let cut = |bytes: &Vec<u8>, limit: usize| bytes[..bytes.len().min(limit)].to_vec();
        let mut headers: Vec<(String, Vec<u8>)> = self.headers.iter().map(|(k, v)| (k.clone(), cut(v, TRUNCATED_HEADER))).collect();
        headers.push(("snow.truncated.from.bytes".into(), self.size().to_string().into_bytes()));
        Outgoing {
            topic: self.topic.clone(),
            key: self.key.as_ref().map(|k| cut(k, TRUNCATED_HEADER)),
            value: self.value.as_ref().map(|v| cut(v, TRUNCATED_VALUE)),
            headers,
        }
    }
}

/// The JSON report of `outcome`.
fn report(connector: &str, record: &SinkRecord, outcome: &Final) -> Value {
    let mut value = json!({
        "connector": connector,
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "key": record.key.as_deref().map(String::from_utf8_lossy),
        "outcome": outcome.outcome(),
    });
    let extra = match outcome {
        Final::Written { operation, table, sys_id, status } => {
            json!({ "operation": operation, "table": table, "sys_id": sys_id, "status": status })
        }
        Final::Skipped { table, sys_id, reason } => json!({ "table": table, "sys_id": sys_id, "reason": reason }),
        Final::Failed { kind, class, status, message, .. } => {
            json!({ "kind": kind, "classification": class, "status": status, "message": message })
        }
    };
    if let (Some(map), Value::Object(more)) = (value.as_object_mut(), extra) {
        map.extend(more);
    }
    value
}

/// Kafka Connect's error context headers for a dead letter.
fn dead_letter_headers(connector: &str, record: &SinkRecord, outcome: &Final) -> Vec<(String, Vec<u8>)> {
    let Final::Failed { kind, class, status, message, stage, .. } = outcome else { return Vec::new() };
    let exception = if *kind == "record" { "snow_connect.RecordError" } else { "snow_connect.ApiError" };
    let (stage, class_name) = match stage {
        Stage::Put => ("TASK_PUT", "snow_connect.guest_sink"),
        Stage::Converter { stage, class } => (*stage, class.as_str()),
    };
    let status = status.map(|s| format!(", ServiceNow answered {s}")).unwrap_or_default();
    [
        ("topic", record.topic.clone()),
        ("partition", record.partition.to_string()),
        ("offset", record.offset.to_string()),
        ("connector.name", connector.to_string()),
        ("task.id", "0".to_string()),
        ("stage", stage.to_string()),
        ("class.name", class_name.to_string()),
        ("exception.class.name", exception.to_string()),
        ("exception.message", message.clone()),
        ("exception.stacktrace", format!("{exception} ({class}{status}): {message}")),
    ]
    .into_iter()
    .map(|(k, v)| (format!("__connect.errors.{k}"), v.into_bytes()))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> SinkRecord {
        SinkRecord {
            topic: "orders".into(),
            partition: 2,
            offset: 41,
            key: Some(b"k-1".to_vec()),
            value: Some(b"{not json".to_vec()),
            headers: vec![crate::component::bindings::types::Header { key: "trace".into(), value: b"t".to_vec() }],
            timestamp_ms: None,
        }
    }

    #[test]
    fn a_truncated_copy_is_small_and_says_how_large_the_record_was() {
        let out = Outgoing {
            topic: "dlq".into(),
            key: Some(b"k".to_vec()),
            value: Some(vec![b'x'; 1_000_000]),
            headers: vec![("__connect.errors.exception.message".into(), vec![b'm'; 50_000])],
        };
        let cut = out.truncated();
        assert!(cut.size() < TRUNCATED_VALUE + 2 * TRUNCATED_HEADER + 100, "{}", cut.size());
        let from = cut.headers.iter().find(|(k, _)| k == "snow.truncated.from.bytes").map(|(_, v)| String::from_utf8_lossy(v).into_owned());
        assert_eq!(from.as_deref(), Some("1050035"));
        assert!(is_permanent(RDKafkaErrorCode::MessageSizeTooLarge) && !is_permanent(RDKafkaErrorCode::NotLeaderForPartition));
    }

    #[test]
    fn a_report_says_where_the_record_came_from_and_what_became_of_it() {
        let written = Final::Written { operation: "create", table: "incident".into(), sys_id: "abc".into(), status: 201 };
        let value = report("c", &record(), &written);
        assert_eq!(
            value,
            json!({"connector":"c","topic":"orders","partition":2,"offset":41,"key":"k-1","outcome":"written",
                   "operation":"create","table":"incident","sys_id":"abc","status":201})
        );
    }

    #[test]
    fn a_dead_letter_carries_connects_error_headers_after_the_records_own() {
        let failed = Final::Failed {
            kind: "record",
            class: "fatal",
            status: None,
            message: "record orders-2@41: the value is not JSON".into(),
            log: true,
            stage: Stage::Put,
            dead_letter: true,
        };
        let headers = dead_letter_headers("c", &record(), &failed);
        let get = |k: &str| headers.iter().find(|(n, _)| n == k).map(|(_, v)| String::from_utf8_lossy(v).into_owned());
        assert_eq!(get("__connect.errors.topic").as_deref(), Some("orders"));
        assert_eq!(get("__connect.errors.partition").as_deref(), Some("2"));
        assert_eq!(get("__connect.errors.offset").as_deref(), Some("41"));
        assert_eq!(get("__connect.errors.connector.name").as_deref(), Some("c"));
        assert_eq!(get("__connect.errors.exception.class.name").as_deref(), Some("snow_connect.RecordError"));
        assert_eq!(get("__connect.errors.exception.message").as_deref(), Some("record orders-2@41: the value is not JSON"));
        assert_eq!(headers.len(), 10);
    }
}
