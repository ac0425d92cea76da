#![allow(unsafe_code)] // sysconf(_SC_CLK_TCK) to convert /proc ticks
//! Measuring a scenario: wall time, CPU time and peak resident memory of a process.

use std::time::{Duration, Instant};

/// What one scenario measured.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Rows delivered and acknowledged by Kafka.
    pub rows: u64,
    /// From the first record produced to the last acknowledged.
    pub backfill: Duration,
    /// From the start of the process to the last acknowledged record.
    pub total: Duration,
    /// User + system CPU of the process up to the end.
    pub cpu: Duration,
    /// Peak resident set size, in kB.
    pub peak_rss_kb: u64,
    /// Median time per page spent reading and turning rows into records (connector side).
    pub page_read_median: Duration,
    /// Median time per page spent queueing records to the producer.
    pub page_enqueue_median: Duration,
    /// Time inside the connector logic: requests, parsing, building records (none for (c)).
    pub phases: Option<(Duration, Duration, Duration)>,
}

impl Outcome {
    /// What a scenario run in this process measured: `rows` produced, the process started at
    /// `started` and its first record was produced at `first`; per-page read and enqueue times.
    pub fn of_this_process(
        rows: u64,
        started: Instant,
        first: Option<Instant>,
        reads: &mut [Duration],
        enqueues: &mut [Duration],
        phases: Option<(Duration, Duration, Duration)>,
    ) -> Self {
        let pid = std::process::id();
        Self {
            rows,
            backfill: first.map(|f| f.elapsed()).unwrap_or_default(),
            total: started.elapsed(),
            cpu: cpu_of(pid),
            peak_rss_kb: peak_rss_kb(pid),
            page_read_median: median(reads),
            page_enqueue_median: median(enqueues),
            phases,
        }
    }

    /// Rows per second over the backfill.
    pub fn rows_per_second(&self) -> f64 {
        self.rows as f64 / self.backfill.as_secs_f64().max(1e-9)
    }

    /// CPU microseconds per row.
    pub fn cpu_us_per_row(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.rows.max(1) as f64
    }

    /// One line of JSON, how a child process reports.
    pub fn to_json(&self) -> String {
        serde_json::json!({
            "rows": self.rows,
            "backfill_ms": self.backfill.as_millis() as u64,
            "total_ms": self.total.as_millis() as u64,
            "cpu_ms": self.cpu.as_millis() as u64,
            "peak_rss_kb": self.peak_rss_kb,
            "page_read_us": self.page_read_median.as_micros() as u64,
            "page_enqueue_us": self.page_enqueue_median.as_micros() as u64,
            "phases_ms": self.phases.map(|(r, p, b)| [r.as_millis() as u64, p.as_millis() as u64, b.as_millis() as u64]),
        })
        .to_string()
    }

    /// Reads what [`Outcome::to_json`] wrote.
    pub fn from_json(text: &str) -> Option<Self> {
        let v: serde_json::Value = serde_json::from_str(text.lines().last()?).ok()?;
        let ms = |k: &str| Duration::from_millis(v[k].as_u64().unwrap_or(0));
        let us = |k: &str| Duration::from_micros(v[k].as_u64().unwrap_or(0));
        Some(Self {
            rows: v["rows"].as_u64()?,
            backfill: ms("backfill_ms"),
            total: ms("total_ms"),
            cpu: ms("cpu_ms"),
            peak_rss_kb: v["peak_rss_kb"].as_u64()?,
            page_read_median: us("page_read_us"),
            page_enqueue_median: us("page_enqueue_us"),
            phases: v["phases_ms"].as_array().map(|a| {
                let at = |i: usize| Duration::from_millis(a.get(i).and_then(serde_json::Value::as_u64).unwrap_or(0));
                (at(0), at(1), at(2))
            }),
        })
    }
}

/// User + system CPU of process `pid` so far (from /proc).
pub fn cpu_of(pid: u32) -> Duration {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return Duration::ZERO };
    let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
    // After the command: state is field 3, utime 14 and stime 15 (1-based, so 11 and 12 here).
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0) + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_micros(ticks * 1_000_000 / per_second)
}

/// Peak resident set size of process `pid`, in kB (VmHWM).
pub fn peak_rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

/// The median of `samples` (zero when empty).
pub fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}
