//! `snow-connect topic count|produce`: small tools to see and feed what flows.

use std::io::BufRead;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use snow_runtime::kafka;

use crate::args::{Args, kafka_connection};
use crate::usage::USAGE;

/// Counts a topic's records or produces lines to it.
pub fn topic(args: &[String]) -> Result<()> {
    let args = Args::parse("topic", args, &["bootstrap", "command-config", "topic", "timeout-seconds", "key-field", "file"])?;
    let topic = args.option("topic").context("--topic is required")?;
    let connection = kafka_connection(&args)?;
    match args.positional.first().map(String::as_str) {
        Some("count") => {
            let timeout = Duration::from_secs(args.option("timeout-seconds").map(str::parse).transpose()?.unwrap_or(60));
            let count = kafka::tools::count(&connection, topic, timeout)?;
            println!("{{\"topic\":{topic:?},\"records\":{},\"distinct_keys\":{}}}", count.records, count.distinct_keys);
            Ok(())
        }
        Some("produce") => {
            let lines: Box<dyn Iterator<Item = String>> = match args.option("file") {
                Some(path) => Box::new(
                    std::io::BufReader::new(std::fs::File::open(path).with_context(|| format!("opening {path}"))?)
                        .lines()
                        .map_while(Result::ok),
                ),
                None => Box::new(std::io::stdin().lock().lines().map_while(Result::ok)),
            };
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let n = rt.block_on(kafka::tools::produce_lines(&connection, topic, lines, args.option("key-field")))?;
            println!("{{\"topic\":{topic:?},\"produced\":{n}}}");
            Ok(())
        }
        _ => bail!("topic needs count or produce\n{USAGE}"),
    }
}
