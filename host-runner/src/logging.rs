//! Log output: `tracing` to stderr, filtered by `SNOW_LOG` (default `info`). Messages that may carry
//! guest or ServiceNow text are redacted where they are built, and every line is scrubbed of the
//! secrets the process holds on its way out ([`crate::redact::ScrubbedStderr`]).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber once.
pub fn init() {
    let filter = EnvFilter::try_from_env("SNOW_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(crate::redact::ScrubbedStderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}
