//! `snow-bench connect`: the source backfill inside Apache Kafka Connect 4.1.1 (our plugin, ADR
//! 0037: the release `snow-connect task-executor` and the same signed `guest_source.wasm`) against
//! `snow-connect run`, on one broker and one release fake-snow seeded with the same rows: rows/s
//! from the first record to the last in Kafka, CPU per row (Connect: the worker's JVM and the
//! task's executor; ours: the one process), peak memory, and the plugin's start time (from the
//! connector's creation over Connect's REST API to its first record; ours: from the process start).
//! The scenarios take turns for a few rounds, each reported by its median round.
//!
//! Results go to `docs/benchmarks.md` between the `bench-connect` markers.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::measure::{cpu_of, peak_rss_kb};
use crate::paths::{fresh_dir, machine, release_bin, require_built, source_component, trusted_keys_line, workspace, write_report};

const ROWS: u64 = 100_000;
const ROUNDS: usize = 3;

/// One scenario's round.
#[derive(Debug, Clone, Copy, Default)]
struct Round {
    /// From the start (process, or connector creation) to the first record in Kafka.
    start: Duration,
    /// From the first record to the last.
    backfill: Duration,
    /// CPU spent over the run.
    cpu: Duration,
    /// Of `cpu`, what the task's executor spent (Connect only).
    executor_cpu: Duration,
    /// Peak resident memory, kB (Connect: the JVM's and the executor's).
    rss_kb: u64,
}

impl Round {
    fn rows_per_second(&self) -> f64 {
        ROWS as f64 / self.backfill.as_secs_f64().max(1e-9)
    }
    fn cpu_us_per_row(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / ROWS as f64
    }
}

pub fn run() -> Result<()> {
    let jar = workspace().join("target/connect/snow-connect-plugin.jar");
    let jars = workspace().join("target/connect/jars-4.1.1");
    require_built(&[release_bin("snow-connect"), release_bin("fake-snow"), source_component(), jar, jars.join(".complete")])?;
    let dir = fresh_dir("bench-connect")?;
    eprintln!("starting Apache Kafka");
    let broker = kafka_harness::KafkaBroker::start()?;
    let bootstrap = broker.bootstrap().to_string();
    eprintln!("seeding {ROWS} rows in fake-snow");
    let (mut fake, fake_url) = crate::orchestrate::seeded_fake(&dir, ROWS)?;
    let plugins = dir.join("plugins");
    let packaged = Command::new("bash")
        .arg(workspace().join("connect-plugin/package.sh"))
        .arg(release_bin("snow-connect"))
        .arg(plugins.join("snow-connect-servicenow"))
        .current_dir(workspace())
        .stdout(Stdio::null())
        .status()?;
    anyhow::ensure!(packaged.success(), "connect-plugin/package.sh failed");
    eprintln!("starting a Kafka Connect 4.1.1 distributed worker");
    let worker_started = Instant::now();
    let mut worker = Worker::start(&dir, &bootstrap, &plugins, &jars)?;
    let worker_up = worker_started.elapsed();

    let (mut ours, mut connect) = (Vec::new(), Vec::new());
    // The first pass of each is a warm-up (the broker's and Connect's JVMs compile their hot paths).
    for round in 0..=ROUNDS {
        eprintln!("round {round}/{ROUNDS}: snow-connect run, {ROWS} rows");
        let a = run_ours(&dir, &fake_url, &bootstrap, round)?;
        eprintln!("  {:.0} rows/s, {:.1} µs CPU a row", a.rows_per_second(), a.cpu_us_per_row());
        eprintln!("round {round}/{ROUNDS}: inside Kafka Connect, {ROWS} rows");
        let b = worker.run_connector(&fake_url, &bootstrap, round)?;
        eprintln!(
            "  {:.0} rows/s, {:.1} µs CPU a row ({:.1} in the executor)",
            b.rows_per_second(),
            b.cpu_us_per_row(),
            b.executor_cpu.as_secs_f64() * 1e6 / ROWS as f64
        );
        if round > 0 {
            ours.push(a);
            connect.push(b);
        }
    }
    worker.stop();
    let _ = fake.kill();
    let _ = fake.wait();
    drop(broker);
    let report = report(&ours, &connect, worker_up);
    println!("{report}");
    write_report("bench-connect", "Inside Kafka Connect (make bench)", &report)
}

/// The round of `runs` with the median backfill.
fn median(runs: &[Round]) -> Round {
    let mut sorted = runs.to_vec();
    sorted.sort_by_key(|r| r.backfill);
    sorted[sorted.len() / 2]
}

fn report(ours: &[Round], connect: &[Round], worker_up: Duration) -> String {
    let (a, b) = (median(ours), median(connect));
    let ratios: Vec<f64> = ours.iter().zip(connect).map(|(a, b)| b.rows_per_second() / a.rows_per_second()).collect();
    let mut sorted = ratios.clone();
    sorted.sort_by(f64::total_cmp);
    let row = |what: &str, r: &Round, start: &str| {
        format!(
            "| {what} | {:.0} | {:.1} | {:.0} | {start} {:.2} s |\n",
            r.rows_per_second(),
            r.cpu_us_per_row(),
            r.rss_kb as f64 / 1024.0,
            r.start.as_secs_f64()
        )
    };
    format!(
        "Command: `make bench` → `target/release/snow-bench connect`. Machine: {}. One Apache Kafka 4.1.1 broker and one \
         release fake-snow seeded with {ROWS} incident rows; each scenario backfills all of them into a fresh topic \
         (`snow.batch.size=1000`), {ROUNDS} rounds taking turns after one warm-up round each, reported by the median round.\n\n\
         | scenario | rows/s | CPU µs/row | peak memory MB | start |\n|---|---|---|---|---|\n{}{}\n\
         Inside Connect / `snow-connect run`, rows/s per round: {} (median {:.2}). CPU inside Connect is the worker JVM's \
         (the plugin's decoding, Connect's record handling, the JSON converter, the producer) plus the task's executor (the \
         component and ServiceNow reads: {:.1} µs a row of the median round's {:.1}); its memory is the JVM's peak plus the executor's. Start: ours from the process start to the first record; \
         Connect's from `POST /connectors` to the first record (Connect's validation and the plan each run a short-lived \
         executor, then the task's executor opens: each loads the component from the compile cache). The Connect worker \
         itself took {:.1} s to answer on its REST API.\n",
        machine(),
        row("`snow-connect run`", &a, "process start →"),
        row("inside Kafka Connect (plugin)", &b, "POST /connectors →"),
        ratios.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>().join(", "),
        sorted[sorted.len() / 2],
        b.executor_cpu.as_secs_f64() * 1e6 / ROWS as f64,
        b.cpu_us_per_row(),
        worker_up.as_secs_f64()
    )
}

/// Records in `topic` now (the sum of its partitions' high watermarks).
fn records_in(consumer: &BaseConsumer, topic: &str) -> u64 {
    let Ok(metadata) = consumer.fetch_metadata(Some(topic), Duration::from_secs(5)) else { return 0 };
    let partitions: Vec<i32> = metadata.topics().iter().flat_map(|t| t.partitions().iter().map(|p| p.id())).collect();
    partitions
        .iter()
        .filter_map(|p| consumer.fetch_watermarks(topic, *p, Duration::from_secs(5)).ok())
        .map(|(_, high)| high.max(0) as u64)
        .sum()
}

/// Waits for `topic` to hold `ROWS` records; the times of its first and of its last, from `since`.
fn watch(bootstrap: &str, topic: &str, since: Instant, alive: &mut dyn FnMut() -> Result<()>) -> Result<(Duration, Duration)> {
    let consumer: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let mut first = None;
    loop {
        let n = records_in(&consumer, topic);
        if n > 0 && first.is_none() {
            first = Some(since.elapsed());
        }
        if n >= ROWS {
            return Ok((first.unwrap_or_default(), since.elapsed()));
        }
        if since.elapsed() > Duration::from_secs(900) {
            bail!("{topic} holds {n} of {ROWS} records after 15 minutes");
        }
        alive()?;
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run_ours(dir: &Path, fake_url: &str, bootstrap: &str, round: usize) -> Result<Round> {
    let topic = format!("bench.connect.ours.{round}");
    let config = dir.join(format!("ours-{round}.properties"));
    std::fs::write(
        &config,
        format!(
            "name=ours-{round}\ncomponent.path={}\n{}kafka.bootstrap.servers={bootstrap}\noffset.storage.file.filename={}\n\
             snow.instance.url={fake_url}\nsnow.auth.type=none\nsnow.tables=incident\nsnow.table.incident.topic={topic}\n\
             snow.batch.size=1000\nsnow.startup.probe=false\n",
            source_component().display(),
            trusted_keys_line(),
            dir.join(format!("ours-{round}.offsets.json")).display()
        ),
    )?;
    let started = Instant::now();
    let mut child = Command::new(release_bin("snow-connect"))
        .arg("run")
        .arg(&config)
        .env("SNOW_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("ours-{round}.log")))?)
        .spawn()
        .context("starting snow-connect")?;
    let pid = child.id();
    let mut alive = || match child.try_wait()? {
        Some(status) => bail!("snow-connect exited ({status})"),
        None => Ok(()),
    };
    let (first, last) = watch(bootstrap, &topic, started, &mut alive)?;
    let round = Round { start: first, backfill: last - first, cpu: cpu_of(pid), rss_kb: peak_rss_kb(pid), ..Round::default() };
    let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
    let _ = child.wait();
    Ok(round)
}

/// The Connect worker of the benchmark.
struct Worker {
    child: Child,
    port: u16,
    plugins: PathBuf,
}

impl Worker {
    fn start(dir: &Path, bootstrap: &str, plugins: &Path, jars: &Path) -> Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let properties = dir.join("connect.properties");
        std::fs::write(
            &properties,
            format!(
                "bootstrap.servers={bootstrap}\ngroup.id=bench-connect\nconfig.storage.topic=bench-connect-configs\n\
                 offset.storage.topic=bench-connect-offsets\nstatus.storage.topic=bench-connect-status\n\
                 config.storage.replication.factor=1\noffset.storage.replication.factor=1\nstatus.storage.replication.factor=1\n\
                 offset.storage.partitions=1\nstatus.storage.partitions=1\n\
                 key.converter=org.apache.kafka.connect.storage.StringConverter\n\
                 value.converter=org.apache.kafka.connect.json.JsonConverter\nvalue.converter.schemas.enable=false\n\
                 listeners=http://127.0.0.1:{port}\nplugin.path={}\n",
                plugins.display()
            ),
        )?;
        let log4j = dir.join("log4j2.properties");
        std::fs::write(
            &log4j,
            "rootLogger.level=WARN\nrootLogger.appenderRef.out.ref=OUT\nappender.out.type=Console\nappender.out.name=OUT\n\
             appender.out.layout.type=PatternLayout\nappender.out.layout.pattern=[%d] %p %m (%c)%n\n",
        )?;
        let child = Command::new("java")
            .arg("-Xmx1g")
            .arg(format!("-Dlog4j2.configurationFile={}", log4j.display()))
            .arg("-cp")
            .arg(format!("{}/*", jars.display()))
            .arg("org.apache.kafka.connect.cli.ConnectDistributed")
            .arg(&properties)
            .stdout(std::fs::File::create(dir.join("connect.log"))?)
            .stderr(Stdio::null())
            .spawn()
            .context("starting Kafka Connect (java)")?;
        let worker = Self { child, port, plugins: plugins.to_path_buf() };
        let started = Instant::now();
        while !worker.get("/connector-plugins").is_ok_and(|b| b.contains("ServiceNowSourceConnector")) {
            if started.elapsed() > Duration::from_secs(180) {
                bail!("Kafka Connect did not list our connectors within 180 s (target/bench-connect/connect.log)");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(worker)
    }

    fn get(&self, path: &str) -> Result<String> {
        self.curl("GET", path, None)
    }

    fn curl(&self, method: &str, path: &str, body: Option<&str>) -> Result<String> {
        let mut command = Command::new("curl");
        command.args(["-sS", "-f", "-X", method, "-H", "Content-Type: application/json"]);
        if let Some(body) = body {
            command.args(["--data-binary", body]);
        }
        let out = command.arg(format!("http://127.0.0.1:{}{path}", self.port)).output()?;
        anyhow::ensure!(out.status.success(), "curl {method} {path}: {}", String::from_utf8_lossy(&out.stderr));
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The ids of the plugin's executor processes now.
    fn executors(&self) -> Vec<u32> {
        let needle = self.plugins.display().to_string();
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
                let cmdline = String::from_utf8_lossy(&std::fs::read(e.path().join("cmdline")).ok()?).replace('\0', " ");
                (cmdline.contains("task-executor") && cmdline.contains(&needle)).then_some(pid)
            })
            .collect()
    }

    fn run_connector(&mut self, fake_url: &str, bootstrap: &str, round: usize) -> Result<Round> {
        let (name, topic) = (format!("connect-{round}"), format!("bench.connect.plugin.{round}"));
        let body = serde_json::json!({"name": name, "config": {
            "connector.class": "io.snowconnect.ServiceNowSourceConnector", "tasks.max": "1",
            "snow.instance.url": fake_url, "snow.auth.type": "none", "snow.tables": "incident",
            "snow.table.incident.topic": topic, "snow.batch.size": "1000", "snow.startup.probe": "false",
        }})
        .to_string();
        let jvm = self.child.id();
        let cpu_before = cpu_of(jvm);
        let created = Instant::now();
        self.curl("POST", "/connectors", Some(&body))?;
        let child = &mut self.child;
        let mut alive = || match child.try_wait()? {
            Some(status) => bail!("Kafka Connect exited ({status})"),
            None => Ok(()),
        };
        let (first, last) = watch(bootstrap, &topic, created, &mut alive)?;
        let executors = self.executors();
        let executor_cpu: Duration = executors.iter().map(|p| cpu_of(*p)).sum();
        let executor_rss: u64 = executors.iter().map(|p| peak_rss_kb(*p)).sum();
        let round = Round {
            start: first,
            backfill: last - first,
            cpu: cpu_of(jvm).saturating_sub(cpu_before) + executor_cpu,
            executor_cpu,
            rss_kb: peak_rss_kb(jvm) + executor_rss,
        };
        self.curl("DELETE", &format!("/connectors/{name}"), None)?;
        let deleted = Instant::now();
        while !self.executors().is_empty() && deleted.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(round)
    }

    fn stop(mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
    }
}
