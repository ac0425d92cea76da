//! The check that every row version the fake held at a read the cursor passed is in Kafka: not
//! only the final versions, but each version a committed read saw, also when the row changed again
//! later (a source that skipped a version and only caught the row's next one would pass a check
//! of final versions).
//!
//! Inputs: the fake's served-versions log (each list answer's versions, when and by whom), the
//! time each version stopped being current, and the `opened at cursor <ts> "<sys_id>"` lines every
//! run logs when it opens the table at its *committed* position (from all processes' logs; the
//! test opens the table once more after the last run so that every read of the runs is followed by
//! an open; the reads of that last opening run itself oblige nothing).
//!
//! Which versions a read obliges: a read `r` is followed by an open at position `P`. Everything a
//! run committed before it stopped is at or below `P`, and nothing above `P` was committed (the
//! position and the records move in one transaction). So a version of `r` at or below `P` was
//! committed by `r`'s poll, by an earlier read, or (when `r` was an overlap re-read whose poll was
//! aborted) it is in the window `[P − overlap, P]` that the next run re-reads: it reaches Kafka as
//! long as it is still the row's version when that re-read comes. A version that stopped being
//! current within `grace` of the next open may have been gone by then (legitimately never
//! emitted) and is not required; the check reports how many were let off that way. A version
//! above `P` was not committed by `r` and is required through a later read, if any served it.
//! Each version is judged at its *last* read: an earlier read of it may have been aborted.

use std::collections::{BTreeMap, BTreeSet};

use fake_snow::FakeSnow;
use fake_snow::served::Served;

/// A run opening the table at its committed position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Open {
    /// When it was logged, in ms since the Unix epoch.
    pub unix_ms: u64,
    /// `(sys_updated_on, sys_id)`.
    pub position: (String, String),
}

/// The opens of `connector`'s `table` in `logs` (any number of processes' logs), in time order.
pub fn opens(logs: &[&str], connector: &str, table: &str) -> Vec<Open> {
    let unit = format!("unit=\"{connector}/{table}\"");
    let mut found: Vec<Open> = logs
        .iter()
        .flat_map(|log| log.lines())
        .filter(|line| line.contains(&unit))
        .filter_map(|line| {
            let (_, after) = line.split_once("opened at cursor ")?;
            let ts = after.get(..19)?.to_string();
            let id = after.get(20..)?.strip_prefix('"')?.split_once('"')?.0.to_string();
            Some(Open { unix_ms: log_time_ms(line)?, position: (ts, id) })
        })
        .collect();
    found.sort_by_key(|o| o.unix_ms);
    found
}

/// The contents of every `*.log` file in `dir` (each run's log, killed runs' included).
pub fn logs_in(dir: &std::path::Path) -> Vec<String> {
    let mut logs = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.path().extension().is_some_and(|e| e == "log") {
            logs.push(std::fs::read_to_string(entry.path()).unwrap_or_default());
        }
    }
    logs
}

/// The time of a log line (`2026-12-04T13:50:58.384979Z ...`) in ms since the Unix epoch.
fn log_time_ms(line: &str) -> Option<u64> {
    let stamp = line.get(..23)?;
    let secs = fake_snow::time::parse_ts(&stamp[..19].replace('T', " "))?;
    let millis: u64 = stamp.get(20..23)?.parse().ok()?;
    Some(secs as u64 * 1000 + millis)
}

/// What the check found.
#[derive(Debug, Default)]
pub struct Passed {
    /// Versions required in Kafka.
    pub required: usize,
    /// Versions at or below their read's next open that stopped being current within the grace.
    pub let_off: usize,
    /// Required versions missing from Kafka: `(sys_updated_on, sys_id, sys_mod_count)`.
    pub missing: Vec<(String, String, String)>,
}

/// Checks `table`'s served versions against `in_kafka` (`(sys_id, sys_mod_count)` read back).
pub fn check(fake: &FakeSnow, table: &str, opens: &[Open], grace_ms: u64, in_kafka: &BTreeSet<(String, String)>) -> Passed {
    let served: Vec<Served> = fake.served().into_iter().filter(|s| s.table == table).collect();
    // Each version's last read.
    let mut last: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for read in &served {
        for v in &read.versions {
            last.insert((v.ts.clone(), v.sys_id.clone(), v.mod_count.clone()), read.unix_ms);
        }
    }
    let mut passed = Passed::default();
    for ((ts, sys_id, mod_count), read_ms) in last {
        // After the last open: a read of the run that only opened the table to log where it
        // stood (stopped at once, its reads' fate unknown).
        let Some(next) = opens.iter().find(|o| o.unix_ms > read_ms) else { continue };
        if (ts.as_str(), sys_id.as_str()) > (next.position.0.as_str(), next.position.1.as_str()) {
            continue;
        }
        if fake.superseded_at(table, &sys_id, &mod_count).is_some_and(|gone| gone <= next.unix_ms + grace_ms) {
            passed.let_off += 1;
            continue;
        }
        passed.required += 1;
        if !in_kafka.contains(&(sys_id.clone(), mod_count.clone())) {
            passed.missing.push((ts, sys_id, mod_count));
        }
    }
    passed
}
