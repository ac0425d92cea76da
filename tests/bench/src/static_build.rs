//! `snow-bench static --binary <static snow-connect>`: the release's static musl binary against the
//! glibc build of the same commit (`target/release/snow-connect`): their sizes, start time
//! (`--version`, wall time, median of many) and the source scenario (a) — the same connector over
//! the same seeded table — taking turns for a few rounds on one broker and one fake, with each
//! round's static/glibc ratio. Results go to `docs/benchmarks.md` between the `bench-static`
//! markers.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::measure::{Outcome, median};
use crate::orchestrate::{Delivery, child, seeded_fake, wasm_with_binary};
use crate::paths::{fresh_dir, machine, release_bin, require_built, source_component, write_report};

/// Starts timed per binary.
const STARTS: usize = 21;

/// Runs the comparison over `rows` rows, `rounds` rounds.
pub fn run(static_binary: &Path, rows: u64, rounds: usize) -> Result<()> {
    let glibc = release_bin("snow-connect");
    require_built(&[glibc.clone(), static_binary.to_path_buf(), release_bin("fake-snow"), source_component()])?;
    let dir = fresh_dir("bench-static")?;
    let builds = [("glibc", glibc.as_path()), ("static (musl)", static_binary)];
    let sizes: Vec<u64> = builds.iter().map(|(_, b)| std::fs::metadata(b).map(|m| m.len())).collect::<Result<_, _>>()?;
    let starts: Vec<Duration> = builds.iter().map(|(_, b)| start_time(b)).collect::<Result<_>>()?;

    let broker = kafka_harness::KafkaBroker::start()?;
    let bootstrap = broker.bootstrap().to_string();
    let (mut fake, fake_url) = seeded_fake(&dir, rows)?;
    child("bare", &fake_url, &bootstrap, "bench.warmup", rows)?;
    let mut runs: [Vec<Outcome>; 2] = [Vec::new(), Vec::new()];
    for round in 1..=rounds {
        for (i, (label, binary)) in builds.iter().enumerate() {
            eprintln!("round {round}/{rounds}: (a) {label}, {rows} rows");
            let topic = format!("bench.static.{i}.{round}");
            runs[i].push(wasm_with_binary(binary, &dir, &fake_url, &bootstrap, &topic, rows, Delivery::AtLeastOnce, "")?);
        }
    }
    let _ = fake.kill();
    let _ = fake.wait();
    drop(broker);

    let ratios: Vec<f64> = runs[1].iter().zip(&runs[0]).map(|(s, g)| s.rows_per_second() / g.rows_per_second()).collect();
    let mut sorted = ratios.clone();
    sorted.sort_by(f64::total_cmp);
    let median_ratio = sorted[sorted.len() / 2];
    let mut table = String::from(
        "| build | size | `--version` (median of 21) | (a) rows/s, median (rounds) | CPU µs a row | peak RSS |\n|---|---|---|---|---|---|\n",
    );
    for (i, (label, _)) in builds.iter().enumerate() {
        let mut by_rate: Vec<&Outcome> = runs[i].iter().collect();
        by_rate.sort_by(|a, b| a.rows_per_second().total_cmp(&b.rows_per_second()));
        let m = by_rate[by_rate.len() / 2];
        let all: Vec<String> = runs[i].iter().map(|o| format!("{:.0}", o.rows_per_second())).collect();
        table.push_str(&format!(
            "| {label} | {:.1} MB | {:.1} ms | {:.0} ({}) | {:.1} | {:.0} MB |\n",
            sizes[i] as f64 / 1e6,
            starts[i].as_secs_f64() * 1e3,
            m.rows_per_second(),
            all.join(", "),
            m.cpu_us_per_row(),
            m.peak_rss_kb as f64 / 1024.0,
        ));
    }
    let all: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
    let report = format!(
        "Command: `target/release/snow-bench static --binary {} --rows {rows} --rounds {rounds}` (`make bench-static`). \
         Machine: {}. The two builds of one commit take turns, {rows} rows a run, one broker and one fake.\n\n{table}\n\
         static ÷ glibc, per round: median **{median_ratio:.2}** (rounds {}).\n",
        static_binary.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        machine(),
        all.join(", ")
    );
    println!("{report}");
    write_report("bench-static", "The static binary against the glibc build (make bench-static)", &report)
}

/// The median wall time of `binary --version` over [`STARTS`] starts.
fn start_time(binary: &Path) -> Result<Duration> {
    let mut samples = Vec::with_capacity(STARTS);
    for _ in 0..STARTS {
        let started = Instant::now();
        let out = Command::new(binary).arg("--version").output().with_context(|| format!("starting {}", binary.display()))?;
        samples.push(started.elapsed());
        if !out.status.success() {
            bail!("{} --version failed", binary.display());
        }
    }
    Ok(median(&mut samples))
}
