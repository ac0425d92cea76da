//! The request journal: every request with its outcome, and the most requests ever in flight.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Serialize;

/// One request as the fake saw it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct JournalEntry {
    /// Order of arrival.
    pub seq: u64,
    /// Method.
    pub method: String,
    /// Path without query.
    pub path: String,
    /// Decoded `sysparm_query`, if any.
    pub query: Option<String>,
    /// Status answered; 0 when the connection was dropped.
    pub status: u16,
    /// `none`, `basic:<user>` or `bearer`.
    pub auth: String,
    /// The request's `X-Request-Id`, if any.
    pub request_id: Option<String>,
    /// The `X-Snow-Worker` header a fleet worker's gate adds: which worker sent the request.
    pub worker: Option<String>,
    /// Requests in flight when this one arrived (itself included).
    pub in_flight: usize,
    /// Encoded-query terms ServiceNow would have dropped silently.
    pub dropped_terms: Vec<String>,
    /// For token requests, the `grant_type` asked for.
    pub grant: Option<String>,
    /// When the request arrived, in ms since the fake started.
    pub at_ms: u64,
    /// `sysparm_limit` and `sysparm_offset` of a list request, as sent.
    pub limit: Option<u32>,
    /// See `limit`.
    pub offset: Option<u32>,
    /// Rows a list answer held (after ACLs dropped the hidden ones).
    pub returned: Option<usize>,
    /// The session the request ran in (its `JSESSIONID`); none for admin and token requests.
    pub session: Option<String>,
    /// Requests of that session in flight when this one arrived (itself included): above one,
    /// two requests shared a session and the instance served them one after another.
    pub session_in_flight: usize,
    /// When the answer was ready, in ms since the fake started (with `at_ms`: the request's span).
    pub done_ms: u64,
    /// For an item of a Batch API request: its position in the batch (the batch's own entry has
    /// none, and shares its `seq`).
    pub batch_item: Option<u32>,
    /// For a Batch API request: how many of its items the quota left unserviced.
    pub unserviced: Option<usize>,
    /// The first 512 bytes of an API write's body (POST, PATCH, PUT under `/api/`), as text.
    pub body: Option<String>,
}

/// Everything recorded since the last reset.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Journal {
    /// Most requests in flight at once.
    pub max_in_flight: usize,
    /// Requests in order of arrival.
    pub entries: Vec<JournalEntry>,
}

/// The recorder.
#[derive(Debug)]
pub struct Recorder {
    started: std::time::Instant,
    entries: Mutex<Vec<JournalEntry>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    seq: std::sync::atomic::AtomicU64,
}

impl Default for Recorder {
    fn default() -> Self {
        Self {
            started: std::time::Instant::now(),
            entries: Mutex::default(),
            in_flight: AtomicUsize::default(),
            max_in_flight: AtomicUsize::default(),
            seq: Default::default(),
        }
    }
}

/// Held while a request is in flight.
pub struct InFlight<'a> {
    recorder: &'a Recorder,
    /// Requests in flight when this one arrived.
    pub at_start: usize,
    /// Order of arrival.
    pub seq: u64,
    /// Arrival in ms since the fake started.
    pub at_ms: u64,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.recorder.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Recorder {
    /// Counts a request in; it is counted out when the guard drops.
    pub fn begin(&self) -> InFlight<'_> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight {
            recorder: self,
            at_start: now,
            seq: self.seq.fetch_add(1, Ordering::SeqCst),
            at_ms: self.started.elapsed().as_millis() as u64,
        }
    }

    /// Milliseconds since the fake started.
    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Records a finished request.
    pub fn record(&self, mut entry: JournalEntry) {
        entry.done_ms = self.now_ms();
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).push(entry);
    }

    /// A copy of the journal.
    pub fn snapshot(&self) -> Journal {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner()).clone();
        entries.sort_by_key(|e| e.seq);
        Journal { max_in_flight: self.max_in_flight.load(Ordering::SeqCst), entries }
    }

    /// Forgets everything recorded (requests in flight keep counting).
    pub fn reset(&self) {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.max_in_flight.store(self.in_flight.load(Ordering::SeqCst), Ordering::SeqCst);
    }
}
