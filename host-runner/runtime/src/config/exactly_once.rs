//! `exactly.once.support` and `transaction.boundary`: Kafka Connect's KIP-618 keys of a source
//! connector (ADR 0030). Absent, a source is at-least-once; `requested` runs exactly-once where it
//! can and says why it cannot; `required` runs exactly-once or not at all.

use snow_core::error::ConfigError;

/// The keys read here.
pub const KEYS: [&str; 3] = ["exactly.once.support", "transaction.boundary", "transaction.boundary.interval.ms"];

/// A source connector's delivery guarantee to Kafka.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExactlyOnce {
    /// At-least-once (no `exactly.once.support`).
    #[default]
    Off,
    /// `requested`: exactly-once where the offsets' place and the broker allow it, else
    /// at-least-once with a warning.
    Requested,
    /// `required`: exactly-once, or the connector does not start.
    Required,
}

impl ExactlyOnce {
    /// Whether transactions are wanted at all.
    pub fn wanted(self) -> bool {
        self != Self::Off
    }
}

/// Reads the keys of `entries`; a problem is pushed to `errors` naming its key.
pub fn read(entries: &std::collections::BTreeMap<String, String>, is_sink: bool, errors: &mut Vec<ConfigError>) -> ExactlyOnce {
    let get = |k: &str| entries.get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    if is_sink {
        for key in KEYS.iter().filter(|k| entries.contains_key(**k)) {
            errors.push(ConfigError::refused(
                *key,
                "applies to source connectors; a sink writes to ServiceNow, at least once with one outcome per record (docs/delivery.md)",
            ));
        }
        return ExactlyOnce::Off;
    }
    match get("transaction.boundary").as_deref() {
        None | Some("poll") => {}
        Some(other) => errors.push(ConfigError::new(
            "transaction.boundary",
            format!("{other:?} is not supported; each transaction holds whole polls of a table (poll, the default)"),
        )),
    }
    match get("exactly.once.support").as_deref() {
        None => ExactlyOnce::Off,
        Some("requested") => ExactlyOnce::Requested,
        Some("required") => ExactlyOnce::Required,
        Some(other) => {
            errors.push(ConfigError::new("exactly.once.support", format!("must be requested or required, got {other:?}")));
            ExactlyOnce::Off
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_pairs(pairs: &[(&str, &str)], is_sink: bool) -> (ExactlyOnce, Vec<String>) {
        let entries = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut errors = Vec::new();
        (read(&entries, is_sink, &mut errors), snow_core::error::config_lines(&errors))
    }

    #[test]
    fn values_and_refusals_name_their_key() {
        assert_eq!(read_pairs(&[], false), (ExactlyOnce::Off, vec![]));
        assert_eq!(read_pairs(&[("exactly.once.support", "required")], false).0, ExactlyOnce::Required);
        assert_eq!(read_pairs(&[("exactly.once.support", "requested"), ("transaction.boundary", "poll")], false).0, ExactlyOnce::Requested);
        let (_, errors) = read_pairs(&[("exactly.once.support", "yes"), ("transaction.boundary", "interval")], false);
        assert!(errors[0].starts_with("transaction.boundary: \"interval\" is not supported"), "{errors:?}");
        assert!(errors[1].starts_with("exactly.once.support: must be requested or required"), "{errors:?}");
        let (eos, errors) = read_pairs(&[("exactly.once.support", "required")], true);
        assert_eq!(eos, ExactlyOnce::Off);
        assert!(errors[0].starts_with("exactly.once.support: applies to source connectors"), "{errors:?}");
    }
}
