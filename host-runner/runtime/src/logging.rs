//! Log output: `tracing` to stderr, filtered by `SNOW_LOG` (default `info`). Messages that may carry
//! guest or ServiceNow text are redacted where they are built, and every line is scrubbed of the
//! secrets the process holds on its way out ([`crate::redact::ScrubbedStderr`]).
//!
//! Levels change while the process runs (Kafka Connect's `/admin/loggers`, KIP-495): a logger is a
//! target prefix (`snow_runtime::sink`, `rdkafka`) or `root`; [`set_level`] adds it to the filter
//! `SNOW_LOG` started with (at most 64 loggers), [`levels`] says what is set.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::{Mutex, OnceLock};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

/// The filter's handle, and the levels set at run time over `SNOW_LOG`'s.
struct Levels {
    handle: reload::Handle<EnvFilter, Registry>,
    base: String,
    set: BTreeMap<String, String>,
}

static LEVELS: OnceLock<Mutex<Levels>> = OnceLock::new();

/// Installs the global subscriber once.
pub fn init() {
    let base = std::env::var("SNOW_LOG").ok().filter(|v| EnvFilter::try_new(v).is_ok()).unwrap_or_else(|| "info".into());
    let (filter, handle) = reload::Layer::new(EnvFilter::new(&base));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(crate::redact::ScrubbedStderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false);
    if tracing_subscriber::registry().with(filter).with(fmt).try_init().is_ok() {
        let _ = LEVELS.set(Mutex::new(Levels { handle, base, set: BTreeMap::new() }));
    }
}

/// The levels Kafka Connect's names for them map to (`FATAL` is `error`, `ALL` is `trace`).
fn level_of(level: &str) -> Option<&'static str> {
    match level.to_ascii_uppercase().as_str() {
        "TRACE" | "ALL" => Some("trace"),
        "DEBUG" => Some("debug"),
        "INFO" => Some("info"),
        "WARN" => Some("warn"),
        "ERROR" | "FATAL" => Some("error"),
        "OFF" => Some("off"),
        _ => None,
    }
}

/// Loggers that may be set at once (each is a directive of the filter every log call consults).
const MAX_LOGGERS: usize = 64;

/// Whether `logger` names a logger: `root`, or a target path.
fn is_logger(logger: &str) -> bool {
    !logger.is_empty() && logger.len() <= 200 && logger.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '.' | '-'))
}

/// Whether `logger` may be set beside the loggers `set`: one already set may change, a new one only
/// while fewer than [`MAX_LOGGERS`] are (REST callers cannot grow the filter without bound).
fn admit(set: &BTreeMap<String, String>, logger: &str) -> Result<(), String> {
    if !set.contains_key(logger) && set.len() >= MAX_LOGGERS {
        return Err(format!("at most {MAX_LOGGERS} loggers may be set at once; set a shorter prefix or root instead"));
    }
    Ok(())
}

/// Sets `logger` (`root` or a target prefix) to `level` from now on; an error says what is wrong.
pub fn set_level(logger: &str, level: &str) -> Result<(), String> {
    if !is_logger(logger) {
        return Err(format!("{logger:?} is not a logger name (root, or a target such as snow_runtime::sink)"));
    }
    let level = level_of(level).ok_or_else(|| format!("{level:?} is not a level (TRACE, DEBUG, INFO, WARN, ERROR, OFF)"))?;
    let Some(levels) = LEVELS.get() else { return Err("logging is not set up in this process".into()) };
    let mut levels = levels.lock().unwrap_or_else(|e| e.into_inner());
    let logger = logger.replace('.', "::");
    admit(&levels.set, &logger)?;
    levels.set.insert(logger, level.to_string());
    let mut directives: Vec<String> = Vec::new();
    match levels.set.get("root") {
        Some(root) => directives.push(root.clone()),
        None => directives.push(levels.base.clone()),
    }
    directives.extend(levels.set.iter().filter(|(k, _)| k.as_str() != "root").map(|(k, v)| format!("{k}={v}")));
    let filter = EnvFilter::try_new(directives.join(",")).map_err(|e| format!("the log filter is refused: {e}"))?;
    levels.handle.reload(filter).map_err(|e| format!("changing the log filter failed: {e}"))
}

/// The loggers and their levels, as Kafka Connect answers them: `root`, then every logger set.
pub fn levels() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(levels) = LEVELS.get() {
        let levels = levels.lock().unwrap_or_else(|e| e.into_inner());
        let root = levels.set.get("root").cloned().unwrap_or_else(|| levels.base.split(',').next().unwrap_or("info").to_string());
        out.insert("root".to_string(), root.to_ascii_uppercase());
        for (k, v) in levels.set.iter().filter(|(k, _)| k.as_str() != "root") {
            out.insert(k.clone(), v.to_ascii_uppercase());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_levels_and_logger_names_are_checked() {
        assert_eq!(level_of("Fatal"), Some("error"));
        assert_eq!(level_of("verbose"), None);
        assert!(is_logger("snow_runtime::sink") && is_logger("org.apache.kafka") && !is_logger("a b") && !is_logger(""));
    }

    #[test]
    fn the_set_of_loggers_is_bounded_and_a_set_one_may_still_change() {
        let mut set = BTreeMap::new();
        for i in 0..MAX_LOGGERS {
            let logger = format!("snow_runtime::module{i}");
            admit(&set, &logger).unwrap();
            set.insert(logger, "debug".to_string());
        }
        let refused = admit(&set, "snow_runtime::one_more").unwrap_err();
        assert!(refused.contains("at most 64 loggers"), "{refused}");
        admit(&set, "snow_runtime::module7").expect("a logger already set may change its level");
    }
}
