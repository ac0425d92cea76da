//! `snow-connect`: run connectors from configuration files, and inspect topics.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use snow_runtime::admin::{self, Admin};
use snow_runtime::artefact::{Checked, Refusal, SigningKey, TrustPolicy, TrustedKey};
use snow_runtime::config::load_files;
use snow_runtime::runner::{Runner, check_paths};
use snow_runtime::{kafka, logging, shutdown};

const USAGE: &str = "usage:
  snow-connect run <connector file>... [--for-seconds N] [--status-listen HOST:PORT] [--rest HOST:PORT] [--component-cache DIR|off]
  snow-connect worker --config worker.properties [--component-cache DIR|off]
  snow-connect component push <component.wasm> --config worker.properties [--bundle FILE]
                                                         (stores it in the fleet's component.storage.topic; prints its component.ref)
  snow-connect validate <connector file>... [--component-cache DIR|off]
  snow-connect topic count KAFKA --topic NAME [--timeout-seconds N]
  snow-connect topic produce KAFKA --topic NAME [--key-field FIELD] [--file PATH]
  snow-connect offsets list (--file OFFSETS.json | --topic NAME KAFKA) [--connector NAME]
  snow-connect offsets reset (--file OFFSETS.json | --topic NAME KAFKA) --connector NAME [--table TABLE]
    KAFKA: --bootstrap HOST:PORT and/or --command-config FILE (Kafka's client keys, for example the
    security settings of worker.properties, which itself will do)
  snow-connect inspect <component.wasm> [--instantiations N] [--trusted-keys PUB[,PUB]] [--bundle FILE]
  snow-connect artefact keygen <prefix>                  (writes <prefix>.key, mode 0600, and <prefix>.pub)
  snow-connect artefact sign <component.wasm> --key FILE [--bundle OUT]
  snow-connect artefact verify <component.wasm> --trusted-keys PUB[,PUB] [--bundle FILE] [--trusted-root FILE]
  snow-connect migrate confluent <file|dir>... [--out DIR] [--bootstrap HOST:PORT] [--source-component WASM] [--sink-component WASM]
                 [--trusted-keys PUB] [--schema-registry URL] [--apply http://worker:8083 [--offsets FILE] [--force] [--accept-manual]]
    (translates Confluent's ServiceNow connectors and the open one; exit 0 clean, 1 REVIEW, 2 MANUAL, 3 not applied, 4 invalid input;
     --apply reads HTTP Basic credentials from SNOW_CONNECT_REST_USER_INFO=user:password)
  snow-connect migrate cutover <our connector file> (--old-connector NAME --old-offsets-topic TOPIC | --old-offsets-file FILE
                 | --since 'YYYY-MM-DD HH:MM:SS') [--old-partition TEXT] [--table T] [--old-topic TOPIC] [KAFKA] [--seed-max N] [--clock-margin-seconds N] [--out OFFSETS.json] [--force] [--json]
    (writes our starting position into the connector's offset store, or with --out the KIP-875 body --apply --offsets reads;
     prints the duplicate bound; KAFKA defaults to the connector's own cluster)
  snow-connect migrate verify <our connector file> --from 'YYYY-MM-DD HH:MM:SS' [--until TS] [KAFKA] [--json]
    (the instance's current rows in the window against the topic: missing versions (exit 1) and duplicates by who wrote them)
  snow-connect task-executor --plugin-dir DIR          (the Kafka Connect plugin's child process: framed requests on stdin, docs/kafka-connect.md)
  snow-connect version

Connector files are Java properties or JSON (Kafka Connect style); see docs/configuration.md.
Logs go to stderr, filtered by SNOW_LOG (default info). --status-listen serves GET /status
(every unit's state, JSON) and GET /metrics (Prometheus text) there. Compiled components are kept
in --component-cache (default $SNOW_COMPONENT_CACHE, else ~/.cache/snow-connect/components).
Bundles are Sigstore bundles (cosign sign-blob --bundle), by default <component>.sigstore.json.";

fn main() -> ExitCode {
    logging::init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("migrate") {
        // The migration's exit codes say what it found (0 clean … 4 invalid input).
        return match migrate::run(&args[1..]) {
            Ok(code) => ExitCode::from(code),
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(migrate::INVALID)
            }
        };
    }
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
        Some("worker") => worker(&args[1..]),
        Some("component") => component(&args[1..]),
        Some("topic") => topic(&args[1..]),
        Some("inspect") => inspect(&args[1..]),
        Some("artefact") => artefact(&args[1..]),
        Some("offsets") => offsets(&args[1..]),
        Some("task-executor") => task_executor(&args[1..]),
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

/// `snow-connect task-executor --plugin-dir DIR`: serves the Kafka Connect plugin on stdin/stdout
/// until it says stop or closes stdin ([`snow_executor`]).
fn task_executor(args: &[String]) -> Result<()> {
    let parsed = Args::parse("task-executor", args, &["plugin-dir"])?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let served = rt.block_on(snow_executor::serve(parsed.option("plugin-dir")));
    // Units still in a call are not waited for: Connect has what was handed over.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    served
}

/// `snow-connect migrate …` (the binary's side: arguments and what is printed).
#[path = "cli/migrate.rs"]
mod migrate;

/// Positional arguments and `--name value` options.
struct Args {
    positional: Vec<String>,
    named: Vec<(String, String)>,
}

impl Args {
    /// Reads `args` of `command`, which takes the options `known` (each with a value); anything
    /// else starting with `-` is an error with the usage.
    fn parse(command: &str, args: &[String], known: &[&str]) -> Result<Self> {
        let (mut positional, mut named) = (Vec::new(), Vec::new());
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if let Some(name) = a.strip_prefix("--").filter(|n| known.contains(n)) {
                let value = it.next().with_context(|| format!("--{name} needs a value\n{USAGE}"))?;
                named.push((name.to_string(), value.clone()));
            } else if a.starts_with('-') && a.len() > 1 {
                bail!("unknown option {a:?} for `snow-connect {command}`\n{USAGE}");
            } else {
                positional.push(a.clone());
            }
        }
        Ok(Self { positional, named })
    }

    fn option(&self, name: &str) -> Option<&str> {
        self.named.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

fn run(args: &[String], validate_only: bool) -> Result<()> {
    let parsed = if validate_only {
        Args::parse("validate", args, &["component-cache"])?
    } else {
        Args::parse("run", args, &["for-seconds", "status-listen", "rest", "component-cache"])?
    };
    let compile_cache = match parsed.option("component-cache") {
        Some("off") => None,
        Some(dir) => Some(PathBuf::from(dir)),
        None => snow_runtime::component::cache::CompileCache::default_dir(),
    };
    let files = &parsed.positional;
    if files.is_empty() {
        bail!("no connector file given\n{USAGE}");
    }
    let for_seconds: Option<u64> =
        parsed.option("for-seconds").map(str::parse).transpose().context("--for-seconds must be a whole number")?;
    let (specs, entries) = snow_runtime::config::load_files_with_entries(&files.iter().map(PathBuf::from).collect::<Vec<_>>())?;
    check_paths(&specs)?;
    snow_runtime::push::listen::check_standalone(&specs)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let runner = std::sync::Arc::new(Runner::new(compile_cache.as_deref())?);
        if validate_only {
            runner.validate(&specs).await?;
            println!("{} connector(s) valid", specs.len());
            return Ok(());
        }
        let (trigger, watch) = shutdown::channel();
        let serving_status = parsed.option("status-listen").is_some();
        if let Some(addr) = parsed.option("status-listen") {
            let admin = Admin { status: runner.status().clone(), metrics: runner.metrics().clone() };
            let bound = admin::serve(addr, admin, watch.clone()).await?;
            tracing::info!("status endpoint on http://{bound}/status and http://{bound}/metrics");
        }
        if let Some(addr) = parsed.option("rest") {
            let listener = snow_fleet::rest::Listener { address: addr.to_string(), ..Default::default() };
            let view = std::sync::Arc::new(snow_fleet::rest::view::Standalone::new(runner.clone(), entries));
            let bound = snow_fleet::rest::serve(view.clone(), &listener, watch.clone()).await?;
            let _ = view.worker_id.set(bound.to_string());
            tracing::info!("REST API (read-only: a standalone run) on http://{bound}/connectors");
        }
        let run = runner.run(&specs, watch);
        tokio::pin!(run);
        // The process stops at --for-seconds or on SIGINT/SIGTERM, whichever comes first; SIGHUP
        // re-reads the connector files and hot-swaps changed components.
        let stop = async {
            use tokio::signal::unix::{SignalKind, signal};
            let (mut term, mut hup) = (signal(SignalKind::terminate())?, signal(SignalKind::hangup())?);
            let after = async {
                match for_seconds {
                    Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(after);
            loop {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => tracing::info!("signal received, stopping"),
                    _ = term.recv() => tracing::info!("signal received, stopping"),
                    () = &mut after => tracing::info!("--for-seconds reached, stopping"),
                    _ = hup.recv() => {
                        tracing::info!("SIGHUP: re-reading {} connector file(s)", files.len());
                        match load_files(&files.iter().map(PathBuf::from).collect::<Vec<_>>()) {
                            Ok(specs) => {
                                runner.reload(&specs).await;
                            }
                            Err(e) => tracing::error!("reload: the connector files are not valid, nothing changed: {e:#}"),
                        }
                        continue;
                    }
                }
                break;
            }
            Ok::<(), std::io::Error>(())
        };
        tokio::pin!(stop);
        let result = tokio::select! {
            r = &mut run => {
                // Every connector ended (parked, or ended with an error): with a status endpoint,
                // the board stays up for the operator until the process is stopped.
                if serving_status {
                    tracing::warn!("every connector has ended; the status endpoint stays up until the process is stopped");
                    let _ = (&mut stop).await;
                }
                r
            }
            _ = &mut stop => { trigger.fire(); run.await }
        };
        println!("{}", runner.summary());
        result
    })
}

/// A worker of a fleet: connectors, offsets and status in Kafka, work shared by the group
/// protocol, Kafka Connect's REST API; runs until SIGINT/SIGTERM.
fn worker(args: &[String]) -> Result<()> {
    let parsed = Args::parse("worker", args, &["config", "component-cache"])?;
    let config =
        snow_fleet::worker::load_config(&PathBuf::from(parsed.option("config").context("--config worker.properties is required")?))?;
    let compile_cache = match parsed.option("component-cache") {
        Some("off") => None,
        Some(dir) => Some(PathBuf::from(dir)),
        None => snow_runtime::component::cache::CompileCache::default_dir(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let (trigger, watch) = shutdown::channel();
        let run = snow_fleet::worker::run(config, compile_cache.as_deref(), watch);
        tokio::pin!(run);
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            r = &mut run => return r,
            _ = tokio::signal::ctrl_c() => tracing::info!("signal received, stopping"),
            _ = term.recv() => tracing::info!("signal received, stopping"),
        }
        trigger.fire();
        run.await
    })
}

/// `component push`: a component and its bundle into the fleet's components topic, checked first
/// with the worker's trusted keys.
fn component(args: &[String]) -> Result<()> {
    let args = Args::parse("component", args, &["config", "bundle"])?;
    if args.positional.first().map(String::as_str) != Some("push") {
        bail!("component needs push\n{USAGE}");
    }
    let file = PathBuf::from(args.positional.get(1).context("component push needs the component to push")?);
    let config =
        snow_fleet::worker::load_config(&PathBuf::from(args.option("config").context("--config worker.properties is required")?))?;
    let trusted: Vec<TrustedKey> = config
        .connector_defaults
        .get("component.trusted.keys")
        .map(|list| {
            list.split(',').filter(|p| !p.trim().is_empty()).map(|p| TrustedKey::from_pem_file(p.trim().as_ref())).collect::<Result<_>>()
        })
        .transpose()?
        .unwrap_or_default();
    let policy = TrustPolicy::new(
        trusted,
        None,
        args.option("bundle").map(PathBuf::from),
        config.connector_defaults.get("component.allow.unsigned").is_some_and(|v| v == "true"),
    )?;
    let checked = Checked::read(&file, &policy)?;
    let bundle_path = policy.bundle_for(&file);
    let bundle = std::fs::read(&bundle_path).ok();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let digest = rt.block_on(async {
        let topic = snow_runtime::state::StateTopic::open(&config.clients(), config.components.clone(), false).await?;
        snow_fleet::worker::components::ComponentStore::new(std::sync::Arc::new(topic)).push(checked.bytes(), bundle.as_deref()).await
    })?;
    println!("component.ref=sha256:{digest}");
    eprintln!(
        "pushed {} ({} bytes{}) to {}; name it in a connector's configuration with the line above",
        file.display(),
        checked.bytes().len(),
        if bundle.is_some() { ", with its bundle" } else { ", without a bundle" },
        config.components.name
    );
    Ok(())
}

/// Lists or resets stored source offsets, in a file or a topic. Reset only while the connector is
/// stopped: a running connector goes on from what it holds in memory.
fn offsets(args: &[String]) -> Result<()> {
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

fn inspect(args: &[String]) -> Result<()> {
    let args = Args::parse("inspect", args, &["instantiations", "trusted-keys", "bundle"])?;
    let path = PathBuf::from(args.positional.first().context("inspect needs a component path")?);
    let n: u32 = args.option("instantiations").map(str::parse).transpose().context("--instantiations must be a number")?.unwrap_or(200);
    let policy = trust_policy(&args, false)?;
    let artefact = Checked::inspect(&path, &policy)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let report = rt.block_on(async {
        snow_runtime::component::inspect::inspect(&snow_runtime::component::ComponentRuntime::new()?, &artefact, n).await
    })?;
    let signature = match artefact.signature() {
        Ok(signature) => signature.to_string(),
        Err(Refusal::NoTrustedKeys) => {
            format!("bundle at {}, not checked (give --trusted-keys to verify it)", policy.bundle_for(&path).display())
        }
        Err(refusal) => format!("not verified: {refusal}"),
    };
    println!("component      {}", path.display());
    println!("world          {}", report.world);
    println!("size           {} bytes", report.size_bytes);
    println!("sha256         {}", report.digest);
    println!("signature      {signature}");
    println!("compile        {:.1} ms (Cranelift, with import checks and pre-instantiation)", report.compile.as_secs_f64() * 1e3);
    println!("instantiate    {:.1} µs (mean of {})", report.instantiate_mean.as_secs_f64() * 1e6, report.instantiations);
    println!("imports        {}", report.imports.join("\n               "));
    println!("exports        {}", report.exports.join("\n               "));
    Ok(())
}

/// The trust policy of `--trusted-keys`, `--bundle` and `--trusted-root`.
fn trust_policy(args: &Args, require_keys: bool) -> Result<TrustPolicy> {
    let keys = match args.option("trusted-keys") {
        Some(list) => {
            list.split(',').filter(|p| !p.trim().is_empty()).map(|p| TrustedKey::from_pem_file(p.trim().as_ref())).collect::<Result<_>>()?
        }
        None if require_keys => bail!("--trusted-keys is required: the PEM public keys that may sign the component\n{USAGE}"),
        None => Vec::new(),
    };
    let root = args
        .option("trusted-root")
        .map(|p| std::fs::read_to_string(p).with_context(|| format!("reading --trusted-root {p}")))
        .transpose()?;
    TrustPolicy::new(keys, root.as_deref(), args.option("bundle").map(PathBuf::from), false)
}

/// Keys, signatures and their checks (Sigstore bundles, `cosign sign-blob --bundle` compatible).
fn artefact(args: &[String]) -> Result<()> {
    let args = Args::parse("artefact", args, &["key", "bundle", "trusted-keys", "trusted-root"])?;
    let operand = |what: &str| args.positional.get(1).map(PathBuf::from).with_context(|| format!("artefact {what}\n{USAGE}"));
    match args.positional.first().map(String::as_str) {
        Some("keygen") => {
            let (key, public) = snow_runtime::artefact::keys::generate(&operand("keygen needs a file prefix")?)?;
            println!(
                "private key {} (keep it secret; mode 0600)\npublic key  {} (give it to hosts as component.trusted.keys)",
                key.display(),
                public.display()
            );
            Ok(())
        }
        Some("sign") => {
            let component = operand("sign needs the component to sign")?;
            let key = SigningKey::from_pem_file(args.option("key").context("--key (the PKCS#8 PEM private key) is required")?.as_ref())?;
            let bundle = snow_runtime::artefact::sign_file(&component, &key, args.option("bundle").map(AsRef::as_ref))?;
            println!("signed {} -> {}", component.display(), bundle.display());
            Ok(())
        }
        Some("verify") => {
            let component = operand("verify needs the component to check")?;
            let checked = Checked::inspect(&component, &trust_policy(&args, true)?)?;
            match checked.signature() {
                Ok(signature) => {
                    println!("{}: {signature} (sha256 {})", component.display(), checked.digest());
                    Ok(())
                }
                Err(refusal) => bail!("component {} refused: {refusal}", component.display()),
            }
        }
        _ => bail!("artefact needs keygen, sign or verify\n{USAGE}"),
    }
}

/// The cluster of `--bootstrap` and `--command-config` (a properties file with Kafka's client keys;
/// `${env:…}`/`${file:…}` references resolved as in a worker file).
fn kafka_connection(args: &Args) -> Result<kafka::tools::Connection> {
    let entries = match args.option("command-config") {
        Some(path) => snow_runtime::config::read_operator_properties(path.as_ref()).context("--command-config")?,
        None => Default::default(),
    };
    kafka::tools::Connection::open(args.option("bootstrap"), &entries)
}

fn topic(args: &[String]) -> Result<()> {
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
