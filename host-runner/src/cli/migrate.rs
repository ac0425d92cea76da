//! `snow-connect migrate confluent …` and `… cutover …`: arguments, what is printed, exit codes.
//! The work is the library's (`host_runner::migrate`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use host_runner::migrate::{self, Options, apply};

use super::{Args, USAGE};

/// Exit code for input that cannot be translated (or a command that cannot run).
pub const INVALID: u8 = 4;
/// Exit code when `--apply` left a connector alone or the fleet refused a step.
const NOT_APPLIED: u8 = 3;

/// `migrate <subcommand> …`; answers the exit code.
pub fn run(args: &[String]) -> Result<u8> {
    match args.first().map(String::as_str) {
        Some("confluent") => confluent(&args[1..]),
        _ => bail!("migrate needs confluent\n{USAGE}"),
    }
}

fn confluent(args: &[String]) -> Result<u8> {
    let flag = |name: &str| args.iter().any(|a| a == name);
    let (force, accept_manual) = (flag("--force"), flag("--accept-manual"));
    let args: Vec<String> = args.iter().filter(|a| *a != "--force" && *a != "--accept-manual").cloned().collect();
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
    let migration = migrate::translate_paths(&paths, &options);
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

fn counts_of(c: &migrate::output::Connector) -> BTreeMap<migrate::rules::Class, usize> {
    migrate::report::counts(std::slice::from_ref(c))
}
