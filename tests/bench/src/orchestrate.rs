//! `snow-bench run`: one broker, one fake seeded once, a warm-up pass, then the scenarios taking
//! turns for a few rounds, each in its own process — (a) at least once and, (a′), exactly once
//! (`exactly.once.support=required`, offsets in a topic) — then the report in `docs/benchmarks.md`
//! (between the bench markers).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::measure::{Outcome, cpu_of, median, peak_rss_kb};
use crate::paths::{fresh_dir, machine, release_bin, require_built, source_component, trusted_keys_line, write_report};

/// Runs the suite over a table of `rows` rows.
pub fn run(rows: u64) -> Result<()> {
    require_built(&[release_bin("snow-connect"), release_bin("fake-snow"), source_component()])?;
    let dir = fresh_dir("bench")?;
    eprintln!("starting Apache Kafka");
    let broker = kafka_harness::KafkaBroker::start()?;
    let bootstrap = broker.bootstrap().to_string();
    eprintln!("seeding {rows} rows in fake-snow");
    let seeding = Instant::now();
    let (mut fake, fake_url) = seeded_fake(&dir, rows)?;
    let seeded = seeding.elapsed();

    // The first pass over a fresh broker and fake is slower whoever makes it (the broker's JVM
    // compiles its hot paths, the fake's rows are touched for the first time): one unmeasured
    // bare pass takes it, so no scenario pays for it.
    eprintln!("warm-up: bare pipeline, {rows} rows (not reported)");
    child("bare", &fake_url, &bootstrap, "bench.warmup", rows)?;
    let small = rows.min(100_000);
    eprintln!("(a) snow-connect + guest_source.wasm, {small} rows");
    let wasm_small = wasm(&dir, &fake_url, &bootstrap, "bench.wasm.small", small)?;
    // The three scenarios take turns, ROUNDS times; each is reported by its median round.
    let (mut wasm_runs, mut native_runs, mut bare_runs, mut eos_runs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        eprintln!("round {round}/{ROUNDS}: (a) snow-connect + guest_source.wasm, {rows} rows");
        wasm_runs.push(wasm(&dir, &fake_url, &bootstrap, &format!("bench.wasm.{round}"), rows)?);
        eprintln!("round {round}/{ROUNDS}: (a′) the same, exactly once, {rows} rows");
        eos_runs.push(wasm_with(&dir, &fake_url, &bootstrap, &format!("bench.eos.{round}"), rows, Delivery::ExactlyOnce, "")?);
        eprintln!("round {round}/{ROUNDS}: (b) native snow-core path, {rows} rows");
        native_runs.push(child("native", &fake_url, &bootstrap, &format!("bench.native.{round}"), rows)?);
        eprintln!("round {round}/{ROUNDS}: (c) bare pipeline, {rows} rows");
        bare_runs.push(child("bare", &fake_url, &bootstrap, &format!("bench.bare.{round}"), rows)?);
    }
    let _ = fake.kill();
    let _ = fake.wait();
    drop(broker);

    // Ratios are taken within each round (the scenarios of a round ran back to back, under the
    // same conditions) and reported by their median.
    let per_round =
        |other: &[Outcome]| -> Vec<f64> { wasm_runs.iter().zip(other).map(|(a, o)| a.rows_per_second() / o.rows_per_second()).collect() };
    let eos_ratio: Vec<f64> = eos_runs.iter().zip(&wasm_runs).map(|(e, a)| e.rows_per_second() / a.rows_per_second()).collect();
    let ratios = Ratios { a_c: per_round(&bare_runs), a_b: per_round(&native_runs), eos: eos_ratio };
    let (wasm_full, native, bare, eos) = (Runs::new(wasm_runs), Runs::new(native_runs), Runs::new(bare_runs), Runs::new(eos_runs));
    let report = report(
        rows,
        seeded,
        &[
            ("(a) components + host", small, &Runs::new(vec![wasm_small])),
            ("(a) components + host", rows, &wasm_full),
            ("(a′) the same, exactly once", rows, &eos),
            ("(b) native, same path", rows, &native),
            ("(c) bare pipeline", rows, &bare),
        ],
        wasm_full.median(),
        &ratios,
    );
    println!("{report}");
    write_report("bench", "Source backfill (make bench)", &report)
}

/// A fake-snow process seeded with `rows` incident rows over one day, once it serves; its URL.
pub(crate) fn seeded_fake(dir: &Path, rows: u64) -> Result<(std::process::Child, String)> {
    let port_file = dir.join("fake.port");
    let fake = Command::new(release_bin("fake-snow"))
        .args(["--port", "0", "--port-file"])
        .arg(&port_file)
        .args(["--seed", &format!("incident:{rows}"), "--seed-span", "86400"])
        .stdout(Stdio::null())
        .spawn()
        .context("starting fake-snow")?;
    let seeding = Instant::now();
    while !port_file.exists() {
        if seeding.elapsed() > Duration::from_secs(900) {
            bail!("fake-snow did not finish seeding");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(50));
    Ok((fake, format!("http://127.0.0.1:{}", std::fs::read_to_string(&port_file)?.trim())))
}

/// `snow-bench eos`: only (a) and (a′) taking turns for `rounds` rounds over `rows` rows, each
/// round's a′/a printed (nothing written): for working on exactly-once throughput without the
/// whole suite.
pub fn eos_only(rows: u64, rounds: usize) -> Result<()> {
    require_built(&[release_bin("snow-connect"), release_bin("fake-snow"), source_component()])?;
    let dir = fresh_dir("bench-eos")?;
    let broker = kafka_harness::KafkaBroker::start()?;
    let bootstrap = broker.bootstrap().to_string();
    let (mut fake, fake_url) = seeded_fake(&dir, rows)?;
    child("bare", &fake_url, &bootstrap, "bench.warmup", rows)?;
    let mut ratios = Vec::new();
    for round in 1..=rounds {
        let a = wasm(&dir, &fake_url, &bootstrap, &format!("bench.wasm.{round}"), rows)?;
        let e = wasm_with(&dir, &fake_url, &bootstrap, &format!("bench.eos.{round}"), rows, Delivery::ExactlyOnce, "")?;
        let ratio = e.rows_per_second() / a.rows_per_second();
        eprintln!(
            "round {round}: (a) {:.0} rows/s {:.1} µs/row, (a′) {:.0} rows/s {:.1} µs/row, a′/a = {ratio:.2}",
            a.rows_per_second(),
            a.cpu_us_per_row(),
            e.rows_per_second(),
            e.cpu_us_per_row()
        );
        ratios.push(ratio);
    }
    let _ = fake.kill();
    let _ = fake.wait();
    drop(broker);
    let (median, all) = median_and_rounds(&ratios);
    println!("a′/a = {median:.2} (rounds {all})");
    Ok(())
}

/// Rounds of each 1M-row scenario.
const ROUNDS: usize = 5;

/// The ratios of each round.
struct Ratios {
    a_c: Vec<f64>,
    a_b: Vec<f64>,
    /// (a′) exactly once over (a) at least once.
    eos: Vec<f64>,
}

/// The median of `values` and all of them, rounded, in round order.
fn median_and_rounds(values: &[f64]) -> (f64, String) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let all: Vec<String> = values.iter().map(|v| format!("{v:.2}")).collect();
    (sorted.get(sorted.len() / 2).copied().unwrap_or(0.0), all.join(", "))
}

/// The rounds of one scenario.
struct Runs(Vec<Outcome>);

impl Runs {
    fn new(mut runs: Vec<Outcome>) -> Self {
        runs.sort_by(|a, b| a.rows_per_second().total_cmp(&b.rows_per_second()));
        Self(runs)
    }

    /// The median round by rows/s.
    fn median(&self) -> &Outcome {
        &self.0[self.0.len() / 2]
    }

    /// "min–max" rows/s over the rounds, or "-" for a single run.
    fn spread(&self) -> String {
        match (self.0.first(), self.0.last()) {
            (Some(lo), Some(hi)) if self.0.len() > 1 => format!("{:.0}–{:.0}", lo.rows_per_second(), hi.rows_per_second()),
            _ => "-".to_string(),
        }
    }
}

/// How a run delivers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// At least once, offsets in a file (the default).
    AtLeastOnce,
    /// `exactly.once.support=required`, offsets in a topic.
    ExactlyOnce,
}

/// (a): `snow-connect run` until `rows` records are in `topic`.
pub(crate) fn wasm(dir: &Path, fake: &str, bootstrap: &str, topic: &str, rows: u64) -> Result<Outcome> {
    wasm_with(dir, fake, bootstrap, topic, rows, Delivery::AtLeastOnce, "")
}

/// (a) or (a′): `snow-connect run` until `rows` records are in `topic` (committed, exactly once:
/// counted from the host's log, since transaction markers take offsets too).
/// `extra`: more connector keys (`key=value` lines).
pub(crate) fn wasm_with(
    dir: &Path,
    fake: &str,
    bootstrap: &str,
    topic: &str,
    rows: u64,
    delivery: Delivery,
    extra: &str,
) -> Result<Outcome> {
    wasm_with_binary(&release_bin("snow-connect"), dir, fake, bootstrap, topic, rows, delivery, extra)
}

/// [`wasm_with`] with another build of snow-connect (the release's static binary).
#[allow(clippy::too_many_arguments)]
pub(crate) fn wasm_with_binary(
    binary: &Path,
    dir: &Path,
    fake: &str,
    bootstrap: &str,
    topic: &str,
    rows: u64,
    delivery: Delivery,
    extra: &str,
) -> Result<Outcome> {
    let config = dir.join(format!("{topic}.properties"));
    let offsets = match delivery {
        Delivery::AtLeastOnce => format!("offset.storage.file.filename={}", dir.join(format!("{topic}.offsets.json")).display()),
        Delivery::ExactlyOnce => format!("offset.storage.topic={topic}.offsets\nexactly.once.support=required"),
    };
    std::fs::write(
        &config,
        format!(
            "name={topic}\ncomponent.path={}\nkafka.bootstrap.servers={bootstrap}\n{offsets}\n\
             snow.instance.url={fake}\nsnow.auth.type=none\nsnow.tables=incident\nsnow.table.incident.topic={topic}\nsnow.batch.size=1000\n{}\n{extra}\n",
            source_component().display(),
            trusted_keys_line()
        ),
    )?;
    let log = dir.join(format!("{topic}.log"));
    let started = Instant::now();
    let summary = dir.join(format!("{topic}.summary"));
    let mut child = Command::new(binary)
        .arg("run")
        .arg(&config)
        .env("SNOW_LOG", "info,snow_runtime::source=trace,snow_runtime::source::exactly_once::transactions=debug")
        .stdout(std::fs::File::create(&summary)?)
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    let pid = child.id();
    let watch: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let mut first = None;
    let mut stored = StoredRecords::default();
    let outcome = loop {
        let high = match delivery {
            Delivery::AtLeastOnce => watch.fetch_watermarks(topic, 0, Duration::from_secs(5)).map(|(_, h)| h).unwrap_or(0),
            Delivery::ExactlyOnce => stored.read(&log)? as i64,
        };
        if high > 0 {
            first.get_or_insert_with(Instant::now);
        }
        if high as u64 >= rows {
            let (cpu, rss) = (cpu_of(pid), peak_rss_kb(pid));
            break Outcome {
                rows,
                backfill: first.map(|f| f.elapsed()).unwrap_or_default(),
                total: started.elapsed(),
                cpu,
                peak_rss_kb: rss,
                ..Outcome::default()
            };
        }
        if child.try_wait()?.is_some() {
            bail!("snow-connect exited early; see {}", log.display());
        }
        if started.elapsed() > Duration::from_secs(1800) {
            bail!("(a) did not finish in 30 minutes");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
    let _ = child.wait();
    let (mut reads, mut enqueues) = (Vec::new(), Vec::new());
    // Full pages (about a thousand records: a page's last second is read again by the next one).
    for line in std::fs::read_to_string(&log)?.lines().filter(|l| l.contains("poll timings") && l.contains("records=9")) {
        let field = |name: &str| {
            line.split(&format!("{name}=")).nth(1).and_then(|r| r.split_whitespace().next()).and_then(|v| v.parse::<u64>().ok())
        };
        if let (Some(p), Some(e)) = (field("poll_us"), field("enqueue_us")) {
            reads.push(Duration::from_micros(p));
            enqueues.push(Duration::from_micros(e));
        }
    }
    // "time in the component: requests X ms, parsing Y ms, building records Z ms"
    let text = std::fs::read_to_string(&summary)?;
    let line = text.split("time in the component: ").nth(1).unwrap_or("");
    let number = |after: &str| line.split(after).nth(1).and_then(|r| r.split_whitespace().next()).and_then(|v| v.parse::<u64>().ok());
    let phases = match (number("requests "), number("parsing "), number("building records ")) {
        (Some(r), Some(p), Some(b)) => Some((Duration::from_millis(r), Duration::from_millis(p), Duration::from_millis(b))),
        _ => None,
    };
    Ok(Outcome { page_read_median: median(&mut reads), page_enqueue_median: median(&mut enqueues), phases, ..outcome })
}

/// The records of committed batches so far, summed from the host's log ("offset stored … records=N").
#[derive(Default)]
struct StoredRecords {
    read_up_to: u64,
    records: u64,
}

impl StoredRecords {
    fn read(&mut self, log: &Path) -> Result<u64> {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = std::fs::File::open(log)?;
        file.seek(SeekFrom::Start(self.read_up_to))?;
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        // Only whole lines: the last one may still be being written.
        let whole = text.rfind('\n').map_or(0, |i| i + 1);
        for line in text[..whole].lines().filter(|l| l.contains("offset stored")) {
            let n = line.split("records=").nth(1).and_then(|r| r.split_whitespace().next()).and_then(|v| v.parse::<u64>().ok());
            self.records += n.unwrap_or(0);
        }
        self.read_up_to += whole as u64;
        Ok(self.records)
    }
}

/// (b) and (c): this binary in another process.
pub(crate) fn child(mode: &str, fake: &str, bootstrap: &str, topic: &str, rows: u64) -> Result<Outcome> {
    let output = Command::new(std::env::current_exe()?)
        .args([mode, "--fake", fake, "--bootstrap", bootstrap, "--topic", topic, "--rows", &rows.to_string()])
        .stderr(Stdio::inherit())
        .output()?;
    if !output.status.success() {
        bail!("snow-bench {mode} failed");
    }
    Outcome::from_json(&String::from_utf8_lossy(&output.stdout)).context("reading the scenario's result")
}

fn report(rows: u64, seeded: Duration, lines: &[(&str, u64, &Runs)], wasm: &Outcome, ratios: &Ratios) -> String {
    let machine = machine();
    let mut out = format!(
        "Run by `make bench` (`target/release/snow-bench run --rows {rows}`) on {machine}; the broker, \
         fake-snow and the measured process share them. fake-snow seeded {rows} incident rows (~1.36 KB each as served, \
         41 fields, 2 references) spread over one day in {:.1} s. Pages of 1,000 rows; the producer's defaults \
         (idempotent, acks=all, lz4, linger 5 ms) in every scenario. An unmeasured bare pass warms the broker and \
         the fake first; then (a), (b) and (c) take turns {ROUNDS} times over {rows} rows and each line is its \
         median round (the spread of rows/s over the rounds beside it).\n\n\
         | scenario | rows | backfill | rows/s | rounds (rows/s) | CPU µs/row | peak RSS | read + build per page | enqueue per page |\n\
         |---|---|---|---|---|---|---|---|---|\n",
        seeded.as_secs_f64()
    );
    for (name, n, runs) in lines {
        let o = runs.median();
        out.push_str(&format!(
            "| {name} | {n} | {:.2} s | {:.0} | {} | {:.1} | {:.1} MB | {:.1} ms | {:.1} ms |\n",
            o.backfill.as_secs_f64(),
            o.rows_per_second(),
            runs.spread(),
            o.cpu_us_per_row(),
            o.peak_rss_kb as f64 / 1024.0,
            o.page_read_median.as_secs_f64() * 1e3,
            o.page_enqueue_median.as_secs_f64() * 1e3,
        ));
    }
    out.push_str("\nTime inside the connector logic over the whole run (snow-core's own counters: the component's in (a), the task's in (b)):\n\n| scenario | requests | parsing | building records |\n|---|---|---|---|\n");
    for (name, n, runs) in lines {
        if let Some((r, p, b)) = runs.median().phases {
            out.push_str(&format!(
                "| {name}, {n} rows | {:.2} s | {:.2} s | {:.2} s |\n",
                r.as_secs_f64(),
                p.as_secs_f64(),
                b.as_secs_f64()
            ));
        }
    }
    let ((a_c, a_c_rounds), (a_b, a_b_rounds)) = (median_and_rounds(&ratios.a_c), median_and_rounds(&ratios.a_b));
    let (eos, eos_rounds) = median_and_rounds(&ratios.eos);
    out.push_str(&format!(
        "\nRatios (rows/s, within each round, median of the rounds): **a/c = {a_c:.2}** (target ≥ 0.6; rounds {a_c_rounds}), \
         **a/b = {a_b:.2}** (target ≥ 0.8; rounds {a_b_rounds}), **a′/a = {eos:.2}** (exactly once over at least once, target ≥ 0.85; \
         rounds {eos_rounds}). End to end: **{:.0} rows/s** (target ≥ 50,000).\n",
        wasm.rows_per_second()
    ));
    out
}
