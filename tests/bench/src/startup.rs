//! `snow-bench startup`: the cost of starting with and without the compile cache — wall time of
//! `snow-connect validate` (load the component, instantiate it, ask it to validate), release build,
//! for each component: a cold start (empty cache: compile and store), warm starts (from the cache)
//! and starts with the cache off. Also the load time the host logs (`component compiled` /
//! `component loaded from the compile cache`). Results go to `docs/benchmarks.md` between the
//! `bench-startup` markers.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::paths::{fresh_dir, machine, release_bin, require_built, sink_component, source_component, trusted_keys_line, write_report};

const WARM_RUNS: usize = 5;

/// One component's starts.
struct Starts {
    name: &'static str,
    size: u64,
    cold: (Duration, u64),
    warm: (Duration, u64),
    off: (Duration, u64),
}

/// Runs the starts and writes the report.
pub fn run() -> Result<()> {
    require_built(&[release_bin("snow-connect"), source_component(), sink_component()])?;
    let dir = fresh_dir("bench-startup")?;
    let mut results = Vec::new();
    for (name, component, keys) in [
        ("guest_source.wasm", source_component(), "snow.tables=incident\n"),
        ("guest_sink.wasm", sink_component(), "topics=t\nsnow.sink.table=incident\n"),
    ] {
        let config = dir.join(format!("{name}.properties"));
        std::fs::write(
            &config,
            format!(
                "name=startup\ncomponent.path={}\nkafka.bootstrap.servers=127.0.0.1:9\nsnow.instance.url=http://127.0.0.1:9\nsnow.auth.type=none\n{keys}{}",
                component.display(),
                trusted_keys_line()
            ),
        )?;
        let cache = dir.join(format!("cache-{name}"));
        let cold = start(&config, Some(&cache))?;
        let warm = median((0..WARM_RUNS).map(|_| start(&config, Some(&cache))).collect::<Result<Vec<_>>>()?);
        let off = median((0..3).map(|_| start(&config, None)).collect::<Result<Vec<_>>>()?);
        results.push(Starts { name, size: std::fs::metadata(&component)?.len(), cold, warm, off });
    }
    let report = report(&results);
    println!("{report}");
    write_report("bench-startup", "Start-up and the compile cache (make bench)", &report)
}

/// One `snow-connect validate`: wall time and the load time the host logged.
fn start(config: &Path, cache: Option<&Path>) -> Result<(Duration, u64)> {
    let started = Instant::now();
    let output = Command::new(release_bin("snow-connect"))
        .arg("validate")
        .arg(config)
        .arg("--component-cache")
        .arg(cache.map_or_else(|| "off".into(), |c| c.display().to_string()))
        .env("SNOW_LOG", "info")
        .output()?;
    let wall = started.elapsed();
    if !output.status.success() {
        bail!("validate failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let log = String::from_utf8_lossy(&output.stderr);
    let ms = log
        .lines()
        .find(|l| l.contains("component compiled") || l.contains("from the compile cache"))
        .and_then(|l| l.split("ms=").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Ok((wall, ms))
}

fn median(mut runs: Vec<(Duration, u64)>) -> (Duration, u64) {
    runs.sort();
    runs[runs.len() / 2]
}

fn report(results: &[Starts]) -> String {
    let machine = machine();
    let mut out = format!(
        "Run by `make bench` (`target/release/snow-bench startup`) on {machine}: wall time of `snow-connect validate` \
         (start, load the component, instantiate it, ask it to validate), and in brackets the load the host logs. Cold: \
         an empty cache (compile and store); warm: the median of {WARM_RUNS} starts from the cache; off: \
         `--component-cache off` (compile every start), median of 3.\n\n\
         | component | size | cold | warm | cache off | warm / off |\n|---|---|---|---|---|---|\n"
    );
    for r in results {
        out.push_str(&format!(
            "| {} | {} KB | {} ms ({} ms) | {} ms ({} ms) | {} ms ({} ms) | {:.2} |\n",
            r.name,
            r.size / 1024,
            r.cold.0.as_millis(),
            r.cold.1,
            r.warm.0.as_millis(),
            r.warm.1,
            r.off.0.as_millis(),
            r.off.1,
            r.warm.0.as_secs_f64() / r.off.0.as_secs_f64().max(1e-9)
        ));
    }
    out
}
