//! Handing one poll's records to the producer: the batch's ranges are checked first (a broken
//! batch is refused whole, so nothing of it is produced), then every record is queued in order
//! (to the batch's topic, with the batch's headers then its own) and its delivery future
//! returned, so the next page can be fetched while these are acknowledged.
//!
//! A record Kafka refuses for good — too large for `message.max.bytes`, invalid, or to a topic
//! the producer may not write — is a [`Refusal`] naming its sys_id and size, whether librdkafka
//! refused it at once or the broker in its delivery report; anything else is a plain failure
//! (the broker is away, a timeout) that reopening at the stored offset may cure.

use std::time::Duration;

use rdkafka::Message;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header as KafkaHeader, Headers, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};

use crate::component::bindings::types::{HeaderSpan, PollBatch, SourceRecord, Span};

/// The bytes of `span` in the batch's `data` then `extra` (snow-core's rule), if it lies inside.
pub fn bytes(batch: &PollBatch, span: Span) -> Option<&[u8]> {
    snow_core::record::span_bytes(&batch.data, &batch.extra, snow_core::record::Span { start: span.start, len: span.len })
}

/// The own headers of a record: a range of `record_headers`, if it lies inside.
/// Record `r`'s own headers: each name as text and its value's bytes.
pub fn record_headers<'b>(batch: &'b PollBatch, r: &SourceRecord) -> Vec<(String, Option<&'b [u8]>)> {
    own_headers(batch, r.headers)
        .unwrap_or_default()
        .iter()
        .map(|h| {
            let name = bytes(batch, h.key).and_then(|b| std::str::from_utf8(b).ok()).unwrap_or_default().to_string();
            (name, bytes(batch, h.value))
        })
        .collect()
}

fn own_headers(batch: &PollBatch, span: Span) -> Option<&[HeaderSpan]> {
    let start = span.start as usize;
    batch.record_headers.get(start..start.checked_add(span.len as usize)?)
}

/// Checks that every range of `batch` lies inside it and every header name is UTF-8; says which
/// record is broken otherwise (a component bug: the caller parks the unit).
pub fn check(batch: &PollBatch) -> Result<(), String> {
    let size = || format!("{} + {} bytes", batch.data.len(), batch.extra.len());
    for (i, h) in batch.record_headers.iter().enumerate() {
        let name = bytes(batch, h.key).ok_or_else(|| format!("record header {i}: name range outside the batch data ({})", size()))?;
        std::str::from_utf8(name).map_err(|_| format!("record header {i}: the name is not UTF-8"))?;
        bytes(batch, h.value).ok_or_else(|| format!("record header {i}: value range outside the batch data ({})", size()))?;
    }
    for (i, r) in batch.records.iter().enumerate() {
        for (what, span) in [("key", r.key), ("value", r.value)] {
            if let Some(span) = span {
                bytes(batch, span)
                    .ok_or_else(|| format!("record {i}: {what} range {}+{} outside the batch data ({})", span.start, span.len, size()))?;
            }
        }
        own_headers(batch, r.headers).ok_or_else(|| {
            format!(
                "record {i}: header range {}+{} outside the batch's {} record headers",
                r.headers.start,
                r.headers.len,
                batch.record_headers.len()
            )
        })?;
    }
    Ok(())
}

/// A record as the user's converters (and transforms) made it: its key and value bytes, and its
/// topic and headers when transforms changed them (`None`: the batch's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Made {
    /// The key's bytes.
    pub key: Option<Vec<u8>>,
    /// The value's bytes (`None`: a tombstone).
    pub value: Option<Vec<u8>>,
    /// The topic a transform routed the record to.
    pub topic: Option<String>,
    /// The headers after transforms.
    pub headers: Option<Vec<(String, Option<Vec<u8>>)>>,
}

/// What one record became: none for a record not produced (a bad row skipped, a record a
/// transform dropped), several when a transform component made several of it.
pub type Converted = Vec<Made>;

/// A record Kafka refuses for good: retrying the same bytes cannot succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The record's key (the row's sys_id).
    pub sys_id: String,
    /// Its size as produced: key, value and headers.
    pub bytes: usize,
    /// The topic it was for.
    pub topic: String,
    /// Kafka's reason.
    pub error: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kafka refused record {} ({} bytes) for topic {}: {}", self.sys_id, self.bytes, self.topic, self.error)
    }
}

/// Why producing failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProduceFailure {
    /// One record is refused for good.
    Refused(Refusal),
    /// Anything else (the broker away, a timeout, the producer closing): reopening may cure it.
    Failed(String),
    /// A newer producer of the same `transactional.id` took over (exactly-once): stop, do not
    /// reopen (that would fence the newer one back).
    Fenced(String),
}

impl std::fmt::Display for ProduceFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Refused(r) => r.fmt(f),
            Self::Failed(e) => write!(f, "producing to Kafka failed: {e}"),
            Self::Fenced(e) => write!(f, "fenced: {e}"),
        }
    }
}

impl std::error::Error for ProduceFailure {}

/// True for errors that refuse one record for good: sending the same bytes again cannot succeed.
fn refuses_for_good(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessage
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::InvalidRecord
            | RDKafkaErrorCode::InvalidTimestamp
            | RDKafkaErrorCode::PolicyViolation
            | RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::InvalidTopic
    )
}

/// A delivery report's error as a failure: a refusal names the record it carries back.
pub fn delivery_failure(error: &KafkaError, message: &OwnedMessage) -> ProduceFailure {
    failure(error, message.key(), message.payload(), message.headers(), message.topic())
}

/// `error` for the record of `key`, `payload` and `headers` to `topic`, as a failure.
fn failure(error: &KafkaError, key: Option<&[u8]>, payload: Option<&[u8]>, headers: Option<&OwnedHeaders>, topic: &str) -> ProduceFailure {
    match error.rdkafka_error_code() {
        Some(code) if refuses_for_good(code) => {
            let headers: usize = headers.map(|h| h.iter().map(|h| h.key.len() + h.value.map_or(0, <[u8]>::len)).sum()).unwrap_or(0);
            ProduceFailure::Refused(Refusal {
                sys_id: String::from_utf8_lossy(key.unwrap_or_default()).into_owned(),
                bytes: key.map_or(0, <[u8]>::len) + payload.map_or(0, <[u8]>::len) + headers,
                topic: topic.to_string(),
                error: error.to_string(),
            })
        }
        _ => ProduceFailure::Failed(error.to_string()),
    }
}

/// Queues the records of a [`check`]ed `batch` in order; returns their deliveries. The first
/// failure is returned (records queued before it may still be written: the caller reopens at
/// its stored offset).
///
/// With `converted` (the user's converters applied, one entry per record), each record's key and
/// value are taken from there instead of the batch's bytes: an empty entry (a bad row skipped
/// under `snow.bad.row.behavior=skip`, a record a transform dropped) is not produced, and each of
/// several is, in order.
///
/// With `versions` (exactly-once), every record also carries [`VERSION_HEADER`]: the row version
/// it came from, which a reopening table reads back to rebuild its dedup window (ADR 0030).
pub async fn enqueue(
    producer: &FutureProducer,
    batch: &PollBatch,
    converted: Option<&[Converted]>,
    versions: bool,
) -> Result<Vec<DeliveryFuture>, ProduceFailure> {
    let text = |span: Span| bytes(batch, span).and_then(|b| std::str::from_utf8(b).ok()).unwrap_or_default();
    let mut deliveries = Vec::with_capacity(batch.records.len());
    // Without converters each record goes once as the batch holds it (`None`); with them, each
    // record it became. No allocation per record on either path.
    let made_of = |i: usize| {
        let made: &[Made] = converted.and_then(|c| c.get(i)).map_or(&[], Vec::as_slice);
        std::iter::once(None).take(usize::from(converted.is_none())).chain(made.iter().map(Some))
    };
    let mut version = String::new();
    for (i, r) in batch.records.iter().enumerate() {
        if versions {
            version_into(&mut version, batch, r);
        }
        for made in made_of(i) {
            let (key, value) = match made {
                None => (r.key.and_then(|k| bytes(batch, k)), r.value.and_then(|v| bytes(batch, v))),
                Some(m) => (m.key.as_deref(), m.value.as_deref()),
            };
            let topic = made.and_then(|m| m.topic.as_deref()).unwrap_or(&batch.topic);
            let mut headers = match made.and_then(|m| m.headers.as_ref()) {
                Some(transformed) => transformed.iter().fold(OwnedHeaders::new_with_capacity(transformed.len()), |hs, (k, v)| {
                    hs.insert(KafkaHeader { key: k, value: v.as_deref() })
                }),
                None => {
                    let own = own_headers(batch, r.headers).unwrap_or_default();
                    let mut headers = OwnedHeaders::new_with_capacity(batch.headers.len() + own.len());
                    for h in &batch.headers {
                        headers = headers.insert(KafkaHeader { key: &h.key, value: Some(&h.value) });
                    }
                    for h in own {
                        headers = headers.insert(KafkaHeader { key: text(h.key), value: bytes(batch, h.value) });
                    }
                    headers
                }
            };
            if versions {
                headers = headers.insert(KafkaHeader { key: VERSION_HEADER, value: Some(version.as_bytes()) });
            }
            let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(topic).headers(headers);
            if let Some(key) = key {
                record = record.key(key);
            }
            if let Some(value) = value {
                record = record.payload(value);
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
                    Err((e, back)) => return Err(failure(&e, back.key, back.payload, back.headers.as_ref(), topic)),
                }
            }
        }
    }
    Ok(deliveries)
}

/// The header naming the row version a record came from, in exactly-once mode:
/// `["<timestamp>","<sys_id>","<sys_mod_count>"]`.
pub const VERSION_HEADER: &str = "snow.source.version";

/// Writes into `out` the version record `r` of `batch` carries: its cursor timestamp (the
/// record's, to the second), its key (the sys_id) and its `snow.sys_mod_count` header (empty
/// without one). One buffer serves every record of a batch (the header value is copied when the
/// record is queued).
fn version_into(out: &mut String, batch: &PollBatch, r: &SourceRecord) {
    use std::fmt::Write as _;
    let ts = snow_core::time::Timestamp(r.timestamp_ms.unwrap_or(0).div_euclid(1000));
    let id = r.key.and_then(|k| bytes(batch, k)).unwrap_or_default();
    let count = own_headers(batch, r.headers)
        .unwrap_or_default()
        .iter()
        .find(|h| bytes(batch, h.key) == Some(b"snow.sys_mod_count".as_slice()))
        .and_then(|h| bytes(batch, h.value))
        .unwrap_or_default();
    out.clear();
    let _ = write!(out, "[\"{ts}\",");
    json_string(out, id);
    out.push(',');
    json_string(out, count);
    out.push(']');
}

/// `bytes` as a JSON string (as text when they are not UTF-8).
fn json_string(out: &mut String, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(&text);
        out.push('"');
    } else {
        out.push_str(&serde_json::to_string(&*text).unwrap_or_default());
    }
}

/// A [`VERSION_HEADER`] value: `["<timestamp>","<sys_id>","<sys_mod_count>"]`.
pub fn encode_version(ts: snow_core::time::Timestamp, id: &str, count: &str) -> String {
    serde_json::to_string(&(ts.to_string(), id, count)).unwrap_or_default()
}

/// A [`VERSION_HEADER`] value read back: `(timestamp, sys_id, sys_mod_count)`.
pub fn parse_version(value: &[u8]) -> Option<(snow_core::time::Timestamp, String, String)> {
    let (ts, id, count): (String, String, String) = serde_json::from_slice(value).ok()?;
    Some((snow_core::time::Timestamp::parse(&ts).ok()?, id, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(records: Vec<SourceRecord>, record_headers: Vec<HeaderSpan>) -> PollBatch {
        PollBatch {
            topic: "t".into(),
            headers: vec![],
            data: b"a1{}".to_vec(),
            extra: b"snow.x".to_vec(),
            record_headers,
            records,
            offset: None,
            next_poll_ms: 0,
            notice: None,
            value_schema: None,
        }
    }

    fn span(start: u32, len: u32) -> Span {
        Span { start, len }
    }

    #[test]
    fn a_record_carries_its_row_version_and_it_reads_back() {
        let mod_count = HeaderSpan { key: span(0, 2), value: span(2, 2) };
        let mut b = batch(vec![], vec![mod_count]);
        b.data = b"snow.sys_mod_count7id-1".to_vec();
        let r = SourceRecord {
            key: Some(span(19, 4)),
            value: None,
            headers: span(0, 1),
            timestamp_ms: Some(snow_core::time::Timestamp::parse("2024-03-01 10:00:05").unwrap().as_millis() + 999),
        };
        b.record_headers = vec![HeaderSpan { key: span(0, 18), value: span(18, 1) }];
        let version_of = |b: &PollBatch, r: &SourceRecord| {
            let mut out = String::from("left over from the previous record");
            version_into(&mut out, b, r);
            out
        };
        let header = version_of(&b, &r);
        assert_eq!(header, r#"["2024-03-01 10:00:05","id-1","7"]"#, "the second of the record's stamp");
        assert_eq!(header, encode_version(snow_core::time::Timestamp::parse("2024-03-01 10:00:05").unwrap(), "id-1", "7"));
        let (ts, id, count) = parse_version(header.as_bytes()).unwrap();
        assert_eq!((ts.to_string().as_str(), id.as_str(), count.as_str()), ("2024-03-01 10:00:05", "id-1", "7"));
        let bare = SourceRecord { headers: span(0, 0), ..r };
        b.data = b"snow.sys_mod_count7i\"\\1".to_vec();
        assert_eq!(parse_version(version_of(&b, &r).as_bytes()).unwrap().1, "i\"\\1", "an id that needs escaping reads back");
        b.data = b"snow.sys_mod_count7id-1".to_vec();
        assert_eq!(parse_version(version_of(&b, &bare).as_bytes()).unwrap().2, "", "no mod count header: empty");
        for bad in [&b"not json"[..], br#"["2024-03-01 10:00:05","x"]"#, br#"["yesterday","x","1"]"#, br#"[1,2,3]"#] {
            assert_eq!(parse_version(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn ranges_outside_the_batch_are_refused_naming_the_record() {
        let header = HeaderSpan { key: span(4, 6), value: span(0, 2) };
        let good = SourceRecord { key: Some(span(0, 2)), value: Some(span(2, 2)), headers: span(0, 1), timestamp_ms: None };
        assert_eq!(check(&batch(vec![good], vec![header])), Ok(()));
        let long_value = SourceRecord { value: Some(span(2, 9)), ..good };
        let err = check(&batch(vec![good, long_value], vec![header])).unwrap_err();
        assert!(err.starts_with("record 1: value range 2+9 outside the batch data (4 + 6 bytes)"), "{err}");
        let across = SourceRecord { value: Some(span(3, 2)), ..good };
        assert!(
            check(&batch(vec![across], vec![header])).unwrap_err().starts_with("record 0: value range 3+2"),
            "a range across data and extra"
        );
        let wrapping = SourceRecord { key: Some(span(u32::MAX, 2)), ..good };
        assert!(check(&batch(vec![wrapping], vec![header])).unwrap_err().starts_with("record 0: key range"));
        let no_header = SourceRecord { headers: span(1, 1), ..good };
        assert!(check(&batch(vec![no_header], vec![header])).unwrap_err().contains("outside the batch's 1 record headers"));
        let bad_name = HeaderSpan { key: span(2, 9), value: span(0, 2) };
        assert!(check(&batch(vec![good], vec![bad_name])).unwrap_err().starts_with("record header 0: name range"));
    }
}
