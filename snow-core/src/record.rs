//! Records as `snow-core` hands them to the guests, one to one with the WIT types: the guests only
//! convert these to and from their generated bindings. A source batch carries its bytes once
//! (`data`, the page it was read from, and `extra`, what the records need besides; built by
//! [`BatchData`]) and its records are ranges of them.

use crate::error::SnowError;

/// A Kafka record header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Name.
    pub key: String,
    /// Value bytes.
    pub value: Vec<u8>,
}

/// A source partition and a position in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceOffset {
    /// The source partition key (see [`crate::cursor::Partition`]).
    pub partition: String,
    /// The cursor position after the record (JSON text).
    pub position: String,
}

/// A range of a list: `len` entries from `start`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Span {
    /// First entry.
    pub start: u32,
    /// Number of entries.
    pub len: u32,
}

impl Span {
    /// The range as indices.
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.start as usize + self.len as usize
    }
}

/// A record header whose name and value are ranges of its batch's `data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderSpan {
    /// The name's bytes.
    pub key: Span,
    /// The value's bytes.
    pub value: Span,
}

/// A record read from ServiceNow: ranges of its batch's `data` (what it shares with its batch
/// is in [`PollBatch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRecord {
    /// Key bytes (the row's sys_id).
    pub key: Option<Span>,
    /// Value bytes (the row's JSON).
    pub value: Option<Span>,
    /// This record's own headers: a range of the batch's `record_headers`.
    pub headers: Span,
    /// Timestamp in ms since the epoch.
    pub timestamp_ms: Option<i64>,
}

/// What one source poll returns: records of one stream, in source order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollBatch {
    /// Destination topic of every record.
    pub topic: String,
    /// Headers of every record.
    pub headers: Vec<Header>,
    /// The bytes the records' keys, values and own headers are ranges of: `data` then `extra`
    /// (a range starting at or after `data.len()` lies in `extra`).
    pub data: Vec<u8>,
    /// Bytes the records need that are not in `data` (header names, unescaped ids, reshaped values).
    pub extra: Vec<u8>,
    /// The records' own headers.
    pub record_headers: Vec<HeaderSpan>,
    /// Records in source order.
    pub records: Vec<SourceRecord>,
    /// The offset to store once every record is acknowledged (none when nothing moved).
    pub offset: Option<SourceOffset>,
    /// When to poll next, in ms (0: at once).
    pub next_poll_ms: u32,
    /// What keeps the stream from moving although rows remain (every row after the cursor hidden
    /// from the integration user), for the host's status board; none when nothing does.
    pub notice: Option<String>,
    /// The table's value schema (Kafka Connect's JSON schema format) when it is new to the host:
    /// on the first batch of a task that describes its table, and after its dictionary changed.
    pub value_schema: Option<String>,
}

impl PollBatch {
    /// A batch of `records` over `bytes` for `topic`, with the headers of every record, the offset
    /// to store once Kafka has them and the pause before the next poll; no notice, no schema.
    pub fn new(
        topic: String,
        headers: Vec<Header>,
        bytes: BatchBytes,
        records: Vec<SourceRecord>,
        offset: Option<SourceOffset>,
        next_poll_ms: u32,
    ) -> Self {
        let BatchBytes { data, extra, record_headers } = bytes;
        Self { topic, headers, data, extra, record_headers, records, offset, next_poll_ms, notice: None, value_schema: None }
    }

    /// The bytes of `span` in `data` then `extra` (empty when out of range: batches built here
    /// never are).
    pub fn bytes(&self, span: Span) -> &[u8] {
        span_bytes(&self.data, &self.extra, span).unwrap_or_default()
    }

    /// The key of record `i`, as text.
    pub fn key_text(&self, i: usize) -> Option<&str> {
        let key = self.records.get(i)?.key?;
        std::str::from_utf8(self.bytes(key)).ok()
    }

    /// The value of record `i`.
    pub fn value(&self, i: usize) -> Option<&[u8]> {
        Some(self.bytes(self.records.get(i)?.value?))
    }

    /// The own headers of record `i` as `(name, value)` text pairs.
    pub fn record_headers_of(&self, i: usize) -> Vec<(String, String)> {
        let Some(r) = self.records.get(i) else { return Vec::new() };
        let text = |s: Span| String::from_utf8_lossy(self.bytes(s)).into_owned();
        self.record_headers.get(r.headers.range()).unwrap_or_default().iter().map(|h| (text(h.key), text(h.value))).collect()
    }
}

/// The bytes `span` addresses in `data` followed by `extra`: in `data` when it ends inside it,
/// else in `extra` when it starts at or after its end; a span across both is out of range.
pub fn span_bytes<'a>(data: &'a [u8], extra: &'a [u8], span: Span) -> Option<&'a [u8]> {
    let (start, len) = (span.start as usize, span.len as usize);
    let end = start.checked_add(len)?;
    if end <= data.len() {
        return data.get(start..end);
    }
    let at = start.checked_sub(data.len())?;
    extra.get(at..at.checked_add(len)?)
}

/// Builds a batch's bytes around one page body: bytes that lie in the page become ranges of it
/// without being copied; other bytes are appended to `extra`, addressed after the page.
/// [`BatchData::finish`] keeps the page whole when the ranges use most of it (a backfill page whose
/// last second is read again), and copies only the used part when they use little of it (a page
/// mostly suppressed as duplicates), so a batch never carries more than twice the bytes its
/// records need. The page is never grown: growing a page-sized buffer copies it.
pub struct BatchData<'a> {
    page: &'a [u8],
    extra: Vec<u8>,
    record_headers: Vec<HeaderSpan>,
    /// The part of the page used so far.
    used: Option<(usize, usize)>,
}

/// A batch would be larger than a span can address (4 GiB).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a batch cannot hold more than 4 GiB")]
pub struct BatchTooLarge;

impl<'a> BatchData<'a> {
    /// Data around `page`.
    pub fn new(page: &'a [u8]) -> Self {
        Self { page, extra: Vec::new(), record_headers: Vec::new(), used: None }
    }

    /// A range holding `bytes`: where they lie when they are a slice of the page, else appended.
    pub fn span(&mut self, bytes: &[u8]) -> Result<Span, BatchTooLarge> {
        let (base, at) = (self.page.as_ptr() as usize, bytes.as_ptr() as usize);
        if at >= base && at + bytes.len() <= base + self.page.len() {
            let start = at - base;
            let (lo, hi) = self.used.unwrap_or((start, start + bytes.len()));
            self.used = Some((lo.min(start), hi.max(start + bytes.len())));
            return span(start, bytes.len());
        }
        self.append(bytes)
    }

    /// A range holding a copy of `bytes`, after the page.
    pub fn append(&mut self, bytes: &[u8]) -> Result<Span, BatchTooLarge> {
        let start = self.page.len() + self.extra.len();
        self.extra.extend_from_slice(bytes);
        span(start, bytes.len())
    }

    /// Adds a record header; returns its index in `record_headers`.
    pub fn header(&mut self, key: Span, value: Span) -> Result<u32, BatchTooLarge> {
        self.record_headers.push(HeaderSpan { key, value });
        u32::try_from(self.record_headers.len() - 1).map_err(|_| BatchTooLarge)
    }

    /// Ends the building: how to turn the page into `data` and fix the records' ranges.
    pub fn finish(self) -> Finished {
        let (lo, hi) = self.used.unwrap_or((0, 0));
        Finished { page_len: self.page.len(), lo, hi, extra: self.extra, record_headers: self.record_headers }
    }
}

/// What [`BatchData`] built, apart from the page it borrowed.
pub struct Finished {
    page_len: usize,
    lo: usize,
    hi: usize,
    extra: Vec<u8>,
    record_headers: Vec<HeaderSpan>,
}

/// A batch's bytes: what [`PollBatch`] carries besides its records.
#[derive(Debug, Default)]
pub struct BatchBytes {
    /// The page, whole or its used part.
    pub data: Vec<u8>,
    /// What the records need besides.
    pub extra: Vec<u8>,
    /// The records' own headers.
    pub record_headers: Vec<HeaderSpan>,
}

impl Finished {
    /// The batch's bytes from the page they were built around: the page moved when at least half
    /// of it is used, else its used part copied and the records' ranges rebased onto it.
    pub fn into_batch_bytes(self, page: Vec<u8>, records: &mut [SourceRecord]) -> BatchBytes {
        debug_assert_eq!(page.len(), self.page_len, "finish with the page the data was built around");
        let Self { page_len, lo, hi, extra, mut record_headers } = self;
        if (hi - lo) * 2 >= page_len {
            return BatchBytes { data: page, extra, record_headers };
        }
        // Page ranges move down by `lo`; ranges in `extra` now start after the used part.
        let shift = |s: &mut Span| {
            let start = s.start as usize;
            let moved = if start >= page_len { start - page_len + (hi - lo) } else { start - lo };
            s.start = moved as u32;
        };
        for r in records.iter_mut() {
            r.key.iter_mut().chain(r.value.iter_mut()).for_each(shift);
        }
        for h in &mut record_headers {
            shift(&mut h.key);
            shift(&mut h.value);
        }
        BatchBytes { data: page[lo..hi].to_vec(), extra, record_headers }
    }
}

fn span(start: usize, len: usize) -> Result<Span, BatchTooLarge> {
    let start = u32::try_from(start).map_err(|_| BatchTooLarge)?;
    let len = u32::try_from(len).map_err(|_| BatchTooLarge)?;
    start.checked_add(len).ok_or(BatchTooLarge)?;
    Ok(Span { start, len })
}

/// A record consumed from Kafka.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkRecord {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Key bytes.
    pub key: Option<Vec<u8>>,
    /// Value bytes; `None` is a tombstone.
    pub value: Option<Vec<u8>>,
    /// Headers.
    pub headers: Vec<Header>,
    /// Timestamp in ms since the epoch.
    pub timestamp_ms: Option<i64>,
}

impl SinkRecord {
    /// `topic-partition@offset`, the way errors name a record.
    pub fn coordinates(&self) -> String {
        format!("{}-{}@{}", self.topic, self.partition, self.offset)
    }
}

/// A Table API write operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// POST.
    Create,
    /// PATCH.
    Patch,
    /// PUT.
    Put,
    /// DELETE.
    Delete,
}

/// A write ServiceNow accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Operation performed.
    pub operation: Operation,
    /// Table written.
    pub table: String,
    /// Row written.
    pub sys_id: String,
    /// HTTP status of the answer.
    pub status: u16,
}

/// The final word on one sink record.
/// Why a record was skipped without a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// A patch, put or delete of a row that does not exist (`snow.sink.not.found=ignore`).
    NotFound,
    /// A write older than the version the row already holds (the stale-write guard).
    Stale,
}

/// A record that needed no write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The table it was for.
    pub table: String,
    /// The row it named.
    pub sys_id: String,
    /// Why nothing was written.
    pub reason: SkipReason,
}

/// The final word on one sink record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// ServiceNow accepted the write.
    Written(Written),
    /// Nothing needed writing.
    Skipped(Skipped),
    /// The write failed; the error says whether trying again can help.
    Failed(SnowError),
}

impl Outcome {
    /// True for a failure that trying again may cure (the partition is held there).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Failed(e) if e.is_retryable())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: Span, value: Span) -> SourceRecord {
        SourceRecord { key: Some(key), value: Some(value), headers: Span::default(), timestamp_ms: None }
    }

    fn batch(bytes: BatchBytes, records: Vec<SourceRecord>) -> PollBatch {
        let BatchBytes { data, extra, record_headers } = bytes;
        PollBatch {
            topic: String::new(),
            headers: vec![],
            data,
            extra,
            record_headers,
            records,
            offset: None,
            next_poll_ms: 0,
            notice: None,
            value_schema: None,
        }
    }

    #[test]
    fn page_bytes_become_ranges_and_only_the_used_part_is_kept() {
        let page = b"0123456789abcdefghij".to_vec();
        let mut data = BatchData::new(&page);
        let key = data.span(&page[3..5]).unwrap();
        let appended = data.span(b"xy").unwrap();
        let value = data.span(&page[7..8]).unwrap();
        let h = data.header(appended, key).unwrap();
        assert_eq!((key, appended), (Span { start: 3, len: 2 }, Span { start: 20, len: 2 }), "page bytes are not copied");
        let mut records = vec![record(key, value), record(appended, appended)];
        let bytes = data.finish().into_batch_bytes(page, &mut records);
        let batch = batch(bytes, records);
        assert_eq!((&batch.data[..], &batch.extra[..]), (&b"34567"[..], &b"xy"[..]), "the used part of the page; what was appended");
        assert_eq!(batch.key_text(0), Some("34"));
        assert_eq!(batch.value(0), Some(&b"7"[..]));
        assert_eq!(batch.key_text(1), Some("xy"));
        assert_eq!(batch.record_headers[h as usize], HeaderSpan { key: Span { start: 5, len: 2 }, value: Span { start: 0, len: 2 } });
    }

    #[test]
    fn a_mostly_used_page_is_moved_whole_and_never_grown() {
        let page = b"[abcdef]".to_vec();
        let at = page.as_ptr();
        let mut data = BatchData::new(&page);
        let value = data.span(&page[1..5]).unwrap();
        let extra = data.span(b"zz").unwrap();
        let mut records = vec![record(value, extra)];
        let batch = batch(data.finish().into_batch_bytes(page, &mut records), records);
        assert_eq!((batch.data.as_ptr(), &batch.data[..], &batch.extra[..]), (at, &b"[abcdef]"[..], &b"zz"[..]));
        assert_eq!((batch.value(0), batch.key_text(0)), (Some(&b"zz"[..]), Some("abcd")));
    }

    #[test]
    fn a_span_across_data_and_extra_or_past_both_is_out_of_range() {
        let (data, extra) = (&b"abc"[..], &b"de"[..]);
        let at = |start, len| span_bytes(data, extra, Span { start, len });
        assert_eq!((at(0, 3), at(3, 2), at(3, 0), at(4, 1)), (Some(&b"abc"[..]), Some(&b"de"[..]), Some(&b""[..]), Some(&b"e"[..])));
        assert_eq!((at(2, 2), at(4, 2), at(u32::MAX, 2)), (None, None, None));
    }
}
