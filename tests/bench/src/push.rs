//! `snow-bench push`: change → record in Kafka with push notifications (ADR 0032), with the
//! release `snow-connect` and `guest_source.wasm` against the release fake-snow, which runs the
//! after-commit business rule (a signed notification posted after each committed write).
//!
//! Four runs of the same workload — 1,000 single-row changes spread over a minute, each row
//! changed once, after a 1,000-row backfill — with push at a 60 s poll interval (all
//! notifications delivered; a fifth of them lost), and without push at 60 s and at 1 s. The
//! latency of a change is the broker's append time of its record (the topic is
//! `message.timestamp.type=LogAppendTime`) minus when the change was made; requests are the
//! Table API reads the fake served during the minute, scaled to an hour.
//!
//! Results go to `docs/benchmarks.md` between the `bench-push` markers.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};

use crate::fake::{Fake, now, stamp};
use crate::paths::{fresh_dir, machine, release_bin, source_component, trusted_keys_line, write_report};

const ROWS: usize = 1_000;
const CHANGES_OVER: Duration = Duration::from_secs(60);
const SECRET: &str = "bench-push-shared-secret-0123456789";

/// One run's settings.
struct Scenario {
    name: &'static str,
    poll_interval_ms: u64,
    /// The share of notifications lost; `None`: no push.
    push_loss: Option<f64>,
    /// Also count the requests of a minute without changes.
    quiet: bool,
}

/// What one run measured.
struct Measured {
    name: &'static str,
    p50_ms: i64,
    p99_ms: i64,
    max_ms: i64,
    requests_per_hour: f64,
    /// Requests per hour without changes, when measured.
    quiet_per_hour: Option<f64>,
    posted: u64,
}

pub fn run() -> Result<()> {
    let dir = fresh_dir("bench-push")?;
    eprintln!("starting Apache Kafka");
    let broker = kafka_harness::KafkaBroker::start()?;
    let bootstrap = broker.bootstrap().to_string();
    let scenarios = [
        Scenario { name: "push, poll.interval.ms=60000", poll_interval_ms: 60_000, push_loss: Some(0.0), quiet: true },
        Scenario {
            name: "push, 20 % of notifications lost, poll.interval.ms=60000",
            poll_interval_ms: 60_000,
            push_loss: Some(0.2),
            quiet: false,
        },
        Scenario { name: "no push, poll.interval.ms=60000", poll_interval_ms: 60_000, push_loss: None, quiet: false },
        Scenario { name: "no push, poll.interval.ms=1000", poll_interval_ms: 1_000, push_loss: None, quiet: true },
    ];
    let mut results = Vec::new();
    for (i, scenario) in scenarios.iter().enumerate() {
        eprintln!("push: {}", scenario.name);
        results.push(measure(&dir, &bootstrap, i, scenario)?);
    }
    drop(broker);
    let report = report(&results);
    println!("{report}");
    write_report("bench-push", "Push: change to record in Kafka (make bench)", &report)
}

fn measure(dir: &Path, bootstrap: &str, index: usize, scenario: &Scenario) -> Result<Measured> {
    let fake = Fake::start(dir, &format!("push-{index}"))?;
    fake.seed(ROWS as u64, &stamp(now() - 3_600), 3_000)?;
    let ids = fake.sys_ids()?;
    let topic = format!("bench.push.{index}");
    create_topic(bootstrap, &topic)?;
    let name = format!("bench-push-{index}");
    let config = dir.join(format!("{name}.properties"));
    let push_keys = match scenario.push_loss {
        Some(_) => "snow.push.secret=${env:BENCH_PUSH_SECRET}\nsnow.push.listen=127.0.0.1:0\n",
        None => "",
    };
    std::fs::write(
        &config,
        format!(
            "name={name}\ncomponent.path={}\nkafka.bootstrap.servers={bootstrap}\noffset.storage.file.filename={}\n\
             snow.instance.url={}\nsnow.auth.type=none\nsnow.tables=incident\nsnow.table.incident.topic={topic}\n\
             snow.poll.interval.ms={}\n{push_keys}{}",
            source_component().display(),
            dir.join(format!("{name}.offsets.json")).display(),
            fake.url(),
            scenario.poll_interval_ms,
            trusted_keys_line()
        ),
    )?;
    let log = dir.join(format!("{name}.log"));
    let mut child = Command::new(release_bin("snow-connect"))
        .arg("run")
        .arg(&config)
        .env("SNOW_LOG", "info")
        .env("BENCH_PUSH_SECRET", SECRET)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .context("starting snow-connect")?;
    let outcome = changes(&fake, &ids, bootstrap, &topic, &name, &log, &mut child, scenario);
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let _ = child.wait();
    outcome
}

#[allow(clippy::too_many_arguments)]
fn changes(
    fake: &Fake,
    ids: &[String],
    bootstrap: &str,
    topic: &str,
    name: &str,
    log: &Path,
    child: &mut Child,
    scenario: &Scenario,
) -> Result<Measured> {
    // The backfill first: every row once.
    read_until(bootstrap, topic, Duration::from_secs(180), child, log, |records| records.len() >= ROWS)?;
    if let Some(loss) = scenario.push_loss {
        let text = std::fs::read_to_string(log)?;
        let address = text
            .split("push endpoint on http://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .with_context(|| format!("no push endpoint in {}", log.display()))?;
        fake.admin(
            "POST",
            "push",
            &serde_json::json!({ "url": format!("http://{address}/snow/push/{name}"), "secret": SECRET, "loss": loss }).to_string(),
        )?;
    }
    fake.admin("DELETE", "journal", "")?;
    let started = Instant::now();
    let mut changed_at: HashMap<String, i64> = HashMap::new();
    for (i, id) in ids.iter().take(ROWS).enumerate() {
        let due = started + CHANGES_OVER * i as u32 / ROWS as u32;
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        changed_at.insert(id.clone(), millis_now());
        fake.admin("POST", "tables/incident/update", &serde_json::json!({ "sys_ids": [id], "changes": { "state": "2" } }).to_string())?;
    }
    let minute = started.elapsed();
    let requests = table_reads(fake)?;
    let posted = fake.admin("GET", "push", "")?["posted"].as_u64().unwrap_or(0);
    // Every change's record: the second version of each row.
    let deadline = Duration::from_secs(scenario.poll_interval_ms / 1000 + 120);
    let records = read_until(bootstrap, topic, deadline, child, log, |records| {
        let changed = records.iter().filter(|(_, mod_count, _)| mod_count != "0").count();
        changed >= changed_at.len()
    })?;
    let mut latencies: Vec<i64> = records
        .iter()
        .filter(|(_, mod_count, _)| mod_count != "0")
        .filter_map(|(key, _, appended)| changed_at.get(key).map(|at| appended - at))
        .collect();
    latencies.sort_unstable();
    let pct = |p: usize| latencies[(latencies.len() * p / 100).min(latencies.len() - 1)];
    let quiet_per_hour = if scenario.quiet {
        fake.admin("DELETE", "journal", "")?;
        let quiet = Instant::now();
        std::thread::sleep(CHANGES_OVER); // the span measured: a minute in which nothing changes
        Some(table_reads(fake)? as f64 * 3600.0 / quiet.elapsed().as_secs_f64())
    } else {
        None
    };
    Ok(Measured {
        name: scenario.name,
        p50_ms: pct(50),
        p99_ms: pct(99),
        max_ms: *latencies.last().unwrap_or(&0),
        requests_per_hour: requests as f64 * 3600.0 / minute.as_secs_f64(),
        quiet_per_hour,
        posted,
    })
}

/// Reads `topic` from its start until `done(records)`: each record's key, `snow.sys_mod_count`
/// header and the broker's append time (ms).
fn read_until(
    bootstrap: &str,
    topic: &str,
    timeout: Duration,
    child: &mut Child,
    log: &Path,
    mut done: impl FnMut(&[(String, String, i64)]) -> bool,
) -> Result<Vec<(String, String, i64)>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "bench-push-watch")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()?;
    consumer.subscribe(&[topic])?;
    let started = Instant::now();
    let mut records = Vec::new();
    loop {
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            let m = message?;
            let mod_count = m
                .headers()
                .and_then(|hs| hs.iter().find(|h| h.key == "snow.sys_mod_count").and_then(|h| h.value))
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default();
            let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
            records.push((key, mod_count, m.timestamp().to_millis().unwrap_or(0)));
            continue;
        }
        if done(&records) {
            return Ok(records);
        }
        if child.try_wait()?.is_some() {
            bail!("snow-connect exited; see {}", log.display());
        }
        if started.elapsed() > timeout {
            bail!("{topic}: not done after {timeout:?} ({} records); see {}", records.len(), log.display());
        }
    }
}

/// The Table API reads of the incident table in the fake's journal.
fn table_reads(fake: &Fake) -> Result<usize> {
    let journal = fake.admin("GET", "journal", "")?;
    Ok(journal["entries"].as_array().map_or(0, |e| e.iter().filter(|e| e["path"] == "/api/now/table/incident").count()))
}

fn create_topic(bootstrap: &str, topic: &str) -> Result<()> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let new = NewTopic::new(topic, 1, TopicReplication::Fixed(1)).set("message.timestamp.type", "LogAppendTime");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    for result in rt.block_on(admin.create_topics(&[new], &AdminOptions::new()))? {
        result.map_err(|(t, e)| anyhow::anyhow!("creating {t}: {e}"))?;
    }
    Ok(())
}

fn millis_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

fn report(results: &[Measured]) -> String {
    let mut out = format!(
        "Run by `make bench` (`target/release/snow-bench push`) on {}: the release `snow-connect` with \
         `guest_source.wasm` against the release fake-snow, which runs the after-commit business rule (a notification \
         posted at once after each write; on an instance the async rule's scheduler adds its own delay). Each run: a \
         1,000-row backfill, then 1,000 single-row changes spread evenly over a minute, each row changed once. Latency: \
         the broker's append time of the change's record minus the time of the change. Requests: the Table API reads \
         the fake served during that minute, times 60, and (quiet) during a following minute without changes. \
         `snow.safety.lag.seconds=5` and `snow.push.min.interval.ms=500` (the defaults) throughout.\n\n\
         | run | p50 | p99 | max | requests per hour, changing | requests per hour, quiet | notifications posted |\n\
         |---|---|---|---|---|---|---|\n",
        machine()
    );
    for m in results {
        out.push_str(&format!(
            "| {} | {} ms | {} ms | {} ms | {:.0} | {} | {} |\n",
            m.name,
            m.p50_ms,
            m.p99_ms,
            m.max_ms,
            m.requests_per_hour,
            m.quiet_per_hour.map_or("-".to_string(), |q| format!("{q:.0}")),
            m.posted
        ));
    }
    out
}
