//! The host-side settings of a sink connector: what it consumes, how many partitions it writes at
//! once, and what happens to a record that fails for good (Kafka Connect's `errors.*` keys, the
//! Confluent ServiceNow sink's `behavior.on.api.errors` and reporter topics).

use snow_core::error::ConfigError;
use std::collections::BTreeMap;

/// What a record that failed for good does to its partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    /// The partition stops at the record (nothing after it is written or committed) until the
    /// connector is restarted; the lane shows `failed` with the record and the reason.
    Stop,
    /// The failure is reported (error topic, dead letter queue) and logged; the partition goes on.
    Log,
    /// As `Log`, without the log line.
    Ignore,
}

/// A sink's host-side settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkSpec {
    /// `topics.regex`: a pattern (librdkafka's POSIX-style regular expressions) whose matching
    /// topics are consumed besides `topics`; a topic created later is picked up.
    pub topics_regex: Option<String>,
    /// `snow.sink.max.in.flight`: partitions written at once (each lane one request at a time).
    pub max_in_flight: usize,
    /// `errors.tolerance=all` lets a record the component cannot write (bad JSON, unknown table,
    /// forbidden field) go to the error topic and dead letter queue instead of stopping its partition.
    pub tolerate_record_errors: bool,
    /// `behavior.on.api.errors`: what a write ServiceNow refused (or whose outcome stayed unknown) does.
    pub on_api_error: OnFailure,
    /// `errors.deadletterqueue.topic.name`: the failed records themselves, under `errors.tolerance=all`.
    pub dlq_topic: Option<String>,
    /// `errors.deadletterqueue.context.headers.enable`: the `__connect.errors.*` headers on them.
    pub dlq_context_headers: bool,
    /// `reporter.result.topic.name`: one report per record written or skipped.
    pub result_topic: Option<String>,
    /// `reporter.error.topic.name`: one report per record that failed for good.
    pub error_topic: Option<String>,
    /// `reporter.refused.behavior`: what a report or dead letter Kafka refuses for good (too
    /// large, invalid) does.
    pub on_refused: OnRefused,
}

/// What a report or dead letter that Kafka refuses for good does (`reporter.refused.behavior`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnRefused {
    /// It is sent again cut down ([`crate::sink::report`]: the value and the long headers
    /// truncated, a header saying so); if that is refused too, the partition stops.
    Truncate,
    /// The partition stops at the record, with the reason, until the connector is restarted.
    Park,
}

/// Keys this module reads.
pub const KEYS: [&str; 9] = [
    "reporter.refused.behavior",
    "topics.regex",
    "snow.sink.max.in.flight",
    "errors.tolerance",
    "behavior.on.api.errors",
    "errors.deadletterqueue.topic.name",
    "errors.deadletterqueue.context.headers.enable",
    "reporter.result.topic.name",
    "reporter.error.topic.name",
];

/// Lanes written at once unless configured: the instance cap's default.
const DEFAULT_MAX_IN_FLIGHT: usize = 8;

impl SinkSpec {
    /// Reads the keys of [`KEYS`] from `entries`, pushing one message per bad key to `errors`.
    /// `${connector}` in a topic name is the connector's name.
    pub fn from_entries(entries: &BTreeMap<String, String>, connector: &str, errors: &mut Vec<ConfigError>) -> Self {
        let get = |k: &str| entries.get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let mut choice = |k: &str, options: &[&str], default: &str| -> String {
            match get(k) {
                None => default.to_string(),
                Some(v) if options.contains(&v.as_str()) => v,
                Some(v) => {
                    errors.push(ConfigError::new(k, format!("must be one of {}, got {v:?}", options.join(", "))));
                    default.to_string()
                }
            }
        };
        let tolerate_record_errors = choice("errors.tolerance", &["none", "all"], "none") == "all";
        let on_api_error = match choice("behavior.on.api.errors", &["fail", "log", "ignore"], "fail").as_str() {
            "log" => OnFailure::Log,
            "ignore" => OnFailure::Ignore,
            _ => OnFailure::Stop,
        };
        let dlq_context_headers = choice("errors.deadletterqueue.context.headers.enable", &["true", "false"], "true") == "true";
        let on_refused = match choice("reporter.refused.behavior", &["truncate", "park"], "truncate").as_str() {
            "park" => OnRefused::Park,
            _ => OnRefused::Truncate,
        };
        let max_in_flight = match get("snow.sink.max.in.flight").map(|v| v.parse::<usize>()) {
            None => DEFAULT_MAX_IN_FLIGHT,
            Some(Ok(n)) if (1..=256).contains(&n) => n,
            Some(_) => {
                errors.push(ConfigError::new("snow.sink.max.in.flight", "must be a whole number between 1 and 256"));
                DEFAULT_MAX_IN_FLIGHT
            }
        };
        let mut topic = |k: &str| -> Option<String> {
            let name = get(k)?.replace("${connector}", connector);
            if name.len() > 249 || !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')) {
                errors
                    .push(ConfigError::new(k, format!("{name:?} is not a Kafka topic name (letters, digits, '.', '_', '-'; at most 249)")));
                return None;
            }
            Some(name)
        };
        let dlq_topic = topic("errors.deadletterqueue.topic.name");
        let result_topic = topic("reporter.result.topic.name");
        let error_topic = topic("reporter.error.topic.name");
        if dlq_topic.is_some() && !tolerate_record_errors {
            errors.push(ConfigError::new(
                "errors.deadletterqueue.topic.name",
                "needs errors.tolerance=all (with none, a failed record stops its partition and nothing is sent to the dead letter queue)",
            ));
        }
        let topics_regex = get("topics.regex");
        // A sink consuming its own reports or dead letters would feed on itself forever (Kafka
        // Connect refuses a dead letter queue among the topics too).
        let consumed: Vec<String> =
            get("topics").map(|t| t.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()).unwrap_or_default();
        for (key, own) in [
            ("errors.deadletterqueue.topic.name", &dlq_topic),
            ("reporter.result.topic.name", &result_topic),
            ("reporter.error.topic.name", &error_topic),
        ] {
            if let Some(own) = own.as_ref().filter(|own| consumed.contains(own)) {
                errors.push(ConfigError::new(
                    key,
                    format!("{own} is also in topics: the sink would consume what it produces there, forever; name another topic"),
                ));
            }
            // The pattern too, as the consumer will match it (whole names). The running sink also
            // stops if the broker assigns it one of them anyway (a pattern this check cannot read).
            let pattern = topics_regex.as_deref().and_then(|p| regex::Regex::new(&format!("^(?:{p})$")).ok());
            if let (Some(own), Some(pattern)) = (own.as_ref(), pattern)
                && pattern.is_match(own)
            {
                errors.push(ConfigError::new(
                    key,
                    format!("{own} matches topics.regex: the sink would consume what it produces there, forever; name another topic or narrow the pattern"),
                ));
            }
        }
        Self {
            topics_regex,
            max_in_flight,
            tolerate_record_errors,
            on_api_error,
            dlq_topic,
            dlq_context_headers,
            result_topic,
            error_topic,
            on_refused,
        }
    }

    /// `snow.sink.halt.on` for the component: the failures that stop a partition, so that it
    /// attempts nothing after one (the caller sets it for sinks only).
    pub fn halt_on(&self) -> Option<String> {
        let kinds: Vec<&str> =
            [(!self.tolerate_record_errors).then_some("record"), (self.on_api_error == OnFailure::Stop).then_some("api")]
                .into_iter()
                .flatten()
                .collect();
        (!kinds.is_empty()).then(|| kinds.join(","))
    }

    /// Whether any record is ever produced to Kafka (a report or a dead letter).
    pub fn produces(&self) -> bool {
        self.dlq_topic.is_some() || self.result_topic.is_some() || self.error_topic.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, &str)]) -> (SinkSpec, Vec<String>) {
        let entries = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut errors = Vec::new();
        (SinkSpec::from_entries(&entries, "orders", &mut errors), snow_core::error::config_lines(&errors))
    }

    #[test]
    fn a_sink_may_not_consume_its_own_reports_or_dead_letters() {
        let (_, errors) = read(&[
            ("topics", "in, orders-dlq"),
            ("errors.tolerance", "all"),
            ("errors.deadletterqueue.topic.name", "${connector}-dlq"),
            ("reporter.result.topic.name", "in"),
        ]);
        assert!(errors.iter().any(|e| e.starts_with("errors.deadletterqueue.topic.name: orders-dlq is also in topics")), "{errors:?}");
        assert!(errors.iter().any(|e| e.starts_with("reporter.result.topic.name: in is also in topics")), "{errors:?}");
        let (_, errors) = read(&[
            ("topics.regex", "orders-.*"),
            ("errors.tolerance", "all"),
            ("errors.deadletterqueue.topic.name", "${connector}-dlq"),
            ("reporter.error.topic.name", "errors-of-orders"),
        ]);
        assert!(errors.iter().any(|e| e.starts_with("errors.deadletterqueue.topic.name: orders-dlq matches topics.regex")), "{errors:?}");
        assert!(!errors.iter().any(|e| e.starts_with("reporter.error.topic.name")), "a whole-name match only: {errors:?}");
    }

    #[test]
    fn defaults_stop_a_partition_at_a_failed_record_and_report_nothing() {
        let (spec, errors) = read(&[]);
        assert!(errors.is_empty());
        assert_eq!((spec.tolerate_record_errors, spec.on_api_error, spec.max_in_flight), (false, OnFailure::Stop, 8));
        assert!(!spec.produces());
    }

    #[test]
    fn topics_name_the_connector_and_every_bad_key_is_named() {
        let (spec, errors) = read(&[
            ("errors.tolerance", "all"),
            ("errors.deadletterqueue.topic.name", "${connector}-dlq"),
            ("reporter.result.topic.name", "${connector}-success"),
            ("behavior.on.api.errors", "log"),
        ]);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(spec.dlq_topic.as_deref(), Some("orders-dlq"));
        assert_eq!(spec.result_topic.as_deref(), Some("orders-success"));
        assert_eq!(spec.on_api_error, OnFailure::Log);
        let (_, errors) = read(&[
            ("errors.tolerance", "some"),
            ("errors.deadletterqueue.topic.name", "dlq"),
            ("reporter.error.topic.name", "bad topic"),
            ("snow.sink.max.in.flight", "0"),
        ]);
        let text = errors.join("\n");
        for key in ["errors.tolerance: must be one of none, all", "needs errors.tolerance=all", "reporter.error.topic.name: \"bad topic\""]
        {
            assert!(text.contains(key), "{key} in {text}");
        }
        assert!(text.contains("snow.sink.max.in.flight: must be"), "{text}");
    }
}
