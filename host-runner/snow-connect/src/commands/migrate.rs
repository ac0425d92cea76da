//! `snow-connect migrate confluent …` and `… cutover …`: arguments, what is printed, exit codes.
//! The work is the library's (`snow_migrate`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use snow_migrate::{Options, apply};

use crate::args::Args;
use crate::usage::USAGE;

/// Exit code for input that cannot be translated (or a command that cannot run).
pub const INVALID: u8 = 4;
/// Exit code when `--apply` left a connector alone or the fleet refused a step.
const NOT_APPLIED: u8 = 3;

/// Takes the flags `names` (options without a value) out of `args`: the rest, and whether each
/// was given.
fn flags<const N: usize>(args: &[String], names: [&str; N]) -> (Vec<String>, [bool; N]) {
    let given = names.map(|name| args.iter().any(|a| a == name));
    (args.iter().filter(|a| !names.contains(&a.as_str())).cloned().collect(), given)
}

/// `migrate <subcommand> …`; answers the exit code.
pub fn run(args: &[String]) -> Result<u8> {
    match args.first().map(String::as_str) {
        Some("confluent") => confluent(&args[1..]),
        Some("cutover") => cutover(&args[1..]),
        Some("verify") => verify(&args[1..]),
        _ => bail!("migrate needs confluent, cutover or verify\n{USAGE}"),
    }
}

fn confluent(args: &[String]) -> Result<u8> {
    let (args, [force, accept_manual]) = flags(args, ["--force", "--accept-manual"]);
    let args = Args::parse(
        "migrate confluent",
        &args,
        &["out", "bootstrap", "source-component", "sink-component", "trusted-keys", "schema-registry", "apply", "offsets"],
    )?;
    if args.positional.is_empty() {
        bail!("migrate confluent needs the old configurations (files or directories)\n{USAGE}");
    }
    let options = Options {
        bootstrap: args.option("bootstrap").map(String::from),
        source_component: args.option("source-component").map(String::from),
        sink_component: args.option("sink-component").map(String::from),
        trusted_keys: args.option("trusted-keys").map(String::from),
        schema_registry: args.option("schema-registry").map(String::from),
    };
    let out = PathBuf::from(args.option("out").unwrap_or("migrated"));
    let paths: Vec<PathBuf> = args.positional.iter().map(PathBuf::from).collect();
    let migration = snow_migrate::translate_paths(&paths, &options);
    if migration.connectors.is_empty() && migration.invalid.is_empty() {
        bail!("no connector configuration (.json or .properties) in {}", args.positional.join(", "));
    }
    migration.write(&out)?;
    for i in &migration.invalid {
        eprintln!("invalid: {}: {}", i.file, i.reason);
    }
    for c in &migration.connectors {
        let classes: Vec<String> = counts_of(c).into_iter().map(|(class, n)| format!("{n} {}", class.label())).collect();
        println!(
            "{}: {} {} from {} ({})",
            out.join(format!("{}.properties", c.name)).display(),
            c.kind,
            c.name,
            c.from.iter().map(|o| format!("{} [{}]", o.name, o.product.id())).collect::<Vec<_>>().join(", "),
            classes.join(", ")
        );
    }
    let mut code = migration.exit_code();
    println!("report: {} (exit code {code})", out.join("migration-report.md").display());
    let Some(url) = args.option("apply") else { return Ok(code) };
    let refused = migration.connectors.iter().any(|c| !c.problems.is_empty());
    if code >= INVALID || refused || (code == 2 && !accept_manual) {
        eprintln!(
            "not applied: {}",
            if code >= INVALID || refused {
                "the translation has invalid input or a configuration this runtime refuses (see the report)"
            } else {
                "the translation has MANUAL items (see the report); --accept-manual applies it without them"
            }
        );
        return Ok(code.max(NOT_APPLIED));
    }
    let offsets: BTreeMap<String, serde_json::Value> = match args.option("offsets") {
        Some(file) => serde_json::from_str(&std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?)
            .with_context(|| format!("{file}: not the JSON `migrate cutover --out` writes"))?,
        None => BTreeMap::new(),
    };
    let fleet = apply::Fleet::new(url, std::env::var("SNOW_CONNECT_REST_USER_INFO").ok());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    for c in &migration.connectors {
        let applied = rt.block_on(fleet.apply(c, offsets.get(&c.name), force));
        println!("{}: {}", c.name, serde_json::to_string(&applied)?);
        if matches!(applied, apply::Applied::Refused(_) | apply::Applied::Failed(_)) {
            code = code.max(NOT_APPLIED);
        }
    }
    Ok(code)
}

fn counts_of(c: &snow_migrate::output::Connector) -> BTreeMap<snow_migrate::rules::Class, usize> {
    snow_migrate::report::counts(std::slice::from_ref(c))
}

/// `migrate cutover <connector file> …`: our starting position from the old connector's.
fn cutover(args: &[String]) -> Result<u8> {
    use snow_migrate::cutover::{self, OldPosition, Request};
    use snow_runtime::offsets::OffsetStore;
    let (args, [force, as_json]) = flags(args, ["--force", "--json"]);
    let args = Args::parse(
        "migrate cutover",
        &args,
        &[
            "old-connector",
            "old-offsets-topic",
            "old-offsets-file",
            "old-partition",
            "since",
            "table",
            "old-topic",
            "bootstrap",
            "command-config",
            "seed-max",
            "clock-margin-seconds",
            "timeout-seconds",
            "out",
        ],
    )?;
    let [file] = args.positional.as_slice() else { bail!("migrate cutover needs our connector's file (one)\n{USAGE}") };
    let spec = &connector_without_component(file)?;
    let old = match (args.option("since"), args.option("old-connector"), args.option("old-offsets-topic")) {
        (None, None, None) if args.option("old-offsets-file").is_some() => {
            OldPosition::OffsetsFile(PathBuf::from(args.option("old-offsets-file").unwrap_or_default()))
        }
        (Some(since), None, None) => OldPosition::Given(
            snow_core::time::Timestamp::parse(since.trim()).map_err(|e| anyhow::anyhow!("--since: {e} (UTC, YYYY-MM-DD HH:MM:SS)"))?,
        ),
        (None, Some(connector), Some(topic)) => OldPosition::OffsetsTopic { topic: topic.into(), connector: connector.into() },
        _ => bail!(
            "give the old position: --old-connector NAME --old-offsets-topic TOPIC, --old-offsets-file FILE (GET /connectors/<name>/offsets), or --since 'YYYY-MM-DD HH:MM:SS'\n{USAGE}"
        ),
    };
    let number = |name: &str, default: u64| -> Result<u64> {
        args.option(name)
            .map(|v| v.trim().parse::<u64>().with_context(|| format!("--{name} must be a whole number")))
            .transpose()
            .map(|v| v.unwrap_or(default))
    };
    let request = Request {
        old,
        table: args.option("table").map(String::from),
        old_partition: args.option("old-partition").map(String::from),
        old_topic: args.option("old-topic").map(String::from),
        seed_max: usize::try_from(number("seed-max", 5_000)?)?,
        clock_margin_seconds: i64::try_from(number("clock-margin-seconds", 300)?)?,
        timeout: std::time::Duration::from_secs(number("timeout-seconds", 120)?),
    };
    let connection = cluster(&args, spec)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let plans = rt.block_on(cutover::plan(&connection, spec, &request))?;
    match args.option("out") {
        Some(out) => cutover::write_offsets_file(&PathBuf::from(out), &spec.name, &plans)?,
        None => {
            let store: Box<dyn OffsetStore> = match &spec.offsets_topic {
                Some(topic) => {
                    let clients =
                        snow_runtime::state::Clients { bootstrap: connection.bootstrap.clone(), common: connection.security.clone() };
                    let topic = rt.block_on(snow_runtime::state::StateTopic::open(&clients, topic.clone(), true))?;
                    Box::new(snow_runtime::offsets::KafkaOffsetStore::new(std::sync::Arc::new(topic)))
                }
                None => Box::new(snow_runtime::offsets::FileOffsetStore::open(&spec.offsets_file)?),
            };
            let stored = store.load(&spec.name);
            for p in &plans {
                if stored.iter().any(|(partition, _)| *partition == p.partition) && !force {
                    bail!(
                        "connector {} already has a position for table {} (it has run): its own position is newer than the old \
                         connector's; --force replaces it",
                        spec.name,
                        p.table
                    );
                }
            }
            let _guard = rt.enter();
            for p in &plans {
                store.commit(&spec.name, &p.partition, &p.position())?;
            }
        }
    }
    for p in &plans {
        eprintln!(
            "{}: the old connector stopped at {} ({}); ours starts at ({}, \"\") and re-reads from {}; {} version(s) of the old \
             topic {} from then on, {} seeded: at most {} duplicate(s){}",
            p.table,
            p.old_timestamp,
            p.old_from,
            p.old_timestamp,
            p.reread_from,
            p.tail_versions,
            p.old_topic,
            p.seeded,
            p.duplicate_bound,
            if p.unreadable_records > 0 {
                format!(" ({} record(s) of the tail were not rows)", p.unreadable_records)
            } else {
                String::new()
            }
        );
    }
    eprintln!("the old connector must stay stopped: what it writes after this read is not in the seed");
    if as_json {
        println!("{}", serde_json::json!({ "connector": spec.name, "tables": plans }));
    }
    Ok(0)
}

/// The connector of `file` for a command that runs no component: its signing policy (a fleet's
/// connector has none of its own) does not matter here.
fn connector_without_component(file: &str) -> Result<snow_runtime::config::ConnectorSpec> {
    let mut entries = snow_runtime::config::read_entries(std::path::Path::new(file))?;
    let [(_, entries)] = entries.as_mut_slice() else { bail!("{file}: give a file with one connector") };
    for key in snow_runtime::config::TRUST_KEYS {
        entries.remove(key);
    }
    entries.insert("component.allow.unsigned".into(), "true".into());
    snow_runtime::config::ConnectorSpec::from_entries(entries.clone()).with_context(|| format!("in {file}"))
}

/// The Kafka cluster a migration command reads: given (`--bootstrap`, `--command-config`), or the
/// one the connector writes to (usually the old connector's too).
fn cluster(args: &Args, spec: &snow_runtime::config::ConnectorSpec) -> Result<snow_runtime::kafka::tools::Connection> {
    if args.option("bootstrap").is_some() || args.option("command-config").is_some() {
        crate::args::kafka_connection(args)
    } else {
        snow_runtime::kafka::tools::Connection::open(Some(&spec.kafka.bootstrap_servers), &spec.kafka.security)
    }
}

/// `migrate verify <connector file> --from TS [--until TS]`: the instance's current rows against
/// the topic; exit 1 when a row's current version is missing.
fn verify(args: &[String]) -> Result<u8> {
    let (args, [as_json]) = flags(args, ["--json"]);
    let args = Args::parse("migrate verify", &args, &["from", "until", "bootstrap", "command-config", "timeout-seconds"])?;
    let [file] = args.positional.as_slice() else { bail!("migrate verify needs our connector's file (one)\n{USAGE}") };
    let spec = connector_without_component(file)?;
    let parse = |name: &str| -> Result<Option<snow_core::time::Timestamp>> {
        args.option(name)
            .map(|v| snow_core::time::Timestamp::parse(v.trim()).map_err(|e| anyhow::anyhow!("--{name}: {e} (UTC, YYYY-MM-DD HH:MM:SS)")))
            .transpose()
    };
    let from = parse("from")?.context("--from 'YYYY-MM-DD HH:MM:SS' is required (the cutover's reread_from, or earlier)")?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    // Rows changed in the last minute may not have reached the topic yet.
    let until = parse("until")?.unwrap_or(snow_core::time::Timestamp(i64::try_from(now)? - 60));
    let timeout = std::time::Duration::from_secs(args.option("timeout-seconds").map(str::parse).transpose()?.unwrap_or(300));
    let connection = cluster(&args, &spec)?;
    let checks = snow_migrate::verify::verify(&connection, &spec, from, until, timeout)?;
    let mut missing = 0;
    for c in &checks {
        missing += c.missing.len();
        eprintln!(
            "{}: {} row(s) with a timestamp in [{}, {}]; {} missing from {}{}; duplicates: {} written by both connectors, {} by ours twice, {} by the old one twice",
            c.table,
            c.rows,
            c.from,
            c.until,
            c.missing.len(),
            c.topic,
            c.missing.iter().take(5).map(|(id, ts, m)| format!(" {id}@{ts}#{m}")).collect::<String>(),
            c.duplicates_old_and_ours,
            c.duplicates_ours,
            c.duplicates_old
        );
    }
    if as_json {
        println!("{}", serde_json::json!({ "connector": spec.name, "tables": checks }));
    }
    Ok(u8::from(missing > 0))
}
