//! `snow-bench backfill`: a parallel backfill (issue 22, ADR 0033) against an instance as slow as
//! a real one: fake-snow answers every request after 300 ms. The release `snow-connect` with
//! `guest_source.wasm` reads the same 120,000 rows (spread over 30 days) with
//! `snow.table.incident.backfill.parallelism` 1, 4 and 8 under the default in-flight cap of 8;
//! the target is at least 0.8 × N × the single cursor's rate up to the cap.
//!
//! Results go to `docs/benchmarks.md` between the `bench-backfill` markers.

use anyhow::Result;

use crate::fake::{Fake, now, stamp};
use crate::measure::Outcome;
use crate::orchestrate::{Delivery, wasm_with};
use crate::paths::{fresh_dir, write_report};

/// Rows seeded.
const ROWS: u64 = 120_000;
/// What each request waits at the fake.
const LATENCY_MS: u64 = 300;

/// Runs each parallelism and writes the report.
pub fn run() -> Result<()> {
    let dir = fresh_dir("bench-backfill")?;
    eprintln!("starting Apache Kafka");
    let broker = kafka_harness::KafkaBroker::start()?;
    let bootstrap = broker.bootstrap().to_string();
    let mut results: Vec<(u32, Outcome, usize)> = Vec::new();
    for parallelism in [1u32, 4, 8] {
        let fake = Fake::start(&dir, &format!("backfill-{parallelism}"))?;
        let t = now();
        fake.seed(ROWS, &stamp(t - 30 * 86_400), 30 * 86_400 - 600)?;
        let settings = fake.admin("POST", "settings", &format!(r#"{{"latency":{{"request_ms":{LATENCY_MS}}}}}"#))?;
        anyhow::ensure!(settings["latency"]["request_ms"] == LATENCY_MS, "the fake did not take the latency: {settings}");
        eprintln!("backfill: parallelism {parallelism}, {ROWS} rows, {LATENCY_MS} ms per request");
        let topic = format!("bench.backfill.{parallelism}");
        let extra = format!("snow.table.incident.backfill.parallelism={parallelism}\nsnow.instance.max.in.flight=8");
        let outcome = wasm_with(&dir, &fake.url(), &bootstrap, &topic, ROWS, Delivery::AtLeastOnce, &extra)?;
        let journal = fake.admin("GET", "journal", "")?;
        let requests = journal["entries"].as_array().map_or(0, |e| e.iter().filter(|e| e["path"] == "/api/now/table/incident").count());
        results.push((parallelism, outcome, requests));
    }
    drop(broker);
    let report = report(&results);
    println!("{report}");
    write_report("bench-backfill", "Parallel backfill at 300 ms a request (make bench)", &report)
}

fn report(results: &[(u32, Outcome, usize)]) -> String {
    let single = results.first().map_or(1.0, |(_, o, _)| o.rows_per_second());
    let mut out = format!(
        "Run by `make bench` (`target/release/snow-bench backfill`): the release `snow-connect` with `guest_source.wasm` \
         against the release fake-snow answering every request after {LATENCY_MS} ms (`POST /__fake/settings` \
         `request_ms`), {ROWS} rows spread over 30 days, `batch.size=1000`, `snow.instance.max.in.flight=8`, one Kafka \
         broker on the same machine. Rows/s from the first record to the last acknowledged; the target is at least \
         0.8 × N × the single cursor's rate (N up to the in-flight cap).\n\n\
         | backfill.parallelism | rows/s | × single cursor | target × | CPU µs/row | peak RSS MB | Table API requests |\n\
         |---|---|---|---|---|---|---|\n"
    );
    for (n, o, requests) in results {
        let ratio = o.rows_per_second() / single;
        out.push_str(&format!(
            "| {n} | {:.0} | {ratio:.2} | {:.1} | {:.1} | {:.0} | {requests} |\n",
            o.rows_per_second(),
            0.8 * f64::from((*n).min(8)),
            o.cpu_us_per_row(),
            o.peak_rss_kb as f64 / 1024.0
        ));
    }
    out
}
