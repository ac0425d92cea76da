//! The served-versions log: for each list answer, which row versions it held (when switched on).
//!
//! A test that must show "every row version the fake held at each read that the cursor passed is
//! in Kafka" needs more than the journal's row counts: it needs each read's versions, and when and
//! by whom the read was made. Off by default (a long backfill serves millions of versions).

use std::sync::Mutex;

use serde::Serialize;

/// One row version in a list answer.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct ServedVersion {
    /// `sys_updated_on` as stored (`YYYY-MM-DD HH:MM:SS`, UTC).
    pub ts: String,
    /// The row's `sys_id`.
    pub sys_id: String,
    /// `sys_mod_count` as stored.
    pub mod_count: String,
}

/// One list answer.
#[derive(Debug, Clone, Serialize)]
pub struct Served {
    /// The table read.
    pub table: String,
    /// The `X-Snow-Worker` of the request, if any.
    pub worker: Option<String>,
    /// When the answer was made, in ms since the Unix epoch (the machine's clock, like a log line).
    pub unix_ms: u64,
    /// The versions the answer held, in its order (after ACLs).
    pub versions: Vec<ServedVersion>,
}

/// The log; `None` while switched off.
#[derive(Debug, Default)]
pub struct ServedLog {
    reads: Mutex<Option<Vec<Served>>>,
}

impl ServedLog {
    /// Switches recording on (keeping what was recorded) or off (forgetting it).
    pub fn set(&self, on: bool) {
        let mut reads = self.reads.lock().unwrap_or_else(|e| e.into_inner());
        match (on, reads.is_some()) {
            (true, false) => *reads = Some(Vec::new()),
            (false, _) => *reads = None,
            (true, true) => {}
        }
    }

    /// Whether list answers are being recorded.
    pub fn is_on(&self) -> bool {
        self.reads.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// Records one answer (ignored while off).
    pub fn record(&self, served: Served) {
        if let Some(reads) = self.reads.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            reads.push(served);
        }
    }

    /// A copy of everything recorded, in order of recording.
    pub fn snapshot(&self) -> Vec<Served> {
        self.reads.lock().unwrap_or_else(|e| e.into_inner()).clone().unwrap_or_default()
    }
}

/// Milliseconds since the Unix epoch, by the machine's clock.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
