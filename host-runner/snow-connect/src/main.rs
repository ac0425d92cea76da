//! `snow-connect`: run connectors from configuration files, run a fleet worker, serve the Kafka
//! Connect plugin, migrate, and inspect topics, offsets and components. One file per command
//! under [`commands`]; the work is the libraries' (snow-runtime, snow-fleet, snow-executor,
//! snow-migrate).

mod args;
mod commands;
mod usage;

use std::process::ExitCode;

use anyhow::{Result, bail};
use snow_runtime::config::shown;
use snow_runtime::logging;

use commands::migrate;
use usage::USAGE;

/// The static release binaries' allocator (feature `static`): musl's allocator serialises threads
/// and halved the source rate against the glibc build (docs/benchmarks.md).
#[cfg(feature = "static")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs the command; an error is printed redacted (each refused key's reason on its own,
/// [`snow_runtime::config::shown`]) and ends the process with a failing code.
fn main() -> ExitCode {
    logging::init();
    snow_runtime::supervise::install_hook();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("migrate") {
        // The migration's exit codes say what it found (0 clean … 4 invalid input).
        return match migrate::run(&args[1..]) {
            Ok(code) => ExitCode::from(code),
            Err(e) => {
                eprintln!("error: {}", shown(&e));
                ExitCode::from(migrate::INVALID)
            }
        };
    }
    match dispatch(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", shown(&e));
            ExitCode::FAILURE
        }
    }
}

/// Runs the command `args` names (every command but `migrate`, whose exit codes say more).
fn dispatch(args: &[String]) -> Result<()> {
    match args.first().map(String::as_str) {
        Some("run") => commands::run::run(&args[1..], false),
        Some("validate") => commands::run::run(&args[1..], true),
        Some("worker") => commands::worker::worker(&args[1..]),
        Some("component") => commands::component::component(&args[1..]),
        Some("topic") => commands::topic::topic(&args[1..]),
        Some("inspect") => commands::inspect::inspect(&args[1..]),
        Some("artefact") => commands::artefact::artefact(&args[1..]),
        Some("offsets") => commands::offsets::offsets(&args[1..]),
        Some("task-executor") => commands::task_executor::task_executor(&args[1..]),
        Some("version" | "--version" | "-V") => {
            // Which build this is, as a release's notes and a bug report need it.
            println!(
                "snow-connect {} (commit {}, {}-{})",
                env!("CARGO_PKG_VERSION"),
                snow_fleet::COMMIT,
                std::env::consts::ARCH,
                std::env::consts::OS
            );
            Ok(())
        }
        Some("-h" | "--help" | "help") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => bail!("unknown command {other:?}\n{USAGE}"),
    }
}
