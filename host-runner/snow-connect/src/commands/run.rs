//! `snow-connect run` and `snow-connect validate`: connectors from files, standalone; the status
//! endpoint and the read-only REST API when asked; SIGHUP re-reads the files and hot-swaps.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use snow_runtime::admin::{self, Admin};
use snow_runtime::config::{ConnectorSpec, Entries, build_specs, read_files};
use snow_runtime::runner::{Runner, check_paths};
use snow_runtime::shutdown;

use crate::args::{Args, compile_cache};
use crate::usage::USAGE;

/// Runs (or with `validate_only`, validates) the connector files of `args`.
/// The connectors of `files`, components named `oci://…` resolved to verified local files; with
/// each connector's entries as written.
async fn load(files: &[String]) -> Result<(Vec<ConnectorSpec>, Vec<Entries>)> {
    let mut read = read_files(&files.iter().map(PathBuf::from).collect::<Vec<_>>())?;
    snow_oci::standalone::resolve_read(&mut read).await?;
    build_specs(read)
}

pub fn run(args: &[String], validate_only: bool) -> Result<()> {
    let parsed = if validate_only {
        Args::parse("validate", args, &["component-cache"])?
    } else {
        Args::parse("run", args, &["for-seconds", "status-listen", "rest", "component-cache"])?
    };
    let compile_cache = compile_cache(&parsed);
    let files = &parsed.positional;
    if files.is_empty() {
        bail!("no connector file given\n{USAGE}");
    }
    let for_seconds: Option<u64> =
        parsed.option("for-seconds").map(str::parse).transpose().context("--for-seconds must be a whole number")?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let (specs, entries) = rt.block_on(load(files))?;
    check_paths(&specs)?;
    snow_runtime::push::listen::check_standalone(&specs)?;
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
            let view = std::sync::Arc::new(snow_fleet::herder::Standalone::new(runner.clone(), entries));
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
                        match load(files).await {
                            Ok((specs, _)) => {
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
