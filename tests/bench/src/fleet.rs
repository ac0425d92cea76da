//! `snow-bench fleet`: a fleet of release `snow-connect worker` processes on this machine, one
//! group, the real source component, a release fake-snow and the broker:
//!
//! * backfill throughput of 50 tables × 10,000 rows by a standalone run and by 1, 2 and 3 workers
//!   (the fake answering at once), from the first record in Kafka to the last;
//! * failover: three workers backfilling (the fake taking 20 ms a request), one SIGKILLed; the
//!   time from the kill until `GET …/status` shows every table running on the other two, with the
//!   default `session.timeout.ms` (10 s), three times.
//!
//! Results go to `docs/benchmarks.md` between the `bench-fleet` markers.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use serde_json::{Value, json};

use crate::fake::{Fake, now, stamp};
use crate::paths::{fresh_dir, machine, release_bin, require_built, source_component, workspace, write_report};

const TABLES: usize = 50;
const ROWS: u64 = 10_000;
const PARTITIONS: i32 = 6;
const KILLS: usize = 3;

/// Runs both measurements and writes the report.
pub fn run() -> Result<()> {
    require_built(&[release_bin("snow-connect"), release_bin("fake-snow"), source_component()])?;
    let dir = fresh_dir("bench-fleet")?;
    eprintln!("starting Apache Kafka");
    let broker = kafka_harness::KafkaBroker::start()?;
    let bootstrap = broker.bootstrap().to_string();
    let tables: Vec<String> = (0..TABLES).map(|i| format!("u_bench_{i:02}")).collect();
    let names: Vec<&str> = tables.iter().map(String::as_str).collect();
    let fake = Fake::start_with_tables(&dir, "fleet", &names)?;
    for table in &tables {
        fake.seed_table(table, ROWS, &stamp(now() - 86_400), 80_000)?;
    }
    let alone = standalone(&dir, &bootstrap, &fake, &names)?;
    let mut throughput = Vec::new();
    for workers in 1..=3 {
        throughput.push((workers, backfill(&dir, &bootstrap, &fake, &names, workers, &format!("tp{workers}"))?));
    }
    fake.admin("POST", "settings", r#"{"latency":{"request_ms":20,"write_ms":0}}"#)?;
    let mut failovers = Vec::new();
    for kill in 0..KILLS {
        failovers.push(failover(&dir, &bootstrap, &fake, &names, &format!("kill{kill}"))?);
    }
    drop(broker);
    let report = report(alone, &throughput, &failovers);
    println!("{report}");
    write_report("bench-fleet", "A fleet of workers (make bench)", &report)
}

/// A worker process of `group` on a free port, with its log in `dir`.
struct Worker {
    child: Child,
    port: u16,
}

impl Worker {
    fn start(dir: &Path, label: &str, group: &str, bootstrap: &str) -> Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let config = dir.join(format!("{label}.properties"));
        std::fs::write(
            &config,
            format!(
                "group.id={group}\nbootstrap.servers={bootstrap}\nlisteners=http://127.0.0.1:{port}\nwork.slots=32\n\
                 component.trusted.keys={}\nplugin.path={}\n\
                 # The bench's fake instance listens on loopback, which a worker refuses unless listed.\n\
                 destinations.instances=127.0.0.1\n",
                workspace().join("tests/keys/development-only.pub").display(),
                // Connectors may name the components built for the bench (ADR 0025).
                source_component().parent().map(|p| p.display().to_string()).unwrap_or_default()
            ),
        )?;
        let child = Command::new(release_bin("snow-connect"))
            .args(["worker", "--config"])
            .arg(&config)
            .arg("--component-cache")
            .arg(dir.join("cache"))
            .env("SNOW_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join(format!("{label}.log")))?)
            .spawn()
            .context("starting a worker")?;
        let worker = Self { child, port };
        let started = Instant::now();
        while http(port, "GET", "/", None).is_err() {
            if started.elapsed() > Duration::from_secs(60) {
                bail!("worker {label} did not answer on its REST port; see its log in {}", dir.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(worker)
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn stop(mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request to the worker on `port`; the status and JSON answer.
fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let text = String::from_utf8_lossy(&answer);
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    Ok((status, serde_json::from_str(body).unwrap_or(Value::Null)))
}

/// The source connector's configuration over `tables` into `topic`.
fn connector(fake: &Fake, tables: &[&str], topic: &str, batch: u32) -> Value {
    let mut config = json!({
        "component.path": source_component().display().to_string(),
        "snow.instance.url": fake.url(),
        "snow.auth.type": "none",
        "snow.tables": tables.join(","),
        "snow.batch.size": batch.to_string(),
        "snow.instance.max.in.flight": "16",
    });
    for t in tables {
        config[format!("snow.table.{t}.topic")] = json!(topic);
    }
    config
}

fn create_topic(bootstrap: &str, topic: &str) -> Result<()> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(admin.create_topics(&[NewTopic::new(topic, PARTITIONS, TopicReplication::Fixed(1))], &AdminOptions::new()))?;
    Ok(())
}

fn produced(bootstrap: &str, topic: &str) -> u64 {
    let Ok(consumer) =
        ClientConfig::new().set("bootstrap.servers", bootstrap).set("group.id", "bench-fleet-watch").create::<BaseConsumer>()
    else {
        return 0;
    };
    (0..PARTITIONS).map(|p| consumer.fetch_watermarks(topic, p, Duration::from_secs(5)).map(|(_, h)| h.max(0) as u64).unwrap_or(0)).sum()
}

/// Rows per second of the 50-table backfill with `count` workers.
fn backfill(dir: &Path, bootstrap: &str, fake: &Fake, tables: &[&str], count: usize, label: &str) -> Result<f64> {
    let group = format!("bench-{label}-{}", std::process::id());
    let workers: Vec<Worker> =
        (0..count).map(|i| Worker::start(dir, &format!("{label}-w{i}"), &group, bootstrap)).collect::<Result<_>>()?;
    // Let the group settle (every worker holding its slots) before the clock starts.
    std::thread::sleep(Duration::from_secs(8));
    let topic = format!("bench.fleet.{label}");
    create_topic(bootstrap, &topic)?;
    let total = tables.len() as u64 * ROWS;
    eprintln!("backfill: {count} worker(s), {total} rows");
    let created = Instant::now();
    let (status, answer) =
        http(workers[0].port, "POST", "/connectors", Some(&json!({ "name": label, "config": connector(fake, tables, &topic, 1000) })))?;
    if status != 201 {
        bail!("creating the connector: {status} {answer}");
    }
    let started = wait_records(bootstrap, &topic, total, created, dir)?;
    let seconds = started.elapsed().as_secs_f64();
    for worker in workers {
        worker.stop();
    }
    Ok(total as f64 / seconds)
}

/// Waits for the first record of `topic`, then for `total`; returns when the first arrived.
fn wait_records(bootstrap: &str, topic: &str, total: u64, since: Instant, dir: &Path) -> Result<Instant> {
    while produced(bootstrap, topic) == 0 {
        if since.elapsed() > Duration::from_secs(120) {
            bail!("no record within 2 minutes; logs in {}", dir.display());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let first = Instant::now();
    while produced(bootstrap, topic) < total {
        if since.elapsed() > Duration::from_secs(600) {
            bail!("the backfill did not finish; logs in {}", dir.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(first)
}

/// Rows per second of the same 50-table backfill by `snow-connect run` (offsets in a file).
fn standalone(dir: &Path, bootstrap: &str, fake: &Fake, tables: &[&str]) -> Result<f64> {
    let topic = "bench.fleet.standalone";
    create_topic(bootstrap, topic)?;
    let config = connector(fake, tables, topic, 1000);
    let mut text = format!(
        "name=standalone\nkafka.bootstrap.servers={bootstrap}\noffset.storage.file.filename={}\ncomponent.trusted.keys={}\n",
        dir.join("standalone.offsets.json").display(),
        workspace().join("tests/keys/development-only.pub").display()
    );
    for (k, v) in config.as_object().into_iter().flatten() {
        text.push_str(&format!("{k}={}\n", v.as_str().unwrap_or_default()));
    }
    let file = dir.join("standalone.properties");
    std::fs::write(&file, text)?;
    let total = tables.len() as u64 * ROWS;
    eprintln!("backfill: standalone, {total} rows");
    let since = Instant::now();
    let mut child = Command::new(release_bin("snow-connect"))
        .arg("run")
        .arg(&file)
        .arg("--component-cache")
        .arg(dir.join("cache"))
        .env("SNOW_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("standalone.log"))?)
        .spawn()?;
    let started = wait_records(bootstrap, topic, total, since, dir)?;
    let seconds = started.elapsed().as_secs_f64();
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let _ = child.wait();
    Ok(total as f64 / seconds)
}

/// Seconds from the SIGKILL of one of three backfilling workers until every table runs elsewhere.
fn failover(dir: &Path, bootstrap: &str, fake: &Fake, tables: &[&str], label: &str) -> Result<(f64, usize)> {
    let group = format!("bench-{label}-{}", std::process::id());
    let mut workers: Vec<Option<Worker>> =
        (0..3).map(|i| Worker::start(dir, &format!("{label}-w{i}"), &group, bootstrap).map(Some)).collect::<Result<_>>()?;
    let topic = format!("bench.fleet.{label}");
    create_topic(bootstrap, &topic)?;
    let port = workers[0].as_ref().map(|w| w.port).unwrap_or_default();
    let (status, answer) =
        http(port, "POST", "/connectors", Some(&json!({ "name": label, "config": connector(fake, tables, &topic, 200) })))?;
    if status != 201 {
        bail!("creating the connector: {status} {answer}");
    }
    let victim = workers[1].as_ref().map(|w| format!("127.0.0.1:{}", w.port)).unwrap_or_default();
    let on = |status: &Value, id: &str| {
        status["tasks"].as_array().map(|t| t.iter().filter(|t| t["worker_id"] == id && t["state"] == "RUNNING").count()).unwrap_or(0)
    };
    let running = |status: &Value| status["tasks"].as_array().map(|t| t.iter().filter(|t| t["state"] == "RUNNING").count()).unwrap_or(0);
    let started = Instant::now();
    let moved = loop {
        let (_, status) = http(port, "GET", &format!("/connectors/{label}/status"), None)?;
        if running(&status) == tables.len() && on(&status, &victim) > 0 && produced(bootstrap, &topic) > 20_000 {
            break on(&status, &victim);
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!("the fleet never ran every table with work on the second worker");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let total = tables.len() as u64 * ROWS;
    if produced(bootstrap, &topic) >= total {
        bail!("the backfill ended before the kill");
    }
    if let Some(victim) = workers[1].take() {
        victim.kill();
    }
    let killed = Instant::now();
    loop {
        let (_, status) = http(port, "GET", &format!("/connectors/{label}/status"), None)?;
        if running(&status) == tables.len() && on(&status, &victim) == 0 {
            break;
        }
        if killed.elapsed() > Duration::from_secs(60) {
            bail!("the killed worker's tables did not run elsewhere within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let seconds = killed.elapsed().as_secs_f64();
    eprintln!("failover: {moved} tables ran elsewhere {seconds:.2} s after SIGKILL");
    for worker in workers.into_iter().flatten() {
        worker.stop();
    }
    Ok((seconds, moved))
}

fn report(alone: f64, throughput: &[(usize, f64)], failovers: &[(f64, usize)]) -> String {
    let mut out = format!(
        "Machine: {}. `make bench` → `target/release/snow-bench fleet`: release `snow-connect worker` processes of one group on this \
         machine, the release fake-snow and Apache Kafka on the same two cores, the real source component.\n\n",
        machine()
    );
    out.push_str(&format!("Backfill of {TABLES} tables × {ROWS} rows (pages of 1,000, the fake answering at once), from the first record in Kafka to the last (a fleet's offset writes are transactions of the slots' fenced producers; standalone's go to a file):\n\n| run | rows/s |\n|---|---|\n| standalone (`snow-connect run`) | {alone:.0} |\n"));
    for (workers, rate) in throughput {
        out.push_str(&format!("| {workers} worker{} | {rate:.0} |\n", if *workers == 1 { "" } else { "s" }));
    }
    out.push_str(
        "\nFailover (three workers backfilling the same tables, pages of 200, the fake taking 20 ms a request, default \
         `session.timeout.ms`=10000; time from SIGKILL of one worker until `GET /connectors/…/status` on another shows every table \
         running on the two left):\n\n| run | tables moved | seconds |\n|---|---|---|\n",
    );
    for (i, (seconds, moved)) in failovers.iter().enumerate() {
        out.push_str(&format!("| {} | {moved} | {seconds:.2} |\n", i + 1));
    }
    out
}
