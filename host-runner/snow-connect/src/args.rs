//! The command line's arguments: positional ones and `--name value` options ([`Args`]), and the
//! options several commands share (the compile cache, a trust policy, a Kafka connection).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use snow_runtime::artefact::{TrustPolicy, TrustedKey};
use snow_runtime::kafka;

use crate::usage::USAGE;

/// Positional arguments and `--name value` options.
pub struct Args {
    /// The arguments that are not options, in order.
    pub positional: Vec<String>,
    named: Vec<(String, String)>,
}

impl Args {
    /// Reads `args` of `command`, which takes the options `known` (each with a value); anything
    /// else starting with `-` is an error with the usage.
    pub fn parse(command: &str, args: &[String], known: &[&str]) -> Result<Self> {
        Self::parse_with_flags(command, args, known, &[])
    }

    /// [`Args::parse`], with options `flags` that take no value ([`Args::flag`]).
    pub fn parse_with_flags(command: &str, args: &[String], known: &[&str], flags: &[&str]) -> Result<Self> {
        let (mut positional, mut named) = (Vec::new(), Vec::new());
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if let Some(name) = a.strip_prefix("--").filter(|n| flags.contains(n)) {
                named.push((name.to_string(), String::new()));
            } else if let Some(name) = a.strip_prefix("--").filter(|n| known.contains(n)) {
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

    /// The value of `--name`, if given.
    pub fn option(&self, name: &str) -> Option<&str> {
        self.named.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// Every value of `--name`, in order (an option given several times).
    pub fn options(&self, name: &str) -> Vec<&str> {
        self.named.iter().filter(|(n, _)| n == name).map(|(_, v)| v.as_str()).collect()
    }

    /// Whether the flag `--name` was given.
    pub fn flag(&self, name: &str) -> bool {
        self.named.iter().any(|(n, _)| n == name)
    }
}

/// `--component-cache DIR|off`, else the default directory (`$SNOW_COMPONENT_CACHE`, else
/// `~/.cache/snow-connect/components`).
pub fn compile_cache(args: &Args) -> Option<PathBuf> {
    match args.option("component-cache") {
        Some("off") => None,
        Some(dir) => Some(PathBuf::from(dir)),
        None => snow_runtime::component::cache::CompileCache::default_dir(),
    }
}

/// The trust policy of `--trusted-keys`, `--bundle` and `--trusted-root`.
pub fn trust_policy(args: &Args, require_keys: bool) -> Result<TrustPolicy> {
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

/// The cluster of `--bootstrap` and `--command-config` (a properties file with Kafka's client keys;
/// `${env:…}`/`${file:…}` references resolved as in a worker file).
pub fn kafka_connection(args: &Args) -> Result<kafka::tools::Connection> {
    let entries = match args.option("command-config") {
        Some(path) => snow_runtime::config::read_operator_properties(path.as_ref()).context("--command-config")?,
        None => Default::default(),
    };
    kafka::tools::Connection::open(args.option("bootstrap"), &entries)
}
