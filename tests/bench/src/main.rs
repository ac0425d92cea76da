//! `snow-bench`: measures the source backfill three ways in one run against the same broker and
//! the same fake ServiceNow (`make bench`), and writes `docs/benchmarks.md`.
//!
//! * (a) `snow-connect` with the real `guest_source.wasm` (a child process);
//! * (b) `snow-bench native`: the same snow-core cursor and parsing path, natively, with the
//!   host's own producer, enqueue and pipeline code;
//! * (c) `snow-bench bare`: no connector logic: keep-alive GET of pages by sys_id, raw row parse,
//!   produce with the same producer settings.
//!
//! Each scenario runs in its own process, so its CPU time and peak RSS are its own.
//! `snow-bench hidden` measures the source through rows hidden by ACLs ([`hidden`]); `snow-bench
//! sink` the sink's Table API and Batch API paths against an instance's latency ([`sink`]);
//! `snow-bench startup` cold and warm starts with the compile cache ([`startup`]); `snow-bench swap`
//! the pause of a hot-swap per unit ([`swap`]); `snow-bench formats` what each value converter
//! costs per row ([`formats`]); `snow-bench transforms` what built-in transforms and transform
//! components cost per record ([`transforms`]); `snow-bench push` change → record in Kafka with
//! push notifications against polling ([`push`]); `snow-bench connect` the backfill inside Kafka
//! Connect through our plugin against `snow-connect run` ([`connect`]). `snow-bench eos` runs only (a) and its
//! exactly-once twin (a′) in turns and prints a′/a per round (for tuning; nothing written).
//! `snow-bench static --binary FILE` the release's static binary against the glibc build
//! ([`static_build`], `make bench-static`).

mod backfill;
mod bare;
mod connect;
mod fake;
mod fleet;
mod formats;
mod hidden;
mod measure;
mod native;
mod orchestrate;
mod paths;
mod push;
mod sink;
mod snapshot;
mod startup;
mod static_build;
mod swap;
mod transforms;

use anyhow::{Result, bail};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    match args.first().map(String::as_str) {
        Some("run") => orchestrate::run(opt("--rows").map(|v| v.parse()).transpose()?.unwrap_or(1_000_000)),
        Some("eos") => orchestrate::eos_only(
            opt("--rows").map(|v| v.parse()).transpose()?.unwrap_or(1_000_000),
            opt("--rounds").map(|v| v.parse()).transpose()?.unwrap_or(3),
        ),
        Some("hidden") => hidden::run(),
        Some("backfill") => backfill::run(),
        Some("sink") => sink::run(),
        Some("startup") => startup::run(),
        Some("static") => static_build::run(
            std::path::Path::new(
                &opt("--binary").ok_or_else(|| anyhow::anyhow!("static needs --binary <the release's static snow-connect>"))?,
            ),
            opt("--rows").map(|v| v.parse()).transpose()?.unwrap_or(1_000_000),
            opt("--rounds").map(|v| v.parse()).transpose()?.unwrap_or(3),
        ),
        Some("swap") => swap::run(),
        Some("fleet") => fleet::run(),
        Some("formats") => formats::run(),
        Some("transforms") => transforms::run(),
        Some("push") => push::run(),
        Some("snapshot") => snapshot::run(),
        Some("connect") => connect::run(),
        Some(mode @ ("native" | "bare")) => {
            let fake = opt("--fake").unwrap_or_default();
            let bootstrap = opt("--bootstrap").unwrap_or_default();
            let topic = opt("--topic").unwrap_or_default();
            let rows: u64 = opt("--rows").unwrap_or_default().parse()?;
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
            let outcome = rt.block_on(async {
                if mode == "native" {
                    native::run(&fake, &bootstrap, &topic, rows).await
                } else {
                    bare::run(&fake, &bootstrap, &topic, rows).await
                }
            })?;
            println!("{}", outcome.to_json());
            Ok(())
        }
        _ => bail!(
            "usage: snow-bench run [--rows N] | eos [--rows N] [--rounds R] | hidden | backfill | sink | startup | swap | fleet | formats | transforms | push | snapshot | connect | native|bare --fake URL --bootstrap B --topic T --rows N"
        ),
    }
}
