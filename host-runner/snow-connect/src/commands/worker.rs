//! `snow-connect worker`: one worker of a fleet (snow-fleet), until SIGINT/SIGTERM.

use std::path::PathBuf;

use anyhow::{Context, Result};
use snow_runtime::shutdown;

use crate::args::{Args, compile_cache};

/// A worker of a fleet: connectors, offsets and status in Kafka, work shared by the group
/// protocol, Kafka Connect's REST API; runs until SIGINT/SIGTERM.
pub fn worker(args: &[String]) -> Result<()> {
    let parsed = Args::parse("worker", args, &["config", "component-cache"])?;
    let config =
        snow_fleet::worker::load_config(&PathBuf::from(parsed.option("config").context("--config worker.properties is required")?))?;
    let compile_cache = compile_cache(&parsed);
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
