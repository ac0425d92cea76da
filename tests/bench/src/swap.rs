//! `snow-bench swap`: the pause a hot-swap costs each unit, in the release host with the real
//! components: a source backfill of 200,000 rows and a sink of 20,000 records, each swapped to a
//! new build five times while running (SIGHUP after the connector file names the new build).
//!
//! A unit's pause is what the host logs for it (`pause_us`): for a source table, from the old
//! version's last records handed to Kafka (its offset is then stored) to the new version's first
//! poll answer, so it includes one Table API request; for a sink lane, from the old version's last
//! committed outcomes to the new version's first put. The new builds are compiled into the compile
//! cache before the run, as a deployment that rolls a version out would have them (the reload's
//! compile is off the units' path either way, but on two cores it competes with them). Results go
//! to `docs/benchmarks.md` between the `bench-swap` markers.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::fake::{Fake, now, stamp};
use crate::paths::{
    fresh_dir, machine, release_bin, require_built, sink_component, source_component, trusted_keys_line, workspace, write_report,
};

const SWAPS: u32 = 5;
const SOURCE_ROWS: u64 = 200_000;
const SINK_RECORDS: u64 = 20_000;
const LANES: u32 = 8;

/// The pauses of one scenario, in ms.
struct Swapped {
    what: String,
    pauses: Vec<f64>,
    note: String,
}

/// Runs both scenarios and writes the report.
pub fn run() -> Result<()> {
    require_built(&[release_bin("snow-connect"), release_bin("fake-snow"), source_component(), sink_component()])?;
    let dir = fresh_dir("bench-swap")?;
    eprintln!("starting Apache Kafka");
    let broker = kafka_harness::KafkaBroker::start()?;
    let bootstrap = broker.bootstrap().to_string();
    let source = source(&dir, &bootstrap)?;
    let sink = sink(&dir, &bootstrap)?;
    drop(broker);
    let report = report(&[source, sink]);
    println!("{report}");
    write_report("bench-swap", "Hot-swap pauses (make bench)", &report)
}

/// Five signed new builds of `component` in `dir`, compiled into `cache` by `snow-connect validate`.
fn builds(dir: &Path, component: &Path, cache: &Path, config_for: impl Fn(&Path) -> String) -> Result<Vec<PathBuf>> {
    let key = snow_runtime::artefact::SigningKey::from_pem_file(&workspace().join("tests/keys/development-only.key"))?;
    let stem = component.file_stem().context("component name")?.to_string_lossy().into_owned();
    let mut builds = Vec::new();
    for build in 1..=SWAPS {
        let path = dir.join(format!("{stem}-build{build}.wasm"));
        std::fs::write(&path, guest_artifacts::new_build(&std::fs::read(component)?, build))?;
        snow_runtime::artefact::sign_file(&path, &key, None)?;
        let config = dir.join(format!("{stem}-build{build}.properties"));
        std::fs::write(&config, config_for(&path))?;
        let out = Command::new(release_bin("snow-connect")).arg("validate").arg(&config).arg("--component-cache").arg(cache).output()?;
        if !out.status.success() {
            bail!("validating build {build}: {}", String::from_utf8_lossy(&out.stderr));
        }
        builds.push(path);
    }
    Ok(builds)
}

fn start(config: &Path, cache: &Path, log: &Path) -> Result<Child> {
    Command::new(release_bin("snow-connect"))
        .arg("run")
        .arg(config)
        .arg("--component-cache")
        .arg(cache)
        .env("SNOW_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log)?)
        .spawn()
        .context("starting snow-connect")
}

/// Waits until the log at `log` holds `needle` (or `done()` says the run is over: an error).
fn wait_log(log: &Path, needle: &str, what: &str, mut done: impl FnMut() -> bool) -> Result<()> {
    let started = Instant::now();
    loop {
        if std::fs::read_to_string(log)?.contains(needle) {
            return Ok(());
        }
        if done() {
            bail!("{what}: the run ended first; see {}", log.display());
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!("{what}: not in the log after 2 minutes; see {}", log.display());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Swaps the connector in `config` (written by `config_for`) to each of `builds` in turn, waiting
/// for its `units` units to log their swap (at most 10 s: a unit with nothing left to do does not
/// swap); returns the pauses in ms and `progress()` when each swap's first unit swapped, and
/// fails when `done()` before a swap (it must land while the work runs).
/// A running `snow-connect`, its connector file and its log.
struct Running<'a> {
    child: &'a Child,
    config: &'a Path,
    log: &'a Path,
}

fn swap_all(
    run: &Running<'_>,
    builds: &[PathBuf],
    units: usize,
    config_for: &dyn Fn(&Path) -> String,
    mut done: impl FnMut() -> bool,
    mut progress: impl FnMut() -> u64,
) -> Result<(Vec<f64>, Vec<u64>)> {
    let Running { child, config, log } = *run;
    let (mut pauses, mut at) = (Vec::new(), Vec::new());
    for (i, build) in builds.iter().enumerate() {
        if done() {
            bail!("the run ended before swap {}", i + 1);
        }
        std::fs::write(config, config_for(build))?;
        let _ = Command::new("kill").arg("-HUP").arg(child.id().to_string()).status();
        let digest = short_digest(build)?;
        wait_log(log, &format!(" to {digest} "), &format!("swap {}", i + 1), &mut done)?;
        at.push(progress());
        let started = Instant::now();
        while pauses_to(&std::fs::read_to_string(log)?, &digest).len() < units && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        pauses.extend(pauses_to(&std::fs::read_to_string(log)?, &digest));
    }
    Ok((pauses, at))
}

fn source(dir: &Path, bootstrap: &str) -> Result<Swapped> {
    let fake = Fake::start(dir, "swap-source")?;
    fake.seed(SOURCE_ROWS, &stamp(now() - 86_400), 80_000)?;
    // 10 ms a request, so that five swaps land inside the backfill (it lasts about 1.5 s without).
    fake.admin("POST", "settings", r#"{"latency":{"request_ms":10,"write_ms":0}}"#)?;
    let topic = "bench.swap.source";
    let offsets = dir.join("source.offsets.json");
    let config_for = |component: &Path| {
        format!(
            "name=swap-source\ncomponent.path={}\nkafka.bootstrap.servers={bootstrap}\noffset.storage.file.filename={}\n\
             snow.instance.url={}\nsnow.auth.type=none\nsnow.tables=incident\nsnow.table.incident.topic={topic}\nsnow.batch.size=1000\n{}",
            component.display(),
            offsets.display(),
            fake.url(),
            trusted_keys_line()
        )
    };
    let cache = dir.join("cache");
    let builds = builds(dir, &source_component(), &cache, config_for)?;
    let config = dir.join("swap-source.properties");
    std::fs::write(&config, config_for(&source_component()))?;
    let log = dir.join("swap-source.log");
    eprintln!("source: backfill of {SOURCE_ROWS} rows, {SWAPS} swaps");
    let mut child = start(&config, &cache, &log)?;
    let produced = |topic: &str| -> Result<u64> { end_offsets(bootstrap, topic, 1) };
    // The first records wait for Kafka to create the topic: swap once the table is under way.
    let started = Instant::now();
    while produced(topic).unwrap_or(0) < 5_000 {
        if started.elapsed() > Duration::from_secs(60) || child.try_wait()?.is_some() {
            bail!("the backfill did not start; see {}", log.display());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut ended = || produced(topic).map(|n| n >= SOURCE_ROWS).unwrap_or(false);
    let (pauses, at) = swap_all(&Running { child: &child, config: &config, log: &log }, &builds, 1, &config_for, &mut ended, || {
        produced(topic).unwrap_or(0)
    })?;
    if at.iter().any(|&n| n >= SOURCE_ROWS) {
        bail!("a swap landed after the backfill ended (rows produced at each swap: {at:?})");
    }
    let started = Instant::now();
    while produced(topic)? < SOURCE_ROWS {
        if started.elapsed() > Duration::from_secs(300) || child.try_wait()?.is_some() {
            bail!("the backfill did not finish; see {}", log.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let _ = child.wait();
    let total = produced(topic)?;
    Ok(Swapped {
        what: format!("source, 1 table, {SOURCE_ROWS} rows, pages of 1,000 (fake: 10 ms a request)"),
        note: format!(
            "rows produced when each swap landed: {}; {total} records in all ({} more than rows: the overlap re-read at each new version's open)",
            at.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
            total - SOURCE_ROWS
        ),
        pauses,
    })
}

fn sink(dir: &Path, bootstrap: &str) -> Result<Swapped> {
    let fake = Fake::start(dir, "swap-sink")?;
    fake.seed(2_000, &stamp(now() - 7200), 3600)?;
    let rows = fake.sys_ids()?;
    fake.admin("POST", "settings", r#"{"latency":{"request_ms":5,"write_ms":1}}"#)?;
    let topic = "bench.swap.sink";
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(crate::sink::produce(bootstrap, topic, &rows, SINK_RECORDS))?;
    let config_for = |component: &Path| {
        format!(
            "name=swap-sink\ncomponent.path={}\nkafka.bootstrap.servers={bootstrap}\ntopics={topic}\nsnow.instance.url={}\n\
             snow.auth.type=none\nsnow.sink.table=incident\nsnow.sink.max.in.flight={LANES}\n{}",
            component.display(),
            fake.url(),
            trusted_keys_line()
        )
    };
    let cache = dir.join("cache");
    let builds = builds(dir, &sink_component(), &cache, config_for)?;
    let config = dir.join("swap-sink.properties");
    std::fs::write(&config, config_for(&sink_component()))?;
    let log = dir.join("swap-sink.log");
    eprintln!("sink: {SINK_RECORDS} records over {LANES} partitions, {SWAPS} swaps");
    let mut child = start(&config, &cache, &log)?;
    let watch: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).set("group.id", "connect-swap-sink").create()?;
    let committed = |watch: &BaseConsumer| -> u64 {
        let mut tpl = rdkafka::TopicPartitionList::new();
        for p in 0..LANES as i32 {
            tpl.add_partition(topic, p);
        }
        watch
            .committed_offsets(tpl, Duration::from_secs(5))
            .map(|c| c.elements().iter().map(|e| e.offset().to_raw().unwrap_or(0).max(0)).sum::<i64>())
            .unwrap_or(0) as u64
    };
    let started = Instant::now();
    while committed(&watch) == 0 {
        if started.elapsed() > Duration::from_secs(60) || child.try_wait()?.is_some() {
            bail!("the sink wrote nothing; see {}", log.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let (pauses, at) = swap_all(
        &Running { child: &child, config: &config, log: &log },
        &builds,
        LANES as usize,
        &config_for,
        || committed(&watch) >= SINK_RECORDS,
        || committed(&watch),
    )?;
    let started = Instant::now();
    while committed(&watch) < SINK_RECORDS {
        if started.elapsed() > Duration::from_secs(300) || child.try_wait()?.is_some() {
            bail!("the sink did not finish; see {}", log.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let _ = child.wait();
    let journal = fake.admin("GET", "journal", "")?;
    let writes = journal["entries"].as_array().context("journal")?.iter().filter(|e| e["method"] == "PATCH").count();
    Ok(Swapped {
        what: format!("sink, {LANES} lanes, {SINK_RECORDS} records (fake: 5 ms a request + 1 ms a write)"),
        note: format!(
            "records committed when each swap landed: {}; {writes} writes executed for {SINK_RECORDS} records",
            at.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ),
        pauses,
    })
}

/// The sum of the end offsets of `topic`'s `partitions`.
fn end_offsets(bootstrap: &str, topic: &str, partitions: i32) -> Result<u64> {
    let consumer: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).set("group.id", "bench-swap-watch").create()?;
    let mut total = 0;
    for p in 0..partitions {
        let (_, high) = consumer.fetch_watermarks(topic, p, Duration::from_secs(5)).unwrap_or((0, 0));
        total += high.max(0) as u64;
    }
    Ok(total)
}

fn short_digest(path: &Path) -> Result<String> {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(std::fs::read(path)?);
    Ok(digest.iter().take(6).map(|b| format!("{b:02x}")).collect())
}

/// The pauses logged for swaps to `digest`, in ms.
fn pauses_to(log: &str, digest: &str) -> Vec<f64> {
    log.lines()
        .filter(|l| l.contains("unit swapped from component version") && l.contains(&format!(" to {digest} ")))
        .filter_map(|l| l.split("pause_us=").nth(1).and_then(|r| r.split_whitespace().next()).and_then(|us| us.parse::<f64>().ok()))
        .map(|us| us / 1000.0)
        .collect()
}

fn report(results: &[Swapped]) -> String {
    let mut out = format!(
        "Run by `make bench` (`target/release/snow-bench swap`) on {}; the broker, fake-snow and the host share them. \
         Five swaps to new builds (the same code with a `snow-build` custom section appended, signed), by SIGHUP after the \
         connector file names the next one; the builds were compiled into the cache first. A source table's pause runs from \
         the old version's last records to the new version's first poll answer (one Table API request included); a sink \
         lane's from the old version's last committed outcomes to the new version's first put. The host logs each source \
         pause split into waiting for Kafka's acknowledgements and storing the offset, opening the new version, and its first poll. \
         The first swap waits until 5,000 rows are in Kafka: the first records wait for Kafka to create the topic (about 200 ms \
         here), which a swap in the first second would count. Target: median under 50 ms, worst under 250 ms.\n\n| scenario | swaps seen | median | worst | all (ms) |\n|---|---|---|---|---|\n",
        machine()
    );
    for r in results {
        let mut sorted = r.pauses.clone();
        sorted.sort_by(f64::total_cmp);
        let median = sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN);
        let worst = sorted.last().copied().unwrap_or(f64::NAN);
        let all: Vec<String> = r.pauses.iter().map(|p| format!("{p:.1}")).collect();
        out.push_str(&format!("| {} | {} | {median:.1} ms | {worst:.1} ms | {} |\n", r.what, r.pauses.len(), all.join(", ")));
    }
    out.push('\n');
    for r in results {
        out.push_str(&format!("* {}: {}.\n", r.what, r.note));
    }
    out
}
