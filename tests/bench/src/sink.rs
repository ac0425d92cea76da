//! `snow-bench sink`: the sink's two write paths against fake-snow made as slow as an instance —
//! 40 ms per HTTP request plus 10 ms per write it executes, a batch's items one after another — with
//! the real `guest_sink.wasm` in the release host, `snow.sink.max.in.flight=8`, over 8 partitions.
//!
//! The limits follow from the model: the Table API path sends one write per request, so 8 lanes
//! make at most 8 / 0.05 s = 160 writes/s; batches of n items take 0.04 + 0.01·n s, so at most
//! 8·n / (0.04 + 0.01·n) writes/s (769/s at n = 100). Each path is reported against its limit,
//! with the ratio of the two, the host's CPU time per record and its peak RSS. Records patch 2,000
//! rows in turn, so no batch holds two writes of one row (nothing is merged: every record is one
//! executed write).
//!
//! A third run writes through the Table API while a source connector of the same process backfills
//! 24 tables from the same instance: both share its in-flight cap (`snow.instance.max.in.flight`,
//! 8), and a place freed goes to the waiting connectors in turn (ADR 0024): half the grants each,
//! the sink holding a place 50 ms and the source 40 ms, so the sink's fair share is 8 · 50/90 places,
//! 8 · (50/90) / 0.05 s = 89 writes/s. Results go to `docs/benchmarks.md` between the `bench-sink`
//! markers.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::Value;

use crate::fake::{Fake, now, stamp};
use crate::measure::{cpu_of, peak_rss_kb};
use crate::paths::{fresh_dir, machine, release_bin, require_built, sink_component, source_component, trusted_keys_line, write_report};

const LANES: u32 = 8;
const ROWS: u64 = 2_000;
const REQUEST_MS: f64 = 40.0;
const WRITE_MS: f64 = 10.0;
const BATCH: u32 = 100;
/// The source backfilling beside the third run: tables, rows each, rows a page.
const BESIDE_TABLES: usize = 24;
const BESIDE_ROWS: u64 = 10_000;
const BESIDE_BATCH: u32 = 20;

/// One path's measurement.
struct Measured {
    path: &'static str,
    records: u64,
    /// Executed writes per second, first write to last answer (from the fake's journal).
    writes_per_second: f64,
    limit: f64,
    requests: usize,
    cpu_us_per_record: f64,
    peak_rss_mb: f64,
}

/// Runs both paths and writes the report.
pub fn run() -> Result<()> {
    let component = sink_component();
    require_built(&[release_bin("snow-connect"), release_bin("fake-snow"), component.clone(), source_component()])?;
    let dir = fresh_dir("bench-sink")?;
    eprintln!("starting Apache Kafka");
    let broker = kafka_harness::KafkaBroker::start()?;
    let bootstrap = broker.bootstrap().to_string();
    let table_limit = f64::from(LANES) / ((REQUEST_MS + WRITE_MS) / 1000.0);
    let n = f64::from(BATCH);
    let batch_limit = f64::from(LANES) * n / ((REQUEST_MS + WRITE_MS * n) / 1000.0);
    let table = measure(&dir, &bootstrap, &component, "table", 4_000, table_limit, false)?;
    let batch = measure(&dir, &bootstrap, &component, "batch", 20_000, batch_limit, false)?;
    // Places go to the two connectors in turn; the sink holds each for a write, the source for a read.
    let sink_share = (REQUEST_MS + WRITE_MS) / (2.0 * REQUEST_MS + WRITE_MS);
    let beside = measure(&dir, &bootstrap, &component, "table", 4_000, table_limit * sink_share, true)?;
    drop(broker);
    let report = report(&[table, batch, beside]);
    println!("{report}");
    write_report("bench-sink", "Sink write paths (make bench)", &report)
}

/// One path over `records` records; `beside`: while a source of the same process backfills.
fn measure(dir: &Path, bootstrap: &str, component: &Path, mode: &'static str, records: u64, limit: f64, beside: bool) -> Result<Measured> {
    let label = if beside { format!("{mode}-beside") } else { mode.to_string() };
    let backfilled: Vec<String> = if beside { (0..BESIDE_TABLES).map(|i| format!("u_backfill_{i:02}")).collect() } else { Vec::new() };
    let served: Vec<&str> = std::iter::once("incident").chain(backfilled.iter().map(String::as_str)).collect();
    let fake = Fake::start_with_tables(dir, &format!("sink-{label}"), &served)?;
    fake.seed(ROWS, &stamp(now() - 7200), 3600)?;
    for table in &backfilled {
        fake.seed_table(table, BESIDE_ROWS, &stamp(now() - 86_400), 80_000)?;
    }
    let rows = fake.sys_ids()?;
    fake.admin("POST", "settings", &format!(r#"{{"latency":{{"request_ms":{REQUEST_MS},"write_ms":{WRITE_MS}}}}}"#))?;
    let topic = format!("bench.sink.{label}");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    eprintln!("{label}: producing {records} records over {LANES} partitions");
    rt.block_on(produce(bootstrap, &topic, &rows, records))?;
    let config = dir.join(format!("{label}.properties"));
    std::fs::write(
        &config,
        format!(
            "name=bench-sink-{label}\ncomponent.path={}\nkafka.bootstrap.servers={bootstrap}\ntopics={topic}\n\
             snow.instance.url={}\nsnow.auth.type=none\nsnow.sink.table=incident\nsnow.sink.max.in.flight={LANES}\n\
             snow.sink.write.mode={mode}\nsnow.sink.batch.size={BATCH}\n{}",
            component.display(),
            fake.url(),
            trusted_keys_line()
        ),
    )?;
    let mut files = vec![config];
    if beside {
        files.push(backfill_config(dir, bootstrap, &fake, &backfilled)?);
    }
    let log = dir.join(format!("{label}.log"));
    eprintln!("{label}: writing");
    let mut child = Command::new(release_bin("snow-connect"))
        .arg("run")
        .args(&files)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    let pid = child.id();
    let group = format!("connect-bench-sink-{label}");
    let watch: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).set("group.id", &group).create()?;
    let started = Instant::now();
    let (cpu, rss) = loop {
        let mut tpl = rdkafka::TopicPartitionList::new();
        for p in 0..LANES as i32 {
            tpl.add_partition(&topic, p);
        }
        let done: i64 = watch
            .committed_offsets(tpl, Duration::from_secs(5))
            .map(|c| c.elements().iter().map(|e| e.offset().to_raw().unwrap_or(0).max(0)).sum())
            .unwrap_or(0);
        if done as u64 >= records {
            break (cpu_of(pid), peak_rss_kb(pid));
        }
        if child.try_wait()?.is_some() {
            bail!("snow-connect exited early; see {}", log.display());
        }
        if started.elapsed() > Duration::from_secs(900) {
            bail!("{label}: not done in 15 minutes ({done} of {records} committed); see {}", log.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
    let _ = child.wait();
    let journal = fake.admin("GET", "journal", "")?;
    let entries = journal["entries"].as_array().context("journal")?;
    let writes: Vec<&Value> = entries.iter().filter(|e| e["method"] == "PATCH").collect();
    if writes.len() as u64 != records {
        bail!("{label}: {} writes executed for {records} records", writes.len());
    }
    // From the first request that carried a write to the last answer.
    let carriers: Vec<&Value> =
        entries.iter().filter(|e| e["batch_item"].is_null() && (e["method"] == "PATCH" || e["path"] == "/api/now/v1/batch")).collect();
    let first = carriers.iter().filter_map(|e| e["at_ms"].as_u64()).min().unwrap_or(0);
    let last = carriers.iter().filter_map(|e| e["done_ms"].as_u64()).max().unwrap_or(0);
    let seconds = (last.saturating_sub(first)) as f64 / 1000.0;
    if beside {
        // The backfill must have been under way for the whole of the sink's run.
        let reads = |e: &&Value| e["method"] == "GET" && e["path"].as_str().is_some_and(|p| p.starts_with("/api/now/table/u_backfill_"));
        let (read_first, read_last) = entries
            .iter()
            .filter(reads)
            .fold((u64::MAX, 0), |(a, b), e| (a.min(e["at_ms"].as_u64().unwrap_or(u64::MAX)), b.max(e["done_ms"].as_u64().unwrap_or(0))));
        if read_first > first || read_last < last {
            bail!("{label}: the backfill ran from {read_first} to {read_last} ms, not across the sink's writes ({first} to {last} ms)");
        }
    }
    Ok(Measured {
        path: match (mode, beside) {
            ("table", false) => "Table API (one write per request)",
            ("table", true) => "Table API beside a 24-table backfill (limit: its fair share)",
            _ => "Batch API (n = 100)",
        },
        records,
        writes_per_second: records as f64 / seconds.max(1e-9),
        limit,
        requests: carriers.len(),
        cpu_us_per_record: cpu.as_secs_f64() * 1e6 / records as f64,
        peak_rss_mb: rss as f64 / 1024.0,
    })
}

/// A source connector over `tables` of `fake` into one topic, with the default in-flight cap.
fn backfill_config(dir: &Path, bootstrap: &str, fake: &Fake, tables: &[String]) -> Result<std::path::PathBuf> {
    let topic = "bench.sink.backfill";
    let mut text = format!(
        "name=bench-backfill\ncomponent.path={}\nkafka.bootstrap.servers={bootstrap}\nsnow.instance.url={}\nsnow.auth.type=none\n\
         snow.tables={}\nsnow.batch.size={BESIDE_BATCH}\noffset.storage.file.filename={}\n{}",
        source_component().display(),
        fake.url(),
        tables.join(","),
        dir.join("backfill.offsets.json").display(),
        trusted_keys_line()
    );
    for t in tables {
        text.push_str(&format!("snow.table.{t}.topic={topic}\n"));
    }
    let file = dir.join("backfill.properties");
    std::fs::write(&file, text)?;
    Ok(file)
}

/// Produces `records` patches of `rows` in turn to a new topic of [`LANES`] partitions, record `i`
/// to partition `i mod LANES`: every lane gets the same share (a key hash would leave some lanes
/// longer than others, and the run's tail to fewer lanes), and a row's records stay in one
/// partition (the row count is a multiple of the partition count).
pub(crate) async fn produce(bootstrap: &str, topic: &str, rows: &[String], records: u64) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    admin.create_topics(&[NewTopic::new(topic, LANES as i32, TopicReplication::Fixed(1))], &AdminOptions::new()).await?;
    let producer: FutureProducer = ClientConfig::new().set("bootstrap.servers", bootstrap).set("linger.ms", "5").create()?;
    let mut pending = Vec::new();
    for i in 0..records {
        let key = &rows[(i % rows.len() as u64) as usize];
        let value = format!(r#"{{"short_description":"bench {i}","u_seq":"{i}"}}"#);
        let record = FutureRecord::to(topic).partition((i % u64::from(LANES)) as i32).key(key.as_str()).payload(value.as_str());
        match producer.send_result(record) {
            Ok(delivery) => pending.push(delivery),
            Err((e, _)) => bail!("producing: {e}"),
        }
        if pending.len() >= 10_000 {
            for d in pending.drain(..) {
                d.await.context("delivery")?.map_err(|(e, _)| anyhow::anyhow!("delivery: {e}"))?;
            }
        }
    }
    for d in pending {
        d.await.context("delivery")?.map_err(|(e, _)| anyhow::anyhow!("delivery: {e}"))?;
    }
    Ok(())
}

fn report(results: &[Measured]) -> String {
    let machine = machine();
    let mut out = format!(
        "Run by `make bench` (`target/release/snow-bench sink`) on {machine}; the broker, fake-snow and \
         the host share them. fake-snow answers each request after {REQUEST_MS:.0} ms and spends {WRITE_MS:.0} ms on each \
         write it executes (a batch's items one after another); `snow.sink.max.in.flight={LANES}` over {LANES} partitions; \
         every record patches one of {ROWS} rows (no batch holds two writes of a row). Writes/s from the first request \
         that carried a write to the last answer (the fake's journal); CPU and peak RSS of the `snow-connect` process.\n\n\
         | path | records | requests | writes/s | limit | of limit | CPU µs/record | peak RSS |\n|---|---|---|---|---|---|---|---|\n"
    );
    for m in results {
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.2} | {:.0} | {:.1} MB |\n",
            m.path,
            m.records,
            m.requests,
            m.writes_per_second,
            m.limit,
            m.writes_per_second / m.limit,
            m.cpu_us_per_record,
            m.peak_rss_mb
        ));
    }
    if let [table, batch, beside] = results {
        out.push_str(&format!(
            "\nBatch / Table API: **{:.1}×** (target ≥ 4 at n = 100); each path at **{:.2}** and **{:.2}** of its limit (target ≥ 0.9).\n",
            batch.writes_per_second / table.writes_per_second,
            table.writes_per_second / table.limit,
            batch.writes_per_second / batch.limit
        ));
        out.push_str(&format!(
            "\nBeside a backfill: a source connector of the same process reads {BESIDE_TABLES} tables ({BESIDE_ROWS} rows each, \
             {BESIDE_BATCH} a page) from the same instance during the whole of the sink's run (checked in the journal), both \
             under the instance's in-flight cap of 8. Freed places go to the waiting connectors in turn (ADR 0024): half \
             the grants each, a sink write holding its place {:.0} ms and a source read {REQUEST_MS:.0} ms, so the sink's fair \
             share is {:.0} writes/s. It wrote **{:.0} writes/s**, **{:.2}** of that share and **{:.2}** of its rate alone.\n",
            REQUEST_MS + WRITE_MS,
            beside.limit,
            beside.writes_per_second,
            beside.writes_per_second / beside.limit,
            beside.writes_per_second / table.writes_per_second
        ));
    }
    out
}
