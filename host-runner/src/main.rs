//! `snow-connect`: run connectors from configuration files, and inspect topics.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use host_runner::config::load_files;
use host_runner::runner::{Runner, check_paths};
use host_runner::{kafka, logging, shutdown};

const USAGE: &str = "usage:
  snow-connect run <connector file>... [--for-seconds N]
  snow-connect validate <connector file>...
  snow-connect topic count --bootstrap HOST:PORT --topic NAME [--timeout-seconds N]
  snow-connect topic produce --bootstrap HOST:PORT --topic NAME [--key-field FIELD] [--file PATH]
  snow-connect version

Connector files are Java properties or JSON (Kafka Connect style); see docs/configuration.md.
Logs go to stderr, filtered by SNOW_LOG (default info).";

fn main() -> ExitCode {
    logging::init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match dispatch(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(args: &[String]) -> Result<()> {
    match args.first().map(String::as_str) {
        Some("run") => run(&args[1..], false),
        Some("validate") => run(&args[1..], true),
        Some("topic") => topic(&args[1..]),
        Some("version") => {
            println!("snow-connect {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        Some("-h" | "--help" | "help") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => bail!("unknown command {other:?}\n{USAGE}"),
    }
}

/// `--name value` options and positional arguments.
fn options(args: &[String]) -> Result<(Vec<String>, Vec<(String, String)>)> {
    let (mut positional, mut named) = (Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some(name) = a.strip_prefix("--") {
            let value = it.next().with_context(|| format!("--{name} needs a value"))?;
            named.push((name.to_string(), value.clone()));
        } else {
            positional.push(a.clone());
        }
    }
    Ok((positional, named))
}

fn option<'a>(named: &'a [(String, String)], name: &str) -> Option<&'a str> {
    named.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

fn run(args: &[String], validate_only: bool) -> Result<()> {
    let (files, named) = options(args)?;
    if files.is_empty() {
        bail!("no connector file given\n{USAGE}");
    }
    let for_seconds: Option<u64> = option(&named, "for-seconds").map(str::parse).transpose().context("--for-seconds must be a whole number")?;
    let specs = load_files(&files.iter().map(PathBuf::from).collect::<Vec<_>>())?;
    check_paths(&specs)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let runner = Runner::new()?;
        if validate_only {
            runner.validate(&specs).await?;
            println!("{} connector(s) valid", specs.len());
            return Ok(());
        }
        let (trigger, watch) = shutdown::channel();
        let run = runner.run(&specs, watch);
        tokio::pin!(run);
        let stop_after = async {
            match for_seconds {
                Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
                None => std::future::pending().await,
            }
        };
        let signals = async {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                _ = term.recv() => {},
            }
            Ok::<(), std::io::Error>(())
        };
        let result = tokio::select! {
            r = &mut run => r,
            _ = stop_after => { tracing::info!("--for-seconds reached, stopping"); trigger.fire(); run.await }
            _ = signals => { tracing::info!("signal received, stopping"); trigger.fire(); run.await }
        };
        println!("{}", runner.summary());
        result
    })
}

fn topic(args: &[String]) -> Result<()> {
    let (positional, named) = options(args)?;
    let bootstrap = option(&named, "bootstrap").context("--bootstrap is required")?;
    let topic = option(&named, "topic").context("--topic is required")?;
    match positional.first().map(String::as_str) {
        Some("count") => {
            let timeout = Duration::from_secs(option(&named, "timeout-seconds").map(str::parse).transpose()?.unwrap_or(60));
            let count = kafka::tools::count(bootstrap, topic, timeout)?;
            println!("{{\"topic\":{topic:?},\"records\":{},\"distinct_keys\":{}}}", count.records, count.distinct_keys);
            Ok(())
        }
        Some("produce") => {
            let lines: Box<dyn Iterator<Item = String>> = match option(&named, "file") {
                Some(path) => Box::new(std::io::BufReader::new(std::fs::File::open(path).with_context(|| format!("opening {path}"))?).lines().map_while(Result::ok)),
                None => Box::new(std::io::stdin().lock().lines().map_while(Result::ok)),
            };
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let n = rt.block_on(kafka::tools::produce_lines(bootstrap, topic, lines, option(&named, "key-field")))?;
            println!("{{\"topic\":{topic:?},\"produced\":{n}}}");
            Ok(())
        }
        _ => bail!("topic needs count or produce\n{USAGE}"),
    }
}
