//! `snow-bench snapshot`: a table read by snapshots (ADR 0035) at scale, with the release
//! `snow-connect` and `guest_source.wasm` against the release fake-snow serving a database view
//! of 100,000 rows without system fields: the first snapshot (every row emitted), a restart (the
//! topic read back) and the snapshot after it with 1 % of the rows changed and 1 % deleted (only
//! those emitted), and the component's memory holding the topic's keys
//! (`snow_component_memory_bytes`).
//!
//! Results go to `docs/benchmarks.md` between the `bench-snapshot` markers.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::fake::Fake;
use crate::paths::{fresh_dir, machine, release_bin, source_component, trusted_keys_line, write_report};

/// Rows of the view.
const ROWS: usize = 100_000;
/// Rows changed, and rows deleted, between the runs.
const CHANGED: usize = 1_000;
const VIEW: &str = "u_bench_view";

/// What a run of snow-connect logged.
struct Run {
    child: Child,
    log: std::path::PathBuf,
}

impl Run {
    fn start(dir: &Path, config: &Path, label: &str) -> Result<Self> {
        let log = dir.join(format!("{label}.log"));
        let child = Command::new(release_bin("snow-connect"))
            .arg("run")
            .arg(config)
            .args(["--status-listen", "127.0.0.1:0"])
            .env("SNOW_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("starting snow-connect")?;
        Ok(Self { child, log })
    }

    /// The first log line holding `needle`, waiting up to `timeout`.
    fn line(&mut self, needle: &str, timeout: Duration) -> Result<String> {
        let started = Instant::now();
        loop {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            if let Some(line) = text.lines().find(|l| l.contains(needle)) {
                return Ok(line.to_string());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                bail!("snow-connect exited ({status}) before logging {needle:?}");
            }
            if started.elapsed() > timeout {
                bail!("no {needle:?} in {} after {timeout:?}", self.log.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The gauge `snow_component_memory_bytes` of the status endpoint.
    fn component_memory(&mut self) -> Result<f64> {
        let line = self.line("status endpoint on http://", Duration::from_secs(30))?;
        let address = line.split("status endpoint on http://").nth(1).and_then(|r| r.split('/').next()).context("no status address")?;
        let mut stream = std::net::TcpStream::connect(address)?;
        use std::io::{Read as _, Write as _};
        write!(stream, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
        let mut text = String::new();
        stream.read_to_string(&mut text)?;
        text.lines()
            .find(|l| l.starts_with("snow_component_memory_bytes"))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .context("no snow_component_memory_bytes in /metrics")
    }

    fn stop(mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
    }
}

/// The seconds of a log line's timestamp (`2026-12-05T00:02:40.090681Z ...`), of the day.
fn stamp(line: &str) -> f64 {
    let time = line.split('T').nth(1).and_then(|r| r.split('Z').next()).unwrap_or("0:0:0");
    let parts: Vec<f64> = time.split(':').map(|p| p.parse().unwrap_or(0.0)).collect();
    parts.first().copied().unwrap_or(0.0) * 3600.0 + parts.get(1).copied().unwrap_or(0.0) * 60.0 + parts.get(2).copied().unwrap_or(0.0)
}

pub fn run() -> Result<()> {
    let dir = fresh_dir("bench-snapshot")?;
    eprintln!("starting Apache Kafka");
    let broker = kafka_harness::KafkaBroker::start()?;
    let bootstrap = broker.bootstrap().to_string();
    let fake = Fake::start(&dir, "snapshot")?;
    fake.admin("PUT", &format!("views/{VIEW}"), "")?;
    let mut ids = Vec::with_capacity(ROWS);
    for chunk in 0..ROWS / 10_000 {
        let rows: Vec<Value> =
            (0..10_000).map(|i| json!({ "u_name": format!("asset {}", chunk * 10_000 + i), "u_cost": (i * 7).to_string() })).collect();
        let answer = fake.admin("POST", &format!("tables/{VIEW}/rows"), &Value::Array(rows).to_string())?;
        ids.extend(answer["sys_ids"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string));
    }
    anyhow::ensure!(ids.len() == ROWS, "seeded {} rows", ids.len());
    let config = dir.join("bench-snapshot.properties");
    std::fs::write(
        &config,
        format!(
            "name=bench-snapshot\ncomponent.path={}\nkafka.bootstrap.servers={bootstrap}\noffset.storage.file.filename={}\n\
             snow.instance.url={}\nsnow.auth.type=none\nsnow.tables={VIEW}\nsnow.table.{VIEW}.topic=bench.snapshot\n\
             snow.table.{VIEW}.mode=snapshot\nsnow.table.{VIEW}.snapshot.interval.ms=3600000\nsnow.startup.probe=false\n{}",
            source_component().display(),
            dir.join("bench-snapshot.offsets.json").display(),
            fake.url(),
            trusted_keys_line()
        ),
    )?;
    eprintln!("snapshot: the first snapshot of {ROWS} rows");
    let mut first = Run::start(&dir, &config, "first")?;
    let opened = first.line("opened for snapshots", Duration::from_secs(60))?;
    let done = first.line("snapshot 1 read", Duration::from_secs(600))?;
    let first_seconds = stamp(&done) - stamp(&opened);
    let first_memory = first.component_memory()?;
    first.stop();

    // 1 % changed, 1 % deleted while it is down.
    fake.admin(
        "POST",
        &format!("tables/{VIEW}/update"),
        &json!({ "sys_ids": ids[..CHANGED], "changes": { "u_name": "renamed" } }).to_string(),
    )?;
    let gone = &ids[CHANGED..2 * CHANGED];
    for id in gone {
        fake.delete_row(VIEW, id)?;
    }
    eprintln!("snapshot: a restart with {CHANGED} rows changed and {CHANGED} deleted");
    // The next snapshot is due at once after the restart (the stored one started an hour ago for
    // this interval).
    let text = std::fs::read_to_string(&config)?.replace("snapshot.interval.ms=3600000", "snapshot.interval.ms=1000");
    std::fs::write(&config, text)?;
    let mut second = Run::start(&dir, &config, "second")?;
    let read_back = second.line("its topic holds", Duration::from_secs(600))?;
    let opened = second.line("opened for snapshots", Duration::from_secs(60))?;
    let done = second.line("snapshot 1 read", Duration::from_secs(600))?;
    let second_seconds = stamp(&done) - stamp(&opened);
    let memory = second.component_memory()?;
    second.stop();
    drop(fake);
    drop(broker);
    let report = format!(
        "Run by `make bench` (`target/release/snow-bench snapshot`) on {}: the release `snow-connect` with \
         `guest_source.wasm` against the release fake-snow serving a database view of {ROWS} rows without system fields \
         (`mode=snapshot`, `batch.size=1000`), one Kafka broker on the same machine.\n\n\
         | measured | value |\n|---|---|\n\
         | first snapshot: every row emitted | {first_seconds:.1} s ({:.0} rows/s) |\n\
         | its component memory (`snow_component_memory_bytes`) | {:.1} MB |\n\
         | restart: the topic read back | {} |\n\
         | the snapshot after {CHANGED} rows changed and {CHANGED} deleted | {second_seconds:.1} s: {} |\n\
         | the component memory holding the topic's {} keys | {:.1} MB |\n",
        machine(),
        ROWS as f64 / first_seconds.max(0.001),
        first_memory / 1e6,
        read_back.split("its topic holds ").nth(1).unwrap_or("").split(" connector=").next().unwrap_or(""),
        done.split_once("u_bench_view: ").map_or("", |(_, r)| r).split(" unit=").next().unwrap_or(""),
        ROWS - CHANGED,
        memory / 1e6
    );
    println!("{report}");
    write_report("bench-snapshot", "Snapshot tables: 100,000 rows (make bench)", &report)
}
