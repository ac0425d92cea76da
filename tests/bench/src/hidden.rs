//! `snow-bench hidden`: the source through rows hidden by ACLs (issue 8), with the real component
//! and host (release builds) against fake-snow, which reads each window before it drops hidden
//! rows as ServiceNow does. Two shapes, each with the instance's `X-Total-Count`/`Link` and
//! without them:
//!
//! * **spread**: 200,000 rows over a day plus 12,000 in one second, one row in seven hidden
//!   (`state=3`), against the same table with nothing hidden;
//! * **block**: 40,000 rows in one second whose 2,500-odd rows with a sys_id starting with `3` —
//!   contiguous in cursor order — are hidden: the time and requests to cross them.
//!
//! Results go to `docs/benchmarks.md` between the `bench-hidden` markers.

use std::path::Path;

use anyhow::Result;
use serde_json::Value;

use crate::fake::{Fake, now, stamp};
use crate::measure::Outcome;
use crate::orchestrate::wasm;
use crate::paths::{fresh_dir, write_report};

/// What one scenario measured.
struct Measured {
    name: String,
    readable: u64,
    outcome: Outcome,
    requests: usize,
    /// For the block: requests and milliseconds from the window at the block to the rows after it.
    crossing: Option<(usize, u64)>,
}

/// Runs every scenario and writes the report.
pub fn run() -> Result<()> {
    let dir = fresh_dir("bench-hidden")?;
    eprintln!("starting Apache Kafka");
    let broker = kafka_harness::KafkaBroker::start()?;
    let bootstrap = broker.bootstrap().to_string();
    let mut results = Vec::new();
    for (name, hide, headers) in [
        ("spread, nothing hidden", false, true),
        ("spread, 1 in 7 hidden", true, true),
        ("spread, 1 in 7 hidden, no count/Link", true, false),
    ] {
        let fake = Fake::start(&dir, &format!("spread-{}", results.len()))?;
        let t = now();
        fake.seed(200_000, &stamp(t - 86_400), 80_000)?;
        fake.seed(12_000, &stamp(t - 3_600), 0)?;
        if hide {
            fake.admin("POST", "tables/incident/hidden", r#"{"query":"state=3"}"#)?;
        }
        results.push(scenario(&dir, &bootstrap, &fake, name, headers, false)?);
    }
    for (name, headers) in [("block of ~2,500 hidden in one second", true), ("block of ~2,500 hidden, no count/Link", false)] {
        let fake = Fake::start(&dir, &format!("block-{}", results.len()))?;
        let t = now();
        fake.seed(1_000, &stamp(t - 7_200), 600)?;
        fake.seed(40_000, &stamp(t - 3_600), 0)?;
        fake.seed(1_000, &stamp(t - 3_000), 600)?;
        fake.admin("POST", "tables/incident/hidden", &format!(r#"{{"query":"sys_updated_on={}^sys_idSTARTSWITH3"}}"#, stamp(t - 3_600)))?;
        results.push(scenario(&dir, &bootstrap, &fake, name, headers, true)?);
    }
    drop(broker);
    let report = report(&results);
    println!("{report}");
    write_report("bench-hidden", "Rows hidden by ACLs (make bench)", &report)
}

fn scenario(dir: &Path, bootstrap: &str, fake: &Fake, name: &str, headers: bool, block: bool) -> Result<Measured> {
    fake.admin("POST", "settings", &format!(r#"{{"pagination_headers":{headers}}}"#))?;
    let readable = fake.readable()?;
    let topic = format!("bench.hidden.{}", name.replace([' ', ',', '/', '~'], "-"));
    eprintln!("hidden rows: {name}: {readable} readable rows");
    let outcome = wasm(dir, &fake.url(), bootstrap, &topic, readable)?;
    let journal = fake.admin("GET", "journal", "")?;
    let entries = journal["entries"].as_array().cloned().unwrap_or_default();
    let requests = entries.iter().filter(|e| e["path"] == "/api/now/table/incident").count();
    let crossing = if block { crossing(&entries) } else { None };
    Ok(Measured { name: name.to_string(), readable, outcome, requests, crossing })
}

/// From the first drain window that came back empty (the block starts there) to the first later
/// window (not a look above) that returned rows.
fn crossing(entries: &[Value]) -> Option<(usize, u64)> {
    let is_list = |e: &Value| e["path"] == "/api/now/table/incident";
    let query = |e: &Value| e["query"].as_str().unwrap_or("").to_string();
    let start = entries.iter().position(|e| is_list(e) && query(e).contains("sys_id>") && e["returned"] == 0)?;
    let found = entries[start + 1..]
        .iter()
        .position(|e| is_list(e) && !query(e).contains("ORDERBYDESC") && e["returned"].as_u64().is_some_and(|n| n > 0))?
        + start
        + 1;
    let ms = entries[found]["at_ms"].as_u64()?.saturating_sub(entries[start]["at_ms"].as_u64()?);
    Some((found - start + 1, ms))
}

fn report(results: &[Measured]) -> String {
    let mut out = String::from(
        "Run by `make bench` (`target/release/snow-bench hidden`): the release `snow-connect` with `guest_source.wasm` \
         against the release fake-snow, which reads each window (`sysparm_limit` from `sysparm_offset`) before it drops \
         hidden rows, as ServiceNow does; `batch.size=1000`, the other settings at their defaults. \"Requests\" counts \
         the Table API reads of the whole run, the look above the cursor included.\n\n\
         | scenario | readable rows | rows/s | CPU µs/row | requests | requests per 1,000 readable rows | crossing the block |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for m in results {
        let crossing = m.crossing.map(|(n, ms)| format!("{n} requests, {ms} ms")).unwrap_or_else(|| "-".into());
        out.push_str(&format!(
            "| {} | {} | {:.0} | {:.1} | {} | {:.2} | {} |\n",
            m.name,
            m.readable,
            m.outcome.rows_per_second(),
            m.outcome.cpu_us_per_row(),
            m.requests,
            m.requests as f64 * 1000.0 / m.readable.max(1) as f64,
            crossing
        ));
    }
    out
}
