//! `snow-connect offsets list|reset`: stored source offsets, in a file or a topic.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

use crate::args::{Args, kafka_connection};
use crate::usage::USAGE;

/// Lists or resets stored source offsets, in a file or a topic. Reset only while the connector is
/// stopped: a running connector goes on from what it holds in memory.
pub fn offsets(args: &[String]) -> Result<()> {
    use snow_runtime::offsets::{FileOffsetStore, KafkaOffsetStore};
    use snow_runtime::state::{Clients, StateTopic, TopicSpec};
    let args = Args::parse("offsets", args, &["file", "topic", "bootstrap", "command-config", "connector", "table"])?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    /// Removes a connector's offsets whose partition passes the filter; how many.
    type Remove = Box<dyn Fn(&str, &dyn Fn(&str) -> bool) -> Result<usize>>;
    let (entries, remove): (Vec<(String, String, String)>, Remove) = match (args.option("file"), args.option("topic")) {
        (Some(file), None) => {
            let file = PathBuf::from(file);
            if !file.exists() {
                bail!("no offset file at {}", file.display());
            }
            let store = FileOffsetStore::open(&file)?;
            (store.entries(), Box::new(move |c, m| store.remove(c, m)))
        }
        (None, Some(topic)) => {
            let connection = kafka_connection(&args)?;
            let clients = Clients { bootstrap: connection.bootstrap, common: connection.security };
            let spec = TopicSpec { name: topic.to_string(), partitions: 25, replication: -1, key: "offset.storage.topic" };
            let store = KafkaOffsetStore::new(std::sync::Arc::new(rt.block_on(StateTopic::open(&clients, spec, true))?));
            let handle = rt.handle().clone();
            (
                store.entries(),
                Box::new(move |c, m| {
                    let _runtime = handle.enter();
                    store.remove(c, m)
                }),
            )
        }
        _ => bail!(
            "give --file (the connector's offset.storage.file.filename) or --topic (its offset.storage.topic) with --bootstrap or --command-config\n{USAGE}"
        ),
    };
    match args.positional.first().map(String::as_str) {
        Some("list") => {
            for (connector, partition, position) in entries {
                if args.option("connector").is_none_or(|c| c == connector) {
                    println!("{{\"connector\":{connector:?},\"partition\":{partition},\"position\":{position}}}");
                }
            }
            Ok(())
        }
        Some("reset") => {
            let connector = args.option("connector").context("--connector is required")?;
            let table = args.option("table");
            let removed = remove(connector, &|partition| {
                table.is_none_or(|t| snow_core::cursor::Partition::from_key(partition).is_some_and(|p| p.table == t))
            })?;
            println!(
                "removed {removed} offset(s) of connector {connector}{}; the table(s) start again from start.timestamp",
                table.map(|t| format!(" table {t}")).unwrap_or_default()
            );
            Ok(())
        }
        _ => bail!("offsets needs list or reset\n{USAGE}"),
    }
}
