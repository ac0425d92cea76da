//! `snow-connect component push`: a signed component into a fleet's components topic.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use snow_runtime::artefact::{Checked, TrustPolicy, TrustedKey};

use crate::args::Args;
use crate::usage::USAGE;

/// `component push`: a component and its bundle into the fleet's components topic, checked first
/// with the worker's trusted keys.
pub fn component(args: &[String]) -> Result<()> {
    let args = Args::parse("component", args, &["config", "bundle"])?;
    if args.positional.first().map(String::as_str) != Some("push") {
        bail!("component needs push\n{USAGE}");
    }
    let file = PathBuf::from(args.positional.get(1).context("component push needs the component to push")?);
    let config = snow_fleet::worker::load_config(&PathBuf::from(args.option("config").context("--config worker.properties is required")?))?;
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
